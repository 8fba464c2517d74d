#!/usr/bin/env bash
# Session 37's H200 calls (carry .prebuilt/*.xz and .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz):
#   gpu_s37.sh dispatch  the dispatch benchmark three times (issue 14: copy_u-max's ugrapher against
#                        an empty launch and torch's own two-output call, by round) and the device's
#                        bandwidth by direction (issue 13: max's floor), into dispatch_r*/;
#   gpu_s37.sh ab        the dispatch benchmark with Plan's outputs from new_empty (ops.py with
#                        plan_outputs.patch reversed) and from empty_like (the tree's), alternating,
#                        two runs each on one host, into ab_{before,after}_r*/.
# (The ab call ran with the reversed file carried whole as ops_before.py; the patch gives the same.)
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -3
case "${1:-dispatch}" in
  dispatch)
    python3 bench/raw/s37/probe_bandwidth.py 2>&1 | tee "$OUT/bandwidth.log"
    for r in 1 2 3; do
      mkdir -p "$OUT/dispatch_r$r"
      OUT=$OUT/dispatch_r$r bash scripts/gpu_check.sh dgl-dispatch 2>&1 | tail -10
    done ;;
  ab)
    cp dgl_ugraph/core/ops.py /tmp/ops_after.py
    patch -s -R -p1 -o /tmp/ops_before.py dgl_ugraph/core/ops.py < bench/raw/s37/plan_outputs.patch || exit 1
    for r in 1 2; do
      for side in before after; do
        cp /tmp/ops_$side.py dgl_ugraph/core/ops.py
        mkdir -p "$OUT/ab_${side}_r$r"
        echo "== $side run $r"
        OUT=$OUT/ab_${side}_r$r bash scripts/gpu_check.sh dgl-dispatch 2>&1 | grep -E "copy_u-max|copy_u-sum"
      done
    done
    cp /tmp/ops_after.py dgl_ugraph/core/ops.py ;;
esac
