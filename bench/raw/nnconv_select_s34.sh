#!/usr/bin/env bash
# Ready for session 34, one H200 (about 6 minutes): the new HeteroGraphConv and conv GPU tests under
# CUDA DGL 2.4, then NNConv's aggregation (u_mul_e sum and max, node rows (k,1) by edge matrices
# (k,k), F = k*k = 16/64/256) on the 15 stand-ins: the selector's choice against the searched best
# (bench_kernels.py --grid quick; its search rows are predictor training data).
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/raw/probe_lib.sh
build_with_dgl || exit 1
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch timeout 150 python3 -m pytest tests/gpu/test_dgl_gpu.py \
  -k "conv" -q -rs -p no:cacheprovider 2>&1 | quiet > "$OUT/conv_tests.log"
tail -6 "$OUT/conv_tests.log"
PYTHONPATH=$PWD timeout 330 python3 scripts/bench_kernels.py --ops nnconv_u_mul_e-max,nnconv_u_mul_e-sum \
  --grid quick --no-large --no-datasets --budget-s 270 --out "$OUT/kernels_nnconv.csv" \
  --search-out "$OUT/kernels_nnconv_search.csv.gz" 2>&1 | quiet | tee "$OUT/kernels_nnconv.log" | tail -32
