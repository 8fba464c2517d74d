"""Collects the strategy predictor's training and evaluation data on the GPU.

    python3 benchmarks/collect.py --out-dir $OUT --budget-s 400

Suite: graph_suite.synthetic_grid() + the uGrapher Table 3 stand-ins + graph_suite.LARGE (each
up to --max-edges) + the real graphs of ../shared/datasets. Held out, by a fixed rule written into
every case row and the meta file: all real datasets, and every synthetic graph whose
sha256("holdout:" + name) is 0 mod 5. Calls: calls.DGL_CALLS (GCN, GIN, SAGE, GAT, forward and
backward, as DGL issues them) at F in calls.WIDTHS; fp32 on every graph, plus fp16, bf16, int64
indices or fp64 on a quarter of the graphs each (same hash rule). --cases-per-graph caps each
graph at a subset spread over its calls (calls.sample_cases), so that a run reaches more graphs. Every case times the full grid
(predictor.config_space); 1 in 16 cases is an audit case (no cut, and the tiling past the limit
timed too), whose results the meta file summarises as the evidence for both prunings.

Output (flat, in --out-dir): cases-<gpu>-<run>.csv.gz, timings-<gpu>-<run>.csv.gz and
meta-<gpu>-<run>.json. Cases already in --out-dir or under --resume (default data/predictor)
for this GPU model are skipped, so repeated runs continue the suite. The run stops cleanly at
--budget-s; a configuration that kills the GPU context costs one worker restart and is recorded.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
import time
from typing import FrozenSet, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.core import _ext  # noqa: E402
from dgl_ugraph.core.timing import TimingPolicy  # noqa: E402
from dgl_ugraph.selection import predictor  # noqa: E402
from dgl_ugraph.tuning import calls, collect, run  # noqa: E402

HOLDOUT_RULE = ("all real datasets (../shared/datasets); every other graph whose "
                "int(sha256('holdout:' + name)[:12], 16) % 5 == 0")
VARIANT_RULE = ("float32/int32 everywhere; then by int(sha256('variant:' + name)[:12], 16) % 4: "
                "0 -> float16/int32, 1 -> bfloat16/int32, 2 -> float32/int64, 3 -> float64/int32")
ORDER_SEED = 20230325


def split_of(name: str, family: str) -> str:
    if family == "dataset":
        return "holdout"
    return "holdout" if calls.stable_hash("holdout:" + name) % 5 == 0 else "train"


def variants_of(name: str):
    extra = {0: [("float16", "int32")], 1: [("bfloat16", "int32")], 2: [("float32", "int64")], 3: [("float64", "int32")]}
    return tuple([("float32", "int32")] + extra[calls.stable_hash("variant:" + name) % 4])


def suite(max_edges: int, datasets: bool = True, scale: float = 1.0):
    """The GraphSources in collection order (a seeded shuffle: each run mixes held-out and
    training graphs of every kind; the scheduler then balances sizes)."""
    specs = [(s, s.family) for s in gs.synthetic_grid(max_edges=max_edges)]
    specs += [(s, "standin") for s in gs.PAPER_STANDINS if s.num_edges <= max_edges]
    specs += [(s, "large") for s in gs.LARGE if s.num_edges <= max_edges]
    sources = []
    for spec, family in specs:
        spec = gs.scaled(spec, scale) if scale != 1.0 else spec
        sources.append(calls.GraphSource(spec.name, family, split_of(spec.name, family), spec.num_edges, spec=spec,
                                        variants=variants_of(spec.name)))
    root = gs.datasets_dir() if datasets else None
    if root is not None:
        import numpy as np
        for path in sorted(root.glob("*.npz")):
            with np.load(path) as z:
                edges = int(z["src"].shape[0])
            name = "ds-" + path.stem
            sources.append(calls.GraphSource(name, "dataset", "holdout", edges, path=str(path), variants=variants_of(name)))
    rng = random.Random(ORDER_SEED)
    sources.sort(key=lambda s: s.name)
    rng.shuffle(sources)
    return sources


def case_ids(path: Optional[pathlib.Path]) -> FrozenSet[str]:
    if path is None:
        return frozenset()
    ids = frozenset(line.strip() for line in path.read_text().splitlines() if line.strip())
    if not ids:
        raise SystemExit(f"{path}: no case ids")
    return ids


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True, type=pathlib.Path)
    ap.add_argument("--budget-s", type=float, default=400.0, help="the whole run, start-up included")
    ap.add_argument("--max-edges", type=int, default=12_500_000, help="skip larger graphs (the 20M/50M ones and LARGE)")
    ap.add_argument("--resume", type=pathlib.Path, nargs="*", default=[ROOT / "data" / "predictor"],
                    help="folders of earlier runs whose cases are skipped")
    ap.add_argument("--widths", default=",".join(map(str, calls.WIDTHS)))
    ap.add_argument("--calls", default=",".join(calls.CALLS))
    ap.add_argument("--no-datasets", action="store_true")
    ap.add_argument("--scale", type=float, default=1.0, help="shrink the synthetic graphs (smoke runs)")
    ap.add_argument("--cut", type=float, default=2.5, help="repeat only configurations within this factor of the best screening run")
    ap.add_argument("--audit-every", type=int, default=16)
    ap.add_argument("--cases-per-graph", type=int, default=0, help="at most this many cases per graph (0: all)")
    ap.add_argument("--case-ids", type=pathlib.Path, default=None,
                    help="a file of case ids (the case_id column of a cases-*.csv.gz), one per line: only these run "
                         "(an earlier core's cases re-timed on a new core; pass --resume with no folder)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-id", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    sources = suite(args.max_edges, not args.no_datasets, args.scale)
    case_ids(args.case_ids)  # a bad file stops here, not in the worker
    widths = tuple(int(x) for x in args.widths.split(","))
    wanted_calls = tuple(c for c in args.calls.split(",") if c)
    if args.worker:
        cfg = collect.CollectConfig(args.out_dir, args.run_id, args.deadline, tuple(args.resume), widths,
                                 calls=wanted_calls, policy=TimingPolicy(cut=args.cut), audit_every=args.audit_every,
                                 cases_per_graph=args.cases_per_graph, case_ids=case_ids(args.case_ids))
        return run.run_worker(sources, cfg)

    import torch
    if not torch.cuda.is_available():
        print("collect.py needs a CUDA GPU", file=sys.stderr)
        return 2
    t0 = time.time()
    deadline = t0 + args.budget_s - 10  # keep a margin for the summary
    run_id = run.new_run_id()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    dev = predictor.device_info()
    tag = f"{dev.slug}-{run_id}"
    meta_path = args.out_dir / f"meta-{tag}.json"
    if not any(s.family == "dataset" for s in sources) and not args.no_datasets:
        print("warning: no shared datasets found (set DGL_UGRAPH_DATASETS): the real held-out graphs are missing")
    meta = {
        "run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
        "device": {"name": dev.name, "sm_count": dev.sm_count, "l2_bytes": dev.l2_bytes, "cc": f"{dev.major}.{dev.minor}",
                   "family": dev.family},
        "torch": torch.__version__, "core": _ext.core().build_info() if _ext.has_cuda() else None,
        "args": {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()
                 if k not in ("worker", "run_id", "deadline")},
        "holdout_rule": HOLDOUT_RULE, "variant_rule": VARIANT_RULE, "widths": list(widths),
        "attention_heads": list(calls.ATTENTION_HEADS), "gat_heads": calls.GAT_HEADS,
        "grid": {"groupings": list(predictor.GRID_GROUPINGS), "tilings": list(predictor.GRID_TILINGS),
                 "tiling_limit": "thread strategies t <= width; warp strategies t <= ceil(width / 32)"},
        "dgl_calls": [dict(model=m, pass_=p, call=c, dgl=d) for m, p, c, d in calls.DGL_CALLS],
        "no_kernel": [dict(model=m, pass_=p, why=w) for m, p, w in calls.NO_KERNEL],
        "calls": {k: vars(v) for k, v in calls.CALLS.items() if k in wanted_calls},
        "graphs": [dict(name=s.name, family=s.family, split=s.split, num_edges=s.num_edges,
                        variants=["/".join(v) for v in s.variants]) for s in sources],
        "timing": {"cut": args.cut, "audit_every": args.audit_every, "method":
                   "CUDA events around each run, queued by the core's timing loop (ug_cuda_time) behind a gate "
                   "that holds the GPU until the batch is queued; one screening run per configuration, those within cut x best repeated "
                   "(about 2 ms of kernel time, 1-10 runs) and their median kept; inputs in [0.5, 1.5)"},
    }
    meta_path.write_text(json.dumps(meta, indent=1, default=str))
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), *argv, "--worker", "--run-id", run_id,
           "--deadline", str(deadline)]
    rc = run.supervise(cmd, deadline)
    summary = run.finish_meta(meta_path, args.out_dir, tag, args.cut)
    state = args.out_dir / f"state-{run_id}.json"
    if state.exists() and not json.loads(state.read_text()).get("bad") and not json.loads(state.read_text()).get("suspect"):
        state.unlink()
    print(f"collect: {summary['cases']} cases ({summary['cases_ok']} ok; {summary['cases_by_split']}), "
          f"{summary['timings']} timings in {time.time() - t0:.0f} s; audit: {summary['audit']}")
    return 0 if rc in (0, run.EXIT_DEVICE_LOST) else rc


if __name__ == "__main__":
    sys.exit(main())
