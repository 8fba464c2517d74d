"""Message creation over node rows (u_add_v, u_mul_v with heads; u_dot_v) on the GPU's edge
strategies, in CSC order (what ships) and in edge-id order, on graphs whose edge ids are in the
user's order (as DGL hands them): which order wins, and where. A thin CLI over core.ops.

    python scripts/probe_message_order.py --out $OUT/message_order.csv [--graphs big-balanced,cora]

Each configuration runs both orders (core.ops._walks_edge_order forced either way), timed by CUDA
events: the median of --reps runs after warm-up, outputs poisoned before every run and the two
orders' results compared.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dgl_ugraph.core import ops  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo, ParallelInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

CONFIGS = [("thread_edge", g, 1) for g in (1, 2, 4, 8)] + [("warp_edge", g, t) for g in (1, 4, 8) for t in (1, 2)]


def operators(n: int, gen: torch.Generator):
    heads = lambda w: torch.randn(n, w, generator=gen).cuda()  # noqa: E731
    x8, y8, x64, y64 = heads(8), heads(8), heads(64), heads(64)
    return {
        "u_add_v_h8": OpInfo("add", "none", x8, "src", y8, "dst", "edge"),
        "u_mul_v_h8": OpInfo("mul", "none", x8, "src", y8, "dst", "edge"),
        "u_dot_v_f64": OpInfo("dot", "none", x64, "src", y64, "dst", "edge"),
    }


def time_ms(prepared, reps: int) -> float:
    for _ in range(3):
        prepared.run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        prepared.outputs[0].fill_(float("nan"))
        start.record()
        prepared.run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run_in_order(graph, op, pinfo, edge_order: bool):
    ops._walks_edge_order = lambda *_: edge_order
    try:
        return ops.prepare(graph, op, pinfo)
    finally:
        ops._walks_edge_order = _shipped


_shipped = ops._walks_edge_order


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default="big-balanced,big-skewed,amazon0505,OVCAR-8H,cora")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default="message_order.csv")
    args = ap.parse_args()
    specs = {s.name: s for s in gs.PAPER_STANDINS + gs.LARGE}
    rows = []
    for name in args.graphs.split(","):
        src, dst, n = gs.make(specs[name])
        graph = UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int64)
        gen = torch.Generator().manual_seed(0)
        for op_name, op in operators(n, gen).items():
            chosen = policy.choose(graph, ops.prepare(graph, op).signature)
            configs = [(chosen.strategy, chosen.grouping, chosen.tiling)] + CONFIGS
            best = {}
            for strategy, grouping, tiling in dict.fromkeys(configs):
                pinfo = ParallelInfo(strategy, grouping, tiling)
                try:
                    csc, edge = (run_in_order(graph, op, pinfo, flag) for flag in (False, True))
                except TypeError:  # a configuration the core cannot run for this case
                    continue
                ms = {"csc": time_ms(csc, args.reps), "edge": time_ms(edge, args.reps)}
                if not torch.allclose(csc.outputs[0], edge.outputs[0], rtol=1e-5, atol=1e-5):
                    raise AssertionError(f"{name} {op_name} {pinfo}: the two orders disagree")
                for order, t in ms.items():
                    rows.append({"graph": name, "V": n, "E": graph.num_edges, "op": op_name,
                                 "config": f"{strategy}:{grouping}:{tiling}", "chosen": int(pinfo == chosen),
                                 "order": order, "ms": round(t, 5)})
                    best[order] = min(best.get(order, float("inf")), t)
                if pinfo == chosen:
                    print(f"{name:14s} {op_name:12s} chosen {pinfo}: csc {ms['csc']:.4f} ms, edge {ms['edge']:.4f} ms",
                          flush=True)
            print(f"{name:14s} {op_name:12s} best csc {best['csc']:.4f} ms, best edge {best['edge']:.4f} ms, "
                  f"csc/edge {best['csc'] / best['edge']:.2f}", flush=True)
        del graph
        torch.cuda.empty_cache()
    write_rows(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
