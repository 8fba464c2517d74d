"""CPU, session 38: a Plan's repeat call through run_cpu_with (one METH_FASTCALL function) against
the way before it (Params.with_data, a params object, then run_cpu, both pybind11), on a 5-node
graph where the kernel is a few hundred nanoseconds; copy_u-max F = 16. Medians of 25 rounds of
2,000 calls, the two ways alternating.

    PYTHONPATH=. .venv/bin/python bench/raw/s38/probe_fast_call_cpu.py
"""
import statistics
import timeit

import torch

from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.selection import policy

g = UGraph.from_coo(torch.tensor([0, 1, 2, 3, 4, 0]), torch.tensor([1, 2, 3, 4, 0, 2]), 5, 5)
x = torch.randn(5, 16)
plan = policy.plan(g, OpInfo("copy_lhs", "max", x, "src", None, "null", "dst"))
core, params = plan._core, plan._template
c, a = torch.empty(5, 16), torch.empty(5, 16, dtype=torch.int64)
data = (x.data_ptr(), 16, 0, 0, c.data_ptr(), a.data_ptr(), 0, 0)
fast = plan._run_cpu_with
fns = {"run_cpu_with": lambda: core.run_cpu_with(params, *data),
       "with_data + run_cpu": lambda: core.run_cpu(params.with_data(*data))}
plans = {"Plan.run, run_cpu_with": fast,
         "Plan.run, with_data + run_cpu": lambda p, *d: core.run_cpu(p.with_data(*d))}
s = {k: [] for k in list(fns) + list(plans)}
for r in range(25):
    for k, f in fns.items():
        s[k].append(min(timeit.repeat(f, number=2000, repeat=3)) / 2000 * 1e6)
    for k, launch in plans.items():
        plan._run_cpu_with = launch
        s[k].append(min(timeit.repeat(lambda: plan.run(x, None), number=2000, repeat=3)) / 2000 * 1e6)
for k, v in s.items():
    print(f"{k:32} {statistics.median(v):7.3f} us")
