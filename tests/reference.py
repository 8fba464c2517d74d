"""The oracle: uGrapher's abstraction written in plain torch, in float64.

It follows csrc/include/ugraph/params.h literally. Messages are formed in the precision the
kernels use (float32 for half types, the dtype otherwise) only for choosing max/min winners,
so winner positions are comparable; values are returned in float64.
"""
from __future__ import annotations

import math

import torch

from dgl_ugraph.core.abstraction import OpInfo, broadcast, uses_lhs, uses_rhs
from dgl_ugraph.core.graph import UGraph


def reduce_zero(gather_op: str, dtype: torch.dtype) -> float:
    big = 65504.0 if dtype == torch.float16 else float("inf")
    return -big if gather_op == "max" else big


def _index(graph: UGraph, ttype: str) -> torch.Tensor:
    if ttype == "src":
        return graph.col.long()
    if ttype == "dst":
        return graph.row.long()
    if graph.eid is None:
        return torch.arange(graph.num_edges, device=graph.col.device)
    return graph.eid.long()


def messages(graph: UGraph, op: OpInfo, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """msg[p] for every position p in CSC order, shape (E, *out_shape)."""
    a = op.A.reshape(op.A.shape[0], -1) if uses_lhs(op.edge_op) else None
    b = op.B.reshape(op.B.shape[0], -1) if uses_rhs(op.edge_op) else None
    bc = broadcast(op.edge_op, tuple(op.A.shape[1:]) if a is not None else None,
                   tuple(op.B.shape[1:]) if b is not None else None)
    k = bc.reduce_size

    def rows(t, ttype, off, length):
        x = t[_index(graph, ttype)].to(dtype).reshape(-1, length, k)
        if off is not None:
            x = x[:, torch.tensor(off, device=x.device)]
        return x

    if op.edge_op == "copy_lhs":
        msg = rows(a, op.A_type, None, bc.a_len)
    elif op.edge_op == "copy_rhs":
        msg = rows(b, op.B_type, None, bc.b_len)
    else:
        x = rows(a, op.A_type, bc.a_off, bc.a_len)
        y = rows(b, op.B_type, bc.b_off, bc.b_len)
        if op.edge_op == "dot":
            msg = (x * y).sum(-1, keepdim=True)
        else:
            msg = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op.edge_op](x, y)
    return msg.reshape((graph.num_edges,) + bc.out_shape)


def reference(graph: UGraph, op: OpInfo):
    """(C, argA, argB) in float64 / int64; args are None unless gather is max/min and the
    operand is used. Gather mean is the sum divided by each row's in-degree, at least 1."""
    feat_dtype = (op.A if uses_lhs(op.edge_op) else op.B).dtype
    msg = messages(graph, op)
    out_shape = msg.shape[1:]
    dev = msg.device
    if op.gather_op == "none":
        c = torch.empty((graph.num_edges,) + tuple(out_shape), dtype=torch.float64, device=dev)
        c[_index(graph, "edge")] = msg
        return c, None, None
    rows = graph.row.long()
    n_out = math.prod(out_shape)
    flat = msg.reshape(graph.num_edges, n_out)
    if op.gather_op in ("sum", "mean"):
        c = torch.zeros(graph.num_dst, n_out, dtype=torch.float64, device=dev)
        c.index_add_(0, rows, flat)
        if op.gather_op == "mean":  # the sum over the in-degree, at least 1
            c /= torch.bincount(rows, minlength=graph.num_dst).clamp(min=1).to(c)[:, None]
        return c.reshape((graph.num_dst,) + tuple(out_shape)), None, None

    # max/min: the first position, in CSC order, that is strictly better than every earlier one.
    shape = (graph.num_dst,) + tuple(out_shape)
    zero = reduce_zero(op.gather_op, feat_dtype)
    if graph.num_edges == 0:  # every row is empty: the reduce zero, args 0
        empty_arg = torch.zeros(shape, dtype=torch.long, device=dev)
        return (torch.full(shape, zero, dtype=torch.float64, device=dev),
                empty_arg if uses_lhs(op.edge_op) else None, empty_arg.clone() if uses_rhs(op.edge_op) else None)
    work_dtype = torch.float64 if feat_dtype == torch.float64 else torch.float32
    cand = messages(graph, op, work_dtype).reshape(graph.num_edges, n_out)
    better = (cand > zero) if op.gather_op == "max" else (cand < zero)  # NaN compares false
    fill = torch.full_like(cand, zero)
    vals = torch.where(better, cand, fill)
    best = torch.full((graph.num_dst, n_out), zero, dtype=work_dtype, device=dev)
    best.scatter_reduce_(0, rows[:, None].expand_as(vals), vals,
                         reduce="amax" if op.gather_op == "max" else "amin", include_self=True)
    win = better & (cand == best[rows])
    pos = torch.arange(graph.num_edges, device=dev)[:, None].expand_as(cand)
    sentinel = graph.num_edges
    first = torch.full((graph.num_dst, n_out), sentinel, dtype=torch.long, device=dev)
    first.scatter_reduce_(0, rows[:, None].expand_as(vals), torch.where(win, pos, torch.full_like(pos, sentinel)),
                          reduce="amin", include_self=True)
    found = first < sentinel
    safe = torch.where(found, first, torch.zeros_like(first))
    value = torch.where(found, flat[safe, torch.arange(n_out, device=dev)[None, :]],
                        torch.full_like(best, zero, dtype=torch.float64))

    def arg(ttype):
        idx = _index(graph, ttype)
        return torch.where(found, idx[safe], torch.zeros_like(safe))

    arg_a = arg(op.A_type) if uses_lhs(op.edge_op) else None
    arg_b = arg(op.B_type) if uses_rhs(op.edge_op) else None
    return (value.reshape(shape), None if arg_a is None else arg_a.reshape(shape),
            None if arg_b is None else arg_b.reshape(shape))


