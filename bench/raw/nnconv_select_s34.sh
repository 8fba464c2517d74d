#!/usr/bin/env bash
# Ready for session 34, one H200 (about 6 minutes): the new HeteroGraphConv and conv GPU tests under
# CUDA DGL 2.4, then NNConv's aggregation (u_mul_e sum and max, node rows (k,1) by edge matrices
# (k,k), F = k*k = 16/64/256) on the 15 stand-ins: the selector's choice against the searched best
# (bench_kernels.py --grid quick; its search rows are predictor training data).
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
OUT=$OUT bash scripts/gpu_check.sh build > "$OUT/build.log" 2>&1
tail -2 "$OUT/build.log"
mkdir -p /tmp/dglpkg && tar -xJf .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz -C /tmp/dglpkg || exit 1
quiet() { grep -v -e lazyInit -e Warning -e "warnings.warn" -e "return super" -e _warn_once; }
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch timeout 150 python3 -m pytest tests/gpu/test_dgl_gpu.py \
  -k "conv" -q -rs -p no:cacheprovider 2>&1 | quiet > "$OUT/conv_tests.log"
tail -6 "$OUT/conv_tests.log"
PYTHONPATH=$PWD timeout 330 python3 scripts/bench_kernels.py --ops nnconv_u_mul_e-max,nnconv_u_mul_e-sum \
  --grid quick --no-large --no-datasets --budget-s 270 --out "$OUT/kernels_nnconv.csv" \
  --search-out "$OUT/kernels_nnconv_search.csv.gz" 2>&1 | quiet | tee "$OUT/kernels_nnconv.log" | tail -32
