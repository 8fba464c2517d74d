#!/usr/bin/env bash
# Session 27: why GAT's aggregation (and u_mul_e-sum with a scalar weight) take 1.5-1.7x
# copy_u-sum's time on ppi at F = 64, where every operand fits in L2: Nsight Compute on each
# kernel at the suite's configuration (and GAT at copy_u-sum's), edge ids as generated.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT=$OUT bash scripts/gpu_check.sh build > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH=$PWD:$PWD/scripts
while read -r op config; do
  echo "=== ppi $op F=64 $config"
  timeout 120 ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section LaunchStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --metrics smsp__inst_executed.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_lg.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    -k regex:aggregate --launch-skip 2 --launch-count 1 \
    python3 scripts/profile_kernel.py ppi "$op" 64 "$config" 2>&1 | grep -v "^==PROF=="
done > "$OUT/ncu_ppi_gat.log" <<'CASES'
copy_u-sum warp_edge:32:1
u_mul_e-sum warp_edge:16:1
gat_u_mul_e-sum warp_edge:16:1
gat_u_mul_e-sum warp_edge:32:1
copy_u-max warp_edge:64:2
CASES
grep -E "^===|Duration|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Executed Ipc A|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Mem Pipes Busy|inst_executed|requests_pipe|wavefronts|sectors_pipe|lts__t_sectors" "$OUT/ncu_ppi_gat.log"
