"""Every compiled CUDA strategy, with the selector bypassed, against the fp64 oracle.

Per (strategy, dtype, idtype): every op_info of the switching space, each at three (g, t)
samples (extremes included), outputs poisoned, each case run twice: a result that moves
between two runs beyond rounding is a race. Run on the device: `python -m pytest tests/gpu`.
"""
from __future__ import annotations

import itertools
import pathlib
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]), str(_HERE.parent), str(_HERE)) if p not in sys.path]

from cases import PARALLEL_SAMPLES, Case, make_op, op_cases, random_operand, suite_graph
from reference import messages, reference

from dgl_ugraph import ugrapher
from dgl_ugraph.core import _ext, ops
from dgl_ugraph.core.abstraction import DTYPE_NAMES, STRATEGIES, OpInfo, ParallelInfo
from dgl_ugraph.core.capability import why_not
from dgl_ugraph.core.graph import UGraph

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _ext.has_cuda()),
                                reason="needs a GPU and the CUDA core")

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Relative tolerance per dtype, on sums of up to ~1600 terms accumulated in float32 (half types)
# and rounded once.
RTOL = {torch.float64: 1e-9, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
ATOMIC = ("thread_edge", "warp_edge")
ops.POISON_OUTPUTS = True


def close(out: torch.Tensor, ref: torch.Tensor, dtype) -> bool:
    out64 = out.double()
    if torch.isnan(out64).any():
        return False
    scale = ref.abs().max().item() if ref.numel() else 0.0
    finite = torch.isfinite(ref)
    if not torch.equal(out64[~finite], ref[~finite]):
        return False
    return bool(torch.allclose(out64[finite], ref[finite], rtol=RTOL[dtype], atol=RTOL[dtype] * max(scale, 1.0)))


def check_args(graph, op, out, arg, ref_arg, which: str, dtype) -> bool:
    """Args must equal the oracle's, except at near-ties that rounding order may split: there the
    message at our arg must equal the winning value."""
    if arg is None:
        return ref_arg is None
    if torch.equal(arg.long(), ref_arg):
        return True
    msg = messages(graph, op).reshape(graph.num_edges, out[0].numel())
    idx = {"src": graph.col, "dst": graph.row, "edge": graph.eid}[which].long()
    diff = (arg.long() != ref_arg).reshape(graph.num_dst, -1).nonzero()
    for r, j in diff.tolist():
        a = arg.reshape(graph.num_dst, -1)[r, j].item()
        pos = ((graph.row.long() == r) & (idx == a)).nonzero().flatten()
        if pos.numel() == 0:
            return False
        best = out.reshape(graph.num_dst, -1)[r, j].double()
        if not torch.isclose(msg[pos, j], best, rtol=RTOL[dtype] * 4, atol=1e-6).any():
            return False
    return True


def run_case(graph, op, pinfo, dtype):
    """Returns a failure description, or None."""
    ref_c, ref_a, ref_b = reference(graph, op)
    results = []
    for _ in range(2):
        results.append(ugrapher(graph, op, pinfo))
    torch.cuda.synchronize()
    (c1, a1, b1), (c2, a2, b2) = results
    if not close(c1, ref_c, dtype):
        err = ((c1.double() - ref_c).norm() / max(ref_c.norm().item(), 1e-30)).item()
        return f"value mismatch (rel err {err:.2e}, nan={torch.isnan(c1).sum().item()})"
    deterministic = pinfo.strategy not in ATOMIC or op.gather_op in ("none", "max", "min")
    if deterministic and not torch.equal(c1, c2):
        return "two runs differ bitwise (a race?)"
    if not deterministic and not close(c2, ref_c, dtype):
        return "second run differs from the oracle (a race?)"
    if op.gather_op in ("max", "min"):
        for arg, ref_arg, arg2, which in ((a1, ref_a, a2, op.A_type), (b1, ref_b, b2, op.B_type)):
            if not check_args(graph, op, c1, arg, ref_arg, which, dtype):
                return f"arg mismatch on {which} operand"
            if arg is not None and not torch.equal(arg, arg2):
                return "args differ between two runs (a race?)"
    return None


def run_unless_refused(graph, op, sig, pinfo, dtype, compiled):
    """(True, run_case's failure or None) where the capability checks let pinfo run the case;
    else (False, None) once ugrapher has refused it with a TypeError, as it must."""
    if why_not(pinfo.strategy, sig, graph.num_edges, compiled):
        with pytest.raises(TypeError):
            ugrapher(graph, op, pinfo)
        return False, None
    return True, run_case(graph, op, pinfo, dtype)


@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=("i32", "i64"))
@pytest.mark.parametrize("dtype", DTYPES, ids=[DTYPE_NAMES[d] for d in DTYPES])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_matches_oracle(strategy, dtype, idtype):
    compiled = _ext.compiled_cuda_keys()
    if (strategy, DTYPE_NAMES[dtype]) not in compiled:
        pytest.skip(f"{strategy}/{DTYPE_NAMES[dtype]} not compiled")
    graph = suite_graph(idtype, "cuda")
    gen = torch.Generator().manual_seed(hash((strategy, str(dtype), str(idtype))) % 2**31)
    failures, ran, refused = [], 0, 0
    samples = itertools.cycle(PARALLEL_SAMPLES)
    for case in op_cases():
        op = make_op(case, graph, dtype, "cuda", gen)
        sig, _ = ops.signature(graph, op)
        for _ in range(3):
            g, t = next(samples)
            pinfo = ParallelInfo(strategy, g, t)
            ok, failure = run_unless_refused(graph, op, sig, pinfo, dtype, compiled)
            ran, refused = ran + ok, refused + (not ok)
            if failure:
                failures.append(f"{case} {pinfo}: {failure}")
    print(f"\n{strategy}/{DTYPE_NAMES[dtype]}/{idtype}: {ran} cases run twice, {refused} refused by capability", file=sys.stderr)
    assert not failures, f"{len(failures)} of {ran} failed:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=("i32", "i64"))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_max_min_without_args_write_the_same_output(strategy, idtype):
    """args=False (no backward reads the winners): every max/min op of the switching space, in
    float32 and float16, on each strategy at one (g, t) sample each (cycling through the
    samples), outputs poisoned, writes C to the bit as with its args, and no args."""
    compiled = _ext.compiled_cuda_keys()
    graph = suite_graph(idtype, "cuda", seed=5)
    gen = torch.Generator().manual_seed(17)
    samples = itertools.cycle(PARALLEL_SAMPLES)
    ran, failures = 0, []
    for dtype in (torch.float32, torch.float16):
        for case in op_cases():
            op = make_op(case, graph, dtype, "cuda", gen)
            if op.gather_op not in ("max", "min"):
                continue
            sig, _ = ops.signature(graph, op)
            g, t = next(samples)
            pinfo = ParallelInfo(strategy, g, t)
            if why_not(strategy, sig, graph.num_edges, compiled):
                continue
            full = ugrapher(graph, op, pinfo)[0]
            c, arg_a, arg_b = ugrapher(graph, op, pinfo, args=False)
            ran += 1
            if arg_a is not None or arg_b is not None or not torch.equal(c, full):
                failures.append(f"{case} {dtype} {pinfo}")
    assert ran and not failures, f"{len(failures)} of {ran} differ:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_int64_args_of_an_int32_graph(strategy):
    """arg_dtype int64 on an int32 graph (params.h's arg_bits 64: a DGL graph of int64 ids run on
    32-bit indices): every max/min op of the switching space, in float32 and float16 (lanes of 4
    and of 8 args), each at one (g, t) sample (cycling), outputs poisoned, writes the int32 call's
    output to the bit and its args as int64."""
    compiled = _ext.compiled_cuda_keys()
    graph = suite_graph(torch.int32, "cuda", seed=8)
    gen = torch.Generator().manual_seed(19)
    samples = itertools.cycle(PARALLEL_SAMPLES)
    ran, failures = 0, []
    for dtype in (torch.float32, torch.float16):
        for case in op_cases():
            if case.gather_op not in ("max", "min"):
                continue
            op = make_op(case, graph, dtype, "cuda", gen)
            sig, _ = ops.signature(graph, op)
            g, t = next(samples)
            pinfo = ParallelInfo(strategy, g, t)
            if why_not(strategy, sig, graph.num_edges, compiled):
                continue
            narrow = ops.prepare(graph, op, pinfo).run()
            wide = ops.prepare(graph, op, pinfo, arg_dtype=torch.int64).run()
            ran += 1
            same = torch.equal(narrow[0], wide[0]) and all(
                a is None and b is None or (b.dtype == torch.int64 and torch.equal(a.long(), b))
                for a, b in zip(narrow[1:], wide[1:]))
            if not same:
                failures.append(f"{case} {DTYPE_NAMES[dtype]} {pinfo}")
    assert ran and not failures, f"{len(failures)} of {ran} differ:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_zero_edges_and_wide_rows(strategy):
    """Zero edges (every row empty) and a width past one warp's 32 lanes many times (F = 257)."""
    empty = UGraph.from_coo(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 5, 9).to("cuda")
    x = torch.randn(5, 257, device="cuda")
    for gather in ("sum", "max", "min", "mean"):
        c, arg, _ = ugrapher(empty, OpInfo("copy_lhs", gather, x, "src", None, "null", "dst"), ParallelInfo(strategy, 4, 3))
        ref_c, ref_a, _ = reference(empty, OpInfo("copy_lhs", gather, x, "src", None, "null", "dst"))
        assert torch.equal(c.double(), ref_c) and (arg is None or torch.equal(arg.long(), ref_a))
    graph = suite_graph(torch.int64, "cuda", seed=3)
    for gather in ("sum", "max", "mean"):
        op = OpInfo("copy_lhs", gather, torch.randn(graph.num_src, 257, device="cuda"), "src", None, "null", "dst")
        assert run_case(graph, op, ParallelInfo(strategy, 2, 7), torch.float32) is None


