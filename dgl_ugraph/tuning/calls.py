"""What the collector times: the kernel calls that DGL's GCN, GIN, SAGE and GAT layers issue,
forward and backward (DGL_CALLS), as cases of a graph suite at feature widths and dtypes, and the
operands that stand for them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from dgl_ugraph.core.abstraction import DTYPE_NAMES, OpInfo
from dgl_ugraph.selection import predictor
from dgl_ugraph.tuning import graph_suite as gs

WIDTHS: Tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
GAT_HEADS = 4  # heads of GAT's layer-width calls: ft is (N, 4, F/4)
ATTENTION_HEADS: Tuple[int, ...] = (1, 4, 8)  # GAT's per-head calls (scores, edge softmax) at these head counts
# By torch name ("float32"), as the shards write them.
DTYPES = {str(d).replace("torch.", ""): d for d in DTYPE_NAMES}
IDTYPES = {"int32": torch.int32, "int64": torch.int64}


# ---- what DGL issues ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    """One distinct kernel call: on the graph G or its reverse, with operand (type, shape) where
    shapes are written F (layer width), H (heads) and D = F / H. `per_width` calls are collected
    at every F of WIDTHS (with H = GAT_HEADS); the others at every H of ATTENTION_HEADS."""

    graph: str  # "G" | "rev"
    edge_op: str
    gather_op: str
    a: Optional[Tuple[str, str]]
    b: Optional[Tuple[str, str]]
    per_width: bool


CALLS: Dict[str, Call] = {
    "copy_u_sum": Call("G", "copy_lhs", "sum", ("src", "F"), None, True),
    "copy_u_sum_rev": Call("rev", "copy_lhs", "sum", ("src", "F"), None, True),
    "u_mul_w_sum": Call("G", "mul", "sum", ("src", "F"), ("edge", "1"), True),
    "u_mul_w_sum_rev": Call("rev", "mul", "sum", ("src", "F"), ("edge", "1"), True),
    "copy_u_max": Call("G", "copy_lhs", "max", ("src", "F"), None, True),
    "gat_u_mul_e_sum": Call("G", "mul", "sum", ("src", "H,D"), ("edge", "H,1"), True),
    "gat_u_mul_e_sum_rev": Call("rev", "mul", "sum", ("src", "H,D"), ("edge", "H,1"), True),
    "gat_u_dot_v": Call("G", "dot", "none", ("src", "H,D"), ("dst", "H,D"), True),
    "gat_u_add_v": Call("G", "add", "none", ("src", "H,1"), ("dst", "H,1"), False),
    "gat_copy_e_max": Call("G", "copy_rhs", "max", None, ("edge", "H,1"), False),
    "gat_e_sub_v": Call("G", "sub", "none", ("edge", "H,1"), ("dst", "H,1"), False),
    "gat_copy_e_sum": Call("G", "copy_rhs", "sum", None, ("edge", "H,1"), False),
    "gat_e_div_v": Call("G", "div", "none", ("edge", "H,1"), ("dst", "H,1"), False),
    "gat_e_mul_v": Call("G", "mul", "none", ("edge", "H,1"), ("dst", "H,1"), False),
    "gat_copy_e_sum_rev": Call("rev", "copy_rhs", "sum", None, ("edge", "H,1"), False),
    "u_dot_v": Call("G", "dot", "none", ("src", "F"), ("dst", "F"), True),
    "u_add_v_hd": Call("G", "add", "none", ("src", "H,D"), ("dst", "H,D"), True),
    "u_mul_v_hd": Call("G", "mul", "none", ("src", "H,D"), ("dst", "H,D"), True),
}

# (model, pass, call, how DGL 2.1 issues it): read from dgl/nn/pytorch/conv/{graphconv,ginconv,
# sageconv,gatconv}.py, dgl/ops/edge_softmax.py and dgl/backend/pytorch/sparse.py. GCN is
# GraphConv (norm 'both'; gcn_ew: with a scalar edge_weight, as after EdgeWeightNorm); GIN is
# GINConv's default 'sum' (its 'max' issues SAGE-pool's calls); SAGE 'mean' runs a sum in _gspmm
# and divides in torch. A backward of max/min issues no kernel: GSpMM.backward scatters the
# gradient with torch's scatter_add_ at argX (NO_KERNEL).
DGL_CALLS: Tuple[Tuple[str, str, str, str], ...] = (
    ("gcn", "fwd", "copy_u_sum", "update_all(copy_u, sum): _gspmm(G, copy_lhs, sum, X[N,F], None)"),
    ("gcn", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("gcn_ew", "fwd", "u_mul_w_sum", "update_all(u_mul_e, sum), edge_weight (E,) padded to (E,1): _gspmm(G, mul, sum, X[N,F], W[E,1])"),
    ("gcn_ew", "bwd", "u_mul_w_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), mul, sum, dZ[N,F], W[E,1]) (W needs no grad)"),
    ("gin", "fwd", "copy_u_sum", "update_all(copy_u, sum): _gspmm(G, copy_lhs, sum, X[N,F], None)"),
    ("gin", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("sage_mean", "fwd", "copy_u_sum", "update_all(copy_u, mean): _gspmm(G, copy_lhs, sum, X[N,F], None), / in_degrees in torch"),
    ("sage_mean", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("sage_gcn", "fwd", "copy_u_sum", "update_all(copy_u, sum): _gspmm(G, copy_lhs, sum, X[N,F], None)"),
    ("sage_gcn", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("sage_pool", "fwd", "copy_u_max", "update_all(copy_u, max): _gspmm(G, copy_lhs, max, relu(fc_pool(X))[N,F], None)"),
    ("gin_max", "fwd", "copy_u_max", "update_all(copy_u, max): _gspmm(G, copy_lhs, max, X[N,F], None)"),
    ("gat", "fwd", "gat_u_add_v", "apply_edges(u_add_v): _gsddmm(G, add, el[N,H,1], er[N,H,1], u, v)"),
    ("gat", "fwd", "gat_copy_e_max", "EdgeSoftmax.forward: _gspmm(G, copy_rhs, max, None, e[E,H,1])"),
    ("gat", "fwd", "gat_e_sub_v", "EdgeSoftmax.forward: _gsddmm(G, sub, e[E,H,1], max[N,H,1], e, v)"),
    ("gat", "fwd", "gat_copy_e_sum", "EdgeSoftmax.forward: _gspmm(G, copy_rhs, sum, None, exp[E,H,1])"),
    ("gat", "fwd", "gat_e_div_v", "EdgeSoftmax.forward: _gsddmm(G, div, exp[E,H,1], sum[N,H,1], e, v)"),
    ("gat", "fwd", "gat_u_mul_e_sum", "update_all(u_mul_e, sum): _gspmm(G, mul, sum, ft[N,H,D], a[E,H,1])"),
    ("gat", "bwd", "gat_u_mul_e_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), mul, sum, dZ[N,H,D], a[E,H,1])"),
    ("gat", "bwd", "gat_u_dot_v", "GSpMM.backward dY (reduce_last): gsddmm(G, dot, ft[N,H,D], dZ[N,H,D], u, v)"),
    ("gat", "bwd", "gat_copy_e_sum", "EdgeSoftmax.backward: gspmm(G, copy_rhs, sum, None, out*grad[E,H,1])"),
    ("gat", "bwd", "gat_e_mul_v", "EdgeSoftmax.backward: gsddmm(G, mul, out[E,H,1], accum[N,H,1], e, v)"),
    ("gat", "bwd", "gat_copy_e_sum_rev", "GSDDMM.backward (add) dX, lhs u: gspmm(G.reverse(), copy_rhs, sum, None, dZ[E,H,1])"),
    ("gat", "bwd", "gat_copy_e_sum", "GSDDMM.backward (add) dY, rhs v: gspmm(G, copy_rhs, sum, None, dZ[E,H,1])"),
    # Not a layer of dgl.nn, but builtins users write themselves: edge scores of link prediction,
    # and per-edge features from both endpoints (as EdgeConv or edge-feature GNNs build them).
    ("link_pred", "fwd", "u_dot_v", "apply_edges(u_dot_v): _gsddmm(G, dot, h[N,F], h[N,F], u, v)"),
    ("edge_feat", "fwd", "u_add_v_hd", "apply_edges(u_add_v): _gsddmm(G, add, x[N,H,D], y[N,H,D], u, v)"),
    ("edge_feat", "fwd", "u_mul_v_hd", "apply_edges(u_mul_v): _gsddmm(G, mul, x[N,H,D], y[N,H,D], u, v)"),
)
NO_KERNEL: Tuple[Tuple[str, str, str], ...] = (
    ("sage_pool", "bwd", "GSpMM.backward for max: dX.scatter_add_(0, argX, dZ) in torch"),
    ("gin_max", "bwd", "GSpMM.backward for max: dX.scatter_add_(0, argX, dZ) in torch"),
)


def call_users(call: str) -> str:
    return ";".join(sorted({f"{m}.{p}" for m, p, c, _ in DGL_CALLS if c == call}))


def operand_shape(template: str, width: int, heads: int) -> Tuple[int, ...]:
    dims = {"F": width, "1": 1, "H": heads, "D": max(1, width // heads)}
    return tuple(dims[d] for d in template.split(","))


# ---- cases -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GraphSource:
    """A graph of the suite: a graph_suite spec or a dataset file, with its split and the
    (dtype, idtype) variants collected on it."""

    name: str
    family: str  # degree | molecules | standin | dataset
    split: str  # train | holdout
    num_edges: int
    spec: Optional[gs.GraphSpec] = None
    path: Optional[str] = None
    variants: Tuple[Tuple[str, str], ...] = (("float32", "int32"),)


@dataclass(frozen=True)
class CaseSpec:
    graph: str
    call: str
    width: int  # F for per-width calls, H for per-head calls
    dtype: str
    idtype: str

    @property
    def key(self) -> str:
        return f"{self.graph}|{self.call}|{self.width}|{self.dtype}|{self.idtype}"

    @property
    def heads(self) -> int:
        """H of the operand shapes: the width itself for per-head calls, GAT_HEADS for GAT's
        layer-width calls, 1 where no operand has heads."""
        call = CALLS[self.call]
        if not call.per_width:
            return self.width
        return GAT_HEADS if any(o is not None and "H" in o[1] for o in (call.a, call.b)) else 1


def graph_cases(src: GraphSource, widths: Sequence[int] = WIDTHS,
                heads: Sequence[int] = ATTENTION_HEADS, calls: Sequence[str] = tuple(CALLS)) -> List[CaseSpec]:
    """A graph's cases in collection order: variant by variant (fp32 first), narrow before wide."""
    out = []
    for dtype, idtype in src.variants:
        for h in heads:
            out += [CaseSpec(src.name, c, h, dtype, idtype) for c in calls if not CALLS[c].per_width]
        for f in widths:
            out += [CaseSpec(src.name, c, f, dtype, idtype) for c in calls if CALLS[c].per_width]
    return out


