#!/usr/bin/env bash
# Session 32, one H200, after mean_backward_s32.sh chose the fused form (mul by the reciprocal):
# under CUDA DGL 2.4, tests/gpu/test_dgl_gpu.py (the fused mean's own test, the models' parity with
# SAGE-mean and GIN-mean, the fuzz) and scripts/bench_mean.py (per call, training: fused against
# divided_grad, the backward as DGL runs it on our kernels).
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
OUT=$OUT bash scripts/gpu_check.sh build dgl-test 2>&1 | tail -12
export PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PYTHONUNBUFFERED=1
timeout 300 python3 scripts/bench_mean.py --out "$OUT/mean_dgl_s32.csv" --widths 16,64,256 --rounds 7 2>&1 \
  | grep -v -e lazyInit -e Warn -e "return super" | tee "$OUT/mean_dgl_s32.log" | tail -40
