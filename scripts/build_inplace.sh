#!/usr/bin/env bash
# Builds the extension in place (dgl_ugraph/_C*.so) with the venv's Python, for PYTHONPATH=. use.
# UGRAPH_CUDA / UGRAPH_CUDA_ARCHS / UGRAPH_STRATEGIES / UGRAPH_DTYPES / UGRAPH_CUDA_PREBUILT /
# UGRAPH_CPU_PREBUILT apply.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
BUILD=${UGRAPH_BUILD_DIR:-build/inplace-$($PY -c 'import sys;print(f"py{sys.version_info[0]}{sys.version_info[1]}")')}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$($PY -c 'import sys;print(sys.executable)')" \
  -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" \
  -DUGRAPH_CUDA="${UGRAPH_CUDA:-AUTO}" -DUGRAPH_CUDA_ARCHS="${UGRAPH_CUDA_ARCHS:-}" \
  -DUGRAPH_STRATEGIES="${UGRAPH_STRATEGIES:-all}" -DUGRAPH_DTYPES="${UGRAPH_DTYPES:-all}" \
  -DUGRAPH_CUDA_PREBUILT="${UGRAPH_CUDA_PREBUILT:-}" -DUGRAPH_CPU_PREBUILT="${UGRAPH_CPU_PREBUILT:-}" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
# Copy, then rename: a process that has the old library mapped keeps its inode intact.
install_lib() { cp -f "$1" "dgl_ugraph/.$(basename "$1").tmp" && mv -f "dgl_ugraph/.$(basename "$1").tmp" "dgl_ugraph/$(basename "$1")"; }
for lib in "$BUILD"/_C*.so; do install_lib "$lib"; done
if [ -f "$BUILD"/csrc/cuda/libugraph_cuda.so ]; then install_lib "$BUILD"/csrc/cuda/libugraph_cuda.so; fi
if [ -n "${UGRAPH_CUDA_PREBUILT:-}" ]; then install_lib "$UGRAPH_CUDA_PREBUILT"; fi
echo "built in place: $(ls dgl_ugraph/_C*.so)"
