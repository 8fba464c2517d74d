"""How much of GAT's aggregation cost over copy_u-sum (issue 13's GAT bar) comes from reading the
attention by edge id: u_mul_e-sum of (N, H, D) x (E, H, 1) on a graph whose edge ids scatter
each row (as generated: the stand-ins' edges in source order), against the same graph with its
edge data in CSC order (eid None, so the attention is read in the order the rows walk it), each
beside copy_u-sum at width H*D. Every op on the selector's choice (policy.plan); CUDA events over
20 back-to-back calls, the six alternating over 7 rounds, medians per call.
    PYTHONPATH=. python bench/raw/probe_gat_csc_s26.py OUT.csv"""
import statistics
import sys

import torch

from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.selection import policy
from dgl_ugraph.tuning import graph_suite as gs
from dgl_ugraph.tuning.shards import write_rows

GRAPHS = ("amazon0505", "amazon0601", "com-amazon", "soc-BlogCatalog", "artist", "DD", "ppi")
SHAPES = ((1, 16), (4, 4), (4, 16), (8, 8), (8, 32))  # (H, D)


def per_call_ms(fn, calls=20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def alternating_medians(calls, rounds=7):
    """name -> median per-call ms of each of `calls` (name -> fn), after one untimed call each,
    over `rounds` rounds that alternate their order."""
    times = {k: [] for k in calls}
    for fn in calls.values():
        fn()
    for r in range(rounds):
        for k in (list(calls) if r % 2 == 0 else list(reversed(calls))):
            times[k].append(per_call_ms(calls[k]))
    return {k: statistics.median(v) for k, v in times.items()}


def main(out):
    specs = {s.name: s for s in gs.PAPER_STANDINS}
    rows = []
    for name in GRAPHS:
        src, dst, n = gs.make(specs[name])
        scattered = UGraph.from_coo(src.cuda(), dst.cuda(), n, n)
        csc = UGraph(scattered.num_src, scattered.num_dst, scattered.indptr, scattered.col, scattered.row, None)
        e = scattered.num_edges
        for heads, d in SHAPES:
            h = torch.randn(n, heads, d, device="cuda")
            att = torch.rand(e, heads, 1, device="cuda")
            flat = h.reshape(n, heads * d)
            calls = {}
            for label, g in (("scattered", scattered), ("csc", csc)):
                plans = {"copy_u_sum": (policy.plan(g, OpInfo("copy_lhs", "sum", flat, "src", None, "null", "dst")), flat, None),
                         "gat": (policy.plan(g, OpInfo("mul", "sum", h, "src", att, "edge", "dst")), h, att)}
                for op, (plan, a, b) in plans.items():
                    calls[label, op] = (lambda plan=plan, a=a, b=b: plan.run(a, b))
            ms = alternating_medians(calls)
            line = {label: ms[label, "gat"] / ms[label, "copy_u_sum"] for label in ("scattered", "csc")}
            print(f"{name} E={e} H={heads} D={d}: gat/copy_u_sum scattered {line['scattered']:.2f}x, "
                  f"csc {line['csc']:.2f}x; gat scattered/csc {ms['scattered', 'gat'] / ms['csc', 'gat']:.2f}x "
                  f"({ms['scattered', 'gat']:.4f} / {ms['csc', 'gat']:.4f} ms)", flush=True)
            rows += [{"device": torch.cuda.get_device_name(), "graph": name, "V": n, "E": e, "heads": heads, "D": d,
                      "edge_order": label, "op": op, "ms": round(t, 5)} for (label, op), t in ms.items()]
        write_rows(out, rows)


if __name__ == "__main__":
    main(sys.argv[1])
