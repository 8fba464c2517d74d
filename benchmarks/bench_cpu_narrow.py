"""Narrow-row CPU calls (1-8 elements per edge) against DGL's own CPU kernels, as GAT and GCN's
output layers make them.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_cpu_narrow.py [--graph pubmed] [--rounds 25] [--label after]

The graph is a dataset of ../shared/datasets (or $DGL_UGRAPH_DATASETS) with self-loops, as
GATConv sees it (its CSC then has a real eid permutation). Each case is one DGL entry point
(_gspmm / _gsddmm) called three ways, round-robin over --rounds rounds after a warm-up, the
order reversed every other round so drift lands on all alike:
  dgl    - DGL's own function (the plugin off): DGL 2.1's CPU kernel and its Python;
  ugraph - the plugin's replacement: dispatch, allocation and our kernel;
  kernel - our kernel alone, its call packed once (ops.Prepared.run).
One sample is the mean of --calls back-to-back calls. Every result is checked against DGL's
first. Reported: median and quartiles of the per-call microseconds; appended (with --label) to
benchmarks/results/cpu_narrow.csv. OMP_WAIT_POLICY defaults to PASSIVE, as in bench_models.py.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.core import ops  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo  # noqa: E402
from dgl_ugraph.dgl import interception  # noqa: E402
from dgl_ugraph.dgl.cache import entry_for  # noqa: E402
from dgl_ugraph.tuning.graph_suite import datasets_dir, shared_dataset  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

COLUMNS = ["label", "graph", "V", "E", "idtype", "threads", "case", "impl", "us_median", "us_p25", "us_p75"]


def load(name: str, idtype):
    found = shared_dataset(name)
    if found is None:
        return None
    src, dst, n = found
    g = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=n))).astype(idtype)
    g.create_formats_()
    return g


def cases(g, gen):
    """name -> (call(fns, gidx) on DGL's entry points, our OpInfo for the same operator)."""
    n, e = g.num_nodes(), g.num_edges()

    def r(*shape):
        return torch.randn(*shape, generator=gen)

    out = {}
    for h in (1, 8):
        el, er = r(n, h, 1), r(n, h, 1)
        out[f"u_add_v {h}x1"] = (lambda fn, gi, el=el, er=er: fn["_gsddmm"](gi, "add", el, er, "u", "v"),
                                 OpInfo("add", "none", el, "src", er, "dst", "edge"))
    for h, d in ((1, 3), (8, 8)):
        ft, a = r(n, h, d), torch.rand(e, h, 1, generator=gen)
        out[f"u_mul_e-sum {h}x{d}"] = (
            lambda fn, gi, ft=ft, a=a: fn["_gspmm"](gi, "mul", "sum", ft, a)[0],
            OpInfo("mul", "sum", ft, "src", a, "edge", "dst"))
        x, y = r(n, h, d), r(n, h, d)
        out[f"u_dot_v {h}x{d}"] = (lambda fn, gi, x=x, y=y: fn["_gsddmm"](gi, "dot", x, y, "u", "v"),
                                   OpInfo("dot", "none", x, "src", y, "dst", "edge"))
    for f in (1, 3, 4, 8):
        x = r(n, f)
        out[f"copy_u-sum {f}"] = (lambda fn, gi, x=x: fn["_gspmm"](gi, "copy_lhs", "sum", x, None)[0],
                                  OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"))
    return out


def per_call_us(fn, calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls / 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="pubmed")
    ap.add_argument("--idtype", choices=("int64", "int32"), default="int64")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated case-name prefixes")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cpu_narrow.csv"))
    args = ap.parse_args(argv)
    g = load(args.graph, getattr(torch, args.idtype))
    if g is None:
        print(f"{args.graph}.npz not found under {datasets_dir() or '../shared/datasets'}: nothing measured")
        return 0
    dgl_ugraph.enable()
    own = dict(interception._dgl)
    ours = {"_gspmm": sparse._gspmm, "_gsddmm": sparse._gsddmm}
    assert ours["_gspmm"] is not own["_gspmm"], "the plugin is not routing DGL's calls"
    gidx = g._graph
    gen = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    print(f"{args.graph}: {g.num_nodes()} nodes, {g.num_edges()} edges with self-loops, {args.idtype}; "
          f"{threads} threads; load {os.getloadavg()[0]:.1f}; us per call: median [q1-q3]")
    rows = []
    only = [s for s in args.only.split(",") if s]
    for name, (call, op) in cases(g, gen).items():
        if only and not any(name.startswith(s) for s in only):
            continue
        want = call(own, gidx)
        got = call(ours, gidx)
        ugraph = entry_for(gidx).ugraph
        prepared = ops.prepare(ugraph, op)
        kern = prepared.run()[0]
        for what, t in (("ugraph", got), ("kernel", kern.view(want.shape))):
            torch.testing.assert_close(t, want, rtol=1e-5, atol=1e-5, msg=f"{name} {what}")
        impls = {"dgl": lambda: call(own, gidx), "ugraph": lambda: call(ours, gidx), "kernel": prepared.run}
        for fn in impls.values():
            per_call_us(fn, args.calls)
        samples = {k: [] for k in impls}
        for r in range(args.rounds):
            for k in (list(impls) if r % 2 == 0 else list(reversed(impls))):
                samples[k].append(per_call_us(impls[k], args.calls))
        q = {k: np.percentile(v, [25, 50, 75]) for k, v in samples.items()}
        print(f"{name:18s} " + "  ".join(f"{k}={q[k][1]:7.1f} [{q[k][0]:6.1f}-{q[k][2]:6.1f}]" for k in impls)
              + f"  dgl/ugraph={q['dgl'][1] / q['ugraph'][1]:.2f}x", flush=True)
        for k in impls:
            rows.append(dict(label=args.label, graph=args.graph, V=g.num_nodes(), E=g.num_edges(), idtype=args.idtype,
                             threads=threads, case=name, impl=k, us_median=round(q[k][1], 1),
                             us_p25=round(q[k][0], 1), us_p75=round(q[k][2], 1)))
    write_rows(args.out, rows, COLUMNS, append=True)
    print(f"appended {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
