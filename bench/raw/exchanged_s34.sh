#!/usr/bin/env bash
# Session 34, one H200 (about 7 minutes): add and mul whose A repeats over blocks now run as B op A
# (core.ops.swaps_operands; NNConv's u_mul_e of x (N,16,1) by w (E,16,16)). The kernel tests (every
# strategy x dtype x idtype against the fp64 oracle, the exchanged cases among them), the conv
# tests under CUDA DGL 2.4, NNConv's aggregation through dgl.ops against DGL (probe_nnconv_s33.py:
# the selector, autotuning, forced configurations), the NNConv modules (bench_convs) and the
# kernel benchmark's nnconv operators after the change (their search rows: training data).
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/raw/probe_lib.sh
build_with_dgl || exit 1
PYTHONPATH=$PWD PROBE_TAIL_BYTES=1500 probe kernel_tests 330 python3 -m pytest tests/gpu/test_kernels_gpu.py -q -rs -x -p no:cacheprovider
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PROBE_TAIL_BYTES=600 probe conv_tests 150 \
  python3 -m pytest tests/gpu/test_dgl_gpu.py -k conv -q -rs -p no:cacheprovider
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch probe nnconv 200 python3 bench/raw/probe_nnconv_s33.py
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch probe convs 200 python3 scripts/bench_convs.py --device cuda \
  --graphs cora,sim-amazon0505 --convs NNConv-sum,NNConv-mean,NNConv-max --budget-s 150 --out "$OUT/convs_nnconv.csv"
PYTHONPATH=$PWD PROBE_TAIL_BYTES=800 probe kernels_nnconv 150 python3 scripts/bench_kernels.py \
  --ops nnconv_u_mul_e-max,nnconv_u_mul_e-sum --grid quick --no-large --no-datasets --budget-s 100 \
  --out "$OUT/kernels_nnconv.csv" --search-out "$OUT/kernels_nnconv_search.csv.gz"