@pytest.mark.parametrize("zeroed", (True, False), ids=("zeroed", "per_call"))
@pytest.mark.parametrize("strategy", ATOMIC)
def test_edge_workspace_across_calls(strategy, zeroed, monkeypatch):
    """The edge strategies' max/min and half sums combine split rows in a workspace. Up to
    ops.ZEROED_WORKSPACE_BYTES a repeat call's plan keeps one per stream, zero-filled, which the
    core must leave zeroed (no clearing pass); above it each call gets an uninitialized one and
    the clearing pass runs. run_case's two calls, then three more, outputs poisoned, each against
    the oracle (max and min with their args, and bitwise equal across calls), then the kept
    workspace all zeros."""
    if not zeroed:
        monkeypatch.setattr(ops, "ZEROED_WORKSPACE_BYTES", -1)
    graph = suite_graph(torch.int32, "cuda", seed=5)  # its hub row is split at every grouping here
    g = torch.Generator().manual_seed(5)
    x = torch.randn(graph.num_src, 24, generator=g).cuda()
    w = torch.randn(graph.num_edges, 1, generator=g).cuda()
    cases = [(OpInfo("copy_lhs", "max", x, "src", None, "null", "dst"), torch.float32),
             (OpInfo("mul", "min", x, "src", w, "edge", "dst"), torch.float32),
             (OpInfo("copy_lhs", "sum", x.half(), "src", None, "null", "dst"), torch.float16),
             (OpInfo("mul", "mean", x.bfloat16(), "src", w.bfloat16(), "edge", "dst"), torch.bfloat16)]
    for op, dtype in cases:
        pinfo = ParallelInfo(strategy, 8, 1)
        name = f"{op.edge_op}-{op.gather_op} {DTYPE_NAMES[dtype]}"
        assert run_case(graph, op, pinfo, dtype) is None, name
        ref_c, ref_a, ref_b = reference(graph, op)
        first = None
        for call in range(3):
            out = ugrapher(graph, op, pinfo)
            torch.cuda.synchronize()
            assert close(out[0], ref_c, dtype), f"{name}, call {call + 3}"
            if op.gather_op in ("max", "min"):
                assert check_args(graph, op, out[0], out[1], ref_a, op.A_type, dtype), f"{name}, call {call + 3}"
                assert check_args(graph, op, out[0], out[2], ref_b, op.B_type, dtype), f"{name}, call {call + 3}"
                first = first or out
                assert all(a is None and b is None or torch.equal(a, b) for a, b in zip(out, first)), name
    plans = [plan for plan in graph.plans.values() if plan._workspace]
    assert len(plans) == len(cases)
    for plan in plans:
        if zeroed:
            assert plan._zeroed and all(int(ws.count_nonzero()) == 0 for ws in plan._zeroed.values())
        else:
            assert plan._zeroed is None


