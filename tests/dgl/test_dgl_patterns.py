"""The switching table is complete: every builtin DGL generates (each dgl.function message x
reducer, each apply_edges message, each dgl.ops name) lowers exactly as the table says, forward,
and every kernel call it makes, backward included, is mapped or listed with a reason."""
import itertools
import os

import pytest
import torch

import dgl
import dgl.function as fn
import dgl.ops
import dgl_ugraph
from dgl_ugraph.dgl import patterns
from tests.dgl_errors import same_error
from dgl_ugraph.core.abstraction import EDGE_OPS, GATHER_OPS, TENSOR_TYPES, OpInfo

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N, E = 5, 9
TARGET_TYPES = {"u": "src", "v": "dst", "e": "edge"}


def graph():
    # An empty row (node 4 receives nothing), a self-loop and a multi-edge.
    return dgl.graph((torch.tensor([0, 1, 2, 3, 0, 0, 2, 1, 3]), torch.tensor([1, 2, 3, 0, 0, 1, 1, 1, 3])), num_nodes=N)


def features():
    gen = torch.Generator().manual_seed(0)
    return {t: (torch.rand(n, 3, generator=gen) + 0.5).requires_grad_() for t, n in (("u", N), ("v", N), ("e", E))}


def message_names():
    return sorted(n for n in dir(fn) if n in ("copy_u", "copy_e") or (n.count("_") == 2 and n[0] in "uve"))


def dgl_ops_names():
    return sorted(n for n in dir(dgl.ops) if not n.startswith("_") and callable(getattr(dgl.ops, n))
                  and not isinstance(getattr(dgl.ops, n), type(dgl.ops)))


def message(name):
    if name == "copy_u":
        return fn.copy_u("u", "m")
    if name == "copy_e":
        return fn.copy_e("e", "m")
    lhs, _, rhs = name.split("_")
    return getattr(fn, name)(lhs, rhs, "m")


def set_features(g, x):
    g.srcdata["u"], g.dstdata["v"], g.edata["e"] = x["u"], x["v"], x["e"]


def update_all(msg, red):
    def run(g, x):
        set_features(g, x)
        g.update_all(message(msg), getattr(fn, red)("m", "h"))
        return g.dstdata["h"]
    return run


def apply_edges(msg):
    def run(g, x):
        set_features(g, x)
        g.apply_edges(message(msg))
        return g.edata["m"]
    return run


def dgl_op(name):
    func = getattr(dgl.ops, name)
    parts = name.split("_")

    def run(g, x):
        if name == "edge_softmax":
            return func(g, x["e"])
        if name.startswith("copy_"):
            return func(g, x[parts[1]])
        if len(parts) == 4:  # u_op_e_reduce
            return func(g, x["u"], x["e"])
        return func(g, x[parts[0]], x[parts[2]])
    return run


def builtin_runners():
    runners = {}
    for msg in message_names():
        for red in ("sum", "max", "min", "mean"):
            runners[f"update_all(fn.{msg}, fn.{red})"] = update_all(msg, red)
        runners[f"apply_edges(fn.{msg})"] = apply_edges(msg)
    for name in dgl_ops_names():
        entry = patterns.builtin_lowering().get(f"dgl.ops.{name}", {})
        if "calls" in entry:
            runners[f"dgl.ops.{name}"] = dgl_op(name)
    return runners


def seen_patterns():
    return {name: p for name, p in dgl_ugraph.stats()["patterns"].items()}


def test_every_builtin_dgl_generates_is_described():
    described = set(patterns.builtin_lowering())
    generated = {f"update_all(fn.{m}, fn.{r})" for m in message_names() for r in ("sum", "max", "min", "mean")}
    generated |= {f"apply_edges(fn.{m})" for m in message_names()}
    generated |= {f"dgl.ops.{n}" for n in dgl_ops_names()}
    assert generated - described == set()
    assert described - generated == set(), "the table describes builtins this DGL does not have"
    for name, entry in patterns.builtin_lowering().items():
        assert ("calls" in entry) + ("generic" in entry) + ("unsupported" in entry) == 1, name


def test_mapped_rows_are_valid_op_infos():
    for key, p in patterns.mapped().items():
        call, op, red, lhs, rhs = key.split(":")
        assert p.edge_op == op and p.edge_op in EDGE_OPS
        assert p.gather_op == ("none" if call == "gsddmm" else red) and p.gather_op in GATHER_OPS
        assert p.A_type == TARGET_TYPES.get(lhs, "null") and p.B_type == TARGET_TYPES.get(rhs, "null")
        assert {p.A_type, p.B_type, p.C_type} <= set(TENSOR_TYPES)
        a = torch.zeros(1, 1) if p.A_type != "null" else None
        b = torch.zeros(1, 1) if p.B_type != "null" else None
        OpInfo(p.edge_op, p.gather_op, a, p.A_type, b, p.B_type, p.C_type)  # raises on an inconsistent row


