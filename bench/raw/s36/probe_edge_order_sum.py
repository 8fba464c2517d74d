"""Session 36: does an aggregation that walks the edges in edge-id order pay where an edge operand
is gathered through scattered edge ids? Rejected: the kernel (csrc/cuda/edge_order_sum.cu and its
binding) is in edge_order_sum.patch beside this script, not in the tree; apply it to run this.

The team strategies walk positions in CSC order and read an edge operand B at eid[p]: where edge
ids are scattered (the stand-ins number them at random, as users build graphs) and B outgrows L2,
each position fetches its own sectors from DRAM. The probe walks edges in id order (B read as a
stream, the source row gathered as before) and adds each message into its destination row with
16-byte atomics (C cleared first by a memset).

Prediction: wins where B's bytes (E x H x 4) outgrow L2 at small F (GAT with 4 and 8 heads at
F = 16 on the 1.6-4.9M-edge stand-ins: 1.2-1.5x); loses where F is wide (F / 4 atomics an edge
against one store a row) and on skewed graphs (atomics queue on the hub rows); copy_u-sum, which
reads no edge operand, loses everywhere (the control: what the atomics cost).

Per case (the stand-ins of the suite, float32, F = 16 and 64): the selector's configuration
(`ugraph`, Prepared.run) and the edge-order sum at groupings 4, 8 and 32, each timed by CUDA-graph
replay (bench_kernels.replay_ms) in two rounds of alternating order; medians. Every edge-order
output is checked against the selector's (float32: 2e-5 of the row's largest magnitude), twice
into outputs poisoned with NaN; then a float64 check against torch's index_add on two graphs.

    git apply bench/raw/s36/edge_order_sum.patch && make cuda-lib   # then, on the GPU machine:
    python bench/raw/s36/probe_edge_order_sum.py [--out edge_order_sum.csv] [--graphs a,b]
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from bench_kernels import make_inputs, replay_ms  # noqa: E402
from dgl_ugraph.core import _ext, ops  # noqa: E402
from dgl_ugraph.core.abstraction import STRATEGY_CODE  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

OPS = ("gat1_u_mul_e-sum", "gat_u_mul_e-sum", "gat8_u_mul_e-sum", "u_mul_e-sum", "copy_u-sum")
GROUPINGS = (4, 8, 32)
FIELDS = ["graph", "V", "E", "std_deg", "op", "F", "impl", "config", "ms", "max_rel_err"]


def edge_order_params(prep, graph: UGraph, grouping: int):
    src, dst = graph.edge_order()
    return prep.params.replace(col=src.data_ptr(), row=dst.data_ptr(), eid=0, strategy=STRATEGY_CODE["warp_edge"],
                               grouping=grouping, tiling=1)


def run_edge_order(core, params):
    core.run_cuda_edge_order_sum(params, torch.cuda.current_stream().cuda_stream)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    scale = ref.abs().amax().clamp(min=1e-30)
    return float(((out.double() - ref.double()).abs().amax() / scale).item())


def float64_check(core, gen) -> None:
    """Every op on two graphs in float64 against torch's index_add (edge-id order)."""
    for spec in [s for s in gs.PAPER_STANDINS if s.name in ("cora", "artist")]:
        src, dst, n = gs.make(spec)
        graph = UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)
        s_e, d_e = graph.edge_order()
        for name in OPS:
            op = make_inputs(name, graph, 16, torch.float64, gen)
            prep = ops.prepare(graph, op, policy.choose(graph, ops.signature(graph, op)[0]))
            a = op.A[s_e.long()]
            msg = a if op.B is None else a * op.B
            ref = torch.zeros((n,) + op.A.shape[1:], dtype=torch.float64, device="cuda").index_add_(0, d_e.long(), msg)
            for g in GROUPINGS:
                for _ in range(2):
                    prep.outputs[0].fill_(float("nan"))
                    run_edge_order(core, edge_order_params(prep, graph, g))
                    torch.cuda.synchronize()
                    err = rel_err(prep.outputs[0], ref)
                    assert err < 1e-12, (spec.name, name, g, err)
        print(f"float64 check {spec.name}: every op and grouping within 1e-12 of index_add", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="edge_order_sum.csv")
    ap.add_argument("--graphs", default="")
    ap.add_argument("--widths", default="16,64")
    ap.add_argument("--budget-s", type=float, default=300)
    args = ap.parse_args()
    core = _ext.core()
    gen = torch.Generator(device="cuda").manual_seed(0)
    float64_check(core, gen)
    only = set(args.graphs.split(",")) if args.graphs else None
    t0 = time.time()
    with open(args.out, "w", newline="") as fh:
        out = csv.DictWriter(fh, FIELDS)
        out.writeheader()
        for spec in gs.PAPER_STANDINS:
            if only and spec.name not in only:
                continue
            if time.time() - t0 > args.budget_s:
                print(f"budget reached before {spec.name}", flush=True)
                break
            src, dst, n = gs.make(spec)
            graph = UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)
            if graph.edge_order() is None:
                continue
            base = dict(graph=spec.name, V=n, E=graph.num_edges, std_deg=round(graph.stats.std, 3))
            for name in OPS:
                for f in (int(w) for w in args.widths.split(",")):
                    op = make_inputs(name, graph, f, torch.float32, gen)
                    chosen = policy.choose(graph, ops.signature(graph, op)[0])
                    prep = ops.prepare(graph, op, chosen)
                    prep.run()
                    ref = prep.outputs[0].clone()
                    fns = {("ugraph", str(chosen)): prep.run}
                    errs = {("ugraph", str(chosen)): 0.0}
                    for g in GROUPINGS:
                        p = edge_order_params(prep, graph, g)
                        worst = 0.0
                        for _ in range(2):
                            prep.outputs[0].fill_(float("nan"))
                            run_edge_order(core, p)
                            torch.cuda.synchronize()
                            worst = max(worst, rel_err(prep.outputs[0], ref))
                        key = ("edge_order", f"edge_order:{g}:1")
                        errs[key] = worst
                        fns[key] = (lambda p_: lambda: run_edge_order(core, p_))(p)
                        if worst > 2e-5:
                            print(f"WRONG {spec.name} {name} F={f} g={g}: {worst:.2e}", flush=True)
                    times = {k: [] for k in fns}
                    for r in range(2):
                        for k in (list(fns) if r % 2 == 0 else list(reversed(fns))):
                            times[k].append(replay_ms(fns[k])[0])
                    line = []
                    for (impl, config), ts in times.items():
                        ms = statistics.median(ts)
                        out.writerow(dict(base, op=name, F=f, impl=impl, config=config, ms=round(ms, 5),
                                          max_rel_err=f"{errs[(impl, config)]:.1e}"))
                        line.append(f"{config}={ms * 1e3:.1f}")
                    fh.flush()
                    best = min(statistics.median(ts) for k, ts in times.items() if k[0] == "edge_order")
                    ours = statistics.median(times[("ugraph", str(chosen))])
                    print(f"{spec.name:28} {name:17} F={f:<3} ugraph/edge_order {ours / best:5.2f}x  "
                          + " ".join(line) + " us", flush=True)
            del graph
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
