#!/usr/bin/env bash
# Creates a pinned CPU environment (design.md §4) and sets dgl_ugraph up in it. Idempotent: a
# second run only reinstalls or rebuilds the package.
#
#   scripts/setup_env.sh          .venv:       torch 2.2.1, DGL 2.1.0 (the full suite, the demo)
#   scripts/setup_env.sh dgl11    .venv-dgl11: torch 2.1.1, DGL 1.1.3 (the tests that meet DGL)
#
# The second set is the oldest DGL that dgl_ugraph accepts. It was picked because PyPI's Linux
# wheels stop at DGL 2.1.0 (its 2.2.1 is for Windows only). DGL 1.1.3's wheel has torch bindings
# (tensoradapter, dgl_sparse) up to torch 2.1.1.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PROFILE=${1:-dgl21}
START=$(date +%s)
case "$PROFILE" in
  dgl21)
    VENV=.venv TORCH=2.2.1 DGL=2.1.0
    # DGL 2.1's graphbolt needs torchdata (--no-deps: its own pins would replace torch) and
    # pydantic. dgl imports setuptools.extern, which setuptools 70 removed. The build tools
    # compile the core, for both environments.
    EXTRA=("pandas<2.3" "setuptools<70" pyyaml pydantic scikit-build-core pybind11 cmake ninja)
    NODEPS=("torchdata==0.7.1") ;;
  dgl11)
    VENV=.venv-dgl11 TORCH=2.1.1 DGL=1.1.3
    EXTRA=()
    NODEPS=()
    if [ ! -x .venv/bin/python ]; then
      echo "setup_env.sh dgl11: run scripts/setup_env.sh first; it builds the compiled core that this environment uses" >&2
      exit 1
    fi ;;
  *)
    echo "setup_env.sh: unknown profile '$PROFILE' (dgl21 or dgl11)" >&2
    exit 2 ;;
esac
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
VPY=$VENV/bin/python
# No wheel cache: each CUDA build of torch brings about 3 GB of wheels, which a cache would hold
# a second time beside the installed copy; CI machines have run out of disk on it.
PIP=("$VPY" -m pip install -q --no-cache-dir)
if ! "$VPY" -c "import dgl, torch; assert torch.__version__.split('+')[0] == '$TORCH' and dgl.__version__ == '$DGL'" 2>/dev/null; then
  "${PIP[@]}" --upgrade pip
  # The CUDA core the package's install built, where it did (a GPU visible, or UGRAPH_CUDA=ON): the
