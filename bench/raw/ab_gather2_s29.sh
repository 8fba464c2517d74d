#!/usr/bin/env bash
# Session 29: two attention values a lane (team.cuh's kGatherB = 2) against core a0434e7f, which
# reads one a lane and so drops to 8-byte lanes (float32 heads of 2) or scalars (half heads of 2)
# and 8-byte lanes (half heads of 4). Times the suite's GAT cases (bench/kernels.csv, impl=ugraph:
# the selector's configurations) at F = 16 in float32 and, under the same configurations, in
# float16 (bfloat16 runs the same code): H = 4 and 8 change there, H = 1 is the control; and
# H = 8 at F = 64 (heads of 8: no change) as a second control. scripts/ab_cores.py alternates the cores' order.
# AB_OPS narrows the F = 16 part's ops; AB_CONTROL=0 leaves the F = 64 part out.
# Carry .prebuilt/*.xz (this branch's core), .gpu-deps/s29/base/libugraph_cuda.so.xz (core
# a0434e7f built with UGRAPH_DTYPES="f32;f16") and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONUNBUFFERED=1
OUT=$OUT bash scripts/gpu_check.sh build | tail -4
xz -dc .gpu-deps/s29/base/libugraph_cuda.so.xz > /tmp/core_base.so
t=$(date +%s)
timeout "${AB_TIMEOUT_S:-300}" python3 scripts/ab_cores.py --core base=/tmp/core_base.so \
  --core pairs=dgl_ugraph/libugraph_cuda.so --cases bench/kernels.csv --dtypes float32 \
  --ops "${AB_OPS:-gat1_u_mul_e-sum,gat_u_mul_e-sum,gat8_u_mul_e-sum}" --widths 16 --also-dtypes float16 \
  --rounds 2 --out "$OUT/ab_f16.csv" 2>&1 | grep -v '^round'
parts=ab_f16.csv
if [ "${AB_CONTROL:-1}" = 1 ]; then
  timeout "${AB_TIMEOUT_S:-300}" python3 scripts/ab_cores.py --core base=/tmp/core_base.so \
    --core pairs=dgl_ugraph/libugraph_cuda.so --cases bench/kernels.csv --dtypes float32 \
    --ops gat8_u_mul_e-sum --widths 64 --rounds 2 --out "$OUT/ab_f64.csv" 2>&1 | grep -v '^round'
  parts="$parts ab_f64.csv"
fi
echo "ab: $(( $(date +%s) - t )) s"
(cd "$OUT" && gzip -f $parts)
