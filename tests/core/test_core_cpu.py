"""The CPU core against the fp64 oracle (tests/reference.py), through dgl_ugraph.ugrapher.

Covers every op_info of the switching space in every dtype and index width, broadcast shapes,
the graph shapes that break kernels (empty, isolated rows, self-loops, multi-edges, one row
holding half of all edges split over several threads), odd feature widths, strided inputs,
half-precision rounding, and the checks that reject broken input. Outputs are poisoned
(conftest.py), so an element the core forgets to write fails the comparison.
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import os
import subprocess
import sys

import pytest
import torch

from dgl_ugraph import OpInfo, UGraph, ugrapher
from dgl_ugraph.core import _ext, ops
from dgl_ugraph.core.abstraction import ParallelInfo, broadcast
from dgl_ugraph.core.ops import prepare
from tests.reference import messages, reference

pytestmark = pytest.mark.skipif(_ext.LOAD_ERROR is not None, reason=str(_ext.LOAD_ERROR))

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
IDTYPES = (torch.int32, torch.int64)
NODE_TYPES = ("src", "dst", "edge")
BINARY = ("add", "sub", "mul", "div", "dot")
GATHERS = ("none", "sum", "max", "min", "mean")
# (rtol, atol) per dtype. Half types round once at the store (2^-11, 2^-8 relative); float32
# sums differ from the fp64 oracle by accumulation order.
TOL = {torch.float64: (1e-12, 1e-10), torch.float32: (1e-5, 1e-4),
       torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


def dname(dtype) -> str:
    return str(dtype).replace("torch.", "")


# ---- inputs ---------------------------------------------------------------------------------

def random_coo(num_src: int, num_dst: int, num_edges: int, idtype, seed: int, isolated: int = 0):
    """(src, dst, graph): a random multigraph's edge list in edge-id order and its UGraph (whose
    eid is then a real permutation); the last `isolated` destinations get no in-edges."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, max(num_dst - isolated, 1), (num_edges,), generator=gen)
    return src, dst, UGraph.from_coo(src, dst, num_src, num_dst, idtype)


def random_graph(num_src: int, num_dst: int, num_edges: int, idtype, seed: int, isolated: int = 3) -> UGraph:
    return random_coo(num_src, num_dst, num_edges, idtype, seed, isolated)[2]


