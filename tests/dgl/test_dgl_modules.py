"""The module patterns (dgl_ugraph/dgl/modules): GraphConv, SAGEConv and GINConv on their lean
paths against DGL's own module, on every device of DEVICES.

Each case runs one training step (forward, then the backward of a fixed random projection of the
output) from one state with fresh random inputs, DGL's forward first, then the lean path, and
compares the outputs and every gradient (parameters, features, edge weights): float64 within
1e-12 of DGL's scale, float32 within 1e-5. stats()["modules"] must show that the step ran on the
lean path, or on DGL's forward with the expected reason. Graphs: nodes without in-edges and a
hub row (`graph`), self-loops on every node, no edges at all, a sampled block, and a bipartite
graph with a pair of features.
"""
from __future__ import annotations

import copy
import inspect
import re

import dgl
import pytest
import torch
import torch.nn.functional as F
from dgl import DGLError
from dgl.nn import DotGatConv, EdgeWeightNorm, GATConv, GATv2Conv, GINConv, GraphConv, SAGEConv

import dgl_ugraph
from dgl_ugraph.dgl import cache
from dgl_ugraph.dgl.modules import attention, fused
from test_dgl_convs import conv_graph

pytestmark = pytest.mark.usefixtures("plugin_on")

# The devices DGL runs on here: CPU, and CUDA where this DGL build and torch have it.
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and dgl.ndarray.gpu(0).exist else [])
TOL = {torch.float64: 1e-12, torch.float32: 1e-5}


def _mlp(i, o):
    return torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))


def _aggregating(module, reducer: str):
    """GINConv with a reducer its constructor refuses but its forward runs (any dgl.function one)."""
    module._aggregator_type = reducer
    return module


# name: (module factory, whether its forward takes edge weights).
ZERO_OK = dict(allow_zero_in_degree=True)
CASES = {
    "GraphConv-both-narrowing": (lambda: GraphConv(6, 5, activation=F.relu, **ZERO_OK), False),
    "GraphConv-both-widening": (lambda: GraphConv(4, 7, **ZERO_OK), False),
    "GraphConv-left": (lambda: GraphConv(6, 5, norm="left", **ZERO_OK), False),
    "GraphConv-right-weighted": (lambda: GraphConv(6, 5, norm="right", **ZERO_OK), True),
    "GraphConv-none-weighted-nobias": (lambda: GraphConv(6, 5, norm="none", bias=False, **ZERO_OK), True),
    "GraphConv-none": (lambda: GraphConv(6, 6, norm="none", **ZERO_OK), False),
    "SAGEConv-mean": (lambda: SAGEConv(6, 5, "mean"), False),
    "SAGEConv-mean-widening-weighted": (lambda: SAGEConv(4, 7, "mean"), True),
    "SAGEConv-mean-dropout-norm": (lambda: SAGEConv(6, 5, "mean", feat_drop=0.4, bias=False,
                                                    norm=torch.nn.LayerNorm(5), activation=F.elu), False),
    "SAGEConv-gcn": (lambda: SAGEConv(6, 5, "gcn"), False),
    "SAGEConv-gcn-widening-weighted": (lambda: SAGEConv(4, 7, "gcn"), True),
    "SAGEConv-gcn-pair": (lambda: SAGEConv(6, 5, "gcn"), False),
    "SAGEConv-pool": (lambda: SAGEConv(6, 5, "pool"), False),
    "SAGEConv-pool-weighted": (lambda: SAGEConv(6, 5, "pool", activation=F.relu), True),
    "GINConv-sum": (lambda: GINConv(_mlp(6, 5), "sum", learn_eps=True), False),
    "GINConv-max": (lambda: GINConv(_mlp(6, 5), "max"), False),
    "GINConv-mean-weighted": (lambda: GINConv(_mlp(6, 5), "mean", init_eps=0.3), True),
    "GINConv-min-activation": (lambda: _aggregating(GINConv(None, "max", activation=torch.tanh), "min"), False),
    "GINConv-sum-weighted": (lambda: GINConv(torch.nn.Linear(6, 5), "sum", learn_eps=True), True),
    "GATConv-1head": (lambda: GATConv(6, 5, 1, **ZERO_OK), False),
    "GATConv-4heads-dropout-residual": (lambda: GATConv(6, 5, 4, feat_drop=0.3, attn_drop=0.4, residual=True,
                                                        activation=F.elu, **ZERO_OK), False),
    "GATConv-8heads-weighted-nobias": (lambda: GATConv(6, 3, 8, bias=False, **ZERO_OK), True),
    "GATConv-2heads-identity-residual": (lambda: GATConv(6, 3, 2, residual=True, **ZERO_OK), False),
    "GATConv-pair-3heads": (lambda: GATConv((6, 6), 4, 3, residual=True, **ZERO_OK), False),
    "GATv2Conv-4heads-dropout-residual": (lambda: GATv2Conv(6, 5, 4, feat_drop=0.3, attn_drop=0.2, residual=True,
                                                            activation=F.elu, **ZERO_OK), False),
    "GATv2Conv-shared-weights": (lambda: GATv2Conv(6, 4, 2, share_weights=True, **ZERO_OK), False),
    "GATv2Conv-pair-1head": (lambda: GATv2Conv((6, 6), 4, 1, **ZERO_OK), False),
    "DotGatConv-3heads": (lambda: DotGatConv(6, 4, 3, **ZERO_OK), False),
    "DotGatConv-pair-2heads": (lambda: DotGatConv((6, 6), 4, 2, **ZERO_OK), False),
}


