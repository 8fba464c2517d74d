#!/usr/bin/env bash
# Session 33, one H200: DGL's graph convolutions (models/convs.py) under CUDA DGL 2.4, the parity
# tests (tests/gpu/test_dgl_gpu.py -k conv) and then scripts/bench_convs.py.
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
# CONV_ARGS adds to the benchmark's command line.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/raw/probe_lib.sh
build_with_dgl || exit 1
export PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PYTHONUNBUFFERED=1 DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets
t=$(date +%s)
timeout 200 python3 -m pytest tests/gpu/test_dgl_gpu.py -k conv -q -rs -p no:cacheprovider 2>&1 | quiet \
  > "$OUT/conv_tests.log"
tail -25 "$OUT/conv_tests.log"
echo "conv tests: $(( $(date +%s) - t )) s"
timeout "${CONV_TIMEOUT:-380}" python3 scripts/bench_convs.py --device cuda --out "$OUT/convs_gpu.csv" \
  --budget-s "${CONV_BUDGET_S:-300}" ${CONV_ARGS:-} 2>&1 | quiet | tee "$OUT/convs_gpu.log" | tail -"${CONV_TAIL:-45}"
