"""CPU, session 38: what a kernel pays for writing into memory it did not write in the call before
(as every real call does, DGL's included) against the same packed call into outputs reused call after
call (bench_dispatch.py's `kernel`). copy_u-max at F = 64 on a cora-sized graph: the packed call into
reused outputs, into one of K output sets allocated beforehand in turn, into newly allocated outputs
(with the two allocations alone timed apart), and Plan.run; medians of 40 rounds of 100 calls.

    PYTHONPATH=. .venv/bin/python bench/raw/s38/cpu_output_memory.py
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
plan = policy.plan(g, op)
core, params = plan._core, plan._template


def into(c, a):
    core.run_cpu_with(params, x.data_ptr(), F, 0, 0, c.data_ptr(), a.data_ptr(), 0, 0)


def new_outputs():
    return torch.empty(n, F), torch.empty(n, F, dtype=torch.int64)


def fresh():
    c, a = new_outputs()
    into(c, a)
    return c, a


def rotating(k):
    sets = [new_outputs() for _ in range(k)]
    state = [0]

    def call():
        c, a = sets[state[0] % k]
        state[0] += 1
        into(c, a)
    return call


c0, a0 = new_outputs()
fns = {"reused outputs": lambda: into(c0, a0)}
fns.update({f"one of {k} output sets in turn": rotating(k) for k in (2, 4, 8, 16)})
fns.update({"new outputs": fresh, "the two allocations alone": new_outputs, "Plan.run": lambda: plan.run(x, None)})
for f in fns.values():
    f()
s = {k: [] for k in fns}
for r in range(40):
    for k, f in (fns.items() if r % 2 == 0 else reversed(fns.items())):
        s[k].append(min(timeit.repeat(f, number=100, repeat=1)) / 100 * 1e6)
for k, v in s.items():
    print(f"{k:32} {statistics.median(v):8.2f} us")
print(f"{'new outputs - allocations':32} {statistics.median(s['new outputs']) - statistics.median(s['the two allocations alone']):8.2f} us")
