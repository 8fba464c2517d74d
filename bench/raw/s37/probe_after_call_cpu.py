"""Does a torch operation run slower right after a plugin call than right after DGL's own call?
(The CPU mini-batch GCN step is slower with the plugin on, outside the plugin's calls: session 35.)
One graph of a pubmed block's size; each round: the aggregation (DGL's or the plugin's, alternating
by round), then a torch matmul of the block's output, timed alone. Medians over rounds."""
import contextlib
import statistics
import sys
import time

import torch
import dgl
import dgl_ugraph

torch.manual_seed(0)
N, E, F = int(sys.argv[1]) if len(sys.argv) > 1 else 12000, 30000, 256
g = dgl.graph((torch.randint(0, N, (E,)), torch.randint(0, N, (E,))), num_nodes=N)
x = torch.randn(N, F)
w = torch.randn(F, F)
dgl_ugraph.enable()


def agg():
    return dgl.ops.copy_u_sum(g, x)


def timed(fn):
    t0 = time.perf_counter_ns()
    r = fn()
    return r, (time.perf_counter_ns() - t0) / 1e3


res = {"dgl": {"agg": [], "mm": [], "relu": []}, "ugraph": {"agg": [], "mm": [], "relu": []}}
for r in range(400):
    for side in (("dgl", "ugraph") if r % 2 == 0 else ("ugraph", "dgl")):
        with dgl_ugraph.disabled() if side == "dgl" else contextlib.nullcontext():
            y, ta = timed(agg)
        y2, tm = timed(lambda: y @ w)
        _, tr = timed(lambda: torch.relu(y2))
        if r >= 20:
            res[side]["agg"].append(ta)
            res[side]["mm"].append(tm)
            res[side]["relu"].append(tr)
for side, d in res.items():
    print(side, " ".join(f"{k}={statistics.median(v):.1f}us" for k, v in d.items()))