# in-place build links it, for the same architectures, instead of compiling the kernels again.
# Printed as the two variables build_inplace.sh takes; nothing where no library matches its sources.
built_cuda_core() {
  local lib archs
  [ "${UGRAPH_CUDA:-AUTO}" = OFF ] && return
  for lib in build/cp*/csrc/cuda/libugraph_cuda.so; do
    [ -f "$lib" ] || continue
    archs=$(.venv/bin/python csrc/source_hash.py --archs-of-library "$lib" 2>/dev/null) || continue
    if [ "$(.venv/bin/python csrc/source_hash.py --of-library "$lib" 2>/dev/null)" = \
         "$(.venv/bin/python csrc/source_hash.py --archs "$archs" --strategies "${UGRAPH_STRATEGIES:-all}" \
            --dtypes "${UGRAPH_DTYPES:-all}")" ]; then
      echo "UGRAPH_CUDA_PREBUILT=$PWD/$lib UGRAPH_CUDA_ARCHS=$archs"
      return
    fi
  done
}
if [ "$PROFILE" = dgl11 ]; then
    # PyPI's torch 2.1.1 and 2.2.1 need the same CUDA 12.1 runtime wheels, NCCL aside (2.8 GB
    # installed). The first environment's copies are hard-linked in with their metadata, so pip
    # finds them installed; it replaces whichever version torch 2.1.1 pins differently. Removing
    # or replacing a file here unlinks it and leaves the first environment's copy intact.
    SRC=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    DST=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if [ -d "$SRC/nvidia" ] && [ ! -e "$DST/nvidia" ]; then
      cp -al "$SRC/nvidia" "$DST/nvidia" 2>/dev/null || cp -a "$SRC/nvidia" "$DST/nvidia"
      cp -a "$SRC"/nvidia_*.dist-info "$DST/"
    fi
  fi
  "${PIP[@]}" "torch==$TORCH" "dgl==$DGL" "numpy<2" "scipy<1.15" "${EXTRA[@]}" \
      psutil pytest hypothesis
  if [ ${#NODEPS[@]} -gt 0 ]; then
    "${PIP[@]}" --no-deps "${NODEPS[@]}"
  fi
fi
# The CPU core as the package's install built it (build/<wheel tag>/), where it comes from these
# very sources: the in-place build links that archive instead of compiling the core a second time
# (its GCC build takes about four minutes on 2 cores). CMake checks its source hash again.
built_cpu_core() {
  local want a
  want=$(.venv/bin/python csrc/source_hash.py --cpu)
  for a in build/cp*/libugraph_cpu.a; do
    if [ -f "$a" ] && [ "$(.venv/bin/python csrc/source_hash.py --of-archive "$a" 2>/dev/null)" = "$want" ]; then
      echo "$PWD/$a"
      return
    fi
  done
}
# The checkout's own compiled core (build_inplace.sh under .venv's Python: the core links neither
# torch nor DGL, so one build serves every venv of that Python), linking what the install built.
build_in_place() {
  local cuda_core=()
  if [ -z "${UGRAPH_CUDA_PREBUILT:-}" ]; then read -r -a cuda_core <<< "$(built_cuda_core)"; fi
  env "${cuda_core[@]}" UGRAPH_CPU_PREBUILT="${UGRAPH_CPU_PREBUILT:-$(built_cpu_core)}" PATH="$PWD/.venv/bin:$PATH" \
    PYTHON=.venv/bin/python bash scripts/build_inplace.sh
}
if [ "$PROFILE" = dgl11 ]; then
  # This environment runs the checkout's package. Its compiled core is the one the first
  # environment builds in place: the core links neither torch nor DGL, so one build serves every
  # venv of the same Python. The build is brought up to date here (ninja only redoes what
  # changed), and the core must then load under this environment's interpreter.
  BUILD_START=$(date +%s)
  build_in_place
  "$VPY" -c "from dgl_ugraph.core import _ext; _ext.core()"
else
  # The predictor's optional extras: training (lightgbm), its plots (matplotlib) and the tuning
  # progress bar (tqdm; DGL pulls the same one); import-linter checks the package's layers in
  # `make test`.
  "$VPY" -c "import lightgbm, matplotlib" 2>/dev/null || "${PIP[@]}" "numpy<2" lightgbm matplotlib
  "$VPY" -c "import importlinter, tqdm" 2>/dev/null || "${PIP[@]}" "import-linter==2.17" "tqdm==4.70.1"
  # The package build needs no isolation: every build tool is already in the venv. The install
  # carries the start-up hook (DGL_UGRAPH=1) and serves programs run from anywhere.
  BUILD_START=$(date +%s)
  "${PIP[@]}" --no-build-isolation .
  # Programs run from the checkout (the tests, the models, python -m dgl_ugraph here) import the
  # package from the checkout, which then needs its own compiled core beside the sources.
  build_in_place
fi
# The set-up time, and how much of it the build took (the package's install and the in-place
# build; the second environment's is a link of the first's core). UGRAPH_SETUP_MAX_S and
# UGRAPH_BUILD_MAX_S, where set, are bars the set-up fails past (CI sets them).
TOOK=$(( $(date +%s) - START )) BUILT=$(( $(date +%s) - BUILD_START ))
echo "setup_env.sh $PROFILE: ready in $TOOK s, of which building $BUILT s"
if [ -n "${UGRAPH_SETUP_MAX_S:-}" ] && [ "$TOOK" -gt "$UGRAPH_SETUP_MAX_S" ]; then
  echo "setup_env.sh $PROFILE: the set-up took $TOOK s, past its bar of $UGRAPH_SETUP_MAX_S s" >&2
  exit 1
fi
if [ -n "${UGRAPH_BUILD_MAX_S:-}" ] && [ "$BUILT" -gt "$UGRAPH_BUILD_MAX_S" ]; then
  echo "setup_env.sh $PROFILE: building took $BUILT s, past its bar of $UGRAPH_BUILD_MAX_S s" >&2
  exit 1
fi