def test_a_plan_keeps_zeroed_workspaces_for_its_latest_streams():
    """A plan's zeroed workspaces: one per stream, at most ops.ZEROED_WORKSPACE_STREAMS (a new
    stream per call must not keep one per call), each all zeros after its calls; the results on
    every stream equal the first (max with args, deterministic on an edge strategy)."""
    graph = suite_graph(torch.int32, "cuda", seed=6)
    x = torch.randn(graph.num_src, 16, generator=torch.Generator().manual_seed(6)).cuda()
    op, pinfo = OpInfo("copy_lhs", "max", x, "src", None, "null", "dst"), ParallelInfo("warp_edge", 8, 1)
    first = ugrapher(graph, op, pinfo)
    streams = [torch.cuda.Stream() for _ in range(ops.ZEROED_WORKSPACE_STREAMS + 3)]
    for stream in streams + streams[:2]:
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = ugrapher(graph, op, pinfo)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(out[:2], first[:2]))
    (plan,) = [p for p in graph.plans.values() if p._workspace]
    assert len(plan._zeroed) == ops.ZEROED_WORKSPACE_STREAMS
    assert all(int(ws.count_nonzero()) == 0 for ws in plan._zeroed.values())


@pytest.mark.parametrize("strategy", ("warp_vertex", "warp_edge"))
def test_tile_major_walk(strategy):
    """Tilings past 1 where the gathered source rows outgrow half the L2 and a slab's share fits
    it: the team kernels then walk tile-major on narrower slabs (team.cuh's tile_major_fits).
    Sums, max with args, a weighted sum, GAT-like heads, dots and message creation on a skewed
    graph whose source rows take 0.8x the L2 at F = 256."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n_src, n_dst, width = int(0.8 * l2) // 1024, 20_000, 256
    assert 2 * n_src * width * 4 > l2  # the walk under test is the tile-major one
    g = torch.Generator().manual_seed(7)
    dst = torch.cat([torch.randint(0, n_dst - 100, (240_000,), generator=g), torch.full((60_000,), 5)])
    src = torch.randint(0, n_src, (dst.numel(),), generator=g)
    perm = torch.randperm(dst.numel(), generator=g)
    graph = UGraph.from_coo(src[perm], dst[perm], n_src, n_dst, torch.int32).to("cuda")
    cases = [Case("copy_lhs", "sum", "src", "null", (width,), ()), Case("copy_lhs", "max", "src", "null", (width,), ()),
             Case("mul", "sum", "src", "edge", (width,), (1,)), Case("mul", "sum", "src", "edge", (4, 64), (4, 1)),
             Case("add", "none", "src", "dst", (width,), (width,)), Case("dot", "none", "src", "dst", (4, 64), (4, 64))]
    failures = []
    for case in cases:
        op = make_op(case, graph, torch.float32, "cuda", g)
        for grouping, tiling in ((4, 2), (1, 4), (16, 8)):
            failure = run_case(graph, op, ParallelInfo(strategy, grouping, tiling), torch.float32)
            if failure:
                failures.append(f"{case} {grouping}:{tiling}: {failure}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=("i32", "i64"))
@pytest.mark.parametrize("dtype", DTYPES, ids=[DTYPE_NAMES[d] for d in DTYPES])
def test_heavy_rows_match_their_teams(dtype, idtype):
    """team.cuh's heavy rows on warp_vertex: a graph of rows from 0 to 6,000 edges (several of a
    length, the longest in shuffled positions), operands of small integers so that max/min tie
    everywhere. Each case runs twice on two copies of the graph, one with its long rows and one
    without (every row then stays with its team): max/min must give the same values and the same
    first winners, sums and means the oracle's values, every run the same bits."""
    g = torch.Generator().manual_seed(11)
    n_src, n_dst = 400, 300
    long = torch.tensor([6000, 3000, 3000, 700, 177, 176, 64, 33, 33, 32])
    degrees = torch.cat([long, torch.randint(0, 12, (n_dst - long.numel(),), generator=g)])
    degrees = degrees[torch.randperm(n_dst, generator=g)]
    dst = torch.repeat_interleave(torch.arange(n_dst), degrees)
    src = torch.randint(0, n_src, (dst.numel(),), generator=g)
    perm = torch.randperm(dst.numel(), generator=g)
    with_rows = UGraph.from_coo(src[perm], dst[perm], n_src, n_dst, idtype).to("cuda")
    without = UGraph.from_coo(src[perm], dst[perm], n_src, n_dst, idtype).to("cuda")
    without._long_rows = torch.empty(0, dtype=idtype, device="cuda")
    assert with_rows.long_rows().numel() == 9
    small = lambda *shape: torch.randint(-3, 4, shape, generator=g).to(dtype).cuda()  # noqa: E731
    failures = []
    for width in (16, 64, 257):
        x, w, y = small(n_src, width), small(dst.numel(), 1), small(n_dst, width)
        for gather in ("sum", "max", "min", "mean"):
            for op in (OpInfo("copy_lhs", gather, x, "src", None, "null", "dst"),
                       OpInfo("mul", gather, x, "src", w, "edge", "dst"),
                       OpInfo("add", gather, x, "src", y, "dst", "dst")):
                for grouping, tiling in ((1, 1), (4, 2), (16, 1), (64, 3)):
                    pinfo = ParallelInfo("warp_vertex", grouping, tiling)
                    name = f"{op.edge_op}-{gather} F={width} {pinfo}"
                    failure = run_case(with_rows, op, pinfo, dtype)
                    if failure:
                        failures.append(f"{name}: {failure}")
                        continue
                    if gather in ("max", "min"):
                        ours, teams = ugrapher(with_rows, op, pinfo), ugrapher(without, op, pinfo)
                        if not all(a is None and b is None or torch.equal(a, b) for a, b in zip(ours, teams)):
                            failures.append(f"{name}: differs from the rows' own teams (values or first winners)")
    assert not failures, f"{len(failures)} failed:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=("i32", "i64"))
