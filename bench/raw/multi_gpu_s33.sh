#!/usr/bin/env bash
# Session 33, on nvidia-h200-x2 with 5 minutes of device time: session 31's open case alone (the
# example models on cuda:1, bench/raw/probe_multi_gpu_s31.py, plainly and under
# CUDA_LAUNCH_BLOCKING=1), then test_multi_gpu.py's models and first-call tests.
# Carry .prebuilt/*.xz and .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=$OUT bash scripts/gpu_check.sh build > "$OUT/build.log" 2>&1
tail -1 "$OUT/build.log"
mkdir -p /tmp/dglpkg && tar -xJf .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz -C /tmp/dglpkg || exit 1
export PYTHONPATH=$PWD:$PWD/tests:$PWD/tests/gpu:/tmp/dglpkg DGLBACKEND=pytorch PYTHONUNBUFFERED=1
nvidia-smi -L
export PROBE_TAIL_BYTES=1800
source bench/raw/probe_lib.sh
P=bench/raw/probe_multi_gpu_s31.py
probe plain 100 python3 $P --repeat 2
probe blocking 60 env CUDA_LAUNCH_BLOCKING=1 python3 $P --models GIN-max,SAGE-pool --repeat 2
probe tests 70 python3 -m pytest tests/gpu/test_multi_gpu.py -k "models or first_call" -q -rs -p no:cacheprovider
