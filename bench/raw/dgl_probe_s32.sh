#!/usr/bin/env bash
# Session 32, one H200: a Python script under CUDA DGL 2.4 (the build and DGL set up as gpu_check.sh
# does). Usage: bash bench/raw/dgl_probe_s32.sh SCRIPT [ARGS...]; output in $OUT/${PROBE_LOG:-probe}.log.
# Carry .prebuilt/*.xz and .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
OUT=$OUT bash scripts/gpu_check.sh build 2>&1 | tail -1
mkdir -p /tmp/dglpkg && tar -xJf .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz -C /tmp/dglpkg || exit 1
export PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch PYTHONUNBUFFERED=1
timeout 400 python3 "$@" 2>&1 | grep -v -e lazyInit -e Warning -e "warnings.warn" -e "return super" -e _warn_once \
  | tee "$OUT/${PROBE_LOG:-probe}.log" | tail -"${PROBE_TAIL:-40}"
