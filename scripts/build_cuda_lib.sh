#!/usr/bin/env bash
# Builds the two cores, libugraph_cuda.so and the CPU core's libugraph_cpu.a, on a machine without
# a GPU, and copies them to .prebuilt/ (with .xz copies to carry), where scripts/gpu_check.sh picks
# each up when its source hash matches the sources: the GPU machine then compiles only the thin
# Python module (its GCC 13 spends minutes on the CPU core's max/min instances).
#   UGRAPH_CUDA_ARCHS  (default 90), UGRAPH_STRATEGIES and UGRAPH_DTYPES (default all): as for the package
#   UGRAPH_PTXAS_VERBOSE=1: also keep ptxas's register and spill report in build/cuda-lib/ptxas.log
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then
  PY=$PWD/.venv/bin/python
  export PATH="$PWD/.venv/bin:$PATH"  # the venv carries cmake and ninja
else
  PY=$(command -v python3)
fi
ARCHS=${UGRAPH_CUDA_ARCHS:-90}
# One build folder per architecture list, so that a check for other archs keeps sm_90's build.
BUILD=build/cuda-lib$([ "$ARCHS" = 90 ] || echo "-${ARCHS//,/-}")
CUDA_FLAGS=""
# The CPU core's archive goes with the sm_90 library (the GPU machine's); other architecture lists
# are compile checks of the CUDA sources. An archive already built from these CPU sources (the
# in-place build of `make dev`/`make test`, or an earlier run's) is taken as it is: its GCC build
# takes about four minutes on 2 cores, the CUDA library a minute.
TARGETS="ugraph_cuda"
CPU_ARCHIVE=""
if [ "$ARCHS" = 90 ]; then
  want=$("$PY" csrc/source_hash.py --cpu)
  for a in .prebuilt/libugraph_cpu.a build/*/libugraph_cpu.a; do
    if [ -f "$a" ] && [ "$("$PY" csrc/source_hash.py --of-archive "$a" 2>/dev/null)" = "$want" ]; then
      CPU_ARCHIVE=$a
      break
    fi
  done
  if [ -z "$CPU_ARCHIVE" ]; then
    TARGETS="ugraph_cuda ugraph_cpu"
    CPU_ARCHIVE=$BUILD/libugraph_cpu.a
  else
    echo "CPU core $want: $CPU_ARCHIVE, built before"
  fi
fi
if [ "${UGRAPH_PTXAS_VERBOSE:-0}" = 1 ]; then CUDA_FLAGS="-Xptxas=-v"; fi

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$PY" -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" \
  -DUGRAPH_CUDA=ON -DUGRAPH_CUDA_PREBUILT= -DUGRAPH_CPU_PREBUILT= -DUGRAPH_CUDA_ARCHS="$ARCHS" \
  -DUGRAPH_STRATEGIES="${UGRAPH_STRATEGIES:-all}" -DUGRAPH_DTYPES="${UGRAPH_DTYPES:-all}" \
  -DCMAKE_CUDA_FLAGS="$CUDA_FLAGS" >/dev/null
start=$(date +%s)
if [ -n "$CUDA_FLAGS" ]; then
  status=0
  cmake --build "$BUILD" --target $TARGETS -j"$(nproc)" >"$BUILD/ptxas.log" 2>&1 || status=$?
  grep -vE '^ptxas info|^    [0-9]+ bytes stack frame' "$BUILD/ptxas.log" || true
  [ "$status" -eq 0 ] || exit "$status"
  awk '/Used [0-9]+ registers/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^registers/) r = $i;
                                 n++; lo = (n == 1 || r < lo) ? r : lo; hi = (r > hi) ? r : hi }
       /spill stores/ { if ($5 > 0 || $9 > 0) spills++ }
       END { printf "ptxas: %d kernels, %d-%d registers, %d with spills\n", n, lo, hi, spills }' "$BUILD/ptxas.log"
else
  cmake --build "$BUILD" --target $TARGETS -j"$(nproc)"
fi
mkdir -p .prebuilt
cp -f "$BUILD/csrc/cuda/libugraph_cuda.so" .prebuilt/libugraph_cuda.so
libs=.prebuilt/libugraph_cuda.so
if [ -n "$CPU_ARCHIVE" ]; then
  [ "$CPU_ARCHIVE" -ef .prebuilt/libugraph_cpu.a ] || cp -f "$CPU_ARCHIVE" .prebuilt/libugraph_cpu.a
  libs="$libs .prebuilt/libugraph_cpu.a"
fi
# The CUDA library is mostly cubins (about 45 MB) and the device tool carries 64 MiB in all: the
# compressed copies (about 3 and 2 MB) are the ones to carry.
for lib in $libs; do xz -T0 -6 -c "$lib" > "$lib.xz"; done
echo "built .prebuilt/libugraph_cuda.so in $(( $(date +%s) - start )) s, $(du -h .prebuilt/libugraph_cuda.so | cut -f1)" \
  "($(du -h .prebuilt/libugraph_cuda.so.xz | cut -f1) as .xz)"
echo "source hash: $("$PY" csrc/source_hash.py --of-library .prebuilt/libugraph_cuda.so)" \
  "$([[ $libs == *libugraph_cpu.a* ]] && echo "(CPU core $("$PY" csrc/source_hash.py --of-archive .prebuilt/libugraph_cpu.a))")"
