"""A/B of two CUDA cores on the same kernel cases: each case (graph, op, F, dtype, config) is timed
under every core given, in rounds that alternate the cores' order (A B, B A, ...), each core in a
fresh process with its libugraph_cuda.so installed in dgl_ugraph/, on the core's timing loop as
bench_kernels.py's finalists are (FINAL_POLICY: no launch gaps, about 5 ms of kernel time per
configuration), so that launch-bound cases compare too. Cases come from the rows of
kernel-bench CSVs (bench_kernels.py's columns) with impl=ugraph: the selector's configuration
of each case, so that the same configuration is timed under both cores (a CSV may give a case
several rows with other configurations: each is timed).

    python benchmarks/ab_cores.py --core old=/path/libugraph_cuda.so --core new=dgl_ugraph/libugraph_cuda.so \
        --cases benchmarks/results/kernels.csv --out /tmp/ab.csv

--no-hint NAME times core NAME with the params' max_degree hint cleared (params.h), as a caller
that does not know the graph's longest row: the same library twice, once with and once without
it, measures what the hint turns on (team.cuh's heavy rows) apart from any other change.

Output: one row per (round, core, case) with the median time of the timing loop's launches; then,
on stdout, a line per (op, F, dtype, strategy kind) and core after the first: the geomean, min and
max over the cases of the first core's median time / that core's (above 1: that core is faster).
"""
from __future__ import annotations

import argparse
import collections
import csv
import dataclasses
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_kernels import FINAL_POLICY, make_inputs  # noqa: E402
from profile_kernel import load  # noqa: E402

import dgl_ugraph.core._ext as ext  # noqa: E402
from dgl_ugraph.core import timing  # noqa: E402
from dgl_ugraph.core.abstraction import ParallelInfo  # noqa: E402

LIB = ROOT / "dgl_ugraph" / "libugraph_cuda.so"
FIELDS = ["round", "core", "core_hash", "graph", "op", "F", "dtype", "config", "ms"]


def read_cases(paths, skip_graphs, dtypes, ops=None, widths=None, also_dtypes=()):
    """The CSVs' impl=ugraph cases, restricted to `ops` and `widths` where given; each case is
    also timed in every dtype of also_dtypes under the same configuration (the suite times GAT in
    float32 only)."""
    seen, cases = set(), []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["impl"] != "ugraph" or row["graph"] in skip_graphs or row["dtype"] not in dtypes:
                    continue
                if (ops and row["op"] not in ops) or (widths and int(row["F"]) not in widths):
                    continue
                for dtype in (row["dtype"], *also_dtypes):
                    key = (row["graph"], row["op"], int(row["F"]), dtype, row["config"])
                    if key not in seen:
                        seen.add(key)
                        cases.append(key)
    return sorted(cases, key=lambda c: c[0])  # stable: each graph is built once


def child(cases_file: str, out_file: str, core: str, rnd: int, no_hint: bool):
    """Times every case with the core installed when this process started; appends rows to
    out_file."""
    core_hash = ext._C.build_info().get("cuda_source_hash", "none")
    with open(cases_file, newline="") as f:
        cases = [(g, op, int(F), dt, cfg) for g, op, F, dt, cfg in csv.reader(f)]
    rows, graph_name, graph = [], None, None

    def flush():  # each graph's rows as it ends: a run cut off by a time limit keeps them
        with open(out_file, "a", newline="") as f:
            csv.DictWriter(f, FIELDS).writerows(rows)
        done = len(rows)
        rows.clear()
        return done

    done = 0
    for g, op, F, dt, cfg in cases:
        if g != graph_name:
            done += flush()
            graph_name, graph = g, None
            torch.cuda.empty_cache()
            graph = load(g)
            if no_hint:  # prepare reads the hint from the graph's degree statistics
                graph._stats = dataclasses.replace(graph.stats, max=0)
        info = make_inputs(op, graph, F, getattr(torch, dt), torch.Generator(device="cuda").manual_seed(0))
        config = ParallelInfo.parse(cfg)
        (t,) = timing.time_configs(timing.CudaRunner(graph, info, config), [config], FINAL_POLICY)
        if t.status != "ok":
            print(f"{g} {op} F={F} {dt} {cfg}: {t.status}", flush=True)
            continue
        rows.append(dict(round=rnd, core=core, core_hash=core_hash, graph=g, op=op, F=F, dtype=dt, config=cfg,
                         ms=f"{t.ms:.5f}"))
    done += flush()
    print(f"round {rnd} core {core} ({core_hash}): {done} cases", flush=True)