def module_class(name: str) -> str:
    return name.split("-")[0]


def in_width(module) -> int:
    return getattr(module, "_in_feats", None) or getattr(module, "_in_src_feats", None) or 6


@pytest.fixture(scope="module")
def graphs():
    """name: a graph of the named edge case (on the CPU; each test moves it)."""
    g = conv_graph(300, 3000)
    assert (g.in_degrees() == 0).any() and g.in_degrees().max() > 100
    frontier = dgl.sampling.sample_neighbors(g, torch.arange(0, 300, 7), 5)
    bipartite = dgl.heterograph({("user", "rates", "item"): (torch.randint(0, 40, (400,)), torch.randint(0, 25, (400,)))},
                                num_nodes_dict={"user": 40, "item": 25})
    return {"skewed": g, "self-loops": dgl.add_self_loop(dgl.remove_self_loop(g)),
            "no-edges": dgl.graph(([], []), num_nodes=20), "block": dgl.to_block(frontier, torch.arange(0, 300, 7)),
            "bipartite": bipartite}


def features(g, width: int, dtype, device, seed: int, pair: bool = False):
    """Fresh random leaves: the node features (a pair on a bipartite graph, or where `pair`) and
    positive edge weights."""
    gen = torch.Generator().manual_seed(seed)

    def leaf(*shape, positive=False):
        t = torch.rand(shape, generator=gen, dtype=torch.float64) + 0.1 if positive else \
            torch.randn(shape, generator=gen, dtype=torch.float64)
        return t.to(device, dtype).requires_grad_()
    if not pair and (g.is_block or len(g.ntypes) == 1):
        feat = leaf(g.num_src_nodes(), width)
    else:
        feat = (leaf(g.num_src_nodes(), width), leaf(g.num_dst_nodes(), width))
    return feat, leaf(g.num_edges(), positive=True)


def step(module, state, g, feat, weights, seed, train=True, **kwargs):
    """One training step from `state` (or, not `train`, an inference: eval mode, no gradient):
    the outputs and every gradient by name."""
    module.load_state_dict(state)
    module.zero_grad(set_to_none=True)
    leaves = list(feat) if isinstance(feat, tuple) else [feat]
    leaves += [weights] if weights is not None else []
    for t in leaves:
        t.grad = None
    torch.manual_seed(seed)  # the same dropout masks on both sides
    module.train(train)
    if weights is not None:
        kwargs = dict(kwargs, edge_weight=weights)
    with torch.set_grad_enabled(train):
        out = module(g, feat, **kwargs)
    outs = list(out) if isinstance(out, tuple) else [out]
    if not train:
        return outs, {}
    gen = torch.Generator().manual_seed(seed)
    sum((t * torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t)).sum() for t in outs).backward()
    grads = {f"parameter {k}": p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}
    grads.update({f"input {k}": t.grad.clone() for k, t in enumerate(leaves) if t.grad is not None})
    return [t.detach() for t in outs], grads


