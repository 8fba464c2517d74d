"""CPU, session 37: the DGL layer's share of copy_u-max's dispatch: DGL's entry point (sparse._gspmm, the
plugin on) against the signature's plan run alone, paired over 60 alternating rounds of 100 calls.

    PYTHONPATH=. .venv/bin/python bench/raw/s37/probe_dgl_layer_cpu.py
"""
import timeit, torch, statistics, dgl
from dgl.backend.pytorch import sparse
import dgl_ugraph
from dgl_ugraph.dgl import interception
from dgl_ugraph.dgl.cache import entry_for
from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.selection import policy
gen = torch.Generator().manual_seed(0)
n, e = 2708, 10556
g = dgl.graph((torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)), num_nodes=n)
g.create_formats_(); gidx = g._graph
dgl_ugraph.enable()
for F in (16, 64):
    x = torch.randn(n, F)
    ug = entry_for(gidx).ugraph
    op = OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")
    plan = policy.plan(ug, op)
    fns = {"dgl_path": lambda: sparse._gspmm(gidx, "copy_lhs", "max", x, None), "plan": lambda: plan.run(x, None)}
    for f in fns.values(): f()
    s = {k: [] for k in fns}
    for r in range(60):
        for k, f in (fns.items() if r % 2 else reversed(list(fns.items()))):
            s[k].append(min(timeit.repeat(f, number=100, repeat=1)) / 100 * 1e6)
    print(F, {k: round(statistics.median(v), 2) for k, v in s.items()}, "paired diff", round(statistics.median(a - b for a, b in zip(s["dgl_path"], s["plan"])), 2))
