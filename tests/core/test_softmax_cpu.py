"""The fused CPU edge softmax (csrc/cpu/softmax.cpp): the kernel against a float64 oracle, the
DGL layer against DGL's own fused kernels (float64 bit for bit: same operations in the same
order; float32 within a few ulp: its exp is computed inline), and every way it falls back to
DGL's kernel whole; and the size rule of the fused CUDA softmax, plain logic."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch

import dgl
import dgl_ugraph
from dgl_ugraph import UGraph
from dgl_ugraph.dgl import interception
from dgl_ugraph.core import _ext
from dgl_ugraph.core.ops import edge_softmax
from tests.dgl_errors import same_error
from tests.reference import SOFTMAX_DTYPES as DTYPES, dname, hub_graph, softmax_close, softmax_oracle as oracle
from tests.reference import softmax_scores as scores
from tests.core.test_core_cpu import omp_threads

pytestmark = pytest.mark.skipif(_ext.LOAD_ERROR is not None, reason=str(_ext.LOAD_ERROR))

# Against the float64 oracle: (rtol, atol as a share of the oracle's largest magnitude). Half
# types round x - max, exp and the sum to their type (as DGL's kernels do), so the error grows
# with |x - max|: scores here stay within +-12. Measured worst cases over this file's shapes:
# float16 3e-3 relative (7e-4 absolute), bfloat16 2.5e-2 (6e-3); backward 1.7e-3 and 1.4e-2 of
# the largest gradient.
TOL = {torch.float64: (1e-12, 1e-14), torch.float32: (1e-5, 1e-6), torch.float16: (5e-3, 4e-3),
       torch.bfloat16: (4e-2, 3e-2)}


def close(got, want, dtype):
    softmax_close(got, want, TOL[dtype])


# ---- the kernel ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=dname)
@pytest.mark.parametrize("shape", [(), (1,), (4, 1), (8,), (2, 3), (65,), (130,)],
                         ids=lambda s: "x".join(map(str, s)) or "1d")
def test_kernel_against_oracle(shape, idtype, dtype):
    """Widths 65 and 130 span several accumulator blocks of 64 elements."""
    graph = hub_graph(idtype)
    x = scores(graph, shape, dtype)
    out = edge_softmax(graph, x)
    assert out.shape == x.shape and out.dtype == dtype
    close(out, oracle(graph, x.double()), dtype)
    y = (out.double() * torch.randn(out.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)).to(dtype)
    close(edge_softmax(graph, out, y), oracle(graph, out.double(), y.double()), dtype)


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_threads_and_identity_edge_ids(threads):
    """Tasks cut the rows at every thread count, each row whole: results equal bit for bit."""
    for identity in (False, True):
        graph = hub_graph(torch.int64, seed=3, nodes=2000, edges=40_000, identity_eids=identity)
        x = scores(graph, (4, 1), torch.float32)
        y = torch.randn(x.shape, generator=torch.Generator().manual_seed(4))
        with omp_threads(1):
            want = edge_softmax(graph, x), edge_softmax(graph, x, y)
        with omp_threads(threads):
            got = edge_softmax(graph, x), edge_softmax(graph, x, y)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        close(got[0], oracle(graph, x.double()), torch.float32)


def test_rows_in_scratch_and_in_place_agree():
    """A row whose edges x width outgrow the per-thread scratch (32768 elements) is computed in
    place, with the same operations: 10,000 edges at width 1 fit, at width 4 they do not."""
    src = torch.randint(0, 50, (10_050,), generator=torch.Generator().manual_seed(8))
    dst = torch.cat([torch.full((10_000,), 3), torch.arange(50)])
    graph = UGraph.from_coo(src, dst, 50, 50, torch.int64)
    x = scores(graph, (1,), torch.float32)
    narrow, wide = edge_softmax(graph, x), edge_softmax(graph, x.expand(-1, 4))
    for j in range(4):
        assert torch.equal(wide[:, j:j + 1], narrow)
    close(narrow, oracle(graph, x.double()), torch.float32)


def test_non_contiguous_scores_and_no_edges():
    graph = hub_graph(torch.int64, seed=5)
    wide = scores(graph, (6,), torch.float64)
    x = wide[:, ::2]
    assert not x.is_contiguous()
    close(edge_softmax(graph, x), oracle(graph, x), torch.float64)
    empty = UGraph.from_coo(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 4, 4, torch.int64)
    assert edge_softmax(empty, torch.zeros(0, 3)).shape == (0, 3)


def test_nan_and_infinity_as_dgl():
    """NaN never wins the max but poisons its row's sum; +inf gives NaN (inf - inf), as in DGL."""
    g = dgl.graph((torch.tensor([0, 1, 2, 0, 1]), torch.tensor([0, 0, 0, 1, 1])), num_nodes=3)
    x = torch.tensor([0.5, float("nan"), 1.0, float("inf"), 2.0])
    with dgl_ugraph.disabled():
        want = dgl.ops.edge_softmax(g, x)
    dgl_ugraph.enable()
    got = dgl.ops.edge_softmax(g, x)
    assert torch.equal(got.isnan(), want.isnan()) and got.isnan().any()
    torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-7, equal_nan=True)


