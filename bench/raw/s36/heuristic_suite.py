"""Session 36: the refit heuristic on the GPU, against the rule before it (00bebbe) and the shipped
model, in one run on fresh timings: the suite's stand-ins (bench_kernels.py's graphs) and operators
at F = 16, 64 and 256 in float32, each case's three configurations timed by the core's loop
(bench_kernels.FINAL_POLICY, alternating as one batch); on a GPU without a model (or with
DGL_UGRAPH_PREDICTOR=0), the two rules alone. The collection the heuristic was refit on holds other
runs of most of these graphs; what this adds is the suite's own cases, timed now.

    PYTHONPATH=. python bench/raw/s36/heuristic_suite.py --out heuristic_suite.csv [--before rules_00bebbe.py]
"""
from __future__ import annotations

import argparse
import csv
import math
import pathlib
import statistics
import subprocess
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from bench_kernels import FINAL_POLICY, make_inputs  # noqa: E402
from dgl_ugraph.core import _ext, ops, timing  # noqa: E402
from dgl_ugraph.core.capability import candidates  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import policy, predictor, rules  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

BEFORE = "00bebbe"
OPS = ("copy_u-sum", "u_mul_e-sum", "copy_u-max", "copy_u-mean", "gat_u_mul_e-sum", "gat8_u_mul_e-sum", "u_add_v",
       "u_mul_v", "u_dot_v")
FIELDS = ["graph", "E", "op", "F", "rule", "config", "ms"]


def old_heuristic(path):
    """00bebbe's rules.heuristic: from `path` (a copy of that rules.py, for a machine without the
    repository's history), else from git."""
    if path:
        source = pathlib.Path(path).read_text()
    else:
        source = subprocess.run(["git", "show", f"{BEFORE}:dgl_ugraph/selection/rules.py"], capture_output=True,
                                text=True, cwd=ROOT, check=True).stdout
    space: dict = {}
    exec(compile(source, f"rules.py@{BEFORE}", "exec"), space)  # noqa: S102 - the repository's own file
    return space["heuristic"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="heuristic_suite.csv")
    ap.add_argument("--budget-s", type=float, default=200)
    ap.add_argument("--before", default="", help="a copy of 00bebbe's dgl_ugraph/selection/rules.py (default: git)")
    args = ap.parse_args()
    before = old_heuristic(args.before)
    gen = torch.Generator(device="cuda").manual_seed(0)
    dev = predictor.device_info(torch.device("cuda"))
    model = predictor.load(dev.family)  # None on a GPU without one: the two rules alone
    base = "model" if model is not None else "before"
    speed = {"heuristic": []} if model is None else {"heuristic": [], "before": []}
    t0 = time.time()
    with open(args.out, "w", newline="") as fh:
        out = csv.DictWriter(fh, FIELDS)
        out.writeheader()
        for spec in gs.PAPER_STANDINS:
            if time.time() - t0 > args.budget_s:
                print(f"budget reached before {spec.name}", flush=True)
                break
            src, dst, n = gs.make(spec)
            graph = UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)
            case = predictor.CaseInfo.from_graph(graph)
            for name in OPS:
                for f in (16, 64, 256):
                    op = make_inputs(name, graph, f, torch.float32, gen)
                    sig = ops.signature(graph, op)[0]
                    allowed = rules.steady(candidates(sig, graph.num_edges, _ext.compiled_cuda_keys()), graph.stats)
                    picks = {}
                    if model is not None:
                        picks["model"] = policy.with_l2_tiling(model.choose(case, sig, dev, allowed), graph, sig, dev)
                    for rule, fn in (("heuristic", rules.heuristic), ("before", before)):
                        picks[rule] = policy.with_l2_tiling(fn(sig, graph.stats, allowed), graph, sig, dev)
                    configs = list(dict.fromkeys(picks.values()))
                    runner = timing.CudaRunner(graph, op, configs[0])
                    ms = {t.config: t.ms for t in timing.time_configs(runner, configs, FINAL_POLICY) if t.status == "ok"}
                    for rule, c in picks.items():
                        out.writerow(dict(graph=spec.name, E=graph.num_edges, op=name, F=f, rule=rule, config=str(c),
                                          ms=round(ms.get(c, math.nan), 5)))
                    for rule in speed:
                        if picks[rule] in ms and picks[base] in ms:
                            speed[rule].append(ms[picks[base]] / ms[picks[rule]])
                    fh.flush()
                    del runner, op
            print(f"{spec.name}: {len(speed['heuristic'])} cases so far; {base} time / rule time, geomean: "
                  + ", ".join(f"{k} {math.exp(statistics.fmean(math.log(x) for x in v)):.3f}" for k, v in speed.items()),
                  flush=True)
            del graph
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
