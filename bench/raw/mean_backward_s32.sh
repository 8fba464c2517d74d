#!/usr/bin/env bash
# Session 32, one H200: a copy_u mean's backward as shipped (the gradient divided, then the reverse
# copy sum) against one fused reverse aggregation, at kernel level (probe_mean_backward_s32.py),
# then under CUDA DGL 2.4: tests/gpu/test_dgl_gpu.py (the models' parity, SAGE-mean and GIN-mean
# among them, and the fuzz) and scripts/bench_mean.py (training: fused against divided_grad).
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -3
export PYTHONPATH=$PWD DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONUNBUFFERED=1
timeout 240 python3 bench/raw/probe_mean_backward_s32.py --out "$OUT/mean_backward_s32.csv" 2>&1 \
  | grep -v lazyInit | tee "$OUT/mean_backward_s32.log" | tail -90
OUT=$OUT bash scripts/gpu_check.sh dgl-test 2>&1 | tail -8
export PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch
timeout 200 python3 scripts/bench_mean.py --out "$OUT/mean_dgl_s32.csv" --rounds 7 2>&1 | grep -v -e lazyInit -e Warn \
  | tee "$OUT/mean_dgl_s32.log" | tail -30
