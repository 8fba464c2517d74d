#!/usr/bin/env bash
# Session 27: a candidate CUDA core (these sources, from .prebuilt) against core 719e977d.
# Builds the candidate, runs the kernel tests (TESTS=0 skips them), then scripts/ab_cores.py on
# the suite's aggregation cases (bench/kernels.csv, impl=ugraph: the selector's configurations).
# Carry .prebuilt/*.xz, .gpu-deps/s27/old/libugraph_cuda.so.xz (core 719e977d built with
# UGRAPH_DTYPES="f32;f16": the device tool carries 64 MiB in all), .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONUNBUFFERED=1
OUT=$OUT bash scripts/gpu_check.sh build | tail -4
xz -dc .gpu-deps/s27/old/libugraph_cuda.so.xz > /tmp/core_719e977d.so
if [ "${TESTS:-1}" = 1 ]; then
  t=$(date +%s)
  timeout "${TEST_TIMEOUT_S:-200}" python3 -m pytest tests/gpu/test_kernels_gpu.py -q -p no:cacheprovider 2>&1 \
    | tail -4 | tee "$OUT/kernel_tests.log"
  echo "kernel tests: $(( $(date +%s) - t )) s"
fi
python3 - <<'PY'
import csv
ops = {("copy_u-sum", "float32"), ("u_mul_e-sum", "float32"), ("copy_u-max", "float32"),
       ("gat_u_mul_e-sum", "float32"), ("copy_u-mean", "float32"),
       ("copy_u-sum", "float16"), ("u_mul_e-sum", "float16")}
with open("bench/kernels.csv") as f, open("/tmp/ab_cases.csv", "w", newline="") as g:
    r = csv.DictReader(f)
    w = csv.DictWriter(g, r.fieldnames)
    w.writeheader()
    n = 0
    for row in r:
        if row["impl"] == "ugraph" and (row["op"], row["dtype"]) in ops:
            w.writerow(row)
            n += 1
print(n, "cases")
PY
t=$(date +%s)
timeout "${AB_TIMEOUT_S:-330}" python3 scripts/ab_cores.py --core old=/tmp/core_719e977d.so \
  --core new=dgl_ugraph/libugraph_cuda.so --cases /tmp/ab_cases.csv --rounds 2 --out "$OUT/ab.csv" 2>&1 | tail -8
echo "ab: $(( $(date +%s) - t )) s"
gzip -f "$OUT/ab.csv"