def square_graph(num_nodes: int, num_edges: int, idtype, seed: int, hub_share: float = 0.0) -> UGraph:
    """Same node set on both sides, with self-loops, repeated edges, and optionally one row that
    holds `hub_share` of all edges."""
    gen = torch.Generator().manual_seed(seed)
    n_hub = int(num_edges * hub_share)
    n_rest = num_edges - n_hub - num_nodes // 4 - 8
    loops = torch.arange(0, num_nodes, 4)
    src = torch.cat([torch.randint(0, num_nodes, (n_rest + n_hub,), generator=gen), loops, torch.full((8,), 1)])
    dst = torch.cat([torch.randint(0, num_nodes - 2, (n_rest,), generator=gen), torch.full((n_hub,), num_nodes // 2),
                     loops, torch.full((8,), 5)])
    perm = torch.randperm(src.numel(), generator=gen)
    return UGraph.from_coo(src[perm], dst[perm], num_nodes, num_nodes, idtype)


def operand(rows: int, shape, dtype, gen, away_from_zero: bool = False, integer: bool = False) -> torch.Tensor:
    if integer:  # small integers: exact in every dtype, and full of exact ties for max/min
        return torch.randint(-3, 4, (rows,) + tuple(shape), generator=gen).to(dtype)
    x = torch.randn((rows,) + tuple(shape), generator=gen, dtype=torch.float64)
    if away_from_zero:  # div's right side: |x| in [0.5, 2.5]
        x = torch.where(x < 0, -1.0, 1.0) * (0.5 + x.abs().clamp(max=2.0))
    return x.to(dtype)


def rows_of(graph: UGraph, ttype: str) -> int:
    return {"src": graph.num_src, "dst": graph.num_dst, "edge": graph.num_edges}[ttype]


def make_op(graph, edge_op, gather, a_type, b_type, a_shape, b_shape, dtype, seed, integer=False) -> OpInfo:
    gen = torch.Generator().manual_seed(seed)
    a = operand(rows_of(graph, a_type), a_shape, dtype, gen, integer=integer) if edge_op != "copy_rhs" else None
    b = (operand(rows_of(graph, b_type), b_shape, dtype, gen, away_from_zero=edge_op == "div", integer=integer)
         if edge_op != "copy_lhs" else None)
    return OpInfo(edge_op, gather, a, a_type if a is not None else "null", b, b_type if b is not None else "null",
                  "edge" if gather == "none" else "dst")


def _libgomps():
    """Every OpenMP runtime in the process. torch ships its own libgomp and loads it globally,
    so the core's OpenMP calls may bind to torch's copy rather than the system's: set both."""
    paths = {line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line}
    return [ctypes.CDLL(path) for path in sorted(paths)]


@contextlib.contextmanager
def omp_threads(n: int):
    """Sets the core's OpenMP team size for the duration."""
    libs = _libgomps()
    assert libs, "no OpenMP runtime loaded"
    old = [lib.omp_get_max_threads() for lib in libs]
    for lib in libs:
        lib.omp_set_num_threads(n)
    try:
        yield
    finally:
        for lib, k in zip(libs, old):
            lib.omp_set_num_threads(k)


# ---- the check ------------------------------------------------------------------------------

def check(graph: UGraph, op: OpInfo, scale: float = 1.0):
    """Runs the core and compares with the oracle: values within the dtype's tolerance (atol
    times `scale`), max/min args exactly, except near-ties that fp rounding may legitimately
    order differently: there the arg must point at a message equal to the result."""
    c, arg_a, arg_b = ugrapher(graph, op)
    ref_c, ref_a, ref_b = reference(graph, op)
    rtol, atol = TOL[c.dtype]
    assert c.shape == ref_c.shape
    torch.testing.assert_close(c.double(), ref_c, rtol=rtol, atol=atol * scale)
    assert (arg_a is None) == (ref_a is None) and (arg_b is None) == (ref_b is None)
    if ref_a is None and ref_b is None:
        return c, arg_a, arg_b
    for got in (arg_a, arg_b):
        if got is not None:
            assert got.dtype == graph.idtype and got.shape == c.shape
    bad = torch.zeros(c.shape, dtype=torch.bool)
    for got, want in ((arg_a, ref_a), (arg_b, ref_b)):
        if got is not None:
            bad |= got.long() != want
    if bad.any():
        check_near_ties(graph, op, c, arg_a, arg_b, ref_c, bad, rtol, atol * scale)
    return c, arg_a, arg_b


def _index(graph: UGraph, ttype: str) -> torch.Tensor:
    if ttype == "src":
        return graph.col.long()
    if ttype == "dst":
        return graph.row.long()
    return graph.eid.long() if graph.eid is not None else torch.arange(graph.num_edges)


def check_near_ties(graph, op, c, arg_a, arg_b, ref_c, bad, rtol, atol):
    """Where args differ from the oracle's, a position of that row with exactly those args must
    carry a message equal (within tolerance) to the reduced value. Only dot, whose sums round
    in a different order than the oracle's, may get here."""
    assert op.edge_op == "dot", "args differ from the oracle's for an op whose messages are exact"
    work = torch.float64 if c.dtype == torch.float64 else torch.float32
    msg = messages(graph, op, work).reshape(graph.num_edges, -1).double()
    ia, ib = _index(graph, op.A_type), _index(graph, op.B_type)
    indptr = graph.indptr.long()
    flat_bad = bad.reshape(graph.num_dst, -1)
    for v, j in flat_bad.nonzero().tolist():
        value = ref_c.reshape(graph.num_dst, -1)[v, j].item()
        ps = torch.arange(indptr[v].item(), indptr[v + 1].item())
        ok = ia[ps] == arg_a.reshape(graph.num_dst, -1)[v, j].long()
        ok &= ib[ps] == arg_b.reshape(graph.num_dst, -1)[v, j].long()
        close = (msg[ps[ok], j] - value).abs() <= atol + rtol * abs(value)
        assert close.any(), f"row {v}, element {j}: the arg names no message equal to {value}"


# ---- the switching space ----------------------------------------------------------------------

def op_space():
    for gather, t in itertools.product(GATHERS, NODE_TYPES):
        yield "copy_lhs", gather, t, "null"
        yield "copy_rhs", gather, "null", t
    for op, gather, ta, tb in itertools.product(BINARY, GATHERS, NODE_TYPES, NODE_TYPES):
        yield op, gather, ta, tb


OP_SPACE = list(op_space())
assert len(OP_SPACE) == 255


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("edge_op,gather,a_type,b_type", OP_SPACE, ids=["-".join(c) for c in OP_SPACE])
def test_op_space(edge_op, gather, a_type, b_type, dtype, idtype):
    graph = random_graph(23, 19, 160, idtype, seed=1)
    op = make_op(graph, edge_op, gather, a_type, b_type, (4, 8), (4, 8), dtype, seed=hash((edge_op, gather, a_type, b_type)) % 1000)
    c, _, _ = check(graph, op)
    assert c.shape[1:] == ((4, 1) if edge_op == "dot" else (4, 8))


BCAST = {
    "add": [((4, 8), (4, 1)), ((1, 8), (4, 8)), ((3, 1, 5), (1, 4, 5)), ((8,), (1,))],
    "dot": [((4, 8), (1, 8)), ((3, 1, 5), (1, 4, 5)), ((2, 1, 3, 6), (4, 1, 6))],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("edge_op,a_shape,b_shape",
                         [(op, a, b) for op in ("add", "sub", "mul", "div") for a, b in BCAST["add"]]
                         + [("dot", a, b) for a, b in BCAST["dot"]])
def test_broadcast(edge_op, a_shape, b_shape, gather, dtype):
    graph = random_graph(31, 27, 240, torch.int64, seed=2)
    for a_type, b_type in (("src", "edge"), ("edge", "dst")):
        op = make_op(graph, edge_op, gather, a_type, b_type, a_shape, b_shape, dtype, seed=3)
        c, _, _ = check(graph, op)
        assert c.shape[1:] == broadcast(edge_op, a_shape, b_shape).out_shape


@pytest.mark.parametrize("a_shape,b_shape,a_table,b_table", [
    ((8,), (1,), False, True),          # u_mul_e with a scalar edge weight
    ((4, 16), (4, 1), False, True),     # GAT: per-head attention
    ((4, 1), (4, 16), True, False),
    ((1, 8), (4, 1), True, True),       # both sides broadcast
    ((4, 8), (4, 8), False, False),
])
def test_broadcast_tables_only_for_a_side_that_broadcasts(a_shape, b_shape, a_table, b_table):
    """A side shaped like the output gets no offset table (params.h's NULL: element j at j), so
    that the CUDA core keeps 16-byte loads on it."""
    bc = broadcast("mul", a_shape, b_shape)
    assert (bc.a_off is not None, bc.b_off is not None) == (a_table, b_table)
    for off, shape in ((bc.a_off, a_shape), (bc.b_off, b_shape)):
        if off is not None:
            assert len(off) == bc.out_len and max(off) < math.prod(shape)


@pytest.mark.parametrize("edge_op,a_shape,b_shape,device,swaps", [
    ("mul", (16, 1), (16, 16), "cuda", True),    # NNConv's u_mul_e: blocks of 16
    ("add", (3, 1), (3, 2), "cuda", True),       # blocks of 2
    ("mul", (16, 1), (16, 16), "cpu", False),    # the CPU core vectorizes either side
    ("sub", (16, 1), (16, 16), "cuda", False),   # does not commute
    ("div", (16, 1), (16, 16), "cuda", False),
    ("mul", (1, 16), (16, 16), "cuda", False),   # A repeats over no block
    ("mul", (4, 16), (4, 1), "cuda", False),     # B broadcasts: runs as written
    ("mul", (4, 1, 1), (1, 2, 8), "cuda", False),  # both do
])
def test_which_calls_run_exchanged(edge_op, a_shape, b_shape, device, swaps):
    assert ops.swaps_operands(edge_op, broadcast(edge_op, a_shape, b_shape), torch.device(device)) == swaps


@pytest.mark.parametrize("gather", GATHERS)
def test_exchanged_operands_give_the_call_as_written(gather, monkeypatch):
    """A call packed as B op A (ops.swaps_operands, a CUDA decision) forced on the CPU core, which
    runs either packing: the values and both args (max/min, where ties are many: small integers)
    must be those of the call as written, and a Plan's repeat calls must give the same bits."""
    monkeypatch.setattr(ops, "swaps_operands", lambda *args: True)
    graph = random_graph(30, 20, 200, torch.int64, seed=31)
    op = make_op(graph, "mul", gather, "src", "edge", (4, 1), (4, 4), torch.float32, seed=32, integer=True)
    assert prepare(graph, op).swapped
    first = check(graph, op)
    plan = ops.Plan(graph, op)
    for _ in range(2):
        assert all(a is None and b is None or torch.equal(a, b) for a, b in zip(plan.run(op.A, op.B), first))


@pytest.mark.parametrize("gather", ["max", "min"])
def test_int64_args_of_an_int32_graph(gather):
    """arg_dtype int64 on an int32 graph (params.h's arg_bits 64, which the DGL layer asks for on a
    graph of int64 ids run on 32-bit indices): the int32 call's values and args, as int64, through
    prepare and a Plan; any other arg type is refused."""
    graph = random_graph(30, 20, 200, torch.int32, seed=33)
    for edge_op, a_type, b_type, shape in (("mul", "src", "edge", (1,)), ("copy_lhs", "src", "null", None),
                                           ("add", "dst", "src", (4,))):
        op = make_op(graph, edge_op, gather, a_type, b_type, (4,), shape, torch.float32, seed=34, integer=True)
        want = check(graph, op)
        got = prepare(graph, op, arg_dtype=torch.int64).run()
        plan = ops.Plan(graph, op, arg_dtype=torch.int64).run(op.A, op.B)
        for out in (got, plan):
            assert torch.equal(out[0], want[0])
            for arg, ref in zip(out[1:], want[1:]):
                assert (arg is None) == (ref is None)
                assert arg is None or (arg.dtype == torch.int64 and torch.equal(arg, ref.long()))
    with pytest.raises(TypeError, match="int64"):
        prepare(graph, op, arg_dtype=torch.int16)


# ---- graph shapes -----------------------------------------------------------------------------

@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("num_nodes", [0, 6])
def test_no_edges(num_nodes, gather, idtype):
    """No edges (and no nodes): the oracle cannot index empty tensors, so the expected outputs
    are written out: nothing for gather none, zeros for sum and mean, the reduce zero and args 0."""
    empty = torch.zeros(0, dtype=torch.long)
    graph = UGraph.from_coo(empty, empty, num_nodes, num_nodes, idtype)
    for edge_op, b_type in (("copy_lhs", "null"), ("mul", "edge"), ("dot", "dst")):
        for dtype in (torch.float32, torch.float16):
            op = make_op(graph, edge_op, gather, "src", b_type, (5,), (5,), dtype, seed=4)
            c, arg_a, arg_b = ugrapher(graph, op)
            width = (1,) if edge_op == "dot" else (5,)
            assert c.shape == ((0 if gather == "none" else num_nodes),) + width
            if gather in ("sum", "mean"):
                assert (c == 0).all()
            if gather in ("max", "min"):
                big = 65504.0 if dtype == torch.float16 else math.inf
                assert (c.double() == (-big if gather == "max" else big)).all()
                assert (arg_a == 0).all() and (arg_b is None or (arg_b == 0).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("gather", ("max", "min"))
def test_isolated_rows_and_ties(gather, dtype):
    """Small integers make many exactly equal messages: the first position in CSC order wins,
    and isolated rows keep the reduce zero with args 0."""
    graph = square_graph(40, 400, torch.int64, seed=5)
    for edge_op, a_type, b_type in (("copy_lhs", "src", "null"), ("add", "src", "edge"), ("mul", "edge", "dst"),
                                    ("copy_rhs", "null", "edge"), ("sub", "dst", "src")):
        op = make_op(graph, edge_op, gather, a_type, b_type, (6,), (6,), dtype, seed=6, integer=True)
        c, arg_a, arg_b = check(graph, op)
        empty = (graph.indptr[1:] == graph.indptr[:-1]).nonzero().flatten()
        assert empty.numel() > 0
        for arg in (arg_a, arg_b):
            if arg is not None:
                assert (arg[empty] == 0).all()


@pytest.mark.parametrize("threads", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("gather", ("sum", "max", "min"))
@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
def test_hub_row_split_over_threads(threads, gather, idtype):
    """One row holds half of all edges, so the edge-balanced partition cuts it over several
    threads; partials must merge exactly (integer data makes sums exact and max/min tie-heavy)."""
    graph = square_graph(500, 40_000, idtype, seed=7, hub_share=0.5)
    with omp_threads(threads):
        for edge_op, a_type, b_type in (("copy_lhs", "src", "null"), ("mul", "src", "edge"), ("add", "edge", "src")):
            for dtype in (torch.float32, torch.bfloat16):
                op = make_op(graph, edge_op, gather, a_type, b_type, (8,), (8,), dtype, seed=8, integer=True)
                check(graph, op)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("gather", GATHERS)
def test_many_threads_random_graph(threads, gather):
    """Work big enough for a team, on a skewed random graph: rows cut at thread boundaries."""
    graph = square_graph(3000, 30_000, torch.int64, seed=9, hub_share=0.1)
    with omp_threads(threads):
        for edge_op, a_type, b_type in (("copy_lhs", "src", "null"), ("div", "src", "edge"), ("dot", "src", "dst")):
            op = make_op(graph, edge_op, gather, a_type, b_type, (16,), (16,), torch.float32, seed=10)
            check(graph, op, scale=10.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
def test_self_loops_and_multi_edges(dtype):
    graph = square_graph(30, 200, torch.int32, seed=11)
    col, row = graph.col.long(), graph.row.long()
    assert (col == row).any()
    assert torch.unique(torch.stack([col, row]), dim=1).shape[1] < graph.num_edges
    for edge_op, gather, a_type, b_type in itertools.product(("copy_lhs", "add", "dot"), GATHERS, ("src",), ("dst", "edge")):
        check(graph, make_op(graph, edge_op, gather, a_type, b_type, (9,), (9,), dtype, seed=12))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=dname)
@pytest.mark.parametrize("gather", GATHERS)
@pytest.mark.parametrize("width", [1, 3, 5, 7, 13, 33, 257, 600])
def test_feature_widths(width, gather, dtype):
    """Odd widths exercise the simd remainders and the sub-vector tail block (3, 5, 7 alone; 13
    and 33 after wider blocks); 257 and 600 span several accumulator blocks."""
    graph = random_graph(50, 40, 300, torch.int64, seed=13)
    for edge_op, a_type, b_type in (("copy_lhs", "src", "null"), ("mul", "src", "edge"), ("dot", "src", "dst"),
                                    ("sub", "edge", "dst")):
        check(graph, make_op(graph, edge_op, gather, a_type, b_type, (width,), (width,), dtype, seed=14),
              scale=math.sqrt(width) if edge_op == "dot" else 1.0)


@pytest.mark.parametrize("width", [3, 16])
@pytest.mark.parametrize("gather", GATHERS)
def test_gathers_beyond_the_caches(gather, width):
    """Source rows well past 4x this machine's L2, where the kernels prefetch what they gather."""
    l2 = os.sysconf("SC_LEVEL2_CACHE_SIZE") if "SC_LEVEL2_CACHE_SIZE" in os.sysconf_names else 0
    rows = max(8 * max(l2, 1 << 20) // (4 * width), 1000)
    graph = random_graph(rows, 500, 60_000, torch.int32, seed=31)
    check(graph, make_op(graph, "mul", gather, "src", "edge", (width,), (width,), torch.float32, seed=32))


@pytest.mark.parametrize("gather", GATHERS)
def test_large_outputs(gather):
    """Outputs over 16 MiB, which the core advises onto huge pages before writing them."""
    graph = random_graph(2000, 70_000, 90_000, torch.int64, seed=29, isolated=100)
    op = make_op(graph, "copy_lhs" if gather != "none" else "mul", gather, "src", "dst", (64,), (64,),
                 torch.float32, seed=30)
    c, arg_a, _ = check(graph, op)
    assert c.numel() * c.element_size() > 16 << 20


@pytest.mark.parametrize("gather", GATHERS)
def test_identity_edge_ids(gather):
    """A CSC without eids (identity): edge tensors are addressed by CSC position."""
    base = random_graph(20, 20, 150, torch.int64, seed=15)
    graph = UGraph.from_csc(base.indptr, base.col, None, base.num_src)
    assert graph.eid is None
    for edge_op, a_type, b_type in (("mul", "src", "edge"), ("copy_rhs", "null", "edge"), ("add", "edge", "dst")):
        check(graph, make_op(graph, edge_op, gather, a_type, b_type, (5,), (5,), torch.float32, seed=16))


# ---- strided inputs ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=dname)
@pytest.mark.parametrize("gather", GATHERS)
def test_non_contiguous_inputs(gather, dtype):
    graph = random_graph(25, 21, 180, torch.int64, seed=17)
    gen = torch.Generator().manual_seed(18)
    n, e, f = graph.num_src, graph.num_edges, 6
    wide = operand(n, (3 * f,), dtype, gen)
    variants = {
        "sliced columns": wide[:, f:2 * f],                       # row stride 3f, features contiguous
        "every other row": operand(2 * n, (f,), dtype, gen)[::2],  # row stride 2f
        "expanded row": operand(1, (f,), dtype, gen).expand(n, f),  # row stride 0
        "transposed": operand(f, (n,), dtype, gen).t(),            # made contiguous by ops.py
    }
    w_expanded = operand(1, (1,), dtype, gen, away_from_zero=True).expand(e, 1)  # (E,1) with stride 0
    w_sliced = operand(e, (2 * f,), dtype, gen, away_from_zero=True)[:, ::2]     # strided features
    for name, x in variants.items():
        for edge_op, b, b_type in (("copy_lhs", None, "null"), ("div", w_expanded, "edge"), ("mul", w_sliced, "edge")):
            op = OpInfo(edge_op, gather, x, "src", b, b_type, "edge" if gather == "none" else "dst")
            check(graph, op)


# ---- half precision ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16), ids=dname)
@pytest.mark.parametrize("edge_op", ("add", "sub", "mul", "div"))
def test_half_rounding_matches_torch(edge_op, dtype):
    """Messages of half types round to nearest even exactly as torch's own float->half casts,
    across subnormals, overflow to inf, inf and NaN."""
    gen = torch.Generator().manual_seed(19)
    n = 4096
    bits = torch.randint(-32768, 32768, (n, 4), generator=gen, dtype=torch.int32).to(torch.int16)
    a = bits.view(dtype)
    b = torch.randint(-32768, 32768, (n, 4), generator=gen, dtype=torch.int32).to(torch.int16).view(dtype)
    idx = torch.arange(n)
    graph = UGraph.from_coo(idx, idx, n, n, torch.int64)
    c, _, _ = ugrapher(graph, OpInfo(edge_op, "none", a, "src", b, "dst", "edge"))
    fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[edge_op]
    want = fn(a.float(), b.float()).to(dtype)
    assert torch.equal(c.isnan(), want.isnan())
    ok = c.isnan() | (c.view(torch.int16) == want.view(torch.int16))
    assert ok.all(), f"{(~ok).sum()} of {ok.numel()} results differ from torch's rounding"


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16), ids=dname)
def test_half_copy_is_exact(dtype):
    """Every 16-bit pattern survives load and store: bit-exact through gather none, and equal
    in value through a one-edge sum (which adds to a +0 start, so -0 comes out +0)."""
    gen = torch.Generator().manual_seed(20)
    n = 1 << 16
    a = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).reshape(n, 1)
    idx = torch.randperm(n, generator=gen)
    graph = UGraph.from_coo(idx, torch.arange(n), n, n, torch.int32)  # row v's one in-edge comes from idx[v]
    want = a[idx]
    c, _, _ = ugrapher(graph, OpInfo("copy_lhs", "none", a, "src", None, "null", "edge"))
    assert torch.equal(c.view(torch.int16)[~want.isnan()], want.view(torch.int16)[~want.isnan()])
    assert torch.equal(c.isnan(), want.isnan())
    c, _, _ = ugrapher(graph, OpInfo("copy_lhs", "sum", a, "src", None, "null", "dst"))
    assert torch.equal(c.isnan(), want.isnan())
    assert (c[~want.isnan()] == want[~want.isnan()]).all()


@pytest.mark.parametrize("gather", ("max", "min"))
def test_nan_never_wins(gather):
    graph = square_graph(30, 300, torch.int64, seed=21)
    gen = torch.Generator().manual_seed(22)
    x = operand(30, (4,), torch.float32, gen)
    x[::3] = float("nan")
    for dtype in DTYPES:
        op = OpInfo("copy_lhs", gather, x.to(dtype), "src", None, "null", "dst")
        c, _, _ = check(graph, op)
        assert not c.isnan().any()


# ---- graphs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
def test_from_coo_and_from_csc(idtype):
    src, dst, g = random_coo(17, 13, 120, idtype, seed=23)
    assert g.idtype == idtype and g.num_edges == 120 and g.num_src == 17 and g.num_dst == 13
    assert torch.equal(g.indptr.long()[1:] - g.indptr.long()[:-1], torch.bincount(dst, minlength=13))
    assert (g.row[1:] >= g.row[:-1]).all()
    eid = g.eid.long()
    assert torch.equal(src[eid], g.col.long()) and torch.equal(dst[eid], g.row.long())
    # Edges of one destination keep their edge-id order (a stable sort).
    same_row = g.row[1:] == g.row[:-1]
    assert (eid[1:][same_row] > eid[:-1][same_row]).all()
    h = UGraph.from_csc(g.indptr.long(), g.col.long(), g.eid.long(), 17, idtype)
    for name in ("indptr", "col", "row", "eid"):
        assert torch.equal(getattr(h, name), getattr(g, name)) and getattr(h, name).dtype == idtype
    assert UGraph.from_csc(g.indptr, g.col, torch.zeros(0, dtype=idtype), 17).eid is None


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
def test_reverse(idtype):
    src, dst, g = random_coo(15, 11, 200, idtype, seed=24)
    gen = torch.Generator().manual_seed(240)
    r = g.reverse()
    assert (r.num_src, r.num_dst, r.num_edges, r.idtype) == (11, 15, 200, idtype)
    # The reverse holds each edge once, swapped, under its original edge id.
    eid = r.eid.long()
    assert torch.equal(torch.sort(eid).values, torch.arange(200))
    assert torch.equal(src[eid], r.row.long()) and torch.equal(dst[eid], r.col.long())
    # Aggregating over the reverse scatters to the original sources (a backward pass).
    x = operand(11, (3,), torch.float64, gen)
    w = operand(200, (1,), torch.float64, gen)
    c, _, _ = ugrapher(r, OpInfo("mul", "sum", x, "src", w, "edge", "dst"))
    want = torch.zeros(15, 3, dtype=torch.float64).index_add_(0, src, x[dst] * w)
    torch.testing.assert_close(c, want)
    assert torch.equal(r.reverse().eid.long().sort().values, torch.arange(200))


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
def test_edge_order_is_the_coo_in_edge_id_order(idtype):
    src, dst, g = random_coo(15, 11, 200, idtype, seed=27)
    s, d = g.edge_order()
    assert s.dtype == d.dtype == idtype and torch.equal(s.long(), src) and torch.equal(d.long(), dst)
    assert g.edge_order()[0] is s  # built once
    # No order of its own where eid is the identity, a repeated id or an id out of range.
    assert UGraph.from_csc(g.indptr, g.col, None, 15).edge_order() is None
    for bad in (0, 200):
        eid = g.eid.clone()
        eid[5] = bad if bad else eid[6]
        assert UGraph(15, 11, g.indptr, g.col, g.row, eid).edge_order() is None


@pytest.mark.parametrize("idtype", IDTYPES, ids=dname)
def test_long_rows_are_every_row_past_the_bound_longest_first(idtype):
    """params.h's long_rows, which the CUDA vertex strategies trust to hold every heavy row:
    each row of more than LONG_ROW edges, once, by degree from the longest."""
    degrees = torch.tensor([0, 40, 33, 32, 1, 500, 40, 31, 2000, 33])
    dst = torch.repeat_interleave(torch.arange(degrees.numel()), degrees)
    src = torch.randint(0, 7, (dst.numel(),), generator=torch.Generator().manual_seed(3))
    g = UGraph.from_coo(src, dst, 7, degrees.numel(), idtype)
    rows = g.long_rows()
    assert rows.dtype == idtype and rows.tolist() == [8, 5, 1, 6, 2, 9]
    assert g.long_rows() is rows  # built once
    assert UGraph.from_coo(src[:10], dst[:10], 7, degrees.numel(), idtype).long_rows().numel() == 0
    # CPU calls carry none of it: the CPU core reads neither field.
    x = torch.randn(7, 4, dtype=torch.float64)
    params = prepare(g, OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")).params
    assert params.max_degree == params.num_long_rows == params.long_rows == 0


def test_message_params_take_the_edge_order_on_the_edge_strategies_only():
    """Prepared.params_for, the one place a CUDA configuration is applied (configure and the
    timing runner), with the two topologies prepare gives message creation on CUDA."""
    graph = random_graph(10, 8, 40, torch.int64, seed=28)
    x = operand(40, (4,), torch.float32, torch.Generator().manual_seed(29))
    prepared = prepare(graph, OpInfo("copy_lhs", "none", x, "edge", None, "null", "edge"))
    csc, coo = (11, 12, 13), (21, 22, 0)
    prepared._topologies = (csc, coo)
    for strategy, want in (("thread_vertex", csc), ("warp_vertex", csc), ("thread_edge", coo), ("warp_edge", coo)):
        p = prepared.params_for(ParallelInfo(strategy, 4, 2))
        assert (p.col, p.row, p.eid, p.grouping, p.tiling) == want + (4, 2)
    # CPU calls and aggregations keep CSC order alone.
    assert prepare(graph, OpInfo("copy_lhs", "sum", x, "edge", None, "null", "dst"))._topologies is None
    assert prepared.params.col == graph.col.data_ptr()


# ---- broken input ------------------------------------------------------------------------------

def test_bad_operands_raise():
    graph = random_graph(10, 8, 40, torch.int64, seed=25)
    gen = torch.Generator().manual_seed(26)
    x, w = operand(10, (4,), torch.float32, gen), operand(40, (4,), torch.float32, gen)
    with pytest.raises(ValueError, match="needs 10 rows"):
        ugrapher(graph, OpInfo("copy_lhs", "sum", x[:9], "src", None, "null", "dst"))
    with pytest.raises(ValueError, match="needs 40 rows"):
        ugrapher(graph, OpInfo("mul", "sum", x, "src", w[:39], "edge", "dst"))
    with pytest.raises(TypeError, match="share one dtype"):
        ugrapher(graph, OpInfo("add", "none", x, "src", w.double(), "edge", "edge"))
    with pytest.raises(TypeError, match="float32, float64, float16 or bfloat16"):
        ugrapher(graph, OpInfo("copy_lhs", "sum", x.int(), "src", None, "null", "dst"))
    with pytest.raises(ValueError, match="not valid for broadcasting"):
        ugrapher(graph, OpInfo("add", "sum", x, "src", operand(40, (3,), torch.float32, gen), "edge", "dst"))
    with pytest.raises(ValueError, match="writes a 'dst' tensor"):
        OpInfo("copy_lhs", "sum", x, "src", None, "null", "edge")


def _prepared(edge_op="mul", gather="max", b_shape=(4,)):
    graph = random_graph(10, 8, 40, torch.int64, seed=27)
    gen = torch.Generator().manual_seed(28)
    x, w = operand(10, (4,), torch.float32, gen), operand(40, b_shape, torch.float32, gen)
    prep = prepare(graph, OpInfo(edge_op, gather, x, "src", w, "edge", "edge" if gather == "none" else "dst"))
    return prep, graph


@pytest.mark.parametrize("field,value,message", [
    ("index_bits", 16, "index_bits must be 32 or 64"),
    ("edge_op", 9, "unknown edge_op"),
    ("gather_op", 7, "unknown gather_op"),
    ("dtype", 5, "unknown dtype"),
    ("c_type", 3, "writes a dst tensor, but c_type"),
    ("c", 0, "c is NULL"),
    ("a", 0, "pointer is NULL"),
    ("b_type", 0, "its type is 0"),
    ("reduce_size", 2, "only meaningful for dot"),
    ("reduce_size", 0, "reduce_size must be >= 1"),
    ("a_len", 3, "a_len=3 != out_len=4"),
    ("a_row_stride", -1, "a_row_stride is negative"),
    ("num_edges", -1, "negative graph size"),
    ("max_degree", -1, r"max_degree=-1 is outside \[0, num_edges=40\]"),
    ("max_degree", 41, r"max_degree=41 is outside \[0, num_edges=40\]"),
    ("num_long_rows", -1, r"num_long_rows=-1 is outside \[0, num_dst=8\]"),
    ("num_long_rows", 9, r"num_long_rows=9 is outside \[0, num_dst=8\]"),
    ("num_long_rows", 1, "long_rows is NULL with num_long_rows > 0"),
    ("num_edges", 41, "indptr must run from 0 to num_edges=41"),
    ("indptr", 0, "indptr is NULL"),
    ("col", 0, "col and row must be set"),
])
def test_core_rejects_broken_params(field, value, message):
    prep, _ = _prepared()
    setattr(prep.params, field, value)
    with pytest.raises(ValueError, match=message):
        prep.run()


def test_core_rejects_broken_offsets_args_and_indptr():
    prep, graph = _prepared(edge_op="add", gather="sum", b_shape=(1,))
    bad = torch.tensor([0, 0, 0, 5], dtype=torch.int64)
    prep.params.b_off = bad.data_ptr()
    with pytest.raises(ValueError, match=r"b_off\[3\]=5 is outside"):
        prep.run()

    prep, graph = _prepared(gather="sum")
    arg = torch.empty(8, 4, dtype=torch.int64)
    prep.params.arg_a = arg.data_ptr()
    with pytest.raises(ValueError, match="only max/min"):
        prep.run()

    prep, graph = _prepared()
    indptr = graph.indptr.clone()
    indptr[3], indptr[4] = indptr[4] + 1, indptr[4]
    prep.params.indptr = indptr.data_ptr()
    with pytest.raises(ValueError, match="indptr decreases at row"):
        prep.run()
    # A failure leaves the core usable, and a success clears the error text.
    prep, graph = _prepared()
    c, arg_a, arg_b = prep.run()
    assert _ext.core().build_info()["cpu"]


# ---- every compiled version ------------------------------------------------------------------

@pytest.mark.parametrize("isa", ["baseline", "v3"])
def test_lower_instruction_sets(isa):
    """The core picks its x86-64 baseline, v3 or v4 kernels by CPU; the rest of this file runs
    the best this machine has. Rerun a cross-section capped at the lower levels."""
    subset = "(op_space and int64 and (float32 or (float16 and not bfloat16))) or hub_row or (broadcast and float32)"
    env = dict(os.environ, DGL_UGRAPH_CPU_ISA=isa)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__,
                          "-k", subset], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

