#!/usr/bin/env bash
# Session 27: the DGL-layer tests under CUDA DGL 2.4, then probe_max_no_args_s27.py; results under $OUT.
# Carry .prebuilt/*.xz (core 719e977d), .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz, .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
OUT=$OUT bash scripts/gpu_check.sh build | tail -3
mkdir -p /tmp/dglpkg && tar -xJf .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz -C /tmp/dglpkg
export PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONUNBUFFERED=1
quiet() { grep --line-buffered -v "lazyInitCUDA is deprecated"; }
t=$(date +%s)
timeout "${TEST_TIMEOUT_S:-240}" python3 -m pytest tests/gpu/test_dgl_gpu.py -q -p no:cacheprovider 2>&1 | quiet \
  | tail -4 | tee "$OUT/dgl_gpu_tests.log"
echo "dgl tests: $(( $(date +%s) - t )) s"
t=$(date +%s)
timeout "${PROBE_TIMEOUT_S:-240}" python3 bench/raw/probe_max_no_args_s27.py "$OUT/max_no_args" 2>&1 | quiet \
  | tee "$OUT/max_no_args.log" | tail -50
echo "probe: $(( $(date +%s) - t )) s"
