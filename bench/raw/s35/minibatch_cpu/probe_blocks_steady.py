"""CPU, session 35: the kernels' steady state on the three blocks of one sampled batch (pubmed
stand-in, fanouts 15/10/5, 512 seeds): DGL's `_gspmm` copy_u-sum forward, and on the reverse graph
the backward's, called 15 times on the same block, plugin off and on, twice in turn; medians of
the last 12 calls.

    PYTHONPATH=. DGL_UGRAPH_TIER_UP=0 .venv/bin/python bench/raw/s35/minibatch_cpu/probe_blocks_steady.py [graph]
"""
import statistics, time, sys
import torch, dgl
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import dgl_ugraph
from dgl_ugraph.tuning import graph_suite as gs
import bench_minibatch as bm
torch.manual_seed(0)
name = sys.argv[1] if len(sys.argv) > 1 else "pubmed"
src, dst, n = gs.make(next(s for s in gs.PAPER_STANDINS if s.name == name))
g = dgl.graph((src, dst), num_nodes=n)
batches = bm.sample(g, torch.arange(n), 4, 512, torch.device("cpu"), 1)
F = 256
from dgl.backend.pytorch import sparse
for li in range(3):
    b = batches[0][2][li]
    x = torch.randn(b.num_src_nodes(), F)
    gidx = b._graph
    rev = gidx.reverse()
    y = torch.randn(b.num_dst_nodes(), F)
    def fwd(): return sparse._gspmm(gidx, "copy_lhs", "sum", x, None)
    def bwd(): return sparse._gspmm(rev, "copy_lhs", "sum", y, None)
    for what, fn in (("fwd", fwd), ("bwd", bwd)):
        r = {}
        for impl in ("dgl", "ugraph", "dgl", "ugraph"):
            ts = []
            for _ in range(15):
                t0 = time.perf_counter(); 
                if impl == "dgl":
                    with dgl_ugraph.disabled(): fn()
                else: fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            r[impl] = statistics.median(ts[3:])
        print(f"block {li} src {b.num_src_nodes()} dst {b.num_dst_nodes()} E {b.num_edges()} {what}: dgl {r['dgl']:.3f} ms ugraph {r['ugraph']:.3f} ms")
