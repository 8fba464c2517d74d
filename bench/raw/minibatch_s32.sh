#!/usr/bin/env bash
# Session 32, one H200: mini-batch training with GPU neighbor sampling under CUDA DGL 2.4, plugin on
# and off (scripts/bench_minibatch.py): every step runs on blocks never seen before.
# Carry .prebuilt/*.xz and .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -2
mkdir -p /tmp/dglpkg && tar -xJf .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz -C /tmp/dglpkg || exit 1
export PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PYTHONUNBUFFERED=1
timeout 400 python3 scripts/bench_minibatch.py --device cuda --out "$OUT/minibatch_gpu.csv" ${MB_ARGS:-} 2>&1 \
  | grep -v -e lazyInit -e Warning -e "warnings.warn" -e "return super" | tee "$OUT/minibatch_gpu${MB_TAG:-}.log" | tail -${MB_TAIL:-20}
