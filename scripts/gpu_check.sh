#!/usr/bin/env bash
# One call on the GPU machine: build, test, sanitize and benchmark; results under $OUT.
#   bash scripts/gpu_check.sh [build] [test] [sanitize] [bench] [suite] [collect] [tune] [dgl | dgl-test dgl-bench]
#                             [dgl-convs] [dgl-dispatch] [dgl-host] [multi-gpu]
#   (default: build test sanitize bench)
# The CUDA library and the CPU core's archive are taken from .prebuilt/ when their source hashes
# match these sources (build both here with `make cuda-lib` and carry .prebuilt/libugraph_cuda.so.xz
# and .prebuilt/libugraph_cpu.a.xz, which are unpacked there); otherwise each is built on the GPU
# machine (the CPU core takes its GCC over 5 minutes).
# Stage dgl (= dgl-test + dgl-bench) runs the plugin under real DGL: it needs, carried in the
# git-ignored .gpu-deps/, the CUDA DGL build of ../shared/dgl-cuda and the shared datasets:
#   mkdir -p .gpu-deps && cp ../shared/dgl-cuda/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz .gpu-deps/ \
#     && cp -r ../shared/datasets .gpu-deps/datasets          # then carry [".gpu-deps", ".prebuilt"]
# DGL_TARBALL and DGL_UGRAPH_DATASETS point elsewhere; DGL_BENCH_BUDGET_S (360) bounds the
# benchmark, DGL_BENCH_ARGS adds to its command line. Stage dgl-convs times DGL's own conv modules
# (benchmarks/bench_convs.py; CONV_BENCH_BUDGET_S, 300, and CONV_BENCH_ARGS, e.g. "--graphs cora").
# Stage dgl-dispatch times the per-call path on a cora-sized graph (benchmarks/bench_dispatch.py
# --device cuda). Stage dgl-host profiles the models' host time by package (benchmarks/profile_host.py;
# HOST_PROFILE_GRAPHS, default cora,pubmed). Stage multi-gpu runs
# tests/gpu/test_multi_gpu.py under that DGL: it needs two GPUs (device kind nvidia-h200-x2).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ugraph_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
# The shared datasets, carried in .gpu-deps/: the suite's real graphs and the models' (the GPU
# machine has no ../shared).
export DGL_UGRAPH_DATASETS=${DGL_UGRAPH_DATASETS:-$PWD/.gpu-deps/datasets}
stages=${*:-build test sanitize bench}
has() { [[ " $stages " == *" $1 "* ]]; }
# DGL 2.4's tensor adapter has torch warn "lazyInitCUDA is deprecated" on every call: megabytes of
# logs that say nothing.
quiet() { grep --line-buffered -v "lazyInitCUDA is deprecated"; }
status=0
# The first line of every log: the GPU and the CUDA core it measured.
header() {
  echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); CUDA core $($PY -c \
    'import dgl_ugraph.core._ext as e; print(e._C.build_info().get("cuda_source_hash", "none"))' 2>/dev/null)"
}

