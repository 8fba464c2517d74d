"""Parity across DGL's own graph convolutions (benchmarks/models/convs.py's table: every dgl.nn.pytorch.conv
module whose forward issues builtin message passing, in the configurations that take different
operators). One forward and backward from a fixed state with dgl_ugraph on and off: the outputs,
every parameter's gradient and the inputs' gradients are equal, and every gspmm/gsddmm call of the
step ran on dgl_ugraph. tests/gpu/test_dgl_gpu.py runs the same table on CUDA."""
from __future__ import annotations

import copy
import os
import re
import sys

import dgl
import dgl.nn
import pytest
import torch
from dgl import DGLError

import dgl_ugraph
from test_dgl_models import assert_equal_up_to_order

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks", "models"))
import convs  # noqa: E402  (benchmarks/models/convs.py)

pytestmark = pytest.mark.usefixtures("plugin_on")

CONVS = convs.table()
RTOL = {torch.float32: 1e-4, torch.float64: 1e-9}


def check_conv(name: str, g: dgl.DGLGraph, dtype: torch.dtype, rtol: float, seed: int = 0) -> dict:
    """Runs the table's `name` on g with dgl_ugraph off, then on; asserts parity and full
    interception and returns the stats of the step with dgl_ugraph on. Where DGL's own module
    raises (some build float32 degree norms whatever their dtype), dgl_ugraph must raise the same."""
    make, call = CONVS[name]
    g = convs.graph_for(name, g)
    torch.manual_seed(seed)
    module = make().to(g.device, dtype)
    state = copy.deepcopy(module.state_dict())
    inputs = convs.Inputs(g, dtype, seed)
    try:
        with dgl_ugraph.disabled():
            ref_outs, ref_grads = convs.step_results(module, state, inputs, call, seed)
    except DGLError as exc:
        with pytest.raises(DGLError, match=re.escape(str(exc))):
            convs.step_results(module, state, inputs, call, seed)
        pytest.skip(f"DGL's own {name} fails in {dtype}: {exc}")
    dgl_ugraph.reset_stats()
    outs, grads = convs.step_results(module, state, inputs, call, seed)
    stats = dgl_ugraph.stats()
    assert len(outs) == len(ref_outs)
    for k, (o, r) in enumerate(zip(outs, ref_outs)):
        assert_equal_up_to_order(o, r, f"{name} output {k}", rtol=rtol)
    assert grads.keys() == ref_grads.keys()
    floor = max(r.abs().max().item() for r in ref_grads.values()) * rtol
    for what in grads:
        assert_equal_up_to_order(grads[what], ref_grads[what], f"{name} gradient of {what}", floor, rtol)
    assert stats["calls"] > 0, f"{name} made no gspmm/gsddmm call"
    assert stats["fallback"] == 0 and stats["intercepted"] == stats["calls"], stats["patterns"]
    return stats


def conv_graph(nodes: int, edges: int, seed: int = 3) -> dgl.DGLGraph:
    """Skewed in-degrees (a hub row), multi-edges, self-loops and nodes without in-edges."""
    gen = torch.Generator().manual_seed(seed)
    popularity = 1.0 / torch.arange(1, nodes + 1, dtype=torch.float64) ** 1.1
    dst = torch.multinomial(popularity, edges, replacement=True, generator=gen)
    src = torch.randint(0, nodes, (edges,), generator=gen)
    return dgl.graph((src, dst), num_nodes=nodes)


@pytest.fixture(scope="module")
def graph():
    g = conv_graph(300, 3000)
    assert (g.in_degrees() == 0).any() and g.in_degrees().max() > 100
    return g


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(CONVS))
def test_conv_parity_and_full_interception(name, dtype, graph):
    check_conv(name, graph, dtype, RTOL[dtype])


def hetero_graph(device="cpu", seed: int = 0) -> dgl.DGLGraph:
    """Two node types, three relations (one within a type, two between), nodes without in-edges."""
    gen = torch.Generator().manual_seed(seed)

    def rel(n_src, n_dst, e):
        return torch.randint(0, n_src, (e,), generator=gen), torch.randint(0, n_dst, (e,), generator=gen)
    return dgl.heterograph({("user", "follows", "user"): rel(50, 50, 300), ("user", "plays", "game"): rel(50, 20, 200),
                            ("game", "played_by", "user"): rel(20, 50, 200)},
                           num_nodes_dict={"user": 50, "game": 20}).to(device)


def hetero_conv(aggregate: str) -> torch.nn.Module:
    """A conv per relation: GraphConv, SAGEConv's pool (a max) and GraphConv normalized by
    in-degree."""
    return dgl.nn.HeteroGraphConv({
        "follows": dgl.nn.GraphConv(6, 5, allow_zero_in_degree=True),
        "plays": dgl.nn.SAGEConv(6, 5, "pool"),
        "played_by": dgl.nn.GraphConv(6, 5, norm="right", allow_zero_in_degree=True)}, aggregate=aggregate)


def check_hetero(aggregate: str, g: dgl.DGLGraph, dtype: torch.dtype, rtol: float) -> dict:
    """HeteroGraphConv (RGCN-style: a conv per relation, their results aggregated per node type)
    with dgl_ugraph on and off: outputs and every gradient equal, every call on dgl_ugraph (each
    relation is a unit graph); returns the stats of the step with dgl_ugraph on."""
    torch.manual_seed(0)
    module = hetero_conv(aggregate).to(g.device, dtype)
    gen = torch.Generator().manual_seed(1)
    x = {nt: torch.randn(g.num_nodes(nt), 6, generator=gen, dtype=torch.float64).to(g.device, dtype).requires_grad_()
         for nt in g.ntypes}

    def step():
        module.zero_grad()
        for t in x.values():
            t.grad = None
        out = module(g, x)
        sum(v.sum() * (k + 1) for k, v in enumerate(out.values())).backward()
        grads = {f"parameter {k}": p.grad.clone() for k, p in module.named_parameters()}
        grads.update({f"input {k}": t.grad.clone() for k, t in x.items()})
        return {k: v.detach() for k, v in out.items()}, grads

    dgl_ugraph.reset_stats()
    outs, grads = step()
    stats = dgl_ugraph.stats()
    with dgl_ugraph.disabled():
        ref_outs, ref_grads = step()
    for got, want in ((outs, ref_outs), (grads, ref_grads)):
        assert got.keys() == want.keys()
        for k in want:
            assert_equal_up_to_order(got[k], want[k], f"HeteroGraphConv ({aggregate}) {k}", rtol=rtol)
    assert stats["calls"] > 0 and stats["fallback"] == 0 and stats["intercepted"] == stats["calls"], stats["patterns"]
    return stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("aggregate", ["sum", "max", "mean", "stack"])
def test_hetero_graph_conv_parity_and_full_interception(aggregate, dtype):
    check_hetero(aggregate, hetero_graph(), dtype, RTOL[dtype])
