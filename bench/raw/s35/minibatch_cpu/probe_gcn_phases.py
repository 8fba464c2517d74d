"""CPU, session 35: GCN mini-batch steps (bench_minibatch: 3 GraphConv layers, hidden 256, pubmed stand-in,
512 seeds), plugin on and off interleaved: step, forward and backward times, and the time inside
sparse._gspmm and the degree queries.

    PYTHONPATH=. DGL_UGRAPH_TIER_UP=0 .venv/bin/python bench/raw/s35/minibatch_cpu/probe_gcn_phases.py
"""
import time, statistics, sys, torch, dgl, functools
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import bench_minibatch as bm
import dgl_ugraph
from dgl_ugraph.dgl import interception, degrees as degmod
from dgl.backend.pytorch import sparse
from dgl_ugraph.tuning import graph_suite as gs
torch.manual_seed(0)
src, dst, n = gs.make(next(s for s in gs.PAPER_STANDINS if s.name == "pubmed"))
g = dgl.graph((src, dst), num_nodes=n)
feat, labels = torch.randn(n, bm.FEAT), torch.randint(0, bm.CLASSES, (n,))
model = bm.build("GCN"); opt = torch.optim.SGD(model.parameters(), lr=0.0)
acc = {"on": 0.0, "off": 0.0}
state = {"side": None}
def timed(fn):
    @functools.wraps(fn)
    def w(*a, **k):
        t0 = time.perf_counter()
        try: return fn(*a, **k)
        finally: acc[state["side"]] += time.perf_counter() - t0
    return w
# DGL's C-level entry points, whichever side runs: sparse._gspmm is what both reach (ours replaces it)
import dgl.heterograph_index as hi
orig_in, orig_out = hi.HeteroGraphIndex.in_degrees, hi.HeteroGraphIndex.out_degrees
sides = {}
for side, seed in (("on", 1), ("off", 2)):
    sides[side] = bm.sample(g, torch.arange(n), 26, 512, torch.device("cpu"), seed)
step = {"on": [], "off": []}; fwd = {"on": [], "off": []}; bwd = {"on": [], "off": []}; sparse_t = {"on": [], "off": []}
for i in range(26):
    for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
        state["side"] = side; acc[side] = 0.0
        def run():
            g0, d_in, d_out = sparse._gspmm, dgl.DGLGraph.in_degrees, dgl.DGLGraph.out_degrees
            sparse._gspmm, dgl.DGLGraph.in_degrees, dgl.DGLGraph.out_degrees = timed(g0), timed(d_in), timed(d_out)
            try:
                inputs, outputs, blocks = sides[side][i]
                t0 = time.perf_counter()
                out = model(blocks, feat[inputs])
                t1 = time.perf_counter()
                loss = torch.nn.functional.cross_entropy(out, labels[outputs])
                opt.zero_grad(); loss.backward(); opt.step()
                t2 = time.perf_counter()
                fwd[side].append(t1 - t0); bwd[side].append(t2 - t1)
                return t2 - t0
            finally:
                sparse._gspmm, dgl.DGLGraph.in_degrees, dgl.DGLGraph.out_degrees = g0, d_in, d_out
        if side == "off":
            with dgl_ugraph.disabled():
                dt = run()
        else:
            dt = run()
        step[side].append(dt); sparse_t[side].append(acc[side])
w = 4
for side in step:
    print(side, f"step {statistics.median(step[side][w:])*1e3:.2f} ms, in gspmm+degrees {statistics.median(sparse_t[side][w:])*1e3:.2f} ms")
for side in step:
    print(side, f"forward {statistics.median(fwd[side][w:])*1e3:.2f} ms, backward {statistics.median(bwd[side][w:])*1e3:.2f} ms")
print("paired off/on", round(statistics.median(a / b for a, b in zip(step["off"][w:], step["on"][w:])), 3))
print(dgl_ugraph.stats()["calls"], dgl_ugraph.stats()["fallback"])
