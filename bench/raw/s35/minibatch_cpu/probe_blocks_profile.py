"""CPU, session 35: cProfile of ten batches' blocks (as probe_blocks_interleaved.py calls them),
one side a process: where a new block's calls spend their time.

    PYTHONPATH=. DGL_UGRAPH_TIER_UP=0 .venv/bin/python bench/raw/s35/minibatch_cpu/probe_blocks_profile.py pubmed {dgl,ugraph}
"""
import statistics, time, sys, cProfile, pstats
import torch, dgl
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import dgl_ugraph
from dgl_ugraph.tuning import graph_suite as gs
import bench_minibatch as bm
torch.manual_seed(0)
name = sys.argv[1] if len(sys.argv) > 1 else "pubmed"
impl = sys.argv[2]
src, dst, n = gs.make(next(s for s in gs.PAPER_STANDINS if s.name == name))
g = dgl.graph((src, dst), num_nodes=n)
batches = bm.sample(g, torch.arange(n), 12, 512, torch.device("cpu"), 1)
F = 256
def calls(block, x):
    x = x.detach().requires_grad_()
    block.srcdata["h"] = x[: block.num_src_nodes()]
    block.update_all(dgl.function.copy_u("h", "m"), dgl.function.sum("m", "o"))
    block.dstdata["o"].sum().backward()
xs = [torch.randn(max(b.num_src_nodes() for b in bt[2]), F) for bt in batches]
def run(bs):
    for bt, x in bs:
        for b in bt[2]: calls(b, x)
ctx = dgl_ugraph.disabled() if impl == "dgl" else open("/dev/null")
with ctx:
    run(list(zip(batches[:2], xs[:2])))
    p = cProfile.Profile(); t0 = time.perf_counter(); p.enable()
    run(list(zip(batches[2:], xs[2:])))
    p.disable(); print(impl, "ms per batch", (time.perf_counter() - t0) * 100)
st = pstats.Stats(p); st.sort_stats("tottime").print_stats(18); st.sort_stats("cumulative").print_stats("dgl_ugraph|_sparse_ops|heterograph_index", 25)