def _raw_args(graph, x, out, backward=False):
    return dict(backward=backward, num_dst=graph.num_dst, num_edges=graph.num_edges, index_bits=64,
                indptr=graph.indptr.data_ptr(), eid=graph.eid.data_ptr(), dtype=0, len=x[0].numel(),
                x=x.data_ptr(), y=x.data_ptr(), out=out.data_ptr())


@pytest.mark.parametrize("field,value,message", [
    ("index_bits", 16, "index_bits must be 32 or 64"),
    ("dtype", 5, "unknown dtype"),
    ("num_edges", -1, "negative size"),
    ("num_edges", 2999, "indptr must run from 0 to num_edges=2999"),
    ("indptr", 0, "indptr is NULL"),
    ("x", 0, "x, out must be set"),
    ("y", 0, "x, out and y must be set"),
])
def test_core_rejects_broken_params(field, value, message):
    graph = hub_graph(torch.int64)
    x = scores(graph, (2,), torch.float32)
    args = dict(_raw_args(graph, x, torch.empty_like(x), backward=field == "y"), **{field: value})
    with pytest.raises(ValueError, match=message):
        _ext.core().edge_softmax_cpu(*args.values())


def test_core_rejects_a_decreasing_indptr():
    graph = hub_graph(torch.int64)
    x = scores(graph, (2,), torch.float32)
    indptr = graph.indptr.clone()
    indptr[3], indptr[4] = indptr[4] + 1, indptr[4]
    args = dict(_raw_args(graph, x, torch.empty_like(x)), indptr=indptr.data_ptr())
    with pytest.raises(ValueError, match="indptr decreases at row 3"):
        _ext.core().edge_softmax_cpu(*args.values())


# ---- through DGL -----------------------------------------------------------------------------

def dgl_graph(idtype, nodes=60):
    """Zero in-degree and zero out-degree nodes (50-59 send nothing, 45-59 receive nothing) and a
    hub (node 0 sends 60 more edges)."""
    gen = torch.Generator().manual_seed(5)
    src = torch.cat([torch.randint(0, 50, (400,), generator=gen), torch.zeros(60, dtype=torch.int64)])
    dst = torch.cat([torch.randint(0, 45, (400,), generator=gen), torch.randint(0, 45, (60,), generator=gen)])
    return dgl.graph((src, dst), num_nodes=nodes, idtype=idtype)


def softmax_step(g, score, grad, norm_by):
    x = score.clone().requires_grad_()
    out = dgl.ops.edge_softmax(g, x, norm_by=norm_by)
    (out * grad).sum().backward()
    return out.detach(), x.grad


@pytest.mark.usefixtures("plugin_on")
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16), ids=dname)
@pytest.mark.parametrize("norm_by", ["dst", "src"])
@pytest.mark.parametrize("shape", [(), (4, 1), (2, 3)], ids=["1d", "heads", "2d"])
@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=dname)
def test_equals_dgl_fused_kernel(idtype, shape, norm_by, dtype):
    """One fused call forward and one backward, on dgl_ugraph; float64 equals DGL's values and
    gradients bit for bit, float32 within a few ulp (the inline exp). bfloat16 sums in float32 where DGL rounds its running sum
    to bfloat16 at every edge: it stays within bfloat16 rounding of DGL's and of the float64
    result."""
    g = dgl_graph(idtype)
    gen = torch.Generator().manual_seed(6)
    score = (torch.randn((g.num_edges(),) + shape, generator=gen, dtype=torch.float64) * 4).to(dtype)
    grad = torch.randn(score.shape, generator=gen, dtype=torch.float64).to(dtype)
    ours = softmax_step(g, score, grad, norm_by)
    seen = dgl_ugraph.stats()["patterns"]
    assert set(seen) == {"edge_softmax_forward", "edge_softmax_backward"}, seen
    assert all(p["fallback"] == 0 and p["intercepted"] == 1 for p in seen.values()), seen
    with dgl_ugraph.disabled():
        theirs = softmax_step(g, score, grad, norm_by)
    if dtype == torch.float64:
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
        return
    if dtype == torch.float32:
        for a, b in zip(ours, theirs):  # measured: at most 3.6e-7 apart, values and gradients below 1
            torch.testing.assert_close(a, b, rtol=2e-6, atol=1e-6)
        return
    exact = softmax_step(g, score.double(), grad.double(), norm_by)
    for a, b, want in zip(ours, theirs, exact):
        torch.testing.assert_close(a, b, rtol=4e-2, atol=2e-2)
        close(a, want, dtype)


