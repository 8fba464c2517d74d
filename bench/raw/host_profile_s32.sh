#!/usr/bin/env bash
# Session 32, one H200: where a small graph's training step spends its host time now, plugin on and
# off (scripts/profile_gpu.py --host: cProfile of 200 steps on cora), for GCN, GAT, SAGE-mean, GIN.
# Carry .prebuilt/*.xz and .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -2
tarball=.gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz
mkdir -p /tmp/dglpkg && tar -xJf "$tarball" -C /tmp/dglpkg || exit 1
export PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PYTHONUNBUFFERED=1
for model in GCN GAT SAGE-mean GIN; do
  timeout 120 python3 scripts/profile_gpu.py --model "$model" --graph cora --training --host --top 40 2>&1 \
    | grep -v -e lazyInit -e Warning -e "warnings.warn" > "$OUT/host_profile_${model}_cora.txt"
  grep "ms per step" "$OUT/host_profile_${model}_cora.txt"
done
