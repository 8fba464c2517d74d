"""ops.Plan, the DGL layer's repeat-call path: checked once, then each call fills only its data.
A plan must give what a fresh dgl_ugraph.ugrapher call gives, for new operands of the same signature
with any row stride, and scripts/bench_dispatch.py (bench/dispatch.csv) must run."""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest
import torch

from dgl_ugraph import ugrapher
from dgl_ugraph.core import ops
from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph

from conftest import ROOT


def graph(seed=0, n=40, e=300):
    gen = torch.Generator().manual_seed(seed)
    return UGraph.from_coo(torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen), n, n)


CASES = [("copy_lhs", "sum", "src", (8,), "null", None), ("mul", "max", "src", (4, 3), "edge", (4, 1)),
         ("add", "none", "src", (5,), "dst", (5,)), ("dot", "none", "src", (2, 6), "dst", (2, 6)),
         ("sub", "min", "edge", (3,), "dst", (1,))]


@pytest.mark.parametrize("edge_op,gather,a_type,a_shape,b_type,b_shape", CASES)
def test_a_plan_reused_with_new_operands_equals_a_fresh_call(edge_op, gather, a_type, a_shape, b_type, b_shape):
    g = graph()
    rows = {"src": g.num_src, "dst": g.num_dst, "edge": g.num_edges}
    gen = torch.Generator().manual_seed(1)

    def operand(ttype, shape, strided):
        if ttype == "null":
            return None
        x = torch.randn((rows[ttype],) + shape, generator=gen)
        if strided:  # the same shape with rows further apart: a stride the plan did not see
            wide = torch.randn((rows[ttype], shape[0] + 2) + shape[1:], generator=gen)
            wide[:, 1:1 + shape[0]] = x
            x = wide[:, 1:1 + shape[0]]
        return x

    def op(strided):
        return OpInfo(edge_op, gather, operand(a_type, a_shape, strided) if edge_op != "copy_rhs" else None, a_type,
                      operand(b_type, b_shape, strided) if edge_op != "copy_lhs" else None, b_type,
                      "edge" if gather == "none" else "dst")

    plan = ops.Plan(g, op(False))
    for strided in (False, True, False):
        fresh = op(strided)
        got = plan.run(fresh.A, fresh.B)
        want = ugrapher(g, fresh)
        for x, y in zip(got, want):
            assert (x is None) == (y is None)
            if x is not None:
                assert torch.equal(x, y)


def test_bench_dispatch_runs(tmp_path):
    out = tmp_path / "dispatch.csv"
    res = subprocess.run([sys.executable, str(ROOT + "/scripts/bench_dispatch.py"), "--rounds", "2", "--calls", "3",
                          "--widths", "4", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = list(csv.DictReader(open(out)))
    assert {r["impl"] for r in rows} == {"dgl", "ugraph", "kernel", "dispatch"}
    assert len({r["op"] for r in rows}) == 4 and all(float(r["us_median"]) == float(r["us_median"]) for r in rows)


def test_ugrapher_repeats_reuse_one_plan_per_signature(monkeypatch):
    from dgl_ugraph.selection import policy
    g = graph(seed=3)
    gen = torch.Generator().manual_seed(4)
    x, w = torch.randn(g.num_src, 8, generator=gen), torch.rand(g.num_edges, 1, generator=gen)
    first = ugrapher(g, OpInfo("mul", "sum", x, "src", w, "edge", "dst"))[0]
    plans = policy._plans[id(g)][1]
    assert len(plans) == 1
    x2, w2 = torch.randn(g.num_src, 8, generator=gen), torch.rand(g.num_edges, 1, generator=gen)
    again = ugrapher(g, OpInfo("mul", "sum", x2, "src", w2, "edge", "dst"))[0]
    fresh = ops.prepare(g, OpInfo("mul", "sum", x2, "src", w2, "edge", "dst")).run()[0]
    assert len(plans) == 1 and torch.equal(again, fresh) and not torch.equal(again, first)
    # Another shape, and another setting the policy reads, each get a plan of their own.
    ugrapher(g, OpInfo("mul", "sum", torch.randn(g.num_src, 4, generator=gen), "src", w, "edge", "dst"))
    monkeypatch.setenv("DGL_UGRAPH_STRATEGY", "warp_edge:16:1")
    ugrapher(g, OpInfo("mul", "sum", x, "src", w, "edge", "dst"))
    assert len(plans) == 3
    # A graph that goes away takes its plans with it.
    gid = id(g)
    del g, plans
    assert gid not in policy._plans
