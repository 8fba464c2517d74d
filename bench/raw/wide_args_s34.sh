#!/usr/bin/env bash
# Session 34, one H200 (about 8 minutes): the cores write int64 args on an int32 graph (params.h's
# arg_bits 64), which the DGL layer asks for on the graphs it narrows. The kernel tests (the new
# test_int64_args_of_an_int32_graph among them), the DGL GPU tests, the narrowed-against-int64 A/B
# (probe_narrow_ab_s34.py) and the int64/int32 kernel timings again (probe_idtype_s34.py).
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/raw/probe_lib.sh
build_with_dgl || exit 1
PYTHONPATH=$PWD PROBE_TAIL_BYTES=1500 probe kernel_tests 300 python3 -m pytest tests/gpu/test_kernels_gpu.py -q -rs -x \
  -p no:cacheprovider
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PROBE_TAIL_BYTES=700 probe dgl_tests 200 \
  python3 -m pytest tests/gpu/test_dgl_gpu.py tests/gpu/test_cuda_graphs.py -q -rs -p no:cacheprovider
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PROBE_TAIL_BYTES=4000 probe narrow_ab 150 \
  python3 bench/raw/probe_narrow_ab_s34.py
PYTHONPATH=$PWD BUDGET_S=${IDTYPE_BUDGET_S:-80} PROBE_TAIL_BYTES=500 probe idtype 150 python3 bench/raw/probe_idtype_s34.py
