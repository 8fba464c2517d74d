"""The CPU core's path for GAT's aggregation: (N, H, D) features times one weight
per head and edge, (E, H, 1) (u_mul_e-sum in the forward, and on the reversed graph in the
backward), in blocks of whole heads fixed at compile time, and the mirror (e_mul_u). Other
edge_ops and reducers with this broadcast keep the general block, which test_core_cpu.py and
test_cpu_narrow.py cover.

Against the fp64 oracle (tests/reference.py) as in test_core_cpu.py: every dtype the core runs,
both index widths, head lengths that are compiled and some that are not, rows of several
blocks, several threads with a hub row cut between segments, empty rows, zero edges, strided
rows and the lower instruction-set versions.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from dgl_ugraph import OpInfo, UGraph, ugrapher
from dgl_ugraph.core import _ext
from tests.reference import reference
from tests.core.test_core_cpu import DTYPES, IDTYPES, check, dname, make_op, omp_threads, operand, random_graph, \
    square_graph

pytestmark = pytest.mark.skipif(_ext.LOAD_ERROR is not None, reason=str(_ext.LOAD_ERROR))

# (heads, head length): compiled lengths 2/4/8/16 at one block and at several (blocks halve
# from 64 float32 or 32 float64 elements), and lengths that are not compiled (3, 5, 32).
HEADS = [(2, 2), (8, 4), (8, 8), (3, 8), (5, 8), (12, 8), (16, 8), (4, 16), (9, 16), (2, 3), (6, 5), (2, 32),
         (33, 2)]
# (a_type, b_type): GAT's u_mul_e, and the operands through each index.
TYPES = (("src", "edge"), ("edge", "dst"), ("dst", "src"), ("edge", "edge"))


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("heads,d", HEADS, ids=[f"{h}x{d}" for h, d in HEADS])
def test_heads_aggregation(heads, d, dtype, idtype):
    graph = random_graph(41, 37, 420, idtype, seed=heads * 100 + d)
    for a_type, b_type in TYPES:
        for a_shape, b_shape in (((heads, d), (heads, 1)), ((heads, 1), (heads, d))):
            check(graph, make_op(graph, "mul", "sum", a_type, b_type, a_shape, b_shape, dtype, seed=d))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("heads,d", [(8, 8), (4, 16), (3, 4)])
def test_heads_cut_between_threads(heads, d, threads):
    """A hub row of 30% of the edges is cut over several segments: the blocks of whole heads go
    to head and tail partials too. Integer data: the sums are exact in any order."""
    graph = square_graph(3000, 60_000, torch.int64, seed=d, hub_share=0.3)
    with omp_threads(threads):
        for dtype in (torch.float32, torch.float64):
            for a_shape, b_shape in (((heads, d), (heads, 1)), ((heads, 1), (heads, d))):
                op = make_op(graph, "mul", "sum", "src", "edge", a_shape, b_shape, dtype, seed=4, integer=True)
                c, _, _ = check(graph, op)
                assert torch.equal(c.double(), reference(graph, op)[0])


def test_heads_zero_edges_and_empty_rows():
    empty = torch.zeros(0, dtype=torch.long)
    none = UGraph.from_coo(empty, empty, 6, 6, torch.int64)
    c, _, _ = ugrapher(none, make_op(none, "mul", "sum", "src", "edge", (8, 8), (8, 1), torch.float32, seed=1))
    assert c.shape == (6, 8, 8) and (c == 0).all()
    sparse = random_graph(50, 300, 40, torch.int32, seed=5, isolated=10)  # most rows empty
    check(sparse, make_op(sparse, "mul", "sum", "src", "edge", (8, 8), (8, 1), torch.float32, seed=2))


def test_heads_strided_rows():
    """Rows whose stride is not their width: a slice of wider features, a weight expanded over
    every edge (stride 0), a slice of a wider weight."""
    graph = random_graph(25, 21, 180, torch.int64, seed=17)
    gen = torch.Generator().manual_seed(18)
    x = operand(graph.num_src, (2, 8, 8), torch.float32, gen)[:, 1]
    assert x.stride(0) == 128
    shared = operand(1, (8, 1), torch.float32, gen).expand(graph.num_edges, 8, 1)
    sliced = operand(graph.num_edges, (2, 8, 1), torch.float32, gen)[:, 0]
    for w in (shared, sliced):
        check(graph, OpInfo("mul", "sum", x, "src", w, "edge", "dst"))
        check(graph, OpInfo("mul", "sum", w, "edge", x, "src", "dst"))


@pytest.mark.parametrize("isa", ["baseline", "v3"])
def test_heads_lower_instruction_sets(isa):
    env = dict(os.environ, DGL_UGRAPH_CPU_ISA=isa)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__,
                          "-k", "heads_aggregation and int64 and (float32 or float64)"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
