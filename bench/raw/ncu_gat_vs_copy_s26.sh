#!/usr/bin/env bash
# Session 26, call 8: GAT's aggregation against copy_u-sum under Nsight Compute (amazon0505, F=64),
# edge ids as generated and in CSC order, each on the selector's configuration.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
t0=$(date +%s)
OUT=$OUT bash scripts/gpu_check.sh build > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=$PWD:$PWD/scripts
python3 - > "$OUT/configs.txt" <<'PY'
import torch
from profile_kernel import load
from bench_kernels import make_inputs
from dgl_ugraph.selection import policy
for order in ("given", "dst"):
    g = load("amazon0505", order)
    for op in ("copy_u-sum", "gat_u_mul_e-sum"):
        oi = make_inputs(op, g, 64, torch.float32, torch.Generator(device="cuda").manual_seed(0))
        print(order, op, policy.choose_for(g, oi).parallel_info)
PY
cat "$OUT/configs.txt"
while read -r order op config; do
  echo "=== amazon0505 $op F=64 order=$order $config"
  timeout 150 ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section LaunchStats --section MemoryWorkloadAnalysis --metrics smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    -k regex:aggregate --launch-skip 2 --launch-count 1 \
    python3 scripts/profile_kernel.py amazon0505 "$op" 64 "$config" --order "$order" 2>&1 | grep -v "^==PROF==" 
done < "$OUT/configs.txt" > "$OUT/ncu_gat_vs_copy.log"
grep -E "^===|Duration|Memory Throughput|DRAM Throughput|Executed Ipc A|Achieved Occupancy|Registers Per|inst_executed|dram__bytes_read|lts__t_sectors|ms$" "$OUT/ncu_gat_vs_copy.log"
echo "all done at $(( $(date +%s) - t0 )) s"
