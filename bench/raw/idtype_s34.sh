#!/usr/bin/env bash
# Session 34, one H200 (about 5 minutes): the DGL GPU tests whole (the exchanged operands under
# every DGL path), the accuracy probe of NNConv's exchanged sum (probe_nnconv_accuracy_s34.py) and
# the int64 graphs' cost against int32 on the stand-ins (probe_idtype_s34.py).
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/raw/probe_lib.sh
build_with_dgl || exit 1
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PROBE_TAIL_BYTES=700 probe dgl_tests 200 \
  python3 -m pytest tests/gpu/test_dgl_gpu.py -q -rs -p no:cacheprovider
PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch probe nnconv_accuracy 120 python3 bench/raw/probe_nnconv_accuracy_s34.py
PYTHONPATH=$PWD BUDGET_S=170 PROBE_TAIL_BYTES=9000 probe idtype 230 python3 bench/raw/probe_idtype_s34.py
