"""CPU, session 37: the last layer's sampled block (about 1.4K edges) of 40 pubmed batches, copy_u-sum at
F = 256 through dgl.ops, its formats made beforehand: the whole first call on the plugin, its kernel
(core.ops._launch) on that first call and on three repeat calls; and (argument dgl) DGL's first call.

    PYTHONPATH=. .venv/bin/python bench/raw/s37/probe_small_block_first_call_cpu.py [dgl]
"""
import sys, time, torch, dgl, statistics
sys.path[:0] = [".", "scripts"]
import bench_minibatch as bm, dgl_ugraph
from dgl_ugraph.tuning import graph_suite as gs
from dgl_ugraph.core import ops
torch.manual_seed(0)
src, dst, n = gs.make(next(s for s in gs.PAPER_STANDINS if s.name == "pubmed"))
g = dgl.graph((src, dst), num_nodes=n)
batches = bm.sample(g, torch.arange(n), 40, 512, torch.device("cpu"), 1)
blocks = [bt[2][2] for bt in batches]
dgl_ugraph.enable()
F=256
kt=[]
orig=ops._launch
def timed(*a, **k):
    t0=time.perf_counter(); r=orig(*a, **k); kt.append((time.perf_counter()-t0)*1e6); return r
ops._launch=timed
import contextlib
side = sys.argv[1] if len(sys.argv) > 1 else "ugraph"
tot=[]
for b in blocks:
    c = dgl.create_block((b.edges()[0], b.edges()[1]), num_src_nodes=b.num_src_nodes(), num_dst_nodes=b.num_dst_nodes()); c.create_formats_()
    x = torch.randn(c.num_src_nodes(), F)
    with dgl_ugraph.disabled() if side == "dgl" else contextlib.nullcontext():
        t0=time.perf_counter(); dgl.ops.copy_u_sum(c, x); tot.append((time.perf_counter()-t0)*1e6)
        for _ in range(3): dgl.ops.copy_u_sum(c, x)
print(side, "whole first call us", round(statistics.median(tot[5:])))
if kt:
    first = kt[0::4]; rep = kt[1::4]+kt[2::4]+kt[3::4]
    print("kernel first us", round(statistics.median(first[5:])), "kernel repeat us", round(statistics.median(rep[5:])))
