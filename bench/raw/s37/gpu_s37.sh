#!/usr/bin/env bash
# Session 37, one H200 call: the dispatch benchmark three times (issue 14: copy_u-max's ugrapher
# against an empty launch and against torch's own two-output call, by round), and the device's
# bandwidth by direction (issue 13: max's floor). Carry .prebuilt/*.xz and
# .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -3
python3 bench/raw/s37/probe_bandwidth.py 2>&1 | tee "$OUT/bandwidth.log"
for r in 1 2 3; do
  mkdir -p "$OUT/dispatch_r$r"
  OUT=$OUT/dispatch_r$r bash scripts/gpu_check.sh dgl-dispatch 2>&1 | tail -10
done
