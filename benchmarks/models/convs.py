"""DGL's own graph convolutions (dgl.nn.pytorch.conv) in the configurations that issue different
message-passing operators (aggregators, norms, edge weights, heads), each with the inputs its
forward takes: a table for parity tests and benchmarks, plain DGL.

Modules left out, and why: AtomicConv, DGNConv and PNAConv run Python message or mailbox functions
and SAGEConv's lstm aggregator an LSTM (no builtin message passing); the Dense* convolutions
multiply dense adjacency matrices; the CuGraph* ones need pylibcugraphops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import dgl
import torch
from dgl.nn.pytorch import conv


@dataclass(frozen=True)
class Dims:
    """Feature widths: node features in and out, edge features, attention heads, relation types,
    a hidden width; `nnconv` bounds NNConv's in and out, whose edge network writes in x out values
    an edge."""
    feat: int = 6
    out: int = 5
    edge: int = 4
    heads: int = 3
    rels: int = 3
    hidden: int = 7
    nnconv: int = 6


def _mlp(i, o):
    return torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))


def table(d: Dims = Dims()) -> dict:
    """name: (a function making the module, a function of Inputs giving its forward's arguments).
    Inputs: g, x (N, feat), x0 (N, feat), x_out (N, out), e (E, edge), e_feat (E, feat), w (E,)
    positive weights, pseudo (E, 2), coord (N, 3), etype (E,), ntype (N,). Modules this DGL does
    not have (GatedGCNConv is new in DGL 2.0) are left out."""
    i_, o_, k_ = d.feat, d.out, min(d.feat, d.nnconv)
    no_zero = dict(allow_zero_in_degree=True)
    entries = {
        "AGNNConv": (lambda: conv.AGNNConv(**no_zero), lambda i: (i.g, i.x)),
        "APPNPConv": (lambda: conv.APPNPConv(k=3, alpha=0.1), lambda i: (i.g, i.x)),
        "APPNPConv-weighted": (lambda: conv.APPNPConv(k=2, alpha=0.2), lambda i: (i.g, i.x, i.w)),
        "CFConv": (lambda: conv.CFConv(i_, d.edge, d.hidden, o_), lambda i: (i.g, i.x, i.e)),
        "ChebConv": (lambda: conv.ChebConv(i_, o_, 3), lambda i: (i.g, i.x, [2.0])),
        "DotGatConv": (lambda: conv.DotGatConv(i_, o_, d.heads, **no_zero), lambda i: (i.g, i.x)),
        "EGATConv": (lambda: conv.EGATConv(i_, d.edge, o_, d.hidden, d.heads), lambda i: (i.g, i.x, i.e)),
        "EGNNConv": (lambda: conv.EGNNConv(i_, d.hidden, o_, d.edge), lambda i: (i.g, i.x, i.coord, i.e)),
        "EdgeConv": (lambda: conv.EdgeConv(i_, o_, **no_zero), lambda i: (i.g, i.x)),
        "EdgeGATConv": (lambda: conv.EdgeGATConv(i_, d.edge, o_, d.heads, **no_zero), lambda i: (i.g, i.x, i.e)),
        "EdgeWeightNorm-both": (lambda: conv.EdgeWeightNorm("both"), lambda i: (i.g, i.w)),
        "EdgeWeightNorm-right": (lambda: conv.EdgeWeightNorm("right"), lambda i: (i.g, i.w)),
        "GATConv": (lambda: conv.GATConv(i_, o_, d.heads, residual=True, **no_zero), lambda i: (i.g, i.x)),
        "GATConv-weighted": (lambda: conv.GATConv(i_, o_, d.heads, **no_zero), lambda i: (i.g, i.x, i.w)),
        "GATv2Conv": (lambda: conv.GATv2Conv(i_, o_, d.heads, **no_zero), lambda i: (i.g, i.x)),
        "GCN2Conv": (lambda: conv.GCN2Conv(i_, layer=2, **no_zero), lambda i: (i.g, i.x, i.x0)),
        "GCN2Conv-weighted": (lambda: conv.GCN2Conv(i_, layer=1, **no_zero), lambda i: (i.g, i.x, i.x0, i.w)),
        "GINConv-sum": (lambda: conv.GINConv(_mlp(i_, o_), "sum", learn_eps=True), lambda i: (i.g, i.x)),
        "GINConv-max": (lambda: conv.GINConv(_mlp(i_, o_), "max"), lambda i: (i.g, i.x)),
        "GINConv-mean-weighted": (lambda: conv.GINConv(_mlp(i_, o_), "mean"), lambda i: (i.g, i.x, i.w)),
        "GINEConv": (lambda: conv.GINEConv(_mlp(i_, o_), learn_eps=True), lambda i: (i.g, i.x, i.e_feat)),
        "GMMConv-sum": (lambda: conv.GMMConv(i_, o_, 2, 3, "sum", **no_zero), lambda i: (i.g, i.x, i.pseudo)),
        "GMMConv-mean": (lambda: conv.GMMConv(i_, o_, 2, 3, "mean", **no_zero), lambda i: (i.g, i.x, i.pseudo)),
        "GMMConv-max": (lambda: conv.GMMConv(i_, o_, 2, 3, "max", **no_zero), lambda i: (i.g, i.x, i.pseudo)),
        "GatedGCNConv": (lambda: conv.GatedGCNConv(i_, d.edge, i_), lambda i: (i.g, i.x, i.e)),
        "GatedGraphConv": (lambda: conv.GatedGraphConv(i_, i_ + 2, 2, d.rels), lambda i: (i.g, i.x, i.etype)),
        "GraphConv-both": (lambda: conv.GraphConv(i_, o_, "both", **no_zero), lambda i: (i.g, i.x)),
        "GraphConv-right-weighted": (lambda: conv.GraphConv(i_, o_, "right", **no_zero),
                                     lambda i: (i.g, i.x, None, i.w)),
        "GraphConv-left": (lambda: conv.GraphConv(o_, i_, "left", **no_zero), lambda i: (i.g, i.x_out)),
        "HGTConv": (lambda: conv.HGTConv(i_, max(1, i_ // d.heads), d.heads, 2, d.rels, dropout=0.0),
                    lambda i: (i.g, i.x, i.ntype, i.etype)),
        "NNConv-sum": (lambda: conv.NNConv(k_, k_, torch.nn.Linear(d.edge, k_ * k_), "sum"),
                       lambda i: (i.g, i.x[:, :k_], i.e)),
        "NNConv-mean": (lambda: conv.NNConv(k_, k_, torch.nn.Linear(d.edge, k_ * k_), "mean"),
                        lambda i: (i.g, i.x[:, :k_], i.e)),
        "NNConv-max": (lambda: conv.NNConv(k_, k_, torch.nn.Linear(d.edge, k_ * k_), "max"),
                       lambda i: (i.g, i.x[:, :k_], i.e)),
        "RelGraphConv-basis": (lambda: conv.RelGraphConv(i_, o_, d.rels, "basis", 2), lambda i: (i.g, i.x, i.etype)),
        "RelGraphConv-bdd": (lambda: conv.RelGraphConv(i_, i_, d.rels, "bdd", 2),
                             lambda i: (i.g, i.x, i.etype, i.w[:, None])),
        "SAGEConv-mean": (lambda: conv.SAGEConv(i_, o_, "mean"), lambda i: (i.g, i.x)),
        "SAGEConv-gcn-weighted": (lambda: conv.SAGEConv(i_, o_, "gcn"), lambda i: (i.g, i.x, i.w)),
        "SAGEConv-pool": (lambda: conv.SAGEConv(i_, o_, "pool"), lambda i: (i.g, i.x)),
        "SGConv": (lambda: conv.SGConv(i_, o_, k=2, **no_zero), lambda i: (i.g, i.x)),
        "TAGConv-weighted": (lambda: conv.TAGConv(i_, o_, k=2), lambda i: (i.g, i.x, i.w)),
        "TWIRLSConv": (lambda: conv.TWIRLSConv(i_, o_, d.hidden, prop_step=3, norm="none", attention=True),
                       lambda i: (i.g, i.x)),
    }
    return {name: entry for name, entry in entries.items() if hasattr(conv, name.split("-")[0])}


# The graph a module is given where it cannot take any graph: EGATConv refuses nodes without
# in-edges; EGNNConv's gradient through |x_u - x_v| is NaN on a self-loop (in DGL too).
GRAPH_FOR = {"EGATConv": dgl.add_self_loop, "EGNNConv": dgl.remove_self_loop}


def graph_for(name: str, g: dgl.DGLGraph) -> dgl.DGLGraph:
    return GRAPH_FOR.get(name, lambda h: h)(g)


class Inputs:
    """Fresh random inputs on g's device (never zeros), each floating-point one a leaf that records
    its gradient."""

    def __init__(self, g: dgl.DGLGraph, dtype: torch.dtype, seed: int, d: Dims = Dims()):
        gen = torch.Generator().manual_seed(seed)
        n, m = g.num_nodes(), g.num_edges()

        def leaf(*shape, positive=False):
            t = torch.rand(shape, generator=gen, dtype=torch.float64) + 0.1 if positive else \
                torch.randn(shape, generator=gen, dtype=torch.float64)
            return t.to(g.device, dtype).requires_grad_()

        self.g = g
        self.x, self.x0, self.x_out = leaf(n, d.feat), leaf(n, d.feat), leaf(n, d.out)
        self.e, self.e_feat = leaf(m, d.edge), leaf(m, d.feat)
        self.w, self.pseudo, self.coord = leaf(m, positive=True), leaf(m, 2, positive=True), leaf(n, 3)
        self.etype = torch.randint(0, d.rels, (m,), generator=gen).to(g.device)
        self.ntype = torch.randint(0, 2, (n,), generator=gen).to(g.device)

    def leaves(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, torch.Tensor) and v.requires_grad}


def outputs(module: torch.nn.Module, inputs: Inputs, call) -> list:
    """The module's forward on the inputs, as a list of its tensor outputs."""
    out = module(*call(inputs))
    return [t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, torch.Tensor)]


