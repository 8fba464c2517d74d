#!/usr/bin/env bash
# Session 30 probe: half-precision sums on 8-byte lanes. At one grouping a float16 call has half
# the warps of a float32 one (16-byte lanes of 8 halves make teams half as wide), and on the
# mid-sized skewed graphs its aggregation kernel takes as long as float32's. The probe core is
# this core with team.cuh's with_vector_width starting half lanes at 4 elements (8 bytes: teams
# as wide as float32's, half the bytes a load), built for float16 alone. Times the suite's half
# sums (bench/kernels.csv, impl=ugraph, float16, F = 64 and 256, the selector's configurations)
# under both cores, two rounds in alternating order.
# The probe core: ab_half_lanes_s30.patch applied to a checkout of this commit, then
#   UGRAPH_DTYPES=f16 bash scripts/build_cuda_lib.sh    (its .prebuilt/libugraph_cuda.so.xz)
# Carry .prebuilt/*.xz (this core), .gpu-deps/s30/half8/libugraph_cuda.so.xz (the probe core) and
# .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONUNBUFFERED=1
OUT=$OUT bash scripts/gpu_check.sh build | tail -1
xz -dc .gpu-deps/s30/half8/libugraph_cuda.so.xz > /tmp/core_half8.so
t=$(date +%s)
timeout "${AB_TIMEOUT_S:-150}" python3 scripts/ab_cores.py --core lanes16=dgl_ugraph/libugraph_cuda.so \
  --core lanes8=/tmp/core_half8.so --cases bench/kernels.csv --dtypes float16 \
  --ops copy_u-sum,u_mul_e-sum --widths 64,256 --rounds 2 --out "$OUT/ab_half8.csv" 2>&1 | grep -v '^round'
echo "ab: $(( $(date +%s) - t )) s"
gzip -f "$OUT/ab_half8.csv"
