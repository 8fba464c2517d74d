#!/usr/bin/env bash
# Session 31, on nvidia-h200-x2: tests/gpu/test_multi_gpu.py under CUDA DGL 2.4 (gpu_check.sh
# multi-gpu), then bench/raw/probe_multi_gpu_s31.py: the example models on cuda:1 as one sequence,
# logging each change of the current device and synchronizing both GPUs after every step; plainly,
# with Plan.run's direct launch, under CUDA_LAUNCH_BLOCKING=1 and under memcheck (our steps only).
# Carry .prebuilt/*.xz and .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=$OUT bash scripts/gpu_check.sh build multi-gpu 2>&1 | tail -8
export PYTHONPATH=$PWD:$PWD/tests:$PWD/tests/gpu:/tmp/dglpkg DGLBACKEND=pytorch PYTHONUNBUFFERED=1
source bench/raw/probe_lib.sh
P=bench/raw/probe_multi_gpu_s31.py
probe plain 110 python3 $P --repeat 2
probe direct 70 python3 $P --models GIN-max,SAGE-pool --repeat 2 --no-poison
probe blocking 80 env CUDA_LAUNCH_BLOCKING=1 python3 $P --models GIN-max,SAGE-pool --repeat 2
probe memcheck 140 compute-sanitizer --tool memcheck --print-limit 20 python3 $P --models GIN-max,SAGE-pool \
  --ours-only --repeat 1