if has build; then
  for xz in .prebuilt/*.xz; do
    if [ "$xz" -nt "${xz%.xz}" ]; then xz -dc "$xz" > "${xz%.xz}"; fi
  done
  # use_prebuilt VAR FILE WHAT READER HASH-ARGS...: export VAR=FILE when FILE's embedded source
  # hash (source_hash.py READER) is that of these sources.
  use_prebuilt() {
    local var=$1 lib=$2 what=$3 reader=$4 want
    shift 4
    want=$($PY csrc/source_hash.py "$@")
    if [ -f "$lib" ] && [ "$($PY csrc/source_hash.py "$reader" "$lib" 2>/dev/null)" = "$want" ]; then
      echo "using prebuilt $what $want"
      export "$var=$PWD/$lib"
    else
      echo "prebuilt $what missing or stale: building it here"
      unset "$var"
    fi
  }
  use_prebuilt UGRAPH_CUDA_PREBUILT .prebuilt/libugraph_cuda.so "CUDA core" --of-library --archs 90
  use_prebuilt UGRAPH_CPU_PREBUILT .prebuilt/libugraph_cpu.a "CPU core" --of-archive --cpu
  t=$(date +%s)
  UGRAPH_CUDA=ON UGRAPH_CUDA_ARCHS=90 PYTHON=$PY bash scripts/build_inplace.sh 2>&1 | tail -5 || exit 1
  echo "build: $(( $(date +%s) - t )) s"
  $PY -c "import dgl_ugraph.core._ext as e; print(e._C.build_info())" | tee "$OUT/build_info.txt" || exit 1
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$OUT/build_info.txt"
fi

if has test; then
  t=$(date +%s)
  { header; $PY -m pytest tests/gpu -q -rs -s -p no:cacheprovider 2>&1; } | quiet | tee "$OUT/gpu_tests.log" | tail -40
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "gpu tests: $(( $(date +%s) - t )) s"
fi

if has sanitize; then
  t=$(date +%s)
  # Each tool (SANITIZE_TOOLS, default both) over the kernel suite's smoke cases and a 500-seed slice of the fuzz.
  # racecheck, the slower, takes the smoke's --tiny set: the whole smoke outran 130 s under it.
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    header > "$OUT/sanitize_$tool.log"
    smoke=tests/gpu/test_kernels_gpu.py
    [ "$tool" = racecheck ] && smoke="$smoke --tiny"
    for script in "$smoke" "tests/gpu/test_reliability_gpu.py --sanitize"; do
      timeout "${SANITIZE_TIMEOUT_S:-200}" compute-sanitizer --tool $tool --error-exitcode 9 $PY $script >> "$OUT/sanitize_$tool.log" 2>&1
      rc=$?
      echo "compute-sanitizer $tool $script: exit $rc; $(grep -E 'ERROR SUMMARY|smoke:|sanitize:' "$OUT/sanitize_$tool.log" | tail -2 | tr '\n' ' ')"
      [ $rc -eq 0 ] || status=1
    done
  done
  echo "sanitize: $(( $(date +%s) - t )) s"
fi

if has bench; then
  $PY benchmarks/bench_kernels.py --out "$OUT/kernels.csv" --search-out "$OUT/kernels_search.csv.gz" \
      --budget-s "${BENCH_BUDGET_S:-300}" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -15
  $PY benchmarks/summarize_kernels.py "$OUT/kernels.csv" --out "$OUT/kernels.md" && cat "$OUT/kernels.md"
fi

# Stage suite: the acceptance suite in one call, the selector's choices and the baselines
# without search (--grid none), in five parts: the uGrapher stand-ins with every operator, the
# shared datasets, the two 40M-edge graphs, the stand-ins' half-precision sums and the stand-ins
# reversed (the backward passes' aggregations); $OUT/kernels.csv holds them all.
if has suite; then
  t=$(date +%s)
  part() {
    local name=$1
    shift
    { header; $PY benchmarks/bench_kernels.py --grid none --budget-s "${SUITE_BUDGET_S:-600}" --out "$OUT/suite_$name.csv" \
        --search-out /tmp/suite_search.csv.gz "$@" 2>&1; } | quiet > "$OUT/suite_$name.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    tail -1 "$OUT/suite_$name.log"
  }
  part standins --no-large --no-datasets
  part datasets --no-large --no-standins \
    --ops copy_u-sum,u_mul_e-sum,copy_u-max,copy_u-mean,gat_u_mul_e-sum,gat1_u_mul_e-sum,gat8_u_mul_e-sum
  part large --no-standins --no-datasets --ops copy_u-sum,copy_u-max,copy_u-mean
  part half --no-large --no-datasets --dtypes float16,bfloat16 --widths 64,256 --ops copy_u-sum,u_mul_e-sum
  part reverse --no-large --no-datasets --reverse --ops copy_u-sum,u_mul_e-sum,copy_u-max
  # One header, then every part's rows.
  awk 'FNR > 1 || NR == 1' "$OUT"/suite_{standins,datasets,large,half,reverse}.csv > "$OUT/kernels.csv"
  rm -f "$OUT"/suite_*.csv
  $PY benchmarks/summarize_kernels.py "$OUT/kernels.csv" --out "$OUT/kernels.md" && cat "$OUT/kernels.md"
  echo "suite: $(( $(date +%s) - t )) s"
fi

if has collect; then
  $PY benchmarks/collect.py --out-dir "$OUT" --budget-s "${COLLECT_BUDGET_S:-400}" ${COLLECT_ARGS:-} 2>&1 | tee "$OUT/collect.log" | tail -15
fi
# Stage tune runs `python -m dgl_ugraph tune --quick` as a user would, then checks that a new process
# picks the model up. The GPU machine has no internet: lightgbm and scipy (which it imports) come
# as wheels carried in .gpu-deps/wheels (pip download --only-binary=:all: --python-version 3.12).
if has tune; then
  $PY -c "import lightgbm" 2>/dev/null || $PY -m pip install -q --no-index --find-links .gpu-deps/wheels lightgbm \
    || exit 1
  t=$(date +%s)
  { header; timeout "${TUNE_TIMEOUT_S:-420}" $PY -m dgl_ugraph tune --quick --fresh 2>&1; } | tee "$OUT/tune_quick.log" | tail -15
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "tune --quick: $(( $(date +%s) - t )) s" | tee -a "$OUT/tune_quick.log"
  $PY -c "from dgl_ugraph.selection import predictor; p = predictor.load(predictor.device_info().family)
print('a new process loads', p.path if p else None)" 2>&1 | tee -a "$OUT/tune_quick.log"
fi

if has dgl || has dgl-test || has dgl-bench || has dgl-convs || has dgl-dispatch || has dgl-host || has multi-gpu; then
  tarball=${DGL_TARBALL:-.gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz}
  mkdir -p /tmp/dglpkg && tar -xJf "$tarball" -C /tmp/dglpkg || exit 1
  export PYTHONPATH=/tmp/dglpkg:$PYTHONPATH DGLBACKEND=pytorch
  echo "datasets: $(ls "$DGL_UGRAPH_DATASETS"/*.npz 2>/dev/null | wc -l) graphs in $DGL_UGRAPH_DATASETS"
  # A DGL that does not load, or loads without CUDA, would only make the tests skip: stop here.
  $PY -W ignore -c "import dgl, torch; from dgl._ffi import base
assert dgl.ndarray.gpu(0).exist, 'this DGL has no CUDA'
print('DGL', dgl.__version__, 'tensoradapter', base.is_tensor_adaptor_enabled(), 'on', torch.cuda.get_device_name())" \
    > "$OUT/dgl_tests.log" 2>&1
  rc=$?
  cat "$OUT/dgl_tests.log"
  [ $rc -eq 0 ] || exit 1
fi

if has dgl || has dgl-test; then
  t=$(date +%s)
  $PY -m pytest tests/gpu/test_dgl_gpu.py tests/dgl/test_dgl_modules.py -q -rs -p no:cacheprovider 2>&1 | quiet \
    | tee -a "$OUT/dgl_tests.log" | tail -30
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "dgl tests: $(( $(date +%s) - t )) s"
fi

if has dgl || has dgl-bench; then
  t=$(date +%s)
  budget=${DGL_BENCH_BUDGET_S:-360}
  # --budget-s stops starting cases; the timeout only guards against a hang, and the rows of every
  # finished case are in the CSV either way.
  timeout $((budget + 90)) $PY benchmarks/bench_models.py --device cuda --sparse-free --out "$OUT/models_gpu.csv" \
      --budget-s "$budget" ${DGL_BENCH_ARGS:-} 2>&1 | quiet | tee "$OUT/models_gpu.log" | tail -25
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  $PY benchmarks/bench_models.py --summarize --device cuda --out "$OUT/models_gpu.csv" > "$OUT/models_gpu.md" 2>&1
  head -30 "$OUT/models_gpu.md"
  echo "dgl bench: $(( $(date +%s) - t )) s"
fi
if has dgl-convs; then
  t=$(date +%s)
  budget=${CONV_BENCH_BUDGET_S:-300}
  timeout $((budget + 120)) $PY benchmarks/bench_convs.py --device cuda --out "$OUT/convs_gpu.csv" --md "$OUT/convs_gpu.md" \
      --budget-s "$budget" ${CONV_BENCH_ARGS:-} 2>&1 | quiet | tee "$OUT/convs_gpu.log" | tail -12
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "conv bench: $(( $(date +%s) - t )) s"
fi
if has multi-gpu; then
  t=$(date +%s)
  { header; nvidia-smi -L; $PY -m pytest tests/gpu/test_multi_gpu.py -q -rs -p no:cacheprovider 2>&1; } | quiet \
    | tee "$OUT/multi_gpu_tests.log" | tail -30
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "multi-gpu tests: $(( $(date +%s) - t )) s"
fi
if has dgl-host; then
  { header; $PY benchmarks/profile_host.py --device cuda --graphs "${HOST_PROFILE_GRAPHS:-cora,pubmed}" \
      --out "$OUT/host_profile_gpu.csv" 2>&1; } | quiet | tee "$OUT/host_profile_gpu.log" | tail -45
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
if has dgl-dispatch; then
  { header; $PY benchmarks/bench_dispatch.py --device cuda --out "$OUT/dispatch_gpu.csv" 2>&1; } | quiet | tee "$OUT/dispatch_gpu.log" | tail -12
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
# The device tool brings back at most 8 files from $OUT: past 7, everything travels as one archive
# (a collection's three shards and the bench's four files together already exceed it).
if [ "$(find "$OUT" -type f | wc -l)" -gt 7 ]; then
  tar -czf /tmp/ugraph_results.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/ugraph_results.tgz "$OUT/results.tgz"
  echo "more than 7 result files: packed into \$OUT/results.tgz"
fi
exit $status
