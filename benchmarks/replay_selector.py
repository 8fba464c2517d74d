"""Replays a selection model on a kernel bench's search timings, on the CPU, between device runs.

For each case of the bench (graph, op, F, dtype), the model ranks the configurations it can
choose from, and the first of them that the bench's search timed stands for its choice; that
time over the search's best is what `impl=ugraph` over `impl=ugraph_best` would read where the
choice falls on the search grid. An estimate, not a measurement: the model's first choice may lie
off the grid (column `on_grid` says so), and the search times are single screening runs where a
configuration was cut. The graphs are rebuilt as `bench_kernels.py` builds them.

    PYTHONPATH=. .venv/bin/python benchmarks/replay_selector.py benchmarks/results/kernels_search.csv.gz \
        [--model dgl_ugraph/predictor_models/sm90.json] [--out replay.csv]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import math
import pathlib
import sys
from collections import defaultdict
from types import SimpleNamespace

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_kernels import graphs, operator_call  # noqa: E402

from dgl_ugraph.core import _ext, ops  # noqa: E402
from dgl_ugraph.core.abstraction import EVERY_CUDA_KEY, OpInfo  # noqa: E402
from dgl_ugraph.core.capability import candidates  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import predictor  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

# The bench's machine (benchmarks/results/kernels.md's header): the features read its SM count and L2 size.
H100 = predictor.DeviceInfo("NVIDIA H100 80GB HBM3", 132, 50 * 2 ** 20, 9, 0)


def load_search(path: pathlib.Path) -> dict:
    """{(graph, op, F, dtype): {config: ms}} of a bench's search file (the parts of a suite run
    are concatenated, each with its header line)."""
    cases = defaultdict(dict)
    with gzip.open(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            if r["ms"] == "ms":
                continue
            cases[(r["graph"], r["op"], int(r["F"]), r["dtype"])][r["config"]] = float(r["ms"])
    return cases


def compiled_keys() -> frozenset:
    """The (strategy, dtype) keys the model may choose from: this build's CUDA core, or on a
    CPU-only build those of the full GPU build the bench ran."""
    return _ext.compiled_cuda_keys() or EVERY_CUDA_KEY


def operands(name: str, graph: UGraph, f: int, dtype: torch.dtype) -> OpInfo:
    """The bench's operands as zero-stride views: selection reads only shapes and dtypes."""
    return operator_call(name, graph, f, lambda shape: torch.empty((1,) * len(shape), dtype=dtype).expand(shape))


def replay(model: predictor.Predictor, search: dict, dev: predictor.DeviceInfo):
    """One row per case: the model's choice among the timed configurations and its slowdown."""
    by_graph = defaultdict(list)
    for key in search:
        by_graph[key[0]].append(key)
    names = {n.removesuffix("-rev") for n in by_graph}
    args = SimpleNamespace(no_standins=False, no_large=False, no_datasets=False, scale=1.0,
                           only=",".join(sorted(names)), skip="")
    compiled = compiled_keys()
    for gname, src, dst, n in graphs(args):
        for name in (gname, gname + "-rev"):
            if name not in by_graph:
                continue
            s, d = (dst, src) if name.endswith("-rev") else (src, dst)
            graph = UGraph.from_coo(s, d, n, n, torch.int32)
            case_info = predictor.CaseInfo.from_graph(graph)
            for key in sorted(by_graph[name], key=str):
                _, op_name, f, dtype = key
                sig, _ = ops.signature(graph, operands(op_name, graph, f, getattr(torch, dtype)))
                ranked = model.rank(case_info, sig, dev, candidates(sig, graph.num_edges, compiled))
                timed = search[key]
                pick = next((c for c in ranked if str(c) in timed), None)
                if pick is None:
                    continue
                best = min(timed, key=timed.get)
                yield dict(graph=name, op=op_name, F=f, dtype=dtype, choice=str(pick), on_grid=int(pick == ranked[0]),
                           ms=timed[str(pick)], best=best, best_ms=timed[best],
                           ratio=round(timed[str(pick)] / timed[best], 4))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("search", type=pathlib.Path, help="a kernels_search*.csv.gz of benchmarks/bench_kernels.py")
    ap.add_argument("--model", type=pathlib.Path, default=ROOT / "dgl_ugraph" / "predictor_models" / "sm90.json")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="write the per-case rows here")
    args = ap.parse_args()
    model = predictor.Predictor.from_files(args.model)
    rows = list(replay(model, load_search(args.search), H100))
    if not rows:
        print("no case of the search file could be replayed", file=sys.stderr)
        return 1
    if args.out:
        write_rows(args.out, rows)
    ratios = [r["ratio"] for r in rows]
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"{args.model.name} on {args.search.name}: {len(rows)} cases, the choice's time over the best "
          f"{geo:.3f} (geomean), worst {max(ratios):.2f}; over 1.5x: {sum(x > 1.5 for x in ratios)}, "
          f"over 1.25x: {sum(x > 1.25 for x in ratios)}; first choice on the grid in "
          f"{sum(r['on_grid'] for r in rows)} cases")
    for r in sorted(rows, key=lambda r: -r["ratio"])[:10]:
        print(f"  {r['ratio']:.2f}x {r['graph']} {r['op']} F={r['F']} {r['dtype']}: {r['choice']} "
              f"({r['ms']:.4f} ms) vs {r['best']} ({r['best_ms']:.4f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