@pytest.mark.parametrize("dtype", DTYPES, ids=[DTYPE_NAMES[d] for d in DTYPES])
@pytest.mark.parametrize("strategy", ("warp_vertex", "warp_edge"))
def test_heads_narrower_than_a_lane(strategy, dtype, idtype):
    """Heads of 1, 2 and 4 values times one value per head, as GAT's aggregation multiplies them.
    A lane of 4 elements over heads of 2 reads two values of B (team.cuh's kGatherB = 2: 2 float
    heads on 16 bytes, 2 half heads on 8); a lane within one head reads one. B by edge (u_mul_e),
    by destination (u_mul_v) and by source, every gather, heads that do not fill a slab, and an A
    that fits no vector, against the fp64 oracle."""
    compiled = _ext.compiled_cuda_keys()
    if (strategy, DTYPE_NAMES[dtype]) not in compiled:
        pytest.skip(f"{strategy}/{DTYPE_NAMES[dtype]} not compiled")
    graph = suite_graph(idtype, "cuda", seed=3)
    gen = torch.Generator().manual_seed(hash((strategy, str(dtype), str(idtype), "heads")) % 2**31)
    failures, ran = [], 0
    for heads, width, b_type, gather in itertools.product((8, 6, 3, 34), (1, 2, 4), ("edge", "dst", "src"),
                                                          ("none", "sum", "max", "min", "mean")):
        case = Case("mul", gather, "src", b_type, (heads, width), (heads, 1))
        op = make_op(case, graph, dtype, "cuda", gen)
        sig, _ = ops.signature(graph, op)
        for grouping, tiling in ((1, 1), (4, 2), (32, 3)):  # warp_edge refuses float64 max/min
            pinfo = ParallelInfo(strategy, grouping, tiling)
            ok, failure = run_unless_refused(graph, op, sig, pinfo, dtype, compiled)
            ran += ok
            if failure:
                failures.append(f"{case} {pinfo}: {failure}")
    # A one element into its storage: no row of it starts on a vector, whatever B's blocks promise.
    x = random_operand(graph.num_src * 16 + 1, (), dtype, "cuda", gen, False)[1:].view(graph.num_src, 8, 2)
    w = random_operand(graph.num_edges, (8, 1), dtype, "cuda", gen, False)
    op = OpInfo("mul", "sum", x, "src", w, "edge", "dst")
    failure = run_case(graph, op, ParallelInfo(strategy, 4, 2), dtype)
    ran += 1
    if failure:
        failures.append(f"misaligned A: {failure}")
    assert not failures, f"{len(failures)} of {ran} failed:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=("i32", "i64"))
