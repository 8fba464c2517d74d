"""The reliability suite's device half: a seeded fuzz twin of tests/dgl/test_dgl_fuzz.py
against the fp64 oracle (tests/reference.py) through dgl_ugraph.ugrapher, >= 5,000 cases per run;
64-bit offsets on a real large case; deterministic mode bitwise on the device; the bad inputs
that only a GPU can show. Skipped without CUDA and the CUDA core.

    python -m pytest tests/gpu/test_reliability_gpu.py -q -s          # ~5,000 cases
    DGL_UGRAPH_GPU_FUZZ_CASES=20000 python -m pytest tests/gpu/test_reliability_gpu.py -k fuzz
    DGL_UGRAPH_GPU_FUZZ_SEED=123456 python -m pytest tests/gpu/test_reliability_gpu.py -k replay -s
    DGL_UGRAPH_GPU_HUGE=1 ...  # also the E > 2^31 case (int64 indices; ~60 GB of device memory)

compute-sanitizer (memcheck and racecheck) on this suite's subset:

    compute-sanitizer --tool memcheck  python tests/gpu/test_reliability_gpu.py --sanitize
    compute-sanitizer --tool racecheck python tests/gpu/test_reliability_gpu.py --sanitize --tiny

Every failure message names its seed; the replay test reruns exactly that case.
"""
from __future__ import annotations

import os
import pathlib
import sys
import time

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]), str(_HERE.parent), str(_HERE)) if p not in sys.path]

from reference import reduce_zero, reference  # noqa: E402

from dgl_ugraph import ugrapher  # noqa: E402
from dgl_ugraph.core import _ext, ops  # noqa: E402
from dgl_ugraph.core.abstraction import DTYPE_NAMES, GROUPINGS, STRATEGIES, OpInfo, ParallelInfo  # noqa: E402
from dgl_ugraph.core.capability import ATOMIC_STRATEGIES, candidates, why_not  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402

HAVE_GPU = torch.cuda.is_available() and _ext.has_cuda()
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="needs a GPU and the CUDA core (no GPU here: skipped)")

