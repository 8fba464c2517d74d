"""What dgl_ugraph does not run goes to DGL, gives DGL's result (or DGL's own error), and says
why in stats(); a failure of our own kernel costs one warning and nothing else."""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import dgl
import dgl.function as fn
import dgl_ugraph
from tests.dgl_errors import same_error
from dgl.backend.pytorch import sparse
from dgl_ugraph.dgl import interception, recognition, routing
from dgl_ugraph.core import _ext

pytestmark = pytest.mark.usefixtures("plugin_on")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))




def small_graph(seed=0, nodes=30, edges=120):
    gen = torch.Generator().manual_seed(seed)
    return dgl.graph((torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)),
                     num_nodes=nodes)


def fallbacks(key):
    return dgl_ugraph.stats()["patterns"].get(key, {"intercepted": 0, "fallback": 0, "reasons": {}})


def test_heterograph_runs_on_dgl_with_reason():
    g = dgl.heterograph({("user", "follows", "user"): ([0, 1, 2], [1, 2, 0]),
                         ("user", "plays", "game"): ([0, 1, 2, 2], [0, 0, 1, 1]),
                         ("game", "liked-by", "user"): ([0, 1], [2, 2])})
    g.nodes["user"].data["h"] = torch.rand(3, 4)
    g.nodes["game"].data["h"] = torch.rand(2, 4)

    def run():
        with g.local_scope():
            g.update_all(fn.copy_u("h", "m"), fn.sum("m", "out"))
            return g.nodes["user"].data["out"], g.nodes["game"].data["out"]

    ours = run()
    with dgl_ugraph.disabled():
        theirs = run()
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
    hetero = fallbacks("gspmm_hetero:copy_lhs:sum:*:*")
    assert hetero["fallback"] >= 1 and hetero["intercepted"] == 0
    assert any("several edge types" in r and "(3 edge types)" in r for r in hetero["reasons"])

    dgl_ugraph.reset_stats()  # one relation of a heterograph is a unit graph: it runs on dgl_ugraph
    with g.local_scope():
        g.update_all(fn.copy_u("h", "m"), fn.sum("m", "out"), etype="plays")
        out = g.nodes["game"].data["out"]
    with dgl_ugraph.disabled(), g.local_scope():
        g.update_all(fn.copy_u("h", "m"), fn.sum("m", "out"), etype="plays")
        ref = g.nodes["game"].data["out"]
    torch.testing.assert_close(out, ref)
    assert fallbacks("gspmm:copy_lhs:sum:u:*")["intercepted"] == 1


def test_several_edge_types_at_the_unit_kernel_get_dgls_error():
    g = dgl.heterograph({("a", "r", "a"): ([0], [0]), ("a", "s", "a"): ([0], [0])})
    text = str(same_error(lambda: sparse._gspmm(g._graph, "copy_lhs", "sum", torch.rand(1, 2), None)))
    assert "one edge type" in text
    assert any("2 edge types" in r for r in fallbacks("gspmm:copy_lhs:sum:u:*")["reasons"])


def test_unknown_ops_get_dgls_error_and_a_reason():
    g = small_graph()
    x, e = torch.rand(30, 4), torch.rand(120, 4)
    same_error(lambda: sparse._gspmm(g._graph, "dot", "sum", x, e))
    assert "dot aggregation" in next(iter(fallbacks("gspmm:dot:sum:u:e")["reasons"]))
    same_error(lambda: sparse._gspmm(g._graph, "copy_lhs", "mean", x, None))
    assert "mean never reaches" in next(iter(fallbacks("gspmm:copy_lhs:mean:u:*")["reasons"]))
    same_error(lambda: sparse._gsddmm(g._graph, "add", x, x, "u", "w"))
    assert "not in the switching table" in next(iter(fallbacks("gsddmm:add:-:u:w")["reasons"]))


@pytest.mark.parametrize("dtype,reason", [
    (torch.int64, "floating point only"), (torch.int32, "floating point only"),
    (torch.complex64, "floating point only"), (torch.float16, "float16 on CPU")])
def test_unsupported_dtypes_get_dgls_behaviour(dtype, reason):
    g = small_graph()
    x = torch.ones(30, 4, dtype=dtype)
    same_error(lambda: dgl.ops.copy_u_sum(g, x))
    assert any(reason in r for r in fallbacks("gspmm:copy_lhs:sum:u:*")["reasons"])


def test_dtype_mismatch_gets_dgls_error():
    g = small_graph()
    text = str(same_error(lambda: sparse._gspmm(g._graph, "mul", "sum", torch.rand(30, 4), torch.rand(120, 1).double())))
    assert "doesn't match" in text
    assert any("dtype-mismatch" in r for r in fallbacks("gspmm:mul:sum:u:e")["reasons"])


def test_wrong_row_count_gets_dgls_error():
    g = small_graph()
    same_error(lambda: sparse._gspmm(g._graph, "copy_lhs", "sum", torch.rand(29, 4), None))
    assert any("29 rows for 30 src" in r for r in fallbacks("gspmm:copy_lhs:sum:u:*")["reasons"])