def summary(rows, cores) -> list:
    """Lines comparing each core after the first with the first (see the module's docstring), from
    the output's rows; a case counts where both cores timed it. The strategy kind is the
    configuration's (edge or vertex): an edge-only change has the vertex cases as its control."""
    times = collections.defaultdict(list)
    for r in rows:
        times[(r["graph"], r["op"], int(r["F"]), r["dtype"], r["config"], r["core"])].append(float(r["ms"]))
    base, lines = cores[0], []
    for other in cores[1:]:
        groups = collections.defaultdict(list)
        for (g, op, F, dt, cfg, core), ms in times.items():
            if core == other and (g, op, F, dt, cfg, base) in times:
                ratio = statistics.median(times[(g, op, F, dt, cfg, base)]) / statistics.median(ms)
                kind = cfg.split(":")[0].split("_")[-1]
                groups[(op, F, dt, kind)].append((ratio, g))
        for (op, F, dt, kind), r in sorted(groups.items()):
            gm = math.exp(sum(math.log(x) for x, _ in r) / len(r))
            (lo, lo_g), (hi, hi_g) = min(r), max(r)
            lines.append(f"{op} F={F} {dt} {kind}: {base}/{other} geomean {gm:.3f}x over {len(r)}, "
                         f"min {lo:.3f} ({lo_g}), max {hi:.3f} ({hi_g})")
    return lines


def install(lib: pathlib.Path):
    # Copy, then rename: never overwrite a mapped library in place.
    tmp = LIB.with_name(".ab_core.tmp")
    shutil.copyfile(lib, tmp)
    os.replace(tmp, LIB)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--core", action="append", help="NAME=PATH of a libugraph_cuda.so (two or more)")
    ap.add_argument("--cases", nargs="+", help="kernel-bench CSVs")
    ap.add_argument("--skip-graphs", default="big-skewed,big-balanced")
    ap.add_argument("--dtypes", default="float32,float16,bfloat16")
    ap.add_argument("--ops", default="", help="comma-separated ops (bench_kernels.py's names); default all")
    ap.add_argument("--widths", default="", help="comma-separated F; default all")
    ap.add_argument("--also-dtypes", default="", help="comma-separated dtypes each case is also timed in")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-hint", action="append", default=[], metavar="NAME",
                    help="time core NAME without the max_degree hint")
    ap.add_argument("--child", nargs=3, metavar=("CASES", "CORE", "ROUND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        cases_file, core, rnd = args.child
        child(cases_file, args.out, core, int(rnd), core in args.no_hint)
        return
    if not args.core or not args.cases:
        ap.error("--core (two or more) and --cases are required")
    cores = [c.split("=", 1) for c in args.core]
    # Every core is copied aside first: one of them may be the library installed now.
    keep = tempfile.mkdtemp(prefix="ab_cores_")
    saved = {name: pathlib.Path(shutil.copy(path, os.path.join(keep, f"{name}.so"))) for name, path in cores}
    original = pathlib.Path(shutil.copy(LIB, os.path.join(keep, "installed.so")))
    split = lambda text: [t for t in text.split(",") if t]  # noqa: E731
    cases = read_cases(args.cases, set(split(args.skip_graphs)), set(split(args.dtypes)), set(split(args.ops)),
                       {int(w) for w in split(args.widths)}, split(args.also_dtypes))
    cases_file = os.path.join(keep, "cases.csv")
    with open(cases_file, "w", newline="") as f:
        csv.writer(f).writerows(cases)
    with open(args.out, "w", newline="") as f:
        csv.DictWriter(f, FIELDS).writeheader()
    print(f"{len(cases)} cases, {len(cores)} cores, {args.rounds} rounds", flush=True)
    try:
        for rnd in range(args.rounds):
            order = cores if rnd % 2 == 0 else cores[::-1]
            for name, _ in order:
                install(saved[name])
                hint = [f"--no-hint={name}"] if name in args.no_hint else []
                subprocess.run([sys.executable, __file__, "--out", args.out, *hint, "--child", cases_file, name,
                                str(rnd)], check=True)
    finally:
        install(original)
    with open(args.out, newline="") as f:
        print("\n".join(summary(list(csv.DictReader(f)), [name for name, _ in cores])))


if __name__ == "__main__":
    main()
