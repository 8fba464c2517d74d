"""Per-call cost of the plugin's dispatch on CPU (issue 14): DGL's _gspmm/_gsddmm entry points
called back to back on one cora-sized graph object, as DGL's autograd functions call them.

For each operator, interleaved round by round in one run:
  dgl     - DGL's own function (the plugin off): DGL's kernel and its Python around it;
  ugraph  - the plugin's replacement: recognition, the graph cache, selection, allocation and our
            kernel;
  kernel  - our kernel alone, its call packed once (ops.Prepared.run): what any path must pay.
dispatch = ugraph - kernel is what the plugin adds per call for a graph object DGL has passed
before. Medians (and quartiles) of per-call microseconds over the rounds go to bench/dispatch.csv.

    PYTHONPATH=. .venv/bin/python scripts/bench_dispatch.py [--rounds 15] [--calls 300]
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import platform
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph import integration, ops  # noqa: E402
from dgl_ugraph.abstraction import OpInfo  # noqa: E402
from dgl_ugraph.cache import entry_for  # noqa: E402

COLUMNS = ["machine", "torch", "dgl", "threads", "op", "F", "impl", "us_median", "us_p25", "us_p75"]


def operators(g, f: int, gen: torch.Generator):
    """name -> (DGL-level call on gidx, the same operator as our OpInfo)."""
    n, e = g.num_nodes(), g.num_edges()
    x = torch.randn(n, f, generator=gen)
    w = torch.rand(e, 1, generator=gen)
    el, er = torch.randn(n, 4, 1, generator=gen), torch.randn(n, 4, 1, generator=gen)
    return {
        "copy_u-sum": (lambda fn, gi: fn["_gspmm"](gi, "copy_lhs", "sum", x, None),
                       OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")),
        "u_mul_e-sum": (lambda fn, gi: fn["_gspmm"](gi, "mul", "sum", x, w),
                        OpInfo("mul", "sum", x, "src", w, "edge", "dst")),
        "copy_u-max": (lambda fn, gi: fn["_gspmm"](gi, "copy_lhs", "max", x, None),
                       OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")),
        "u_add_v": (lambda fn, gi: fn["_gsddmm"](gi, "add", el, er, "u", "v"),
                    OpInfo("add", "none", el, "src", er, "dst", "edge")),
    }


def per_call_us(fn, calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--widths", default="16,64")
    ap.add_argument("--out", default=str(ROOT / "bench" / "dispatch.csv"))
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(0)
    n, e = 2708, 10556  # cora's size
    g = dgl.graph((torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)), num_nodes=n)
    g.create_formats_()
    gidx = g._graph
    dgl_ugraph.enable()
    own = dict(integration._dgl)  # DGL's functions, as enable() captured them
    ours = {"_gspmm": sparse._gspmm, "_gsddmm": sparse._gsddmm}
    assert ours["_gspmm"] is not own["_gspmm"], "the plugin is not routing DGL's calls"
    ugraph = entry_for(gidx).ugraph
    rows = []
    for f in (int(w) for w in args.widths.split(",")):
        for name, (call, op) in operators(g, f, gen).items():
            prepared = ops.prepare(ugraph, op)
            impls = {"dgl": lambda: call(own, gidx), "ugraph": lambda: call(ours, gidx), "kernel": prepared.run}
            for fn in impls.values():  # warm-up: the decision, the graph cache, allocator pools
                per_call_us(fn, 20)
            samples = {k: [] for k in impls}
            for r in range(args.rounds):
                order = list(impls) if r % 2 == 0 else list(reversed(impls))
                for k in order:
                    samples[k].append(per_call_us(impls[k], args.calls))
            samples["dispatch"] = [u - k for u, k in zip(samples["ugraph"], samples["kernel"])]
            for impl, xs in samples.items():
                q = statistics.quantiles(xs, n=4)
                rows.append(dict(machine=platform.processor() or platform.machine(), torch=torch.__version__,
                                 dgl=dgl.__version__, threads=torch.get_num_threads(), op=name, F=f, impl=impl,
                                 us_median=round(statistics.median(xs), 2), us_p25=round(q[0], 2),
                                 us_p75=round(q[2], 2)))
            line = " ".join(f"{r['impl']}={r['us_median']:.1f}" for r in rows[-4:])
            print(f"{name:12} F={f:<3} us per call: {line}", flush=True)
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
