"""CPU, session 37: why copy_u-max's dispatch at F = 64 (bench_dispatch.py: the DGL path's time minus
Prepared.run's, whose outputs are allocated once and reused) sits near 10 us. The same packed call
(run_cpu on the plan's parameters) into reused outputs, into newly allocated ones (in either order,
or C alone), and Plan.run and Prepared.run themselves; cora-sized graph, medians of 40 rounds of 100
calls.

    PYTHONPATH=. .venv/bin/python bench/raw/s37/cpu_fresh_outputs.py
"""
import statistics
import timeit

import torch

from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.selection import policy

gen = torch.Generator().manual_seed(0)
n, e, F = 2708, 10556, 64
g = UGraph.from_coo(torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen), n, n)
x = torch.randn(n, F)
op = OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")
plan, prepared = policy.plan(g, op), policy.prepare(g, op)
core, params = plan._core, plan._template
c0, a0 = torch.empty(n, F), torch.empty(n, F, dtype=torch.int64)


def into(c, a):
    core.run_cpu(params.with_data(x.data_ptr(), F, 0, 0, c.data_ptr(), a.data_ptr(), 0, 0))


def fresh_both():
    c, a = torch.empty(n, F), torch.empty(n, F, dtype=torch.int64)
    into(c, a)
    return c, a


def fresh_args_first():
    a, c = torch.empty(n, F, dtype=torch.int64), torch.empty(n, F)
    into(c, a)
    return a, c


def fresh_c_only():
    c = torch.empty(n, F)
    into(c, a0)
    return c


fns = {"reused outputs": lambda: into(c0, a0), "new C and args": fresh_both, "new args, then C": fresh_args_first,
       "new C only": fresh_c_only, "Plan.run": lambda: plan.run(x, None), "Prepared.run": prepared.run,
       "the two allocations alone": lambda: (torch.empty(n, F), torch.empty(n, F, dtype=torch.int64))}
for f in fns.values():
    f()
s = {k: [] for k in fns}
for r in range(40):
    for k, f in fns.items():
        s[k].append(min(timeit.repeat(f, number=100, repeat=1)) / 100 * 1e6)
for k, v in s.items():
    print(f"{k:28} {statistics.median(v):8.2f} us")
