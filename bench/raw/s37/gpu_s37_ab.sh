#!/usr/bin/env bash
# Session 37, one H200 call: the dispatch benchmark with Plan's outputs from new_empty (the core
# ops.py before, kept as bench/raw/s37/ops_before.py) and from empty_like of a template (the tree's),
# alternating, two runs each on one host. Carry .prebuilt/*.xz and the CUDA DGL tarball.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -2
cp dgl_ugraph/core/ops.py /tmp/ops_after.py
for r in 1 2; do
  for side in before after; do
    if [ $side = before ]; then cp bench/raw/s37/ops_before.py dgl_ugraph/core/ops.py; else cp /tmp/ops_after.py dgl_ugraph/core/ops.py; fi
    mkdir -p "$OUT/ab_${side}_r$r"
    echo "== $side run $r"
    OUT=$OUT/ab_${side}_r$r bash scripts/gpu_check.sh dgl-dispatch 2>&1 | grep -E "copy_u-max|copy_u-sum"
  done
done
cp /tmp/ops_after.py dgl_ugraph/core/ops.py
