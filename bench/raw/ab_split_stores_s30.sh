#!/usr/bin/env bash
# Session 30 probe: what the atomics of the edge strategies' split rows cost. The probe core is
# this core with EdgeSink's sum flushes (edge_aggregate.cuh: flush and flush_partial_sum) made
# plain stores: wrong sums wherever a row is split, so timing only. Its time bounds from below
# what a two-phase sum (each run's partial stored into a slot of its own, then combined in order
# by the finishing pass) could reach, before that pass's extra reads. Times the suite's
# copy_u-sum cases (bench/kernels.csv, impl=ugraph: the selector's configurations) at every
# width in float32 and, under the same configurations, float16; the vertex strategies' cases,
# which flush nothing, are the controls. Then each launch's device time of one call on three
# skewed graphs whose half sums gain least over float32 (profile_kernel.py --kernels).
# Carry .prebuilt/*.xz (this core), .gpu-deps/s30/stores/libugraph_cuda.so.xz (the probe core,
# built with UGRAPH_DTYPES="f32;f16") and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONUNBUFFERED=1
OUT=$OUT bash scripts/gpu_check.sh build | tail -4
xz -dc .gpu-deps/s30/stores/libugraph_cuda.so.xz > /tmp/core_stores.so
t=$(date +%s)
timeout "${AB_TIMEOUT_S:-300}" python3 scripts/ab_cores.py --core atomics=dgl_ugraph/libugraph_cuda.so \
  --core stores=/tmp/core_stores.so --cases bench/kernels.csv --dtypes float32 --ops copy_u-sum \
  --also-dtypes float16 --rounds 2 --out "$OUT/ab_stores.csv" 2>&1 | grep -v '^round'
echo "ab: $(( $(date +%s) - t )) s"
gzip -f "$OUT/ab_stores.csv"
for case in "ppi 64 warp_edge:32:1" "soc-BlogCatalog 64 warp_edge:64:1" "artist 64 warp_edge:32:1"; do
  set -- $case
  for dt in float32 float16; do
    echo "== $1 F=$2 $3 $dt"
    python3 scripts/profile_kernel.py "$1" copy_u-sum "$2" "$3" --dtype $dt --kernels 2>&1 | tail -5
  done
done