def assert_close(ours, theirs, what, tol):
    scale = max(theirs.abs().max().item(), 1e-30) if theirs.numel() else 1.0
    diff = (ours - theirs).abs().max().item() if theirs.numel() else 0.0
    assert ours.shape == theirs.shape and diff <= tol * scale, f"{what}: max |diff| {diff:.3g} at scale {scale:.3g}"


def check_against_dgl(module, g, feat, weights, dtype, seed=0, train=True, **kwargs):
    """DGL's forward, then the plugin's, from one state: outputs and gradients equal within TOL;
    returns stats()["modules"] of the plugin's step."""
    state = copy.deepcopy(module.state_dict())
    try:
        with dgl_ugraph.disabled():
            ref, ref_grads = step(module, state, g, feat, weights, seed, train, **kwargs)
    except Exception as exc:  # DGL's own module fails here (u_mul_e max's backward on no edges): so must ours
        dgl_ugraph.reset_stats()
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            step(module, state, g, feat, weights, seed, train, **kwargs)
        return dgl_ugraph.stats()["modules"]
    dgl_ugraph.reset_stats()
    out, grads = step(module, state, g, feat, weights, seed, train, **kwargs)
    modules = dgl_ugraph.stats()["modules"]
    assert len(out) == len(ref)
    for k, (o, r) in enumerate(zip(out, ref)):
        assert_close(o, r, f"output {k}", TOL[dtype])
    assert grads.keys() == ref_grads.keys()
    for what in grads:
        assert_close(grads[what], ref_grads[what], f"gradient of {what}", TOL[dtype])
    return modules


def lean_only(modules, cls: str, calls: int = 1):
    assert modules.get(cls, {}).get("lean") == calls and modules[cls]["dgl"] == 0, modules


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("graph_name", ["skewed", "self-loops", "no-edges", "block", "bipartite"])
@pytest.mark.parametrize("name", list(CASES))
def test_lean_path_matches_dgl(name, graph_name, dtype, device, graphs):
    lean_only(check_case(name, graphs[graph_name], graph_name, dtype, device)[0], module_class(name))


def check_case(name, graph, graph_name, dtype, device):
    """check_against_dgl of CASES[name] on `graph` with fresh inputs: (stats' modules, the module)."""
    make, weighted = CASES[name]
    g = graph.to(device)
    torch.manual_seed(1)
    module = make().to(device, dtype)
    feat, weights = features(g, in_width(module), dtype, device, seed=sum(map(ord, name + graph_name)),
                             pair="pair" in name)
    return check_against_dgl(module, g, feat, weights if weighted else None, dtype), module


FUSED_NORMS = [n for n in CASES if n.startswith(("GraphConv-both", "GraphConv-left"))]


