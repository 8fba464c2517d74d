"""Failure containment: whatever fails inside dgl_ugraph (the compiled kernel raising, running out
of memory, the extension not loading) costs the user one UGraphFallbackWarning, and the training
run completes with exactly DGL's results. Failures are injected at the narrowest point: the
compiled core's run call, the allocation before it, and the import of the core.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dgl
import dgl_ugraph
from dgl_ugraph.dgl import cache, interception, recognition, routing
from dgl_ugraph.core import _ext, ops

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(_ext.LOAD_ERROR is not None, reason=str(_ext.LOAD_ERROR))


@pytest.fixture(autouse=True)
def isolated_failures(plugin_on, monkeypatch):
    cache.clear()  # decisions live on graph entries: no test inherits another's
    monkeypatch.setattr(recognition, "_failed", {})
    monkeypatch.setattr(recognition, "_warned", set())
    yield
    cache.clear()


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = dgl.nn.GraphConv(12, 16, activation=F.relu)
        self.c2 = dgl.nn.GraphConv(16, 4)

    def forward(self, g, x):
        return self.c2(g, self.c1(g, x))


class GAT(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = dgl.nn.GATConv(12, 8, num_heads=3, activation=F.elu)
        self.c2 = dgl.nn.GATConv(24, 4, num_heads=1)

    def forward(self, g, x):
        return self.c2(g, self.c1(g, x).flatten(1)).squeeze(1)


class MaxSage(nn.Module):  # max/min aggregation and its argument-driven backward
    def __init__(self):
        super().__init__()
        self.c1 = dgl.nn.SAGEConv(12, 16, "pool", activation=F.relu)
        self.c2 = dgl.nn.SAGEConv(16, 4, "mean")

    def forward(self, g, x):
        return self.c2(g, self.c1(g, x))


MODELS = {"GCN": GCN, "GAT": GAT, "SAGE": MaxSage}


def problem(seed=0, nodes=200, edges=1500):
    gen = torch.Generator().manual_seed(seed)
    g = dgl.graph((torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)),
                  num_nodes=nodes)
    g = dgl.add_self_loop(dgl.remove_self_loop(g))
    return g, torch.randn(nodes, 12, generator=gen), torch.randint(0, 4, (nodes,), generator=gen)


def train(name, g, x, y, steps=5, on_step=None):
    """Losses and final parameters of `steps` Adam steps from a fixed initialization."""
    torch.manual_seed(0)
    model = MODELS[name]()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for i in range(steps):
        if on_step is not None:
            on_step(i)
        opt.zero_grad()
        loss = F.cross_entropy(model(g, x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), [p.detach().clone() for p in model.parameters()]


def native(name, g, x, y, steps=5):
    with dgl_ugraph.disabled():
        return train(name, g, x, y, steps)


def ours(caught):
    return [w for w in caught if issubclass(w.category, dgl_ugraph.UGraphFallbackWarning)]


class FailingCore:
    """The real compiled core, except that its CPU kernels (run_cpu, a Plan's run_cpu_with,
    edge_softmax_cpu) raise `make()` (from call `after` on)."""

    def __init__(self, real, make, after=0):
        self.real, self.make, self.after, self.calls = real, make, after, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def _kernel(self, name, *args):
        self.calls += 1
        if self.calls > self.after:
            raise self.make()
        return getattr(self.real, name)(*args)

    def run_cpu(self, params):
        return self._kernel("run_cpu", params)

    def run_cpu_with(self, *args):
        return self._kernel("run_cpu_with", *args)

    def edge_softmax_cpu(self, *args):
        return self._kernel("edge_softmax_cpu", *args)


FAILURES = {
    "kernel_raises": lambda: RuntimeError("ug_cpu_run: injected kernel failure"),
    "cuda_oom": lambda: torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)"),
    "host_oom": lambda: RuntimeError("out of memory"),
    "memoryerror": lambda: MemoryError("injected"),
    "valueerror": lambda: ValueError("injected invalid params"),
}


CORE_CASES = [(f, m) for f in ("kernel_raises", "cuda_oom", "host_oom") for m in MODELS] + \
             [("memoryerror", "GAT"), ("valueerror", "SAGE")]


@pytest.mark.parametrize("failure,model", CORE_CASES)
def test_core_failure_from_the_first_call(monkeypatch, model, failure):
    g, x, y = problem()
    ref = native(model, g, x, y)
    monkeypatch.setattr(_ext, "_C", FailingCore(_ext._C, FAILURES[failure]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = train(model, g, x, y)
    assert torch.equal(got[0], ref[0])
    assert all(torch.equal(a, b) for a, b in zip(got[1], ref[1]))
    assert len(ours(caught)) == 1, [str(w.message) for w in ours(caught)]
    s = dgl_ugraph.stats()
    assert s["intercepted"] == 0 and s["fallback"] > 0


@pytest.mark.parametrize("model", ["GCN", "GAT"])
def test_core_failure_in_the_middle_of_a_run(monkeypatch, model):
    """The kernel runs for two steps, then starts failing (memory pressure mid-run): the run goes
    on, on DGL, with one warning, and ends where DGL's would (up to float32 summation order).
    Unpoisoned, as a user runs: the repeat calls' plans launch through their fast call."""
    monkeypatch.setattr(ops, "POISON_OUTPUTS", False)
    g, x, y = problem(1)
    ref = native(model, g, x, y, steps=6)
    failing = FailingCore(_ext._C, FAILURES["cuda_oom"], after=10 ** 9)

    def on_step(i):
        if i == 2:
            failing.after = failing.calls
    monkeypatch.setattr(_ext, "_C", failing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = train(model, g, x, y, steps=6, on_step=on_step)
    torch.testing.assert_close(got[0], ref[0], rtol=1e-4, atol=1e-5)
    for a, b in zip(got[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert len(ours(caught)) == 1
    assert "out of memory" in str(ours(caught)[0].message).lower()
    assert failing.calls > failing.after > 0  # our kernel ran before, and was tried once per signature after


@pytest.mark.parametrize("failure", ["cuda_oom", "host_oom"])
def test_allocation_failure_before_the_kernel(monkeypatch, failure):
    """Out of memory while allocating the output (inside ops.prepare)."""
    g, x, y = problem(2)
    ref = native("GAT", g, x, y)

    def failing_prepare(*args, **kwargs):
        raise FAILURES[failure]()
    monkeypatch.setattr(ops, "prepare", failing_prepare)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = train("GAT", g, x, y)
    assert torch.equal(got[0], ref[0])
    assert len(ours(caught)) == 1


@pytest.mark.parametrize("model", list(MODELS))
def test_extension_missing(monkeypatch, model):
    g, x, y = problem(3)
    ref = native(model, g, x, y)
    monkeypatch.setattr(_ext, "_C", None)
    monkeypatch.setattr(_ext, "LOAD_ERROR", "the compiled core failed to load: injected")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = train(model, g, x, y)
        got2 = train(model, *problem(4))  # another graph: still no second warning
    assert torch.equal(got[0], ref[0])
    assert all(torch.equal(a, b) for a, b in zip(got[1], ref[1]))
    assert len(ours(caught)) == 1 and "injected" in str(ours(caught)[0].message)
    assert torch.isfinite(got2[0]).all()


def test_a_core_that_is_not_built_says_so_and_how_to_build_it(tmp_path):
    """A copy of the package without its compiled core, as a checkout before its build: the
    reason names the missing core and the commands that build it, not Python's circular-import
    wording."""
    import shutil

    package = os.path.dirname(dgl_ugraph.__file__)
    shutil.copytree(package, tmp_path / "dgl_ugraph", ignore=shutil.ignore_patterns("_C*", "*.so", "__pycache__"))
    code = "from dgl_ugraph.core import _ext; print(_ext.LOAD_ERROR)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    assert "not built" in out.stdout and "make dev" in out.stdout and "pip install ." in out.stdout, out.stdout
    assert "circular" not in out.stdout


def test_extension_that_fails_to_import_in_a_fresh_process(tmp_path):
    """A real failed import (the module is blocked before dgl_ugraph loads it): the program
    trains on DGL with one warning, and its numbers are DGL's."""
    code = textwrap.dedent("""
        import sys, warnings
        sys.modules["dgl_ugraph._C"] = None          # import of the core raises ImportError
        warnings.simplefilter("always")
        import torch, dgl, torch.nn.functional as F
        import dgl_ugraph
        from dgl_ugraph.core import _ext
        assert _ext._C is None and "failed to load" in _ext.LOAD_ERROR
        torch.manual_seed(0)
        g = dgl.add_self_loop(dgl.rand_graph(100, 600))
        x, y = torch.randn(100, 8), torch.randint(0, 3, (100,))
        def run():
            torch.manual_seed(1)
            conv = dgl.nn.GATConv(8, 3, num_heads=1)
            opt = torch.optim.SGD(conv.parameters(), lr=0.1)
            for _ in range(3):
                opt.zero_grad()
                loss = F.cross_entropy(conv(g, x).squeeze(1), y)
                loss.backward()
                opt.step()
            return loss.detach()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = run()
        with dgl_ugraph.disabled():
            theirs = run()
        n = sum(issubclass(w.category, dgl_ugraph.UGraphFallbackWarning) for w in caught)
        assert torch.equal(ours, theirs), (ours, theirs)
        print("WARNINGS", n, "INTERCEPTED", dgl_ugraph.stats()["intercepted"])
    """)
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("DGL_UGRAPH", None)
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "WARNINGS 1 INTERCEPTED 0" in res.stdout, res.stdout


def test_failure_in_the_backward_pass_only(monkeypatch):
    """The forward pass runs on dgl_ugraph; the reverse-graph kernel of the backward raises."""
    g, x, y = problem(5)
    ref = native("GCN", g, x, y)
    real = routing.Plan

    def flaky(graph, op_info, parallel_info=None, **kwargs):
        if getattr(flaky, "in_backward", False):
            raise RuntimeError("injected backward failure")
        return real(graph, op_info, parallel_info, **kwargs)

    class Hook(torch.autograd.Function):  # marks when autograd reaches the graph layers
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, grad):
            flaky.in_backward = True
            return grad

    monkeypatch.setattr(routing, "Plan", flaky)
    torch.manual_seed(0)
    model = GCN()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = []
        for _ in range(5):
            flaky.in_backward = False
            opt.zero_grad()
            loss = F.cross_entropy(Hook.apply(model(g, x)), y)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    torch.testing.assert_close(torch.stack(losses), ref[0], rtol=1e-5, atol=1e-6)
    assert dgl_ugraph.stats()["intercepted"] > 0  # the forward passes did run on dgl_ugraph
    assert len(ours(caught)) == 1 and "injected backward failure" in str(ours(caught)[0].message)


def test_failures_are_reported_in_stats(monkeypatch):
    g, x, y = problem(6)
    monkeypatch.setattr(_ext, "_C", FailingCore(_ext._C, FAILURES["cuda_oom"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train("GAT", g, x, y, steps=2)
    reasons = [r for p in dgl_ugraph.stats()["patterns"].values() for r in p["reasons"]]
    assert any("OutOfMemoryError" in r for r in reasons), reasons
