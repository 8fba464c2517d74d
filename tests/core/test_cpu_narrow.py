"""The CPU core's narrow-row paths: rows of 1-8 elements per edge with the width
fixed at compile time, in aggregation (whole rows of a segment in one loop; head and tail rows
cut between threads), in gather none, and dot messages of up to 8 products; broadcasts that are
one run over the row (GAT's one-head attention: (1, D) x (1, 1)) take the same paths with a
fixed step of 0 on one side.

Against the fp64 oracle (tests/reference.py) as in test_core_cpu.py, in every dtype the core
runs, both index widths, with several threads (rows cut between segments), empty rows, zero
edges, strided rows and the lower instruction-set versions.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from dgl_ugraph import OpInfo, UGraph, ugrapher
from dgl_ugraph.core import _ext
from tests.core.test_core_cpu import DTYPES, GATHERS, IDTYPES, check, dname, make_op, omp_threads, operand, random_graph, \
    square_graph

pytestmark = pytest.mark.skipif(_ext.LOAD_ERROR is not None, reason=str(_ext.LOAD_ERROR))

WIDTHS = list(range(1, 10))  # 1-8 take the fixed widths, 9 the block path next to them

# (edge_op, a_type, b_type): each operand kind through each index (col, row, eid).
PAIRS = (("copy_lhs", "src", "null"), ("copy_rhs", "null", "edge"), ("mul", "src", "edge"), ("add", "src", "dst"),
         ("sub", "edge", "dst"), ("div", "dst", "src"))


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("width", WIDTHS)
def test_narrow_widths(width, gather, dtype, idtype):
    graph = random_graph(40, 37, 400, idtype, seed=width)
    for edge_op, a_type, b_type in PAIRS:
        check(graph, make_op(graph, edge_op, gather, a_type, b_type, (width,), (width,), dtype, seed=width + 1))


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("heads,k", [(1, 1), (1, 2), (1, 3), (1, 5), (1, 8), (2, 3), (8, 8), (1, 9), (3, 16)])
def test_dot_small_k(heads, k, gather, dtype, idtype):
    """Dot messages of k products (u_dot_v in GAT's backward: (N, H, D) . (N, H, D))."""
    graph = random_graph(30, 28, 300, idtype, seed=k)
    for a_type, b_type in (("src", "dst"), ("edge", "src"), ("dst", "edge")):
        op = make_op(graph, "dot", gather, a_type, b_type, (heads, k), (heads, k), dtype, seed=heads * 10 + k)
        check(graph, op, scale=math.sqrt(k))


# a_shape, b_shape: one run over the row (either side standing still), several runs, and both
# sides broadcasting.
BCAST_SHAPES = [((1, 3), (1, 1)), ((1, 8), (1, 1)), ((1, 1), (1, 5)), ((1,), (1,)), ((7,), (1,)), ((1,), (4,)),
                ((2, 3), (2, 1)), ((8, 8), (8, 1)), ((1, 3), (4, 1)), ((1, 9), (1, 1))]


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("a_shape,b_shape", BCAST_SHAPES, ids=[f"{a}x{b}" for a, b in BCAST_SHAPES])
def test_narrow_broadcast(a_shape, b_shape, gather, dtype, idtype):
    graph = random_graph(33, 29, 260, idtype, seed=len(a_shape) + a_shape[-1])
    for edge_op in ("mul", "add", "sub", "div"):
        for a_type, b_type in (("src", "edge"), ("edge", "dst"), ("dst", "src")):
            check(graph, make_op(graph, edge_op, gather, a_type, b_type, a_shape, b_shape, dtype, seed=5))


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("gather", ("sum", "max", "min"))
@pytest.mark.parametrize("width", [1, 3, 4, 8])
def test_narrow_rows_cut_between_threads(width, gather, threads):
    """Big enough for a team: each segment's whole rows go through the narrow loop, its head
    and tail rows (a hub row cut over several segments) through the block path, and the
    partials merge. Integer data: sums exact, max/min full of ties."""
    graph = square_graph(2000, 60_000, torch.int32, seed=width, hub_share=0.3)
    with omp_threads(threads):
        for edge_op, a_type, b_type, shapes in (("copy_lhs", "src", "null", ((width,), (width,))),
                                                ("mul", "src", "edge", ((1, width), (1, 1))),
                                                ("add", "edge", "dst", ((width,), (width,)))):
            for dtype in (torch.float32, torch.float64):
                op = make_op(graph, edge_op, gather, a_type, b_type, *shapes, dtype, seed=3, integer=True)
                c, _, _ = check(graph, op)
                if gather == "sum":  # exact: integer sums in any order
                    from tests.reference import reference
                    assert torch.equal(c.double(), reference(graph, op)[0])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("width", [1, 2, 3, 8])
def test_gather_none_narrow_with_threads(width, threads):
    graph = square_graph(3000, 50_000, torch.int64, seed=width + 20)
    with omp_threads(threads):
        for edge_op, a_type, b_type, a_shape, b_shape in (
                ("add", "src", "dst", (width,), (width,)), ("mul", "src", "edge", (1, width), (1, 1)),
                ("dot", "src", "dst", (1, width), (1, width)), ("dot", "src", "dst", (8, width), (8, width))):
            check(graph, make_op(graph, edge_op, "none", a_type, b_type, a_shape, b_shape, torch.float32, seed=1),
                  scale=math.sqrt(width))


@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("width", [1, 3])
def test_narrow_zero_edges_and_empty_rows(width, gather):
    empty = torch.zeros(0, dtype=torch.long)
    none = UGraph.from_coo(empty, empty, 5, 5, torch.int64)
    op = make_op(none, "mul", gather, "src", "edge", (width,), (width,), torch.float32, seed=2)
    c, _, _ = ugrapher(none, op)
    assert c.shape[0] == (0 if gather == "none" else 5)
    if gather == "sum":
        assert (c == 0).all()
    # Most rows empty: 300 destinations, 40 edges into the first 290.
    sparse = random_graph(50, 300, 40, torch.int32, seed=3, isolated=10)
    for edge_op, a_type, b_type, shapes in (("copy_lhs", "src", "null", ((width,), (width,))),
                                            ("mul", "src", "edge", ((1, width), (1, 1))),
                                            ("dot", "src", "dst", ((1, width), (1, width)))):
        check(sparse, make_op(sparse, edge_op, gather, a_type, b_type, *shapes, torch.float32, seed=4))


@pytest.mark.parametrize("gather", GATHERS)
def test_narrow_strided_rows(gather):
    """Narrow rows whose row stride is not their width (slices of wider tensors, an expanded
    edge weight)."""
    graph = random_graph(25, 21, 180, torch.int64, seed=17)
    gen = torch.Generator().manual_seed(18)
    n, e = graph.num_src, graph.num_edges
    for f in (1, 3, 5):
        x = operand(n, (4 * f,), torch.float32, gen)[:, f:2 * f]
        w = operand(1, (1,), torch.float32, gen, away_from_zero=True).expand(e, 1)
        for edge_op, b, b_type in (("copy_lhs", None, "null"), ("div", w, "edge"),
                                   ("mul", operand(e, (2 * f,), torch.float32, gen)[:, ::2], "edge")):
            check(graph, OpInfo(edge_op, gather, x, "src", b, b_type, "edge" if gather == "none" else "dst"))


@pytest.mark.parametrize("isa", ["baseline", "v3"])
def test_narrow_lower_instruction_sets(isa):
    """The narrow paths live in the x86-64-v3/v4 versions; baseline keeps the general loops.
    Rerun a cross-section of this file capped at the lower levels."""
    subset = "(narrow_widths and int64 and (float32 or float64)) or dot_small_k or (narrow_broadcast and float32)"
    env = dict(os.environ, DGL_UGRAPH_CPU_ISA=isa)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__,
                          "-k", subset], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