def norm_sum_calls() -> dict:
    """stats()'s counts of the fused row of GraphConv's normalized aggregation."""
    found = dgl_ugraph.stats()["patterns"].get("gspmm_norm_sum", {})
    return {"lean": found.get("intercepted", 0), "dgl": found.get("fallback", 0)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("graph_name", ["skewed", "self-loops", "no-edges", "block", "bipartite"])
@pytest.mark.parametrize("name", FUSED_NORMS)
def test_graph_conv_fused_norms_match_dgl(name, graph_name, dtype, device, graphs, monkeypatch):
    """GraphConv's norms folded into its aggregation (modules.fused), forward and backward, on
    every device: the CPU runs DGL's order unless told otherwise."""
    monkeypatch.setattr(fused, "FUSED_DEVICES", ("cpu", "cuda"))
    make, _ = CASES[name]
    g = graphs[graph_name].to(device)
    torch.manual_seed(1)
    module = make().to(device, dtype)
    feat, _ = features(g, in_width(module), dtype, device, seed=sum(map(ord, name + graph_name)))
    lean_only(check_against_dgl(module, g, feat, None, dtype), "GraphConv")
    calls = norm_sum_calls()
    # One call forward and one backward on the reverse graph (norm 'left': the backward is a plain sum).
    assert calls == {"lean": 1 if "left" in name else 2, "dgl": 0}, dgl_ugraph.stats()["patterns"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("graph_name", ["skewed", "self-loops", "no-edges", "block", "bipartite"])
@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("GATConv")])
def test_gat_scores_by_matmul_match_dgl(name, graph_name, dtype, device, graphs, monkeypatch):
    """GATConv's endpoint scores as one matmul by the block-diagonal attention vectors
    (attention.endpoint_scores), forward and backward, on every device: the CPU keeps DGL's
    products unless told otherwise."""
    monkeypatch.setattr(attention, "SCORE_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(attention, "MATMUL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(attention, "MATMUL_MIN_ELEMENTS_TRAINING", 0)
    calls = []
    monkeypatch.setattr(attention, "_block_diagonal", lambda v, own=attention._block_diagonal: calls.append(1) or own(v))
    modules, module = check_case(name, graphs[graph_name], graph_name, dtype, device)
    lean_only(modules, "GATConv")
    assert calls or module._num_heads == 1, "the scores did not run as a matmul"


@pytest.mark.parametrize("precision", ["highest", "high"])
def test_gat_scores_keep_dgl_products_where_matmuls_round(precision, monkeypatch):
    """A float32 matmul allowed to round its inputs (TF32) would blur the scores: there DGL's
    products run; float64 takes the matmul whatever the setting."""
    monkeypatch.setattr(attention, "SCORE_DEVICES", ("cpu",))
    monkeypatch.setattr(attention, "MATMUL_MIN_ELEMENTS", 0)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        x = torch.randn(7, 3, 4)
        a, b = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
        assert attention._scores_by_matmul(x) == (precision == "highest")
        assert attention._scores_by_matmul(x.double())
        assert not attention._scores_by_matmul(x.half())
        assert not attention._scores_by_matmul(x[:, :1])  # one head: a matrix-vector product
        el, er = attention.endpoint_scores(x.double(), x.double(), a.double(), b.double())
        torch.testing.assert_close(el, (x.double() * a.double()).sum(-1, keepdim=True), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(er, (x.double() * b.double()).sum(-1, keepdim=True), rtol=1e-12, atol=1e-12)
    finally:
        torch.set_float32_matmul_precision(before)


def test_gat_scores_by_matmul_only_past_their_size(monkeypatch):
    """Small layers keep DGL's products (the matmul's host cost outweighs its saving), and the
    size that pays is larger where the backward runs."""
    monkeypatch.setattr(attention, "SCORE_DEVICES", ("cpu",))
    monkeypatch.setattr(attention, "MATMUL_MIN_ELEMENTS", 64)
    monkeypatch.setattr(attention, "MATMUL_MIN_ELEMENTS_TRAINING", 128)
    small, mid = torch.randn(7, 2, 4), torch.randn(12, 2, 4)
    assert not attention._scores_by_matmul(small) and attention._scores_by_matmul(mid)
    assert not attention._scores_by_matmul(mid.requires_grad_())
    with torch.no_grad():
        assert attention._scores_by_matmul(mid)
    assert attention._scores_by_matmul(torch.randn(16, 2, 4, requires_grad=True))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", [n for n in CASES if "dropout" in n] + ["GraphConv-both-narrowing", "SAGEConv-pool"])
def test_inference_matches_dgl(name, device, graphs):
    """Eval mode without gradients (dropout off), as a model's inference runs."""
    make, weighted = CASES[name]
    g = graphs["skewed"].to(device)
    module = make().to(device, torch.float64)
    feat, weights = features(g, in_width(module), torch.float64, device, seed=11)
    lean_only(check_against_dgl(module, g, feat, weights if weighted else None, torch.float64, train=False),
              module_class(name))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", [GATConv, GATv2Conv, DotGatConv])
def test_attention_is_returned_as_dgl(cls, device, graphs):
    g = graphs["skewed"].to(device)
    dropout = {} if cls is DotGatConv else dict(attn_drop=0.2)
    module = cls(6, 4, 4, **dropout, **ZERO_OK).to(device, torch.float64)
    feat, weights = features(g, 6, torch.float64, device, seed=12)
    weights = weights if cls is GATConv else None
    lean_only(check_against_dgl(module, g, feat, weights, torch.float64, get_attention=True), cls.__name__)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("graph_name", ["skewed", "no-edges", "block", "bipartite"])
@pytest.mark.parametrize("norm", ["both", "left", "right", "none"])
def test_edge_weight_norm_matches_dgl(norm, graph_name, device, graphs):
    """EdgeWeightNorm, whose edge function DGL runs in Python, with its gradient into the weights."""
    g = graphs[graph_name].to(device)
    module = EdgeWeightNorm(norm, eps=0.1 if norm == "right" else 0.0)
    _, weights = features(g, 1, torch.float64, device, seed=len(norm) + len(graph_name))

    def normalized():
        weights.grad = None
        out = module(g, weights)
        (out * torch.arange(out.numel(), dtype=out.dtype, device=device)).sum().backward()
        return [out.detach(), weights.grad.clone()]
    with dgl_ugraph.disabled():
        ref = normalized()
    dgl_ugraph.reset_stats()
    got = normalized()
    for what, o, r in zip(("output", "gradient"), got, ref):
        assert_close(o, r, what, TOL[torch.float64])
    lean_only(dgl_ugraph.stats()["modules"], "EdgeWeightNorm")


@pytest.mark.parametrize("device", DEVICES)
def test_edge_weight_norm_errors_as_dgl(device, graphs):
    g = graphs["skewed"].to(device)
    for norm, weights in (("both", -torch.rand(g.num_edges(), device=device)),
                          ("right", torch.rand(g.num_edges(), 2, device=device))):
        with dgl_ugraph.disabled(), pytest.raises(DGLError) as dgl_error:
            EdgeWeightNorm(norm)(g, weights)
        with pytest.raises(DGLError) as ours:
            EdgeWeightNorm(norm)(g, weights)
        assert str(ours.value) == str(dgl_error.value)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_in_degree_error_exactly_as_dgl(device, graphs):
    g = graphs["skewed"].to(device)
    module = GraphConv(6, 5).to(device)
    x = torch.randn(g.num_nodes(), 6, device=device)
    with dgl_ugraph.disabled(), pytest.raises(DGLError) as dgl_error:
        module(g, x)
    dgl_ugraph.reset_stats()
    with pytest.raises(DGLError) as ours:
        module(g, x)
    assert str(ours.value) == str(dgl_error.value)
    assert dgl_ugraph.stats()["modules"]["GraphConv"]["lean"] == 1
    assert re.search(r"GraphConv\.forward +lean path +1 ", dgl_ugraph.report())
    loops = graphs["self-loops"].to(device)
    x, _ = features(loops, 6, torch.float64, device, seed=4)
    lean_only(check_against_dgl(module.double(), loops, x, None, torch.float64), "GraphConv")


@pytest.mark.parametrize("device", DEVICES)
def test_external_weight_and_its_error(device, graphs):
    g = graphs["self-loops"].to(device)
    module = GraphConv(6, 5, weight=False).to(device, torch.float64)
    x, _ = features(g, 6, torch.float64, device, seed=5)
    w = torch.randn(6, 5, dtype=torch.float64, device=device, requires_grad=True)
    lean_only(check_against_dgl(module, g, x, None, torch.float64, weight=w), "GraphConv")
    assert w.grad is not None
    owned = GraphConv(6, 5).to(device, torch.float64)
    with pytest.raises(DGLError, match="External weight is provided"):
        owned(g, x, weight=w)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fold", [False, True], ids=["dgl-order", "fused-norms"])
def test_second_order_gradients(fold, device, graphs, monkeypatch):
    """A gradient penalty: autograd records the backward (create_graph), through DGL's autograd
    functions on the lean path as on DGL's forward (GraphConv's fused norms: DGL's differentiable
    reverse sum inside its backward)."""
    if fold:
        monkeypatch.setattr(fused, "FUSED_DEVICES", ("cpu", "cuda"))
    g = graphs["skewed"].to(device)
    for module in (GraphConv(6, 5, **ZERO_OK), SAGEConv(6, 5, "gcn"), GINConv(_mlp(6, 5), "mean"),
                   GATConv(6, 3, 2, **ZERO_OK), GATv2Conv(6, 3, 2, **ZERO_OK), DotGatConv(6, 3, 2, **ZERO_OK)):
        module = module.to(device, torch.float64)
        state = copy.deepcopy(module.state_dict())

        def penalty():
            module.load_state_dict(state)
            module.zero_grad(set_to_none=True)
            x = torch.randn(g.num_nodes(), 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) \
                .to(device).requires_grad_()
            (gx,) = torch.autograd.grad((module(g, x) ** 2).sum(), x, create_graph=True)
            (gx ** 2).sum().backward()
            return {k: p.grad.clone() for k, p in module.named_parameters()}
        with dgl_ugraph.disabled():
            ref = penalty()
        dgl_ugraph.reset_stats()
        got = penalty()
        lean_only(dgl_ugraph.stats()["modules"], type(module).__name__)
        for k in ref:
            assert_close(got[k], ref[k], f"{type(module).__name__} second-order gradient of {k}", 1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_attributes_changed_after_the_first_call(device, graphs):
    g = graphs["skewed"].to(device)
    x, w = features(g, 6, torch.float64, device, seed=7)
    conv = GraphConv(6, 5, **ZERO_OK).to(device, torch.float64)
    check_against_dgl(conv, g, x, None, torch.float64)
    conv._norm = "right"
    lean_only(check_against_dgl(conv, g, x, w, torch.float64), "GraphConv")
    conv.set_allow_zero_in_degree(False)
    with pytest.raises(DGLError, match="0-in-degree"):
        conv(g, x)
    gin = GINConv(_mlp(6, 5), "sum").to(device, torch.float64)
    check_against_dgl(gin, g, x, None, torch.float64)
    gin._aggregator_type = "max"
    lean_only(check_against_dgl(gin, g, x, None, torch.float64), "GINConv")
    gin._aggregator_type = "prod"  # DGL's own forward, and its own error
    with pytest.raises(AttributeError):
        gin(g, x)
    assert "aggregator_type='prod'" in str(dgl_ugraph.stats()["modules"]["GINConv"]["reasons"])


@pytest.mark.parametrize("device", DEVICES)
def test_what_runs_dgls_forward_and_why(device, graphs):
    """A subclass's own forward, the lstm aggregator, features of the wrong rows (DGL's own error)
    and integer features run DGL's forward, with the reason in stats()."""
    g = graphs["self-loops"].to(device)
    x, _ = features(g, 6, torch.float64, device, seed=9)

    class Doubled(GraphConv):
        def forward(self, graph, feat):
            return super().forward(graph, feat) * 2

    reasons = check_against_dgl(Doubled(6, 5).to(device, torch.float64), g, x, None, torch.float64)
    assert reasons["GraphConv"]["lean"] == 0 and "Doubled overrides forward" in reasons["GraphConv"]["reasons"]
    reasons = check_against_dgl(SAGEConv(6, 5, "lstm").to(device, torch.float64), g, x, None, torch.float64)
    assert any("lstm" in r for r in reasons["SAGEConv"]["reasons"]), reasons
    with pytest.raises(DGLError):
        SAGEConv(6, 5, "mean").to(device)(g, torch.randn(g.num_nodes() + 1, 6, device=device))
    reasons = dgl_ugraph.stats()["modules"]
    assert "features whose rows are not the graph's nodes" in reasons["SAGEConv"]["reasons"], reasons
    with pytest.raises(Exception) as dgl_error, dgl_ugraph.disabled():
        GINConv(None, "sum")(g, torch.ones(g.num_nodes(), 6, dtype=torch.int64, device=device))
    dgl_ugraph.reset_stats()
    with pytest.raises(type(dgl_error.value)):
        GINConv(None, "sum")(g, torch.ones(g.num_nodes(), 6, dtype=torch.int64, device=device))
    assert any("int64" in r for r in dgl_ugraph.stats()["modules"]["GINConv"]["reasons"])


@pytest.mark.skipif("cuda" not in DEVICES, reason="autocast of the kernels' operands is CUDA's")
def test_autocast_runs_dgls_forward(graphs):
    g = graphs["self-loops"].to("cuda")
    module = GraphConv(6, 5).cuda()
    x = torch.randn(g.num_nodes(), 6, device="cuda")
    with torch.autocast("cuda"):
        ours = module(g, x)
        with dgl_ugraph.disabled():
            ref = module(g, x)
    assert ours.dtype == ref.dtype and torch.equal(ours, ref)
    assert any("autocast" in r for r in dgl_ugraph.stats()["modules"]["GraphConv"]["reasons"])


def test_disable_gives_dgl_its_forwards_back():
    from dgl.nn.pytorch import conv
    lean = {cls: cls.forward for cls in (conv.GraphConv, conv.SAGEConv, conv.GINConv, conv.GATConv, conv.GATv2Conv,
                                         conv.DotGatConv, conv.EdgeWeightNorm)}
    assert all(forward.__module__ == "dgl_ugraph.dgl.modules" for forward in lean.values())
    assert all(inspect.signature(forward) == inspect.signature(forward.__wrapped__) for forward in lean.values())
    dgl_ugraph.disable()
    try:
        for cls, forward in lean.items():
            assert cls.forward is forward.__wrapped__ and cls.forward.__module__.startswith("dgl.nn.pytorch.conv")
    finally:
        dgl_ugraph.enable()
    assert all(cls.forward.__wrapped__ is forward.__wrapped__ for cls, forward in lean.items())
    assert all(cls.forward.__module__ == "dgl_ugraph.dgl.modules" for cls in lean)


def test_modules_off_by_setting(monkeypatch, graphs):
    """DGL_UGRAPH_MODULES=0: DGL's forwards, on the plugin's kernels."""
    from dgl.nn.pytorch import conv
    dgl_ugraph.disable()
    monkeypatch.setenv("DGL_UGRAPH_MODULES", "0")
    dgl_ugraph.enable()
    assert conv.GraphConv.forward.__module__.startswith("dgl.nn.pytorch.conv")
    g = graphs["self-loops"]
    GraphConv(6, 5)(g, torch.randn(g.num_nodes(), 6))
    stats = dgl_ugraph.stats()
    assert stats["modules"] == {} and stats["intercepted"] > 0
    dgl_ugraph.disable()
    monkeypatch.delenv("DGL_UGRAPH_MODULES")
    dgl_ugraph.enable()
    assert conv.GraphConv.forward.__module__ == "dgl_ugraph.dgl.modules"


def test_per_graph_facts_are_cached_once(graphs):
    g = graphs["self-loops"]
    module = GraphConv(6, 5).double()
    x = torch.randn(g.num_nodes(), 6, dtype=torch.float64)
    module(g, x)
    entry = cache.seen(g._graph)
    norms = {k: v for k, v in entry.divisors.items() if k[0] == "graph_conv_norm"}
    assert len(norms) == 2
    module(g, x)
    assert all(entry.divisors[k] is v for k, v in norms.items())