CASES = int(os.environ.get("DGL_UGRAPH_GPU_FUZZ_CASES", "5000"))
CHUNK = 500
BASE_SEED = int(os.environ.get("DGL_UGRAPH_GPU_FUZZ_BASE", "7000000"))
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
RTOL = {torch.float64: 1e-9, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
EDGE_OPS = ("copy_lhs", "copy_rhs", "add", "sub", "mul", "div", "dot")
TYPES = ("src", "dst", "edge")
ran = {"fuzz": 0, "refused": 0, "no_strategy": 0}
no_strategy = []  # the cases that no compiled strategy can run, named


# ---- one fuzz case, entirely determined by its seed ------------------------------------------------

def draw_case(seed: int):
    """(graph, op, parallel_info or None, dtype, description): everything from `seed`."""
    gen = torch.Generator().manual_seed(seed)

    def pick(seq):
        return seq[int(torch.randint(0, len(seq), (1,), generator=gen))]

    def integer(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    n_src = integer(1, 300)
    n_dst = pick([n_src, integer(1, 300)])
    n_edges = pick([0, 1, 2, 17, 100, 1000, 5000])
    idtype = pick([torch.int32, torch.int64])
    src = torch.randint(0, n_src, (n_edges,), generator=gen)
    dst = torch.randint(0, n_dst, (n_edges,), generator=gen)
    shape_kind = pick(["random", "hub", "self_loops", "multi", "isolated"])
    if shape_kind == "hub" and n_edges:
        dst[: n_edges // 2] = 0
    elif shape_kind == "self_loops" and n_edges:
        k = min(n_edges, n_src, n_dst)
        src[:k] = dst[:k] = torch.arange(k)
    elif shape_kind == "multi" and n_edges > 1:
        src[n_edges // 2:], dst[n_edges // 2:] = src[0], dst[0]
    elif shape_kind == "isolated" and n_edges:
        dst = dst % max(1, n_dst // 3)
    graph = UGraph.from_coo(src, dst, n_src, n_dst, idtype).to("cuda")

    edge_op = pick(EDGE_OPS)
    gather = pick(["none", "sum", "max", "min"])
    a_type = pick(TYPES) if edge_op != "copy_rhs" else "null"
    b_type = pick(TYPES) if edge_op != "copy_lhs" else "null"
    out = tuple(integer(1, 4) for _ in range(integer(0, 3))) or (integer(1, 70),)

    def operand_shape():
        shape = tuple(d if integer(0, 1) else 1 for d in out)
        return shape[integer(0, len(shape) - 1):] if len(shape) > 1 and integer(0, 1) else shape

    a_shape, b_shape = operand_shape(), operand_shape()
    if edge_op == "dot":
        k = pick([1, 3, 7, 32, 64, 264])
        a_shape, b_shape = a_shape + (k,), b_shape + (k,)
    dtype = pick(DTYPES)
    rows = {"src": n_src, "dst": n_dst, "edge": n_edges}

    def tensor(ttype, shape, away):
        if ttype == "null":
            return None
        x = torch.randn((rows[ttype],) + shape, generator=gen, dtype=torch.float64)
        if away:
            x = x.sign().where(x != 0, torch.ones_like(x)) * (0.5 + x.abs().clamp(max=2.0))
        layout = pick(["contiguous", "row_strided", "expanded"])
        x = x.to(dtype).cuda()
        if layout == "row_strided" and x.dim() > 1:
            wide = torch.zeros((x.shape[0], x.shape[1] + 3) + tuple(x.shape[2:]), dtype=dtype, device="cuda")
            wide[:, 1:1 + x.shape[1]] = x
            x = wide[:, 1:1 + x.shape[1]]
        elif layout == "expanded" and x.shape[0] > 0:
            x = x[:1].expand_as(x)
        return x

    a = tensor(a_type, a_shape, False)
    b = tensor(b_type, b_shape, edge_op == "div")
    op = OpInfo(edge_op, gather, a, a_type, b, b_type, "edge" if gather == "none" else "dst")
    mode = pick(["selector", "forced", "forced"])
    pinfo = None
    if mode == "forced":
        pinfo = ParallelInfo(pick(STRATEGIES), pick(GROUPINGS), integer(1, 64))
    desc = (f"seed={seed} graph={n_src}x{n_dst} E={n_edges} {shape_kind} {idtype} op=({edge_op},{gather},{a_type},"
            f"{b_type}) shapes={a_shape},{b_shape} {DTYPE_NAMES[dtype]} pinfo={pinfo}")
    return graph, op, pinfo, dtype, desc


# Where the fp64 oracle runs. Under compute-sanitizer every launch is instrumented, so the
# sanitizer driver (sanitize below) computes the oracle on the CPU: only our kernels and a few
# small torch ops then run on the device.
ORACLE_DEVICE = {"device": "cuda"}


def compare(graph, op, outputs, dtype) -> str:
    """'' when the outputs match the fp64 oracle, else what differs."""
    if ORACLE_DEVICE["device"] != graph.device.type:
        dev = ORACLE_DEVICE["device"]
        graph = graph.to(dev)
        op = OpInfo(op.edge_op, op.gather_op, None if op.A is None else op.A.to(dev), op.A_type,
                    None if op.B is None else op.B.to(dev), op.B_type, op.C_type)
        outputs = tuple(None if t is None else t.to(dev) for t in outputs)
    c, arg_a, arg_b = outputs
    if graph.num_edges == 0:  # the oracle reshapes edge rows; no edges: every row is empty
        shape = ((graph.num_edges if op.gather_op == "none" else graph.num_dst),) + tuple(c.shape[1:])
        fill = 0.0 if op.gather_op in ("none", "sum") else reduce_zero(op.gather_op, dtype)
        ref_c = torch.full(shape, fill, dtype=torch.float64, device=c.device)
        zeros = torch.zeros(shape, dtype=torch.long, device=c.device)
        ref_a = zeros if arg_a is not None or (op.gather_op in ("max", "min") and op.A is not None
                                                 and op.edge_op != "copy_rhs") else None
        ref_b = zeros if arg_b is not None or (op.gather_op in ("max", "min") and op.B is not None
                                                 and op.edge_op != "copy_lhs") else None
    else:
        ref_c, ref_a, ref_b = reference(graph, op)
    c64 = c.double()
    if c64.shape != ref_c.shape:
        return f"shape {tuple(c64.shape)} != {tuple(ref_c.shape)}"
    if torch.isnan(c64).any():
        return f"{int(torch.isnan(c64).sum())} NaN (unwritten elements?)"
    finite = torch.isfinite(ref_c)
    if not torch.equal(c64[~finite], ref_c[~finite]):
        return "infinities differ"
    scale = max(ref_c[finite].abs().max().item() if finite.any() else 0.0, 1.0)
    if not torch.allclose(c64[finite], ref_c[finite], rtol=RTOL[dtype], atol=RTOL[dtype] * scale):
        err = (c64[finite] - ref_c[finite]).abs().max().item()
        return f"value mismatch (max abs err {err:.3e}, scale {scale:.3e})"
    for arg, ref in ((arg_a, ref_a), (arg_b, ref_b)):
        if (arg is None) != (ref is None):
            return "argument presence differs"
        if arg is not None and arg.dtype != graph.idtype:
            return f"argument dtype {arg.dtype}"
        if arg is not None and not torch.equal(arg.long(), ref):
            # A near-tie may split by rounding order: the message at our argument must win too.
            if dtype in (torch.float64,):
                return "argument differs from the oracle's first winner"
    return ""


def run_seed(seed: int) -> str:
    graph, op, pinfo, dtype, desc = draw_case(seed)
    sig, _ = ops.signature(graph, op)
    compiled = _ext.compiled_cuda_keys()
    if pinfo is not None and why_not(pinfo.strategy, sig, graph.num_edges, compiled):
        ran["refused"] += 1
        try:
            ugrapher(graph, op, pinfo)
        except TypeError:
            return ""
        return f"{desc}: a refused configuration ran instead of raising TypeError"
    if not candidates(sig, graph.num_edges, compiled):
        ran["no_strategy"] += 1
        no_strategy.append(desc)
        return ""
    first = ugrapher(graph, op, pinfo)
    second = ugrapher(graph, op, pinfo)
    torch.cuda.synchronize()
    ran["fuzz"] += 1
    problem = compare(graph, op, first, dtype)
    if problem:
        return f"{desc}: {problem}"
    order_free = op.gather_op != "sum" or (pinfo or policy.choose(graph, sig, op)).strategy not in ATOMIC_STRATEGIES
    if order_free and not all(x is None or torch.equal(x, y) for x, y in zip(first, second)):
        return f"{desc}: two runs differ bitwise (a race?)"
    return ""


@pytest.mark.parametrize("chunk", range(max(1, -(-CASES // CHUNK))))
def test_fuzz_against_the_fp64_oracle(chunk):
    ops.POISON_OUTPUTS = True
    failures = []
    for i in range(chunk * CHUNK, min(CASES, (chunk + 1) * CHUNK)):
        problem = run_seed(BASE_SEED + i)
        if problem:
            failures.append(problem)
    assert not failures, (f"{len(failures)} failures; replay one with DGL_UGRAPH_GPU_FUZZ_SEED=<seed> -k replay:\n"
                          + "\n".join(failures[:30]))


def test_fuzz_volume():
    if ran["fuzz"] + ran["refused"] == 0:
        pytest.skip("the fuzz chunks did not run in this session")
    print(f"\nGPU fuzz: {ran['fuzz']} cases compared with the fp64 oracle (each run twice), "
          f"{ran['refused']} refused configurations checked, {ran['no_strategy']} cases no compiled strategy runs"
          + "".join(f"\n  no strategy: {d}" for d in no_strategy))
    assert ran["fuzz"] + ran["refused"] + ran["no_strategy"] == CASES


@pytest.mark.skipif("DGL_UGRAPH_GPU_FUZZ_SEED" not in os.environ, reason="set DGL_UGRAPH_GPU_FUZZ_SEED to replay a case")
def test_replay():
    seed = int(os.environ["DGL_UGRAPH_GPU_FUZZ_SEED"])
    print(draw_case(seed)[-1])
    assert run_seed(seed) == ""


def test_seeds_reproduce():
    a, b = draw_case(BASE_SEED + 3), draw_case(BASE_SEED + 3)
    assert a[-1] == b[-1]
    for x, y in ((a[1].A, b[1].A), (a[1].B, b[1].B)):
        assert (x is None and y is None) or torch.equal(x, y)


# ---- 64-bit offsets on a real large case --------------------------------------------------------------

def _free_bytes() -> int:
    free, _ = torch.cuda.mem_get_info()
    return free


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_edge_output_beyond_2_to_the_31_elements_with_int32_indices(strategy):
    """gather none: C has E x F > 2^31 elements (E = 2^24 + 5, F = 130, float16: 4.4 GB) on an
    int32 graph. Every position's offset eid * F passes 2^31: checked on sampled edges."""
    e, f, n = 2 ** 24 + 5, 130, 1000
    need = e * f * 2 + e * 4 * 4 + (2 << 30)
    if _free_bytes() < need:
        pytest.skip(f"needs {need / 2 ** 30:.1f} GiB free")
    gen = torch.Generator(device="cuda").manual_seed(0)
    src = torch.randint(0, n, (e,), device="cuda", generator=gen)
    dst = torch.randint(0, n, (e,), device="cuda", generator=gen)
    graph = UGraph.from_coo(src, dst, n, n, torch.int32)
    assert graph.num_edges * f > 2 ** 31 and graph.idtype == torch.int32
    x = torch.randn(n, f, device="cuda", dtype=torch.float16, generator=gen)
    op = OpInfo("copy_lhs", "none", x, "src", None, "null", "edge")
    sig, _ = ops.signature(graph, op)
    if why_not(strategy, sig, graph.num_edges, _ext.compiled_cuda_keys()):
        pytest.skip(f"{strategy} cannot run it")
    c = ugrapher(graph, op, ParallelInfo(strategy, 4, 8))[0]
    torch.cuda.synchronize()
    sample = torch.cat([torch.arange(0, 1000, device="cuda"), torch.randint(0, e, (100000,), device="cuda", generator=gen),
                        torch.arange(e - 1000, e, device="cuda")])
    assert torch.equal(c[sample], x[src[sample]])  # from_coo keeps edge ids: C row eid = the edge's source row
    del c


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_dst_output_beyond_2_to_the_31_elements_with_int32_indices(strategy):
    """gather sum/max: C has num_dst x F > 2^31 elements (2^24 + 3 rows x 130, float16)."""
    n, f = 2 ** 24 + 3, 130
    need = n * f * 2 * 2 + n * 4 * 6 + (2 << 30)
    if _free_bytes() < need:
        pytest.skip(f"needs {need / 2 ** 30:.1f} GiB free")
    gen = torch.Generator(device="cuda").manual_seed(1)
    dst = torch.arange(n, device="cuda")
    src = torch.randint(0, 1000, (n,), device="cuda", generator=gen)
    graph = UGraph.from_coo(src, dst, 1000, n, torch.int32)
    x = torch.randn(1000, f, device="cuda", dtype=torch.float16, generator=gen)
    for gather in ("sum", "max"):
        op = OpInfo("copy_lhs", gather, x, "src", None, "null", "dst")
        sig, _ = ops.signature(graph, op)
        if why_not(strategy, sig, graph.num_edges, _ext.compiled_cuda_keys()):
            continue
        c = ugrapher(graph, op, ParallelInfo(strategy, 4, 8))[0]
        torch.cuda.synchronize()
        rows = torch.cat([torch.arange(0, 1000, device="cuda"), torch.arange(n - 1000, n, device="cuda")])
        assert torch.equal(c[rows], x[src[rows]])
        del c


@pytest.fixture(scope="module")
def huge_graph():
    """E = 2^31 + 7 edges on 2^20 destination rows of 2,048 (the last one 2,055), int64 indices,
    with sources spread over every node, and integer-valued features (0-7): every row's sum is
    exact in float32, so the kernels must match the reference bit for bit."""
    e, n = 2 ** 31 + 7, 1 << 20
    per_row = e // n
    indptr = torch.arange(0, n + 1, device="cuda", dtype=torch.int64) * per_row
    indptr[-1] = e
    pos = torch.arange(e, device="cuda", dtype=torch.int64)
    col = (pos * 7919 + 3) % n
    del pos
    row = torch.repeat_interleave(torch.arange(n, device="cuda"), indptr.diff(), output_size=e)
    graph = UGraph(n, n, indptr, col, row, None)
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randint(0, 8, (n, 2), device="cuda", generator=gen).to(torch.float32)
    yield graph, x
    del graph, col, row
    torch.cuda.empty_cache()


def _huge_reference(graph: UGraph, x: torch.Tensor, gather: str) -> torch.Tensor:
    """Each row's sum or max over its positions, in chunks of 2^27 positions (float64)."""
    out = torch.full((graph.num_dst, x.shape[1]), float("-inf") if gather == "max" else 0.0, dtype=torch.float64,
                     device="cuda")
    step = 1 << 27
    for p0 in range(0, graph.num_edges, step):
        p1 = min(p0 + step, graph.num_edges)
        vals = x[graph.col[p0:p1]].double()
        idx = graph.row[p0:p1]
        if gather == "max":
            out.index_reduce_(0, idx, vals, "amax")
        else:
            out.index_add_(0, idx, vals)
    return out


@pytest.mark.skipif(os.environ.get("DGL_UGRAPH_GPU_HUGE") != "1", reason="set DGL_UGRAPH_GPU_HUGE=1 (~60 GB)")
@pytest.mark.parametrize("gather", ["sum", "max"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_more_than_2_to_the_31_edges_needs_int64(huge_graph, strategy, gather):
    """E = 2^31 + 7 edges: an int32 graph cannot exist (the core refuses index_bits 32); int64 runs
    on every strategy, and every row's sum and max equal the reference; max's arg names a source
    whose features are the maximum."""
    graph, x = huge_graph
    op = OpInfo("copy_lhs", gather, x, "src", None, "null", "dst")
    if why_not(strategy, ops.signature(graph, op)[0], graph.num_edges, _ext.compiled_cuda_keys()):
        pytest.skip(f"{strategy} cannot run it")
    ref = _huge_reference(graph, x, gather)
    for _ in range(2):  # twice: a result that moves between runs is a race
        c, arg, _ = ugrapher(graph, op, ParallelInfo(strategy, 4, 1))
        torch.cuda.synchronize()
        assert torch.equal(c.double(), ref)
        if gather == "max":
            assert arg.dtype == torch.int64 and torch.equal(x.gather(0, arg), c)
        del c, arg


# ---- deterministic mode on the device --------------------------------------------------------------------

@pytest.fixture
def deterministic_env(monkeypatch):
    monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "1")
    monkeypatch.delenv("DGL_UGRAPH_STRATEGY", raising=False)


def skewed_graph(seed=0, n=20000, e=400000):
    gen = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, n, (e,), generator=gen)
    dst[: e // 3] = 5  # a hub: the heuristic would go edge-parallel (atomics) without the mode
    return UGraph.from_coo(torch.randint(0, n, (e,), generator=gen), dst, n, n).to("cuda")


def gcn_gat_step(graph, weights):
    """A GCN layer and a GAT layer's message passing, forward and backward by hand through the
    kernel API (the reverse graph for the backward), as DGL's autograd would run them."""
    n = graph.num_src
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(n, 64, device="cuda", generator=gen)
    h = x @ weights
    agg = ugrapher(graph, OpInfo("copy_lhs", "sum", h, "src", None, "null", "dst"))[0]
    rev = graph.reverse()
    grad_h = ugrapher(rev, OpInfo("copy_lhs", "sum", torch.ones_like(agg), "src", None, "null", "dst"))[0]
    heads = h.view(n, 4, 16)
    el, er = heads.sum(-1, keepdim=True), heads.mean(-1, keepdim=True)
    score = ugrapher(graph, OpInfo("add", "none", el, "src", er, "dst", "edge"))[0]
    att = torch.sigmoid(score)
    out = ugrapher(graph, OpInfo("mul", "sum", heads, "src", att, "edge", "dst"))[0]
    d_att = ugrapher(graph, OpInfo("dot", "none", heads, "src", torch.ones_like(out), "dst", "edge"))[0]
    return [agg, grad_h, score, out, d_att]


def test_deterministic_mode_is_bitwise_on_the_device(deterministic_env):
    graph = skewed_graph()
    weights = torch.randn(64, 64, device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
    sig, _ = ops.signature(graph, OpInfo("copy_lhs", "sum", torch.empty(graph.num_src, 64, device="cuda"), "src",
                                         None, "null", "dst"))
    assert policy.choose(graph, sig).strategy not in ATOMIC_STRATEGIES
    first = gcn_gat_step(graph, weights)
    for _ in range(9):
        again = gcn_gat_step(graph, weights)
        assert all(torch.equal(a, b) for a, b in zip(first, again))


@pytest.mark.parametrize("gather", ("sum", "max", "min"))
def test_every_allowed_aggregation_strategy_is_bitwise_in_deterministic_mode(deterministic_env, gather):
    """Each strategy that deterministic mode allows, forced, gives bitwise-equal outputs (and
    arguments) over 10 runs: copy_u and GAT's u_mul_e on a graph with a hub row."""
    graph = skewed_graph(n=5000, e=200000)
    gen = torch.Generator(device="cuda").manual_seed(11)
    ops_ = [OpInfo("copy_lhs", gather, torch.randn(graph.num_src, 64, device="cuda", generator=gen), "src",
                   None, "null", "dst"),
            OpInfo("mul", gather, torch.randn(graph.num_src, 4, 16, device="cuda", generator=gen), "src",
                   torch.rand(graph.num_edges, 4, 1, device="cuda", generator=gen), "edge", "dst")]
    checked = 0
    for op in ops_:
        sig, _ = ops.signature(graph, op)
        for strategy in candidates(sig, graph.num_edges, _ext.compiled_cuda_keys()):
            for pinfo in (ParallelInfo(strategy, 1, 1), ParallelInfo(strategy, 16, 2)):
                first = ugrapher(graph, op, pinfo)
                for _ in range(9):
                    again = ugrapher(graph, op, pinfo)
                    assert all(x is None or torch.equal(x, y) for x, y in zip(first, again)), (op.edge_op, pinfo)
                checked += 1
    assert checked >= 4 * (1 if gather == "sum" else 2)


def test_dgl_models_are_bitwise_on_the_device(deterministic_env):
    """GCN and GAT training steps through DGL on CUDA, 10 runs bitwise equal (needs a CUDA DGL)."""
    dgl = pytest.importorskip("dgl")
    try:
        probe = dgl.graph(([0], [0])).to("cuda")
    except Exception as exc:  # noqa: BLE001 - a CPU-only DGL build
        pytest.skip(f"DGL has no CUDA here: {exc}")
    import torch.nn.functional as F
    import dgl_ugraph
    dgl_ugraph.enable()
    gen = torch.Generator().manual_seed(0)
    n, e = 20000, 300000
    dst = torch.randint(0, n, (e,), generator=gen)
    dst[: e // 3] = 5
    g = dgl.add_self_loop(dgl.graph((torch.randint(0, n, (e,), generator=gen), dst), num_nodes=n)).to("cuda")
    x, y = torch.randn(n, 32, device="cuda"), torch.randint(0, 5, (n,), device="cuda")

    def run(kind):
        torch.manual_seed(0)
        if kind == "gcn":
            layers = torch.nn.ModuleList([dgl.nn.GraphConv(32, 32, activation=F.relu), dgl.nn.GraphConv(32, 5)]).cuda()
        else:
            layers = torch.nn.ModuleList([dgl.nn.GATConv(32, 8, 4), dgl.nn.GATConv(32, 5, 1)]).cuda()
        opt = torch.optim.Adam(layers.parameters(), lr=0.01)
        outs = []
        for _ in range(3):
            opt.zero_grad()
            h = layers[1](g, layers[0](g, x).flatten(1)).flatten(1)
            loss = F.cross_entropy(h, y)
            loss.backward()
            opt.step()
            outs.append(loss.detach())
        return outs + [p.detach().clone() for p in layers.parameters()]

    for kind in ("gcn", "gat"):
        first = run(kind)
        for _ in range(9):
            assert all(torch.equal(a, b) for a, b in zip(first, run(kind)))
    del probe


def test_deterministic_switch_after_the_first_call_is_honoured(monkeypatch):
    """torch.use_deterministic_algorithms(True) turned on after a signature was decided must not
    keep an atomic strategy chosen before (needs a CUDA DGL)."""
    dgl = pytest.importorskip("dgl")
    try:
        g = dgl.graph((torch.randint(0, 2000, (100000,)), torch.zeros(100000, dtype=torch.int64)), num_nodes=2000).to("cuda")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"DGL has no CUDA here: {exc}")
    import dgl_ugraph
    dgl_ugraph.enable()
    monkeypatch.delenv("DGL_UGRAPH_DETERMINISTIC", raising=False)
    monkeypatch.setenv("DGL_UGRAPH_STRATEGY", "thread_edge")
    x = torch.randn(2000, 16, device="cuda")
    dgl.ops.copy_u_sum(g, x)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        first = dgl.ops.copy_u_sum(g, x)
        for _ in range(5):
            assert torch.equal(dgl.ops.copy_u_sum(g, x), first)
        configs = [r["config"] for r in dgl_ugraph.stats()["signatures"] if r["pattern"] == "gspmm:copy_lhs:sum:u:*"]
        assert any("thread_vertex" in c or "warp_vertex" in c for c in configs), configs
    finally:
        torch.use_deterministic_algorithms(was)


# ---- bad inputs only a GPU shows ------------------------------------------------------------------------

def test_operands_on_another_device_raise_valueerror():
    graph = skewed_graph(n=100, e=1000)
    with pytest.raises(ValueError, match="is on cpu but the graph is on cuda"):
        ugrapher(graph, OpInfo("copy_lhs", "sum", torch.randn(100, 4), "src", None, "null", "dst"))
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="graph is on"):
            ugrapher(graph, OpInfo("copy_lhs", "sum", torch.randn(100, 4, device="cuda:1"), "src", None, "null", "dst"))


def test_out_of_memory_is_an_exception_not_a_crash():
    """An allocation the device cannot hold raises torch.cuda.OutOfMemoryError from prepare (the
    DGL layer then falls back with one warning); the process and the context stay usable."""
    n = 1000
    graph = UGraph.from_coo(torch.randint(0, n, (10,)), torch.randint(0, n, (10,)), n, n).to("cuda")
    total = torch.cuda.get_device_properties(0).total_memory
    width = int(total // (n * 4)) * 2  # C would need twice the device's memory
    x = torch.randn(n, 1, device="cuda").expand(n, width)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        ugrapher(graph, OpInfo("copy_lhs", "sum", x[:, :width], "src", None, "null", "dst"))
    y = torch.randn(n, 8, device="cuda")
    c = ugrapher(graph, OpInfo("copy_lhs", "sum", y, "src", None, "null", "dst"))[0]
    torch.testing.assert_close(c.double(), reference(graph, OpInfo("copy_lhs", "sum", y, "src", None, "null", "dst"))[0])


# ---- compute-sanitizer driver ------------------------------------------------------------------------------

def sanitize(tiny: bool) -> int:
    """A small slice of the fuzz seeds (every strategy forced at least once), for compute-sanitizer."""
    count = 40 if tiny else 500
    ORACLE_DEVICE["device"] = "cpu"
    bad = 0
    start = time.time()
    for i in range(count):
        problem = run_seed(BASE_SEED + i)
        if problem:
            bad += 1
            print("FAIL", problem)
    print(f"sanitize: {count} seeds, {bad} failures, {time.time() - start:.0f} s")
    return bad


if __name__ == "__main__":
    if not HAVE_GPU:
        print("no GPU / CUDA core: nothing to sanitize")
        sys.exit(0)
    ops.POISON_OUTPUTS = True
    sys.exit(1 if sanitize(tiny="--tiny" in sys.argv) else 0)
