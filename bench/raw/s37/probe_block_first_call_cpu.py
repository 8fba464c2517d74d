"""CPU: one new block's copy_u-sum update_all and its backward, DGL against the plugin, with the
block's formats created beforehand on both sides (DGL's CSC is then no part of either side's time).
Each block is sampled once and copied for each side (its own graph index, so its own entry).
Per block: the forward, the backward, the whole; medians, and the plugin's first call split by
phase with cProfile in a second pass.

    PYTHONPATH=. .venv/bin/python bench/raw/s37/probe_block_first_call_cpu.py [pubmed] [F]
"""
import contextlib
import cProfile
import pstats
import statistics
import sys
import time

import torch
import dgl

sys.path[:0] = [".", "scripts"]
import bench_minibatch as bm  # noqa: E402
import dgl_ugraph  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "pubmed"
F = int(sys.argv[2]) if len(sys.argv) > 2 else 256
torch.manual_seed(0)
src, dst, n = gs.make(next(s for s in gs.PAPER_STANDINS if s.name == name))
g = dgl.graph((src, dst), num_nodes=n)
batches = bm.sample(g, torch.arange(n), 30, 512, torch.device("cpu"), 1)
blocks = [b for bt in batches for b in bt[2]]
dgl_ugraph.enable()


def copy(b):
    c = dgl.create_block((b.edges()[0], b.edges()[1]), num_src_nodes=b.num_src_nodes(),
                         num_dst_nodes=b.num_dst_nodes())
    c.create_formats_()
    return c


def one(b, x):
    x = x.detach().requires_grad_()
    t0 = time.perf_counter()
    b.srcdata["h"] = x
    b.update_all(dgl.function.copy_u("h", "m"), dgl.function.sum("m", "o"))
    out = b.dstdata["o"]
    t1 = time.perf_counter()
    out.backward(torch.ones_like(out))
    t2 = time.perf_counter()
    return (t1 - t0) * 1e6, (t2 - t1) * 1e6


res = {"dgl": [], "ugraph": []}
for i, b in enumerate(blocks):
    x = torch.randn(b.num_src_nodes(), F)
    for side in (("dgl", "ugraph") if i % 2 == 0 else ("ugraph", "dgl")):
        c = copy(b)
        with dgl_ugraph.disabled() if side == "dgl" else contextlib.nullcontext():
            res[side].append(one(c, x))
for side, xs in res.items():
    xs = xs[6:]
    print(f"{side:7} forward {statistics.median(a for a, _ in xs):8.1f} us  backward "
          f"{statistics.median(b for _, b in xs):8.1f} us  whole {statistics.median(a + b for a, b in xs):8.1f} us")
print("paired dgl/ugraph", round(statistics.median((a[0] + a[1]) / (b[0] + b[1]) for a, b in zip(res['dgl'][6:], res['ugraph'][6:])), 3))
print("block edges median", statistics.median(b.num_edges() for b in blocks))
prof = cProfile.Profile()
cs = [copy(b) for b in blocks[:30]]
xs = [torch.randn(b.num_src_nodes(), F) for b in blocks[:30]]
prof.enable()
for c, x in zip(cs, xs):
    one(c, x)
prof.disable()
pstats.Stats(prof).sort_stats("tottime").print_stats(25)