# ---- the edge softmax -------------------------------------------------------------------------

SOFTMAX_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def dname(dtype) -> str:
    return str(dtype).replace("torch.", "")


def softmax_close(got, want, tol):
    """got within tol = (rtol, atol as a share of want's largest magnitude) of the float64 want."""
    rtol, atol = tol
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol * want.abs().max().item())


def hub_graph(idtype, seed=0, nodes=300, edges=3000, identity_eids=False) -> UGraph:
    """Isolated rows (the last 5 destinations), self-loops, multi-edges and one row holding a
    third of all edges; edge ids a random permutation of CSC positions unless identity_eids."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, nodes, (edges,), generator=gen)
    dst = torch.randint(0, nodes - 5, (edges,), generator=gen)
    dst[: edges // 3] = 7
    if identity_eids:
        order = torch.sort(dst, stable=True).indices
        src, dst = src[order], dst[order]
    g = UGraph.from_coo(src, dst, nodes, nodes, idtype)
    return UGraph(g.num_src, g.num_dst, g.indptr, g.col, g.row, None) if identity_eids else g


def softmax_oracle(graph: UGraph, x: torch.Tensor, y=None) -> torch.Tensor:
    """Edge softmax over each destination's in-edges (or its gradient: x the output, y = x *
    output gradient), in float64 on x's device."""
    dev = x.device
    eid = graph.eid.long() if graph.eid is not None else torch.arange(graph.num_edges, device=dev)
    dst = torch.empty(graph.num_edges, dtype=torch.long, device=dev)
    dst[eid] = graph.row.long()
    flat = x.double().reshape(graph.num_edges, -1)
    index = dst[:, None].expand_as(flat)
    if y is None:
        m = torch.full((graph.num_dst, flat.shape[1]), -torch.inf, dtype=torch.float64, device=dev)
        m = m.scatter_reduce(0, index, flat, "amax")
        z = torch.exp(flat - m[dst])
        s = torch.zeros(m.shape, dtype=torch.float64, device=dev).index_add(0, dst, z)
        return (z / s[dst]).reshape(x.shape)
    yf = y.double().reshape(flat.shape)
    s = torch.zeros((graph.num_dst, flat.shape[1]), dtype=torch.float64, device=dev).index_add(0, dst, yf)
    return (yf - s[dst] * flat).reshape(x.shape)


def softmax_scores(graph: UGraph, shape, dtype, seed=1) -> torch.Tensor:
    """Edge scores within +-12, on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand((graph.num_edges,) + tuple(shape), generator=gen, dtype=torch.float64) * 24 - 12).to(dtype)