def sample_cases(cases: Sequence[CaseSpec], n: int) -> List[CaseSpec]:
    """At most n of a graph's cases (all when n <= 0), spread over its calls: each call's cases
    ranked by a stable hash of their key and taken round-robin across calls, then kept in
    collection order. Deterministic, so a resumed run picks the same ones. A collection that caps
    each graph reaches more graphs in the same time, and the model generalizes across graphs."""
    if n <= 0 or len(cases) <= n:
        return list(cases)
    by_call: Dict[str, List[CaseSpec]] = {}
    for c in cases:
        by_call.setdefault(c.call, []).append(c)
    queues = [sorted(by_call[k], key=lambda c: stable_hash("sample:" + c.key)) for k in sorted(by_call)]
    chosen: set = set()
    for i in range(max(len(q) for q in queues)):
        for q in queues:
            if i < len(q) and len(chosen) < n:
                chosen.add(q[i].key)
    return [c for c in cases if c.key in chosen]


def stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def is_audit(key: str, every: int) -> bool:
    return every > 0 and stable_hash("audit:" + key) % every == 0


def load_source(src: GraphSource) -> Tuple[np.ndarray, np.ndarray, int]:
    """(src, dst, num_nodes) as int32 numpy arrays; runs in a helper process in real runs."""
    if src.path is not None:
        with np.load(src.path) as z:
            return z["src"].astype(np.int32), z["dst"].astype(np.int32), int(z["num_nodes"])
    s, d, n = gs.make(src.spec)
    return s.numpy().astype(np.int32), d.numpy().astype(np.int32), n


def make_op(backend, graph, call: Call, width: int, heads: int, dtype: str) -> OpInfo:
    def operand(spec):
        if spec is None:
            return None, "null"
        ttype, template = spec
        return backend.operand(graph, graph.rows(ttype), operand_shape(template, width, heads), dtype), ttype

    a, at = operand(call.a)
    b, bt = operand(call.b)
    return OpInfo(call.edge_op, call.gather_op, a, at, b, bt, "edge" if call.gather_op == "none" else "dst")


def beyond_tilings(strategy: str, width: int) -> List[int]:
    """The next grid tiling past max_tiling, timed on audited cases to show it never pays."""
    limit = predictor.max_tiling(strategy, width)
    return [t for t in predictor.GRID_TILINGS if t > limit][:1]
