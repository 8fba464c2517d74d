#!/usr/bin/env bash
# Creates .venv with the pinned CPU set that real DGL 2.1.0 needs (design.md §4) and installs
# dgl_ugraph into it. Idempotent: a second run only reinstalls the package.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
if ! "$VPY" -c "import dgl, torch; assert torch.__version__.startswith('2.2.1')" 2>/dev/null; then
  "$VPY" -m pip install -q --upgrade pip
  "$VPY" -m pip install -q "torch==2.2.1" "dgl==2.1.0" "numpy<2" "scipy<1.15" "pandas<2.3" \
      "setuptools<70" pyyaml pydantic psutil pytest hypothesis \
      scikit-build-core pybind11 cmake ninja
  "$VPY" -m pip install -q --no-deps "torchdata==0.7.1"
fi
# The predictor's optional extras: training (lightgbm) and its plots (matplotlib).
"$VPY" -c "import lightgbm, matplotlib" 2>/dev/null || "$VPY" -m pip install -q "numpy<2" lightgbm matplotlib
# The package build needs no isolation: every build tool is already in the venv. The install
# carries the start-up hook (DGL_UGRAPH=1) and serves programs run from anywhere.
"$VPY" -m pip install -q --no-build-isolation .
# Programs run from the checkout (the tests, the models, python -m dgl_ugraph here) import the
# package from the checkout, which then needs its own compiled core beside the sources.
PATH="$PWD/.venv/bin:$PATH" PYTHON="$VPY" bash scripts/build_inplace.sh
