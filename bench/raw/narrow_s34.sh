#!/usr/bin/env bash
# Session 34, one H200 (about 7 minutes): int64 DGL graphs run as int32 in the graph cache
# (dgl_ugraph/dgl/cache.py NARROW_DEVICES). The DGL GPU tests and the CUDA-graph tests with it, then
# the example models (bench_models.py, plugin on and off interleaved) narrowed and, in a second run,
# kept at int64 (bench_models_wide_s34.py), on the same graphs.
# Carry .prebuilt/*.xz, .gpu-deps/dgl-2.4.0-cuda13-sm90-torch2.11.tar.xz and .gpu-deps/datasets.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/raw/probe_lib.sh
build_with_dgl || exit 1
export DGL_UGRAPH_DATASETS=$PWD/.gpu-deps/datasets PYTHONPATH=/tmp/dglpkg:$PWD DGLBACKEND=pytorch
PROBE_TAIL_BYTES=700 probe dgl_tests 240 python3 -m pytest tests/gpu/test_dgl_gpu.py tests/gpu/test_cuda_graphs.py \
  -q -rs -p no:cacheprovider
GRAPHS=${GRAPHS:-cora,pubmed,karate_wikipedia,sim-artist,sim-com-amazon,sim-soc-BlogCatalog,sim-amazon0505}
for side in narrow wide; do
  script=scripts/bench_models.py
  [ $side = wide ] && script=bench/raw/bench_models_wide_s34.py
  PROBE_TAIL_BYTES=300 probe "models_$side" 200 python3 $script --device cuda --no-pyg --only "$GRAPHS" \
    --budget-s "${BUDGET_S:-130}" --out "$OUT/models_$side.csv"
  python3 scripts/bench_models.py --summarize --device cuda --out "$OUT/models_$side.csv" > "$OUT/models_$side.md" 2>&1
done
python3 - "$OUT" <<'PY'
import csv, math, sys, collections
out = sys.argv[1]
x = {}
for side in ("narrow", "wide"):
    for r in csv.DictReader(open(f"{out}/models_{side}.csv")):
        if r["impl"] == "ugraph" and r["paired_x"]:
            x[(side, r["model"], r["graph"], r["mode"])] = float(r["paired_x"])
by = collections.defaultdict(list)
for (side, m, g, mode), v in x.items():
    if side == "narrow" and ("wide", m, g, mode) in x:
        by[(g, mode)].append(v / x[("wide", m, g, mode)])
        print(f"{m:10} {g:22} {mode:9} vs DGL narrow {v:.2f} wide {x[('wide', m, g, mode)]:.2f}")
for (g, mode), r in sorted(by.items()):
    print(f"{g:22} {mode:9} narrow/wide speedup geomean {math.exp(sum(map(math.log, r)) / len(r)):.3f} over {len(r)}")
PY