@pytest.mark.usefixtures("plugin_on")
def test_gat_model_uses_the_fused_kernel():
    g = dgl.add_self_loop(dgl_graph(torch.int64))
    torch.manual_seed(0)
    conv = dgl.nn.GATConv(5, 3, num_heads=4)
    x = torch.randn(g.num_nodes(), 5)

    def run():
        conv.zero_grad()
        out = conv(g, x)
        out.square().sum().backward()
        return out.detach(), [p.grad.clone() for p in conv.parameters()]

    ours = run()
    with dgl_ugraph.disabled():
        theirs = run()
    # (the aggregation's float32 sums run in another order than DGL's)
    torch.testing.assert_close(ours[0], theirs[0], rtol=1e-4, atol=1e-5)
    for a, b in zip(ours[1], theirs[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for key in ("edge_softmax_forward", "edge_softmax_backward"):
        assert dgl_ugraph.stats()["patterns"][key]["intercepted"] == 1


# ---- falling back: DGL's fused kernel, whole --------------------------------------------------



def softmax_patterns():
    return {k: v for k, v in dgl_ugraph.stats()["patterns"].items() if k.startswith("edge_softmax")}


@pytest.mark.usefixtures("plugin_on")
def test_float16_gets_dgls_error_with_a_reason():
    g = dgl_graph(torch.int64)
    same_error(lambda: dgl.ops.edge_softmax(g, torch.rand(g.num_edges(), 2).to(torch.float16)))
    reasons = softmax_patterns()["edge_softmax_forward"]["reasons"]
    assert any("float16 on CPU" in r for r in reasons), reasons


@pytest.mark.usefixtures("plugin_on")
def test_graph_restricted_to_coo_gets_dgls_kernel_and_its_error():
    """dgl_ugraph makes no format a graph refused, so DGL's fused kernel gets the call, and DGL's
    error (it cannot make the CSC either) comes out."""
    g = dgl_graph(torch.int64).formats("coo")
    same_error(lambda: dgl.ops.edge_softmax(g, torch.randn(g.num_edges(), 2)))
    seen = softmax_patterns()
    assert set(dgl_ugraph.stats()["patterns"]) == {"edge_softmax_forward"}  # no gspmm/gsddmm call either
    assert seen["edge_softmax_forward"]["intercepted"] == 0
    assert any("CSC" in r for r in seen["edge_softmax_forward"]["reasons"]), seen


@pytest.mark.usefixtures("plugin_on")
def test_a_failing_kernel_costs_one_warning_and_gives_dgls_results(monkeypatch, isolated_failures):
    def broken(*args, **kwargs):
        raise RuntimeError("injected softmax failure")

    g = dgl_graph(torch.int64)
    score, grad = torch.randn(g.num_edges(), 4, 1), torch.randn(g.num_edges(), 4, 1)
    with dgl_ugraph.disabled():
        want = softmax_step(g, score, grad, "dst")
    monkeypatch.setattr(interception, "edge_softmax", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            got = softmax_step(g, score, grad, "dst")
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    ours = [w for w in caught if issubclass(w.category, dgl_ugraph.UGraphFallbackWarning)]
    assert len(ours) == 1 and "injected softmax failure" in str(ours[0].message)
    for key in ("edge_softmax_forward", "edge_softmax_backward"):
        p = softmax_patterns()[key]
        assert p["intercepted"] == 0 and p["fallback"] == 3
        assert any("RuntimeError: injected softmax failure" in r for r in p["reasons"])


@pytest.mark.usefixtures("plugin_on")
def test_an_op_dgl_never_passes_goes_to_dgl_unrecorded(monkeypatch):
    calls = []
    monkeypatch.setitem(interception._dgl, "_edge_softmax_forward", lambda *a: calls.append(a) or "dgl")
    g = dgl_graph(torch.int64)
    assert interception._edge_softmax_forward(g._graph, torch.rand(g.num_edges()), "copy_lhs") == "dgl"
    assert len(calls) == 1 and not softmax_patterns()


def test_every_instruction_set_gives_the_same_values(tmp_path):
    """The x86-64 baseline and v3 versions make the same operations (no FMA contraction in this
    file), so they agree bit for bit; run the baseline in a fresh process and compare."""
    script = (
        "import sys, torch\n"
        "sys.path.insert(0, '.')\n"
        "from tests.core.test_softmax_cpu import hub_graph, scores\n"
        "from dgl_ugraph.core.ops import edge_softmax\n"
        "out = {}\n"
        "for dtype in (torch.float32, torch.float64, torch.bfloat16):\n"
        "    for shape in ((1,), (8,), (3,)):\n"
        "        g = hub_graph(torch.int64)\n"
        "        x = scores(g, shape, dtype)\n"
        "        out[(str(dtype), shape)] = (edge_softmax(g, x), edge_softmax(g, x, x * 0.5))\n"
        f"torch.save(out, {str(tmp_path / 'base.pt')!r})\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, DGL_UGRAPH_CPU_ISA="baseline"))
    assert run.returncode == 0, run.stderr[-3000:]
    base = torch.load(tmp_path / "base.pt")
    for (dtype, shape), (fwd, bwd) in base.items():
        g = hub_graph(torch.int64)
        x = scores(g, shape, getattr(torch, dtype.split(".")[1]))
        assert torch.equal(edge_softmax(g, x), fwd) and torch.equal(edge_softmax(g, x, x * 0.5), bwd), (dtype, shape)


def test_cuda_softmax_split_and_size_rule(monkeypatch):
    """core.ops.softmax_splits and recognition's rule for the fused CUDA softmax, whose logic CPU
    tensors exercise as well: past SOFTMAX_SPLIT_ELEMENTS scores on a graph whose edge ids
    scatter its rows, the backward splits; the forward where a row passes
    SOFTMAX_SPLIT_FORWARD_DEGREE in-edges, or its rows are of 8 bytes or more and their
    statistics fit the budget (a CUDA device's L2; CPU tensors have none unless one is set). A
    row past SOFTMAX_FUSED_MAX_DEGREE leaves the call to the five calls unless it splits."""
    from dgl_ugraph.core import ops
    from dgl_ugraph.dgl import recognition

    gen = torch.Generator().manual_seed(0)
    edges = ops.SOFTMAX_SPLIT_ELEMENTS + 1000  # past the threshold with one score an edge
    graph = UGraph.from_coo(torch.randint(0, 50_000, (edges,), generator=gen),
                            torch.randint(0, 50_000, (edges,), generator=gen), 50_000, 50_000)
    splits = ops.softmax_splits
    small = UGraph.from_coo(torch.arange(800) % 100, torch.arange(800) % 97, 100, 100)
    assert not splits(small, torch.randn(800, 3), backward=True)  # in L2: one launch
    assert splits(graph, torch.randn(edges, 1), backward=True)
    wide = torch.randn(edges, 2)
    assert not splits(graph, wide, backward=False)  # no statistics budget on CPU
    stats = 2 * 50_000 * 8 * 4  # a max and a sum a row and element, for 8 scores an edge
    monkeypatch.setattr(ops, "SOFTMAX_SPLIT_FORWARD_STATS_BYTES", stats)
    assert [splits(graph, torch.randn(edges, heads, dtype=dtype), backward=False)
            for heads, dtype in ((1, torch.float32), (2, torch.float32), (5, torch.float32), (8, torch.float16),
                                 (8, torch.float32), (9, torch.float32))] == \
        [4 >= ops.SOFTMAX_SPLIT_FORWARD_ROW_BYTES, True, True, True, True, False]
    in_order = UGraph(graph.num_src, graph.num_dst, graph.indptr, graph.col, graph.row, None)
    assert not splits(in_order, torch.randn(edges, 1), backward=True)  # CSC order is edge-id order already
    rule = recognition._past_fused_softmax
    assert rule(small, torch.randn(800, 4, requires_grad=True)) is None
    assert rule(graph, torch.randn(edges, 1, requires_grad=True)) is None  # training splits the backward
    degree = recognition.SOFTMAX_FUSED_MAX_DEGREE + 1
    hub = UGraph.from_coo(torch.arange(degree) % 50, torch.zeros(degree, dtype=torch.long), 50, 50)
    assert rule(hub, torch.randn(degree, 2)) == (f"a row of {degree} in-edges, past the fused kernel's "
                                                 f"{recognition.SOFTMAX_FUSED_MAX_DEGREE} in one launch")
    assert rule(hub, torch.randn(degree, ops.SOFTMAX_SPLIT_ELEMENTS // degree + 1)) is None  # split
