"""The GPU suite's cases: every op_info of the switching space, a graph with every named edge
case, and the (grouping, tiling) samples, extremes included."""
from __future__ import annotations

import itertools
from typing import List, NamedTuple, Optional, Tuple

import pytest
import torch

from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph

def why_no_cuda_dgl() -> Optional[str]:
    """Why the tests that run DGL on the GPU cannot run here; None where a CUDA build imports."""
    try:
        import dgl
    except Exception as exc:  # absent, or a DGL build that does not load with this torch
        return f"DGL does not import ({type(exc).__name__})"
    return None if dgl.ndarray.gpu(0).exist else f"DGL {dgl.__version__} is built without CUDA"


_NO_CUDA_DGL = why_no_cuda_dgl()
needs_cuda_dgl = pytest.mark.skipif(_NO_CUDA_DGL is not None, reason=str(_NO_CUDA_DGL))

NODE_TYPES = ("src", "dst", "edge")
BINARY = ("add", "sub", "mul", "div")
# (g, t) samples: both extremes of each, and odd tilings that do not divide the width.
PARALLEL_SAMPLES: Tuple[Tuple[int, int], ...] = ((1, 1), (64, 64), (1, 64), (64, 1), (2, 3), (8, 5), (32, 17), (4, 2), (16, 1))


class Case(NamedTuple):
    edge_op: str
    gather_op: str
    a_type: str
    b_type: str
    a_shape: Tuple[int, ...]
    b_shape: Tuple[int, ...]


def shapes_for(edge_op: str, variant: int) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """A rotating choice of feature shapes: plain widths (1, 7, 33, 64), GAT-like heads with a
    broadcast (4,16)x(4,1) and its mirror (4,1)x(4,16) (which add and mul run exchanged), a
    two-sided broadcast, a row of several 32-lane slabs of 16-byte
    vectors in every dtype (520), widths that take 8-byte vectors (6 and (4,2)x(4,1) in 32-bit
    floats, 12 and (4,4)x(4,1) in 16-bit ones), and dot over 7, 64 or 264 (several vectors per
    lane), per head (4 heads; 40 heads of 8, more than one team's worth) or broadcast."""
    if edge_op == "dot":
        return [((7,), (7,)), ((64,), (64,)), ((4, 16), (4, 16)), ((3, 1, 5), (1, 4, 5)), ((264,), (264,)),
                ((40, 8), (40, 8))][variant % 6]
    return [((33,), (33,)), ((4, 16), (4, 1)), ((1,), (1,)), ((64,), (64,)), ((7,), (1,)), ((3, 1, 5), (1, 4, 5)),
            ((520,), (520,)), ((6,), (6,)), ((4, 2), (4, 1)), ((12,), (12,)), ((4, 4), (4, 1)),
            ((4, 1), (4, 16))][variant % 12]


def op_cases() -> List[Case]:
    cases, v = [], 0
    for gather in ("none", "sum", "max", "min", "mean"):
        for t in NODE_TYPES:
            a, _ = shapes_for("copy_lhs", v); v += 1
            cases.append(Case("copy_lhs", gather, t, "null", a, ()))
            a, _ = shapes_for("copy_rhs", v); v += 1
            cases.append(Case("copy_rhs", gather, "null", t, (), a))
        for op, (ta, tb) in itertools.product(BINARY + ("dot",), itertools.product(NODE_TYPES, NODE_TYPES)):
            a, b = shapes_for(op, v); v += 1
            cases.append(Case(op, gather, ta, tb, a, b))
    return cases


def suite_graph(idtype: torch.dtype, device, seed: int = 0) -> UGraph:
    """A bipartite graph (300 sources, 257 destinations) with isolated destinations, self-loops,
    multi-edges, one row holding half of all edges, and edge ids in shuffled order."""
    g = torch.Generator().manual_seed(seed)
    n_src, n_dst = 300, 257
    rest_dst = torch.randint(0, n_dst - 20, (1500,), generator=g)  # the last 20 stay isolated
    hub_dst = torch.full((1600,), 3)
    loops = torch.arange(0, 50)
    multi_src = torch.full((6,), 7)
    dst = torch.cat([rest_dst, hub_dst, loops, torch.full((6,), 11)])
    src = torch.cat([torch.randint(0, n_src, (1500 + 1600,), generator=g), loops, multi_src])
    perm = torch.randperm(dst.numel(), generator=g)
    return UGraph.from_coo(src[perm], dst[perm], n_src, n_dst, idtype).to(device)


def random_operand(rows: int, shape: Tuple[int, ...], dtype: torch.dtype, device, gen: torch.Generator,
                   away_from_zero: bool) -> torch.Tensor:
    x = torch.randn((rows,) + shape, generator=gen, dtype=torch.float64)
    if away_from_zero:  # div's right side: keep |x| in [0.5, 2.5] so quotients stay tame
        x = x.sign().where(x != 0, torch.ones_like(x)) * (0.5 + x.abs().clamp(max=2.0))
    return x.to(dtype).to(device)


def make_op(case: Case, graph: UGraph, dtype: torch.dtype, device, gen: torch.Generator) -> OpInfo:
    rows = {"src": graph.num_src, "dst": graph.num_dst, "edge": graph.num_edges}
    a = random_operand(rows[case.a_type], case.a_shape, dtype, device, gen, False) if case.a_type != "null" else None
    b = random_operand(rows[case.b_type], case.b_shape, dtype, device, gen, case.edge_op == "div") if case.b_type != "null" else None
    return OpInfo(case.edge_op, case.gather_op, a, case.a_type, b, case.b_type,
                  "edge" if case.gather_op == "none" else "dst")
