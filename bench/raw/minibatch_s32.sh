#!/usr/bin/env bash
# Session 32, one H200: mini-batch training with GPU neighbor sampling under CUDA DGL 2.4, plugin on
# and off (scripts/bench_minibatch.py; MB_ARGS adds to its command line): every step runs on
# blocks never seen before. Output in $OUT/minibatch_gpu${MB_TAG}.log and $OUT/minibatch_gpu.csv.
# Carry .prebuilt/*.xz and .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
OUT=${OUT:-/tmp/ugraph_out} PROBE_LOG="minibatch_gpu${MB_TAG:-}" PROBE_TAIL=${MB_TAIL:-20} \
  bash "$(dirname "$0")/dgl_probe_s32.sh" scripts/bench_minibatch.py --device cuda --out "${OUT:-/tmp/ugraph_out}/minibatch_gpu.csv" ${MB_ARGS:-}