@pytest.mark.parametrize("name", sorted(builtin_runners()))
def test_builtin_lowers_as_the_table_says_and_every_call_is_covered(name):
    entry = patterns.builtin_lowering()[name]
    g = graph()
    x = features()
    dgl_ugraph.reset_stats()
    out = builtin_runners()[name](g, x)
    forward = seen_patterns()
    # On CPU (this suite), a DGL builtin with a CPU branch of its own calls what that branch calls.
    assert set(forward) == set(entry.get("cpu_calls", entry["calls"])), f"{name} lowered to {sorted(forward)}"
    dgl_ugraph.reset_stats()
    if out.requires_grad:
        out.sum().backward()
    for key, counts in {**forward, **seen_patterns()}.items():
        assert key in patterns.mapped() or key in patterns.fused() or patterns.unsupported_reason(key), key
        if key in patterns.mapped() or key in patterns.fused():
            assert counts["fallback"] == 0, (key, counts["reasons"])


GSPMM_OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")
GSDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")


@pytest.mark.parametrize("op,red", list(itertools.product(GSPMM_OPS, ("sum", "max", "min", "mean"))))
def test_generic_gspmm_reaches_only_mapped_rows(op, red):
    g, x = graph(), features()
    dgl_ugraph.reset_stats()
    out = dgl.ops.gspmm(g, op, red, x["u"] if op != "copy_rhs" else None, x["e"] if op != "copy_lhs" else None)
    out.sum().backward()
    for key, counts in seen_patterns().items():
        assert key in patterns.mapped() or key in patterns.fused_operators(), key
        assert counts["fallback"] == 0, (key, counts)


@pytest.mark.parametrize("op,lhs,rhs", [(op, l, r) for op in GSDDMM_OPS for l in "uve" for r in "uve"])
def test_generic_gsddmm_reaches_only_mapped_rows(op, lhs, rhs):
    g, x = graph(), features()
    dgl_ugraph.reset_stats()
    out = dgl.ops.gsddmm(g, op, x[lhs], x[rhs], lhs, rhs)
    out.sum().backward()
    for key, counts in seen_patterns().items():
        assert key in patterns.mapped() and counts["fallback"] == 0, (key, counts)


def test_cpu_edge_softmax_on_edge_subsets_and_fallback_dtypes():
    """eids select the edges softmax normalizes (DGL takes an edge subgraph first); a dtype the
    plugin does not run on CPU keeps DGL's fused kernel whole."""
    g = dgl.rand_graph(40, 300)
    x = torch.randn(300, 2)
    eids = torch.arange(0, 300, 3)
    dgl_ugraph.reset_stats()
    ours = dgl.ops.edge_softmax(g, x[eids], eids=eids)
    assert seen_patterns()["edge_softmax_forward"]["intercepted"] == 1
    with dgl_ugraph.disabled():
        theirs = dgl.ops.edge_softmax(g, x[eids], eids=eids)
    torch.testing.assert_close(ours, theirs, rtol=2e-6, atol=1e-7)
    same_error(lambda: dgl.ops.edge_softmax(g, x.to(torch.float16)))


def test_unknown_keys_have_reasons():
    assert "several edge types" in patterns.unsupported_reason(patterns.hetero_key("gspmm_hetero", "copy_lhs", "sum"))
    assert "mean never reaches" in patterns.unsupported_reason(patterns.spmm_key("copy_lhs", "mean"))
    assert "dot aggregation" in patterns.unsupported_reason(patterns.spmm_key("dot", "sum"))
    assert isinstance(patterns.lookup(patterns.sddmm_key("add", "src", "dst")), patterns.Pattern)
    assert patterns.unsupported_reason(patterns.sddmm_key("add", "u", "w")) is None
    assert "not in the switching table" in patterns.lookup(patterns.sddmm_key("add", "u", "w"))


def test_readme_table_is_generated_from_the_switching_table():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert patterns.markdown_table() in readme


def test_table_is_found_in_a_checkout_and_when_installed(tmp_path, monkeypatch):
    assert patterns.table_path() == os.path.join(REPO, "patterns", "switching_table.json")
    installed = tmp_path / "site-packages" / "dgl_ugraph"
    installed.mkdir(parents=True)
    (installed / "switching_table.json").write_text("{}")
    monkeypatch.setattr(patterns, "_PACKAGE_DIR", str(installed))
    assert patterns.table_path() == str(installed / "switching_table.json")
    (installed / "switching_table.json").unlink()
    with pytest.raises(FileNotFoundError, match="switching table is missing"):
        patterns.table_path()
