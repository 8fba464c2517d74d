"""Running a collection: a supervising process restarts the worker when a configuration kills the
GPU context (the worker resumes from its shards); the run's summary; and `python -m dgl_ugraph
tune`, which re-collects on the user's GPU and retrains the model there. Progress is shown by tqdm.
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import pathlib
import random
import subprocess
import sys
import time
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from tqdm import tqdm

from dgl_ugraph import settings
from dgl_ugraph.core import _ext
from dgl_ugraph.core.timing import DeviceLost
from dgl_ugraph.selection import predictor
from dgl_ugraph.tuning import graph_suite as gs
from dgl_ugraph.tuning.calls import WIDTHS, GraphSource
from dgl_ugraph.tuning.collect import CollectConfig, CudaBackend, Collector, warm_modules
from dgl_ugraph.tuning.shards import collected_files, read_rows
from dgl_ugraph.tuning.training import export, load_cases, train

EXIT_DEVICE_LOST = 3


def supervise(worker_cmd: List[str], deadline: float, max_restarts: int = 8, log: Callable[[str], None] = print) -> int:
    """Runs the worker until it finishes; a worker that lost its GPU context (exit 3) or died of a
    signal is restarted (it resumes from its shards) while time and restarts remain."""
    restarts = 0
    while True:
        rc = subprocess.call(worker_cmd)
        if rc == 0:
            return 0
        if rc != EXIT_DEVICE_LOST and rc >= 0:
            log(f"worker failed with exit code {rc}; not restarting")
            return rc
        restarts += 1
        if restarts > max_restarts or time.time() >= deadline - 5:
            log(f"worker lost the GPU (exit {rc}); {restarts - 1} restarts done, stopping")
            return rc
        log(f"worker lost the GPU (exit {rc}): restart {restarts} of {max_restarts}")


def run_worker(sources: Sequence[GraphSource], cfg: CollectConfig, progress: Optional[tqdm] = None,
               backend=None, log: Callable[[str], None] = print) -> int:
    """The worker's body: returns its exit code (0 done or out of budget, EXIT_DEVICE_LOST)."""
    backend = backend or CudaBackend()
    if progress is not None:
        log = progress.write  # a log line above the bar
    # Graphs are generated in helper processes (numpy work that would otherwise hold the GIL
    # while kernels are being queued); "spawn", as this process has a CUDA context.
    loader = multiprocessing.get_context("spawn").Pool(2)
    collector = Collector(backend, cfg, progress=progress, loader=loader, log=log)
    try:
        collector.plan(sources)  # the first graphs are generated while the modules load
        variants = sorted({v for s in sources for v in s.variants})
        t = time.time()
        runs = warm_modules(backend, variants, cfg.calls, collector.compiled, log)
        log(f"warm-up: {runs} configurations loaded in {time.time() - t:.1f} s")
        stats = collector.run()
    except DeviceLost as exc:
        collector.note_device_lost()
        log(f"GPU context lost ({exc}); the supervisor restarts the worker")
        loader.terminate()
        sys.stdout.flush()
        os._exit(EXIT_DEVICE_LOST)  # the context is gone: skip CUDA teardown
    finally:
        if progress is not None:
            progress.close()
    loader.terminate()
    log(f"worker: {stats.cases} cases ({stats.failed} failed), {stats.timings} timings; stopped: {stats.stop_reason}")
    return 0


def audit_summary(case_rows: Sequence[dict], timing_rows: Sequence[dict], cut: float) -> dict:
    """Evidence for the pruning: on audited cases (every configuration repeated, and the next
    tiling past the limit timed too), would the cut have dropped the winner, and did a tiling
    past the limit ever beat the grid's best?"""
    by_case: Dict[str, List[dict]] = defaultdict(list)
    for t in timing_rows:
        by_case[t["case_id"]].append(t)
    lost, regrets, beyond_wins, beyond_best, n = 0, [], 0, [], 0
    for row in case_rows:
        if row.get("audit") != "1" or row.get("status") != "ok":
            continue
        ts = by_case.get(row["case_id"], [])
        grid = [t for t in ts if t["status"] == "ok" and t["ms"] and t["first_ms"]]
        if not grid:
            continue
        n += 1
        best = min(float(t["ms"]) for t in grid)
        first_best = min(float(t["first_ms"]) for t in grid)
        kept = [float(t["ms"]) for t in grid if float(t["first_ms"]) <= cut * first_best]
        if min(kept) > best:
            lost += 1
        regrets.append(min(kept) / best)
        beyond = [float(t["ms"]) for t in ts if t["status"] == "beyond" and t["ms"]]
        if beyond:
            beyond_best.append(best / min(beyond))
            beyond_wins += min(beyond) < best
    return {"audited_cases": n, "cut_factor": cut, "cut_lost_winner": lost,
            "cut_worst_slowdown": max(regrets) if regrets else None,
            "beyond_limit_faster_cases": beyond_wins,
            "beyond_limit_best_speedup": max(beyond_best) if beyond_best else None}


