#!/usr/bin/env bash
# Session 27: two edge_aggregate variants (float32 builds carried in .gpu-deps/s27/edge/) against
# the installed core 719e977d, on the suite's float32 aggregation cases whose configuration is an
# edge strategy: v3 bounds edge_aggregate to 5 blocks an SM on int32 graphs (48 registers), v2
# adds the whole-chunk fold of core 7310824b.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONUNBUFFERED=1
OUT=$OUT bash scripts/gpu_check.sh build | tail -2
cp dgl_ugraph/libugraph_cuda.so /tmp/core_719e977d.so
for v in v2 v3; do xz -dc .gpu-deps/s27/edge/$v.so.xz > /tmp/core_$v.so; done
python3 - <<'PY'
import csv
ops = {"copy_u-sum", "u_mul_e-sum", "copy_u-max", "gat_u_mul_e-sum", "copy_u-mean"}
with open("bench/kernels.csv") as f, open("/tmp/ab_cases.csv", "w", newline="") as g:
    r = csv.DictReader(f)
    w = csv.DictWriter(g, r.fieldnames)
    w.writeheader()
    for row in r:
        if (row["impl"] == "ugraph" and row["op"] in ops and row["dtype"] == "float32"
                and row["config"].split(":")[0] in ("warp_edge", "thread_edge")):
            w.writerow(row)
PY
timeout 400 python3 scripts/ab_cores.py --core base=/tmp/core_719e977d.so --core v3=/tmp/core_v3.so \
  --core v2=/tmp/core_v2.so --cases /tmp/ab_cases.csv --dtypes float32 --rounds 2 --out "$OUT/ab_edge.csv" 2>&1 | tail -8
gzip -f "$OUT/ab_edge.csv"