def test_graph_restricted_to_coo_runs_on_dgl():
    g = small_graph().formats("coo")
    x = torch.rand(30, 4)
    ours = dgl.ops.copy_u_sum(g, x)
    with dgl_ugraph.disabled():
        theirs = dgl.ops.copy_u_sum(g, x)
    torch.testing.assert_close(ours, theirs)  # DGL's COO kernel adds in a thread-dependent order
    assert fallbacks("gspmm:copy_lhs:sum:u:*")["intercepted"] == 0
    assert any("cannot have a CSC" in r for r in fallbacks("gspmm:copy_lhs:sum:u:*")["reasons"])


def gcn_step(g, x, weight):
    with g.local_scope():
        g.srcdata["h"] = x @ weight
        g.update_all(fn.copy_u("h", "m"), fn.max("m", "h"))
        out = g.dstdata["h"]
    out.square().sum().backward()
    return out.detach(), weight.grad.clone()


def test_a_failing_kernel_costs_one_warning_and_gives_dgls_results(monkeypatch, isolated_failures):
    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    g, x = small_graph(seed=1), torch.rand(30, 8)
    weight = torch.rand(8, 8, requires_grad=True)
    with dgl_ugraph.disabled():
        ref, ref_grad = gcn_step(g, x, weight)
    monkeypatch.setattr(routing, "Plan", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            weight.grad = None
            out, grad = gcn_step(g, x, weight)
            assert torch.equal(out, ref) and torch.equal(grad, ref_grad)
        weight.grad = None
        gcn_step(small_graph(seed=2), x, weight)  # a second graph with the same signature: no new warning
    ours = [w for w in caught if issubclass(w.category, dgl_ugraph.UGraphFallbackWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "injected failure" in str(ours[0].message)
    reasons = fallbacks("gspmm:copy_lhs:max:u:*")["reasons"]
    assert any("RuntimeError: injected failure" in r for r in reasons)
    assert fallbacks("gspmm:copy_lhs:max:u:*")["intercepted"] == 0


def _fallback_warnings_over_three_graphs(op, first_seed):
    """The fallback warnings of `op` on three new graphs, each result equal to DGL's own."""
    x = torch.rand(30, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(first_seed, first_seed + 3):
            g = small_graph(seed=seed)
            ours = op(g, x)
            with dgl_ugraph.disabled():
                assert torch.equal(ours, op(g, x))
    return [w for w in caught if issubclass(w.category, dgl_ugraph.UGraphFallbackWarning)]


def test_a_missing_core_costs_one_warning(monkeypatch, isolated_failures):
    monkeypatch.setattr(_ext, "_C", None)
    monkeypatch.setattr(_ext, "LOAD_ERROR", "the compiled core failed to load: injected")
    ours = _fallback_warnings_over_three_graphs(dgl.ops.copy_u_sum, 10)
    assert len(ours) == 1 and "injected" in str(ours[0].message)
    assert any("injected" in r for r in fallbacks("gspmm:copy_lhs:sum:u:*")["reasons"])


def test_a_failing_recognition_costs_one_warning(monkeypatch, isolated_failures):
    def broken(*args):
        raise KeyError("injected")

    monkeypatch.setattr(recognition, "_decide", broken)
    ours = _fallback_warnings_over_three_graphs(dgl.ops.copy_u_max, 20)
    assert len(ours) == 1 and "could not recognize" in str(ours[0].message)
    assert fallbacks("gspmm:copy_lhs:max:u:*")["fallback"] == 3


def test_log_names_each_new_decision_once():
    code = textwrap.dedent("""
        import torch, dgl, dgl_ugraph
        g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])))
        for _ in range(3):
            dgl.ops.copy_u_sum(g, torch.rand(3, 4))
            try:
                dgl.ops.copy_u_sum(g, torch.ones(3, 4, dtype=torch.int64))
            except Exception as exc:  # DGL's own error, as DGL alone raises it
                assert "Feature data" in str(exc)
    """)
    env = dict(os.environ, PYTHONPATH=REPO, DGL_UGRAPH_LOG="1")
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert err.returncode == 0, err.stderr
    lines = [line for line in err.stderr.splitlines() if line.startswith("[dgl_ugraph]")]
    assert len(lines) == 2, err.stderr
    assert "gspmm:copy_lhs:sum:u:* float32" in lines[0] and "-> dgl_ugraph" in lines[0]
    assert "int64" in lines[1] and "-> DGL" in lines[1]


def test_stats_report_configuration_and_reasons():
    g = small_graph()
    dgl.ops.copy_u_sum(g, torch.rand(30, 4))
    s = dgl_ugraph.stats()
    row = next(r for r in s["signatures"] if r["pattern"] == "gspmm:copy_lhs:sum:u:*")
    assert row["runs_on"] == "dgl_ugraph" and row["config"] == "cpu" and row["op_info"] == "(copy_lhs, sum, src, null, dst)"
    assert row["dtype"] == "float32" and row["lhs_shape"] == (4,) and row["idtype"] == "int64"
    assert s["enabled"] and s["intercepted"] >= 1
    assert "gspmm:copy_lhs:sum:u:*" in dgl_ugraph.report()