def finish_meta(meta_path: pathlib.Path, out_dir: pathlib.Path, tag: str, cut: float) -> dict:
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    cases_path, timings_path = out_dir / f"cases-{tag}.csv.gz", out_dir / f"timings-{tag}.csv.gz"
    cases = read_rows(cases_path) if cases_path.exists() else []
    timings = read_rows(timings_path) if timings_path.exists() else []
    status = defaultdict(int)
    for t in timings:
        status[t["status"]] += 1
    meta.update(finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                cases=len(cases), cases_ok=sum(r["status"] == "ok" for r in cases),
                cases_by_split={s: sum(r["split"] == s for r in cases) for s in ("train", "holdout")},
                timings=len(timings), timings_by_status=dict(status),
                starved_batches=sum(int(r["starved_batches"] or 0) for r in cases),
                audit=audit_summary(cases, timings, cut))
    tmp = meta_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, meta_path)
    return meta


def new_run_id() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{random.randrange(16 ** 4):04x}"


# ---- `python -m dgl_ugraph tune` ---------------------------------------------------------------------------

def tune_suite(quick: bool) -> List[GraphSource]:
    """The user's own re-collection: the synthetic families (no held-out graphs: every graph
    trains); --quick takes a seeded sample of the smaller ones."""
    specs = gs.synthetic_grid(max_edges=2_500_000 if quick else 12_500_000)
    if quick:
        rng = random.Random(11)
        small = [s for s in specs if s.num_edges <= 1_000_000]
        specs = rng.sample(small, min(18, len(small)))
    return [GraphSource(s.name, s.family, "train", s.num_edges, spec=s) for s in specs]


def _tune_args(argv):
    ap = argparse.ArgumentParser(prog="python -m dgl_ugraph tune",
                                 description="Re-collect strategy timings on this GPU and retrain the predictor.")
    ap.add_argument("--quick", action="store_true", help="a short collection (under 5 minutes in all on an H100)")
    ap.add_argument("--budget-s", type=float, default=None, help="collection time (default 150 quick, 1200 full)")
    ap.add_argument("--fresh", action="store_true", help="discard earlier tune data for this GPU")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-id", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def _tune_widths(quick: bool) -> Tuple[int, ...]:
    return (16, 64, 256) if quick else WIDTHS


def main(argv=None) -> int:
    args = _tune_args(sys.argv[1:] if argv is None else argv)
    try:
        import lightgbm  # noqa: F401  (needed to retrain; checked before spending GPU time)
    except ImportError:
        print("dgl_ugraph tune needs lightgbm to train the model: pip install 'dgl_ugraph[predictor]' "
              "(or pip install lightgbm)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or not _ext.has_cuda():
        print(f"dgl_ugraph tune needs a CUDA GPU and the CUDA core ({_ext.LOAD_ERROR or 'no CUDA core in this build'})",
              file=sys.stderr)
        return 2
    dev = predictor.device_info()
    data_dir = settings.cache_dir() / "tune" / dev.slug
    budget = args.budget_s if args.budget_s is not None else (150.0 if args.quick else 1200.0)
    sources = tune_suite(args.quick)
    widths = _tune_widths(args.quick)
    if args.worker:
        cfg = CollectConfig(data_dir, args.run_id, args.deadline, widths=widths)
        return run_worker(sources, cfg, tqdm(unit="case", desc="dgl_ugraph tune", file=sys.stderr))
    if args.fresh and data_dir.exists():
        for p in data_dir.glob("*"):
            p.unlink()
    data_dir.mkdir(parents=True, exist_ok=True)
    run_id = new_run_id()
    deadline = time.time() + budget
    print(f"dgl_ugraph tune: collecting on {dev.name} for up to {budget:.0f} s into {data_dir}")
    cmd = [sys.executable, "-m", "dgl_ugraph", "tune", "--worker", "--run-id", run_id, "--deadline", str(deadline)]
    cmd += ["--quick"] if args.quick else []
    rc = supervise(cmd, deadline)
    if rc not in (0, EXIT_DEVICE_LOST):
        return rc
    paths = collected_files([data_dir], "cases")
    cases = [c for c in load_cases(paths) if c.row["device"] == dev.name]
    if not cases:
        print("dgl_ugraph tune: no cases were collected", file=sys.stderr)
        return 1
    result = train(cases, num_trees=100 if args.quick else 200)
    out = export(result, settings.cache_dir() / "models", dev.family, paths, [dev.name])
    predictor.reset()
    loaded = predictor.load(dev.family)
    if loaded is None or loaded.path != out:
        print(f"dgl_ugraph tune: the model written to {out} did not load", file=sys.stderr)
        return 1
    print(f"dgl_ugraph tune: {len(cases)} cases; model {out} ({loaded.forest.num_trees} trees) loads and is "
          f"preferred over the shipped one; validation: {result.validation}")
    return 0
