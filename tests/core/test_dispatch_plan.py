"""ops.Plan, the DGL layer's repeat-call path: checked once, then each call fills only its data.
A plan must give what a fresh dgl_ugraph.ugrapher call gives, for new operands of the same signature
with any row stride, and benchmarks/bench_dispatch.py (benchmarks/results/dispatch.csv) and benchmarks/bench_host_path.py
(benchmarks/results/host_path_cpu.csv) must run."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import weakref

import pytest
import torch

from dgl_ugraph import ugrapher
from dgl_ugraph.core import _ext, ops
from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_dispatch  # noqa: E402


def graph(seed=0, n=40, e=300):
    gen = torch.Generator().manual_seed(seed)
    return UGraph.from_coo(torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen), n, n)


CASES = [("copy_lhs", "sum", "src", (8,), "null", None), ("mul", "max", "src", (4, 3), "edge", (4, 1)),
         ("add", "none", "src", (5,), "dst", (5,)), ("dot", "none", "src", (2, 6), "dst", (2, 6)),
         ("sub", "min", "edge", (3,), "dst", (1,))]


@pytest.mark.parametrize("poison", [True, False], ids=["poisoned", "fast-call"])
@pytest.mark.parametrize("edge_op,gather,a_type,a_shape,b_type,b_shape", CASES)
def test_a_plan_reused_with_new_operands_equals_a_fresh_call(edge_op, gather, a_type, a_shape, b_type, b_shape,
                                                             poison, monkeypatch):
    """Poisoned outputs (the session's default) show an element the kernel misses; without poison
    Plan.run takes its fast call (run_cpu_with), whose data must be passed in the right places."""
    monkeypatch.setattr(ops, "POISON_OUTPUTS", poison)
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
    kept = []  # every call's outputs, alive: each call must have storage of its own
    for strided in (False, True, False):
        fresh = op(strided)
        got = plan.run(fresh.A, fresh.B)
        want = ugrapher(g, fresh)
        for x, y in zip(got, want):
            assert (x is None) == (y is None)
            if x is not None:
                assert torch.equal(x, y)
                assert x.is_contiguous() and x.stride() == y.stride() and x.dtype == y.dtype
                assert all(x.data_ptr() != k.data_ptr() for k in kept)
                kept.append(x)


def test_the_cpu_fast_call_runs_a_plans_params_and_refuses_bad_arguments():
    """run_cpu_with, a Plan's CPU launch, a METH_FASTCALL function parsing its own arguments: the
    packed call with this call's addresses, and a Python error (no crash) for what it cannot take."""
    g = graph()
    x = torch.randn(g.num_src, 8, generator=torch.Generator().manual_seed(2))
    op = OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")
    run, params = _ext.core().run_cpu_with, ops.Plan(g, op)._template
    c = torch.full((g.num_dst, 8), float("nan"))
    data = [x.data_ptr(), 8, 0, 0, c.data_ptr(), 0, 0, 0]
    run(params, *data)
    assert torch.equal(c, ugrapher(g, op)[0])
    with pytest.raises(TypeError, match="takes 9 arguments"):
        run(params, *data[:-1])
    with pytest.raises(TypeError):
        run(object(), *data)
    with pytest.raises(TypeError):
        run(params, float(data[0]), *data[1:])
    with pytest.raises(OverflowError):
        run(params, -1, *data[1:])
    with pytest.raises(ValueError, match="c is NULL"):
        run(params, *data[:4], 0, *data[5:])


def test_bench_dispatch_runs(tmp_path):
    out = tmp_path / "dispatch.csv"
    res = subprocess.run([sys.executable, str(ROOT + "/benchmarks/bench_dispatch.py"), "--rounds", "2", "--calls", "3",
                          "--widths", "4", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = list(csv.DictReader(open(out)))
    assert {r["impl"] for r in rows} == {"dgl", "ugraph", "dispatch", "kernel", "plan", "ugraph_minus_kernel"}
    assert len({r["op"] for r in rows}) == 4 and all(float(r["us_median"]) == float(r["us_median"]) for r in rows)


def test_bench_dispatch_times_the_plans_call_without_its_launch(monkeypatch):
    """bench_dispatch's `dispatch` impl: inside launches_stubbed a plan allocates its outputs and
    fills its data but launches nothing; after it, the plan launches again (its fast call: the
    poisoning that the tests turn on takes another way)."""
    monkeypatch.setattr(ops, "POISON_OUTPUTS", False)
    g = graph()
    x = torch.randn(g.num_src, 8)
    op = OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")
    plan = ops.Plan(g, op)
    launches = []
    real = plan._run_cpu_with
    plan._run_cpu_with = lambda *data: launches.append(data) or real(*data)
    with bench_dispatch.launches_stubbed([plan]):
        c, arg, _ = plan.run(x, None)
        assert c.shape == arg.shape == (g.num_dst, 8) and not launches
    got = plan.run(x, None)
    assert len(launches) == 1
    assert all(torch.equal(a, b) for a, b in zip(got[:2], ugrapher(g, op)[:2]))


def test_bench_host_path_runs(tmp_path):
    out = tmp_path / "host_path.csv"
    res = subprocess.run([sys.executable, str(ROOT + "/benchmarks/bench_host_path.py"), "--rounds", "2", "--calls", "5",
                          "--nodes", "20", "--edges", "60", "--width", "4", "--out", str(out)],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert res.returncode == 0, res.stderr[-2000:]
    rows = list(csv.DictReader(open(out)))
    assert {r["impl"] for r in rows} == {"empty", "raw", "prepared", "plan", "ugrapher", "dgl_path", "dgl",
                                         "ugrapher_host", "dispatch"}
    assert len({r["op"] for r in rows}) == 4 and {r["tree"] for r in rows} == {"this"}


def test_ugrapher_repeats_reuse_one_plan_per_signature(monkeypatch):
    g = graph(seed=3)
    gen = torch.Generator().manual_seed(4)
    x, w = torch.randn(g.num_src, 8, generator=gen), torch.rand(g.num_edges, 1, generator=gen)
    first = ugrapher(g, OpInfo("mul", "sum", x, "src", w, "edge", "dst"))[0]
    plans = g.plans
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
    held = weakref.ref(plans)
    del g, plans
    assert held() is None


MAX_MIN_CASES = [("copy_lhs", "max", "src", (8,), "null", None), ("mul", "max", "src", (4, 3), "edge", (4, 1)),
                 ("add", "min", "src", (5,), "dst", (5,)), ("sub", "min", "edge", (3,), "dst", (1,)),
                 ("copy_rhs", "max", "null", None, "edge", (2, 2))]


@pytest.mark.parametrize("edge_op,gather,a_type,a_shape,b_type,b_shape", MAX_MIN_CASES)
def test_max_min_without_args_give_the_same_values_and_no_args(edge_op, gather, a_type, a_shape, b_type, b_shape):
    """args=False (a call no backward pass reads the winners of): C to the bit as with the args,
    argA and argB None, each a plan of its own."""
    g = graph(seed=11)
    rows = {"src": g.num_src, "dst": g.num_dst, "edge": g.num_edges}
    gen = torch.Generator().manual_seed(12)
    a = torch.randn((rows[a_type],) + a_shape, generator=gen) if a_shape else None
    b = torch.randn((rows[b_type],) + b_shape, generator=gen) if b_shape else None
    op = OpInfo(edge_op, gather, a, a_type, b, b_type, "dst")
    full = ugrapher(g, op)
    assert (full[1] is not None) == (a is not None) and (full[2] is not None) == (b is not None)
    for _ in range(2):  # the first call, then its plan
        c, arg_a, arg_b = ugrapher(g, op, args=False)
        assert arg_a is None and arg_b is None and torch.equal(c, full[0])
    assert len(g.plans) == 2
    prepared = ops.prepare(g, op, args=False)
    assert prepared.outputs[1:] == (None, None) and torch.equal(prepared.run()[0], full[0])


def test_ugrapher_repeat_calls_follow_dtype_device_and_strides():
    """A plan is reused only for operands of its shapes, dtype and device: anything else is
    checked (and planned) afresh, and a repeat call's strides are its own."""
    g = graph(seed=5)
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(g.num_src, 6, generator=gen)
    want = ops.prepare(g, OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")).run()[0]
    assert torch.equal(ugrapher(g, OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"))[0], want)
    got = ugrapher(g, OpInfo("copy_lhs", "sum", x.double(), "src", None, "null", "dst"))[0]
    assert got.dtype == torch.float64 and torch.allclose(got, want.double(), atol=1e-5)
    wide = torch.randn(g.num_src, 9, generator=gen)
    wide[:, 2:8] = x
    assert torch.equal(ugrapher(g, OpInfo("copy_lhs", "sum", wide[:, 2:8], "src", None, "null", "dst"))[0], want)
    columns = x.t().contiguous().t()  # features not contiguous: copied for the kernel
    assert torch.equal(ugrapher(g, OpInfo("copy_lhs", "sum", columns, "src", None, "null", "dst"))[0], want)
    # Same shape and dtype on another device: that device's check, not the CPU plan.
    with pytest.raises(ValueError, match="A is on meta but the graph is on cpu"):
        ugrapher(g, OpInfo("copy_lhs", "sum", x.to("meta"), "src", None, "null", "dst"))


def test_ugrapher_plan_key_follows_every_setting_the_policy_reads(monkeypatch):
    """A changed DGL_UGRAPH_* variable that selection reads, or torch's deterministic mode,
    makes a new key at once (so the call is chosen again); restoring it finds the old plan."""
    from dgl_ugraph.selection import policy
    g = graph(seed=7)
    op = OpInfo("copy_lhs", "sum", torch.randn(g.num_src, 4), "src", None, "null", "dst")
    for name in ("DGL_UGRAPH_STRATEGY", "DGL_UGRAPH_DETERMINISTIC", "DGL_UGRAPH_AUTOTUNE", "DGL_UGRAPH_AUTOTUNE_TOPK",
                 "DGL_UGRAPH_MODEL", "DGL_UGRAPH_PREDICTOR"):
        monkeypatch.delenv(name, raising=False)
    base = policy._plan_key(op, None, True)
    assert policy._plan_key(op, None, False) != base
    for name, value in (("DGL_UGRAPH_STRATEGY", "warp_edge:16:1"), ("DGL_UGRAPH_DETERMINISTIC", "1"),
                        ("DGL_UGRAPH_AUTOTUNE", "1"), ("DGL_UGRAPH_AUTOTUNE_TOPK", "3"),
                        ("DGL_UGRAPH_MODEL", "/no/such/model.json"), ("DGL_UGRAPH_PREDICTOR", "0")):
        monkeypatch.setenv(name, value)
        assert policy._plan_key(op, None, True) != base, name
        monkeypatch.delenv(name)
        assert policy._plan_key(op, None, True) == base, name
    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        assert policy._plan_key(op, None, True) != base
    finally:
        torch.use_deterministic_algorithms(was)
    assert policy._plan_key(op, None, True) == base


def test_ugrapher_a_new_graph_at_a_dead_graphs_address_gets_its_own_plan():
    """Plans are per graph object: a graph created where a dead one lived (CPython reuses the
    address, hence the id) never runs the dead graph's plan."""
    x = torch.randn(40, 4)
    g = graph(seed=8)
    ugrapher(g, OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"))
    gid = id(g)
    del g
    for seed in range(9, 200):  # until one lands at the old address (most often the first)
        g = graph(seed=seed, e=120)
        if id(g) == gid:
            break
    got = ugrapher(g, OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"))[0]
    assert torch.equal(got, ops.prepare(g, OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")).run()[0])


def test_workspaces_up_to_the_bound_come_zero_filled(monkeypatch):
    """ops.new_workspace: zero-filled with workspace_zeroed 1 up to ZEROED_WORKSPACE_BYTES (the
    core may then skip its clearing pass and must leave it zeroed), uninitialized with 0 past it."""
    monkeypatch.setattr(ops, "ZEROED_WORKSPACE_BYTES", 64)
    small, flag = ops.new_workspace(64, torch.device("cpu"))
    assert flag == 1 and small.dtype == torch.uint8 and small.numel() == 64 and int(small.count_nonzero()) == 0
    large, flag = ops.new_workspace(65, torch.device("cpu"))
    assert flag == 0 and large.numel() == 65