def projections(outs: list, seed: int) -> list:
    """A fixed random weight per output, so that a loss reaches every element's gradient."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.device, t.dtype) for t in outs]


def clear_grads(module: torch.nn.Module, inputs: Inputs) -> None:
    module.zero_grad(set_to_none=True)
    for t in inputs.leaves().values():
        t.grad = None


def train_step(module: torch.nn.Module, inputs: Inputs, call, weights: Optional[list] = None, seed: int = 0) -> list:
    """A forward in training mode and the backward of sum(output * weight), with the weights
    given or else projections(outputs, seed): its outputs."""
    module.train()
    outs = outputs(module, inputs, call)
    weights = projections(outs, seed) if weights is None else weights
    sum((t * w).sum() for t, w in zip(outs, weights)).backward()
    return outs


def step_results(module: torch.nn.Module, state: dict, inputs: Inputs, call, seed: int = 0):
    """A training step from `state` with projections(outputs, seed): (its outputs, every gradient
    by name, the parameters' then the inputs')."""
    module.load_state_dict(state)
    clear_grads(module, inputs)
    outs = train_step(module, inputs, call, seed=seed)
    grads = {f"parameter {k}": p.grad.detach().clone() for k, p in module.named_parameters() if p.grad is not None}
    grads.update({f"input {k}": t.grad.detach().clone() for k, t in inputs.leaves().items() if t.grad is not None})
    return [t.detach() for t in outs], grads
