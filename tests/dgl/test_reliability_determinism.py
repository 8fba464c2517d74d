"""Deterministic mode: DGL_UGRAPH_DETERMINISTIC=1 or torch.use_deterministic_algorithms(True)
keeps the selector off strategies that sum with atomics, and repeated training runs are bitwise
equal. On CPU the core is atomic-free at any setting (each thread owns whole output rows and
rows cut between threads are merged in thread order), so the runs here must be bitwise equal;
the GPU twin is tests/gpu/test_reliability_gpu.py.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dgl
import dgl_ugraph
from dgl_ugraph.core import _ext
from dgl_ugraph.core.abstraction import DTYPE_NAMES, EVERY_CUDA_KEY, STRATEGIES, ParallelInfo, Signature
from dgl_ugraph.core.capability import ATOMIC_STRATEGIES, candidates, deterministic, why_not
from dgl_ugraph.core.graph import DegreeStats, UGraph
from dgl_ugraph.selection import policy
from dgl_ugraph.selection.rules import heuristic

pytestmark = pytest.mark.usefixtures("plugin_on")

REPEATS = 10


@pytest.fixture
def torch_deterministic():
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(was)


def sig(gather="sum", dtype=torch.float32, edge_op="copy_lhs"):
    c = "edge" if gather == "none" else "dst"
    return Signature(edge_op, gather, "src", "null" if edge_op == "copy_lhs" else "edge", c, dtype, 64, 1, False, "cuda")


# ---- the selector --------------------------------------------------------------------------------

@pytest.mark.parametrize("switch", ["env", "torch"])
def test_atomic_sums_are_refused_in_deterministic_mode(monkeypatch, switch):
    monkeypatch.delenv("DGL_UGRAPH_DETERMINISTIC", raising=False)
    assert not deterministic()
    for s in ATOMIC_STRATEGIES:
        assert why_not(s, sig("sum"), 1000, EVERY_CUDA_KEY) is None
    was = torch.are_deterministic_algorithms_enabled()
    if switch == "env":
        monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "1")
    else:
        torch.use_deterministic_algorithms(True)
    try:
        assert deterministic()
        for dtype in DTYPE_NAMES:
            for edge_op in ("copy_lhs", "mul"):
                s = sig("sum", dtype, edge_op)
                for strategy in ATOMIC_STRATEGIES:
                    reason = why_not(strategy, s, 1000, EVERY_CUDA_KEY)
                    assert reason is not None and "deterministic mode" in reason
                assert set(candidates(s, 1000, EVERY_CUDA_KEY)) == {"thread_vertex", "warp_vertex"}
        # Message creation has no atomics; max/min keys pack (value, position): order-free.
        assert candidates(sig("none"), 1000, EVERY_CUDA_KEY) == list(STRATEGIES)
        assert set(candidates(sig("max"), 1000, EVERY_CUDA_KEY)) == set(STRATEGIES)
        # The heuristic's edge-parallel preference for skewed graphs yields to the restriction.
        skewed = DegreeStats(mean=2.0, std=300.0, max=100000, empty_rows=0, edges=10 ** 6)
        allowed = candidates(sig("sum"), 10 ** 6, EVERY_CUDA_KEY)
        assert heuristic(sig("sum"), skewed, allowed).strategy not in ATOMIC_STRATEGIES
        assert heuristic(sig("sum"), skewed, list(STRATEGIES)).strategy in ATOMIC_STRATEGIES
    finally:
        torch.use_deterministic_algorithms(was)


def test_env_values_other_than_1_do_not_switch_it_on(monkeypatch):
    for value in ("0", "", "true", "yes"):
        monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", value)
        assert deterministic() == torch.are_deterministic_algorithms_enabled()


def test_choose_never_returns_an_atomic_sum_in_deterministic_mode(monkeypatch):
    """Even a forced DGL_UGRAPH_STRATEGY naming an atomic strategy yields in deterministic mode."""
    monkeypatch.setattr(_ext, "compiled_cuda_keys", lambda: EVERY_CUDA_KEY)
    monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "1")
    graph = UGraph.from_coo(torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1]), 3, 3)
    for forced in ("thread_edge:4:2", "warp_edge", None):
        if forced:
            monkeypatch.setenv("DGL_UGRAPH_STRATEGY", forced)
        else:
            monkeypatch.delenv("DGL_UGRAPH_STRATEGY", raising=False)
        pinfo = policy.choose(graph, sig("sum"))
        assert isinstance(pinfo, ParallelInfo) and pinfo.strategy not in ATOMIC_STRATEGIES
    monkeypatch.setenv("DGL_UGRAPH_STRATEGY", "thread_edge:4:2")
    assert policy.choose(graph, sig("max")).strategy == "thread_edge"  # max/min keep their atomics


# ---- bitwise-equal training ---------------------------------------------------------------------------

class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = dgl.nn.GraphConv(16, 32, activation=F.relu)
        self.c2 = dgl.nn.GraphConv(32, 5)

    def forward(self, g, x):
        return self.c2(g, self.c1(g, x))


class GAT(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = dgl.nn.GATConv(16, 8, num_heads=4, feat_drop=0.2, attn_drop=0.2, activation=F.elu)
        self.c2 = dgl.nn.GATConv(32, 5, num_heads=1)

    def forward(self, g, x):
        return self.c2(g, self.c1(g, x).flatten(1)).squeeze(1)


@pytest.fixture(scope="module")
def problem():
    # Large enough that the core splits rows over both threads (one hub row cut between them).
    gen = torch.Generator().manual_seed(0)
    n, e = 1200, 12000
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n, (e,), generator=gen)
    dst[: e // 4] = 7
    g = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=n)))
    return g, torch.randn(n, 16, generator=gen), torch.randint(0, 5, (n,), generator=gen)


def run(model_cls, problem, steps=2):
    """Every loss, output and final parameter of a short training run (dropout seeded)."""
    g, x, y = problem
    torch.manual_seed(0)
    model = model_cls()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    outs = []
    for _ in range(steps):
        opt.zero_grad()
        out = model(g, x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        outs += [loss.detach(), out.detach()]
    return outs + [p.detach().clone() for p in model.parameters()]


def bitwise_equal_runs(model_cls, problem):
    first = run(model_cls, problem)
    for i in range(REPEATS - 1):
        again = run(model_cls, problem)
        for a, b in zip(first, again):
            assert torch.equal(a, b), f"run {i + 2} differs from run 1"
    assert dgl_ugraph.stats()["intercepted"] > 0


@pytest.mark.parametrize("model_cls", [GCN, GAT], ids=["GCN", "GAT"])
def test_training_is_bitwise_repeatable_with_the_env_switch(monkeypatch, problem, model_cls):
    monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "1")
    bitwise_equal_runs(model_cls, problem)


@pytest.mark.parametrize("model_cls", [GCN, GAT], ids=["GCN", "GAT"])
def test_training_is_bitwise_repeatable_under_torch_deterministic(problem, model_cls, torch_deterministic):
    assert deterministic()
    bitwise_equal_runs(model_cls, problem)


@pytest.mark.skipif(_ext.LOAD_ERROR is not None, reason=str(_ext.LOAD_ERROR))
def test_kernel_is_bitwise_repeatable_on_a_hub_row(monkeypatch):
    """The one place order could leak on CPU: a row cut between threads. 10 runs, bitwise."""
    from dgl_ugraph import OpInfo, ugrapher
    monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "1")
    gen = torch.Generator().manual_seed(3)
    n, e = 500, 200000
    graph = UGraph.from_coo(torch.randint(0, n, (e,), generator=gen), torch.zeros(e, dtype=torch.int64) + 3, n, n)
    x = torch.randn(n, 33, generator=gen)
    op = OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")
    first = ugrapher(graph, op)[0]
    for _ in range(REPEATS - 1):
        assert torch.equal(ugrapher(graph, op)[0], first)


def test_a_cuda_decision_is_remade_when_the_mode_or_a_setting_changes(monkeypatch):
    """A CUDA configuration chosen before deterministic mode was switched on (say, an atomic
    sum) is not kept: the next call decides again. CPU decisions carry no configuration and are
    kept. Any other setting the policy reads likewise. (The device half, through DGL, is
    tests/gpu/test_reliability_gpu.py.)"""
    from dgl_ugraph.dgl import recognition

    class Entry:
        decisions = {}

    entry = Entry()
    made = []

    def fake_decide(entry_, key, op, lhs, rhs):
        strategy = "thread_vertex" if deterministic() else "thread_edge"
        d = recognition.Decision(None, pattern=object(), choice=policy.Choice(ParallelInfo(strategy, 4, 2), policy.selection_state()))
        made.append(d)
        return d

    monkeypatch.setattr(recognition.cache, "entry_for", lambda gidx: entry)
    monkeypatch.setattr(recognition, "_decide", fake_decide)
    monkeypatch.delenv("DGL_UGRAPH_DETERMINISTIC", raising=False)
    key = ("gspmm", "copy_lhs", "sum", None, None, None)
    first = recognition.decision_for(object(), key, "copy_lhs", None, None)[1]
    assert recognition.decision_for(object(), key, "copy_lhs", None, None)[1] is first
    monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "1")
    again = recognition.decision_for(object(), key, "copy_lhs", None, None)[1]
    assert again is not first and again.choice.parallel_info.strategy == "thread_vertex"
    assert recognition.decision_for(object(), key, "copy_lhs", None, None)[1] is again
    cpu = recognition.Decision(None, pattern=object())
    entry.decisions[key] = cpu
    monkeypatch.delenv("DGL_UGRAPH_DETERMINISTIC")
    assert recognition.decision_for(object(), key, "copy_lhs", None, None)[1] is cpu
    assert len(made) == 2
    # Any other setting the policy reads, too: a forced strategy set since is honoured.
    first = recognition.decision_for(object(), ("gspmm", "copy_lhs", "max", None, None, None), "copy_lhs", None, None)[1]
    monkeypatch.setenv("DGL_UGRAPH_STRATEGY", "warp_vertex:2:2")
    assert recognition.decision_for(object(), ("gspmm", "copy_lhs", "max", None, None, None), "copy_lhs", None,
                                    None)[1] is not first
    assert len(made) == 4