@pytest.mark.parametrize("dtype", DTYPES, ids=[DTYPE_NAMES[d] for d in DTYPES])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_exchanged_operands(strategy, dtype, idtype):
    """u_mul_e and u_add_e whose A repeats over blocks and whose B does not run as B op A
    (ops.swaps_operands): NNConv's (16, 1) by (16, 16), blocks of 4 and of 2 (8-byte lanes in
    float32, scalars in halves), each operand by source, destination and edge, every gather; the
    values and both args (max/min) against the fp64 oracle's for the call as written."""
    compiled = _ext.compiled_cuda_keys()
    if (strategy, DTYPE_NAMES[dtype]) not in compiled:
        pytest.skip(f"{strategy}/{DTYPE_NAMES[dtype]} not compiled")
    graph = suite_graph(idtype, "cuda", seed=4)
    gen = torch.Generator().manual_seed(hash((strategy, str(dtype), str(idtype), "exchanged")) % 2**31)
    samples = itertools.cycle(PARALLEL_SAMPLES)
    failures, ran = [], 0
    for (a_shape, b_shape), edge_op, (a_type, b_type), gather in itertools.product(
            (((16, 1), (16, 16)), ((4, 1), (4, 4)), ((3, 1), (3, 2))), ("mul", "add"),
            (("src", "edge"), ("edge", "dst"), ("dst", "src")), ("none", "sum", "max", "min", "mean")):
        case = Case(edge_op, gather, a_type, b_type, a_shape, b_shape)
        op = make_op(case, graph, dtype, "cuda", gen)
        sig, bc = ops.signature(graph, op)
        assert ops.swaps_operands(edge_op, bc, graph.device), case
        g, t = next(samples)
        pinfo = ParallelInfo(strategy, g, t)
        ok, failure = run_unless_refused(graph, op, sig, pinfo, dtype, compiled)
        ran += ok
        if failure:
            failures.append(f"{case} {pinfo}: {failure}")
    assert ran and not failures, f"{len(failures)} of {ran} failed:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=("f32", "f16"))
