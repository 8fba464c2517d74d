#!/usr/bin/env bash
# Session 36, one H200 call: the edge-order sum probe (probe_edge_order_sum.py), DGL's GPU tests
# on the DGL layer's first-call change of session 35, and the E > 2^31 test on every strategy.
# Carry .prebuilt/*.xz (this tree's cores), .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -3
t=$(date +%s)
timeout "${PROBE_TIMEOUT_S:-260}" python3 bench/raw/s36/probe_edge_order_sum.py --out "$OUT/edge_order_sum.csv" \
  --budget-s "${PROBE_BUDGET_S:-170}" ${PROBE_ARGS:-} 2>&1 | tee "$OUT/edge_order_sum.log" | tail -"${PROBE_TAIL:-60}"
echo "probe: $(( $(date +%s) - t )) s"
if [ "${HUGE:-1}" = 1 ]; then
  t=$(date +%s)
  DGL_UGRAPH_GPU_HUGE=1 timeout 200 python3 -m pytest tests/gpu/test_reliability_gpu.py -k more_than_2_to_the_31 \
    -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/huge.log" | tail -12
  echo "huge: $(( $(date +%s) - t )) s"
fi
if [ "${DGL_TEST:-1}" = 1 ]; then
  OUT=$OUT bash scripts/gpu_check.sh dgl-test 2>&1 | tail -8
fi
