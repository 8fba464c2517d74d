"""CPU, session 35: cProfile of 17 GCN forward passes on new sampled blocks, plugin on and off (pubmed
stand-in, 512 seeds): the functions whose own time differs most between the two sides.

    PYTHONPATH=. DGL_UGRAPH_TIER_UP=0 .venv/bin/python bench/raw/s35/minibatch_cpu/probe_gcn_forward_diff.py
"""
import time, sys, torch, dgl, cProfile, pstats
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "scripts"))
import bench_minibatch as bm
import dgl_ugraph
from dgl_ugraph.tuning import graph_suite as gs
torch.manual_seed(0)
src, dst, n = gs.make(next(s for s in gs.PAPER_STANDINS if s.name == "pubmed"))
g = dgl.graph((src, dst), num_nodes=n)
feat = torch.randn(n, bm.FEAT)
model = bm.build("GCN")
stats = {}
for side, seed in (("on", 1), ("off", 2), ("on", 3), ("off", 4)):
    batches = bm.sample(g, torch.arange(n), 20, 512, torch.device("cpu"), seed)
    p = cProfile.Profile()
    ctx = dgl_ugraph.disabled() if side == "off" else open("/dev/null")
    with ctx:
        for inputs, outputs, blocks in batches[:3]:
            model(blocks, feat[inputs])
        p.enable()
        for inputs, outputs, blocks in batches[3:]:
            with torch.no_grad():
                model(blocks, feat[inputs])
        p.disable()
    stats[side] = pstats.Stats(p).stats
def tot(st):
    out = {}
    for k, v in st.items():
        out[f"{k[0].split('/')[-1]}:{k[1]}({k[2]})"] = (v[2], v[1])
    return out
on, off = tot(stats["on"]), tot(stats["off"])
rows = sorted(((on.get(k, (0, 0))[0] - off.get(k, (0, 0))[0], k, on.get(k, (0, 0)), off.get(k, (0, 0))) for k in set(on) | set(off)), reverse=True)
print("function: tottime on - off (s over 17 forward passes), (on tottime, calls), (off tottime, calls)")
for r in rows[:25]:
    print(f"{r[0]*1e3:8.2f} ms  {r[1]}  on {r[2][0]*1e3:.2f}/{r[2][1]}  off {r[3][0]*1e3:.2f}/{r[3][1]}")
print("...")
for r in rows[-8:]:
    print(f"{r[0]*1e3:8.2f} ms  {r[1]}  on {r[2][0]*1e3:.2f}/{r[2][1]}  off {r[3][0]*1e3:.2f}/{r[3][1]}")