@pytest.mark.parametrize("strategy", ("warp_vertex", "warp_edge"))
def test_a_block_promise_of_0_or_1_reads_every_offset(strategy, dtype):
    """params.h's b_off_block 0 and 1 promise nothing of b_off: a caller of the C API may pass
    either with a GAT-like broadcast, and the lanes must then read B at each element's offset,
    not one or two values a lane (team.cuh's vectors_fit)."""
    graph = suite_graph(torch.int32, "cuda", seed=5)
    gen = torch.Generator().manual_seed(5)
    failures = []
    for heads, width in ((8, 2), (4, 4), (2, 8)):
        op = make_op(Case("mul", "sum", "src", "edge", (heads, width), (heads, 1)), graph, dtype, "cuda", gen)
        ref_c, _, _ = reference(graph, op)
        for promise in (0, 1):
            prep = ops.prepare(graph, op, ParallelInfo(strategy, 4, 2))
            assert prep.params.b_off_block == width  # what prepare promises for this broadcast
            prep.params.b_off_block = promise
            c, _, _ = prep.run()
            if not close(c, ref_c, dtype):
                failures.append(f"heads of {width}, b_off_block {promise}")
    assert not failures, "\n".join(failures)


def smoke(tiny: bool = False) -> int:
    """A handful of cases for compute-sanitizer (memcheck, racecheck), which slows every launch
    a hundredfold: each strategy on copy, mul and dot, every gather, two (g, t), in float32; then
    GAT's heads of 2 and 4 (one and two attention values a lane) in float32 and float16."""
    graph = suite_graph(torch.int32, "cuda")
    gen = torch.Generator().manual_seed(0)
    compiled = _ext.compiled_cuda_keys()
    picked = [c for c in op_cases() if c.edge_op in ("copy_lhs", "mul", "dot") and c.a_type == "src"
              and c.b_type in ("null", "edge", "dst")]
    if tiny:  # racecheck: one case per gather kind
        picked = [c for c in picked if c.edge_op == "mul" and c.b_type == "edge"]
    heads = [Case("mul", gather, "src", b_type, (8, width), (8, 1))
             for width, b_type, gather in itertools.product((2, 4), ("edge", "dst"), ("sum", "max"))]
    runs = itertools.chain(
        itertools.product(STRATEGIES, (torch.float32,), picked, ((1, 1), (8, 5))),
        itertools.product(("warp_vertex", "warp_edge"), (torch.float32, torch.float16), heads, ((1, 1), (8, 5))))
    bad = 0
    for strategy, dtype, case, (g, t) in runs:
        op = make_op(case, graph, dtype, "cuda", gen)
        sig, _ = ops.signature(graph, op)
        if why_not(strategy, sig, graph.num_edges, compiled):
            continue
        failure = run_case(graph, op, ParallelInfo(strategy, g, t), dtype)
        if failure:
            bad += 1
            print(f"FAIL {case} {strategy}:{g}:{t} {dtype}: {failure}")
    print(f"smoke: {bad} failures")
    return bad


if __name__ == "__main__":
    sys.exit(1 if smoke(tiny="--tiny" in sys.argv) else 0)
