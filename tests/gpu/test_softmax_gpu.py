"""The fused CUDA edge softmax (csrc/cuda/softmax.cu): the kernel against the float64 oracle over
dtypes, index types, edge-row shapes and named graphs (isolated rows, a row of a third of the
edges, identity edge ids, a huge-degree row, no edges), each run twice into poisoned outputs;
then, under a CUDA build of DGL, dgl.ops.edge_softmax and GATConv with the plugin on against DGL's
own five-call softmax, what stats() records, and each case that keeps DGL's path.

    python -m pytest tests/gpu/test_softmax_gpu.py -q -rs
"""
from __future__ import annotations

import pathlib
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]), str(_HERE.parent), str(_HERE)) if p not in sys.path]

from dgl_ugraph import UGraph  # noqa: E402
from dgl_ugraph.core import _ext, ops  # noqa: E402
from dgl_ugraph.core.ops import edge_softmax  # noqa: E402
from cases import needs_cuda_dgl  # noqa: E402
from reference import SOFTMAX_DTYPES as DTYPES, dname, hub_graph, softmax_close, softmax_oracle, softmax_scores  # noqa: E402,E501

if not torch.cuda.is_available() or not _ext.has_cuda():
    pytest.skip("needs a GPU and dgl_ugraph's CUDA core", allow_module_level=True)

# Against the float64 oracle: (rtol, atol as a share of the oracle's largest magnitude). The
# kernel computes in float (float64 for float64) and rounds once, so half types err by about one
# rounding of the result; the backward's y = out * grad is rounded by the caller, as DGL's is.
TOL = {torch.float64: (1e-12, 1e-14), torch.float32: (1e-5, 1e-6), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1.6e-2, 1.6e-2)}


def close(got, want, dtype):
    softmax_close(got, want, TOL[dtype])


def split_every_call(monkeypatch, split: bool):
    """The CUDA softmax split in two launches whatever the size (split) or never."""
    monkeypatch.setattr(ops, "SOFTMAX_SPLIT_ELEMENTS", 0 if split else 1 << 62)
    monkeypatch.setattr(ops, "SOFTMAX_SPLIT_FORWARD_ROW_BYTES", 0)
    monkeypatch.setattr(ops, "SOFTMAX_SPLIT_FORWARD_STATS_BYTES", 1 << 62)


def runs_twice(graph, x, y=None):
    """Two calls into outputs that the caching allocator hands back poisoned: a result that moves
    between them is a race, one that keeps a NaN skipped an element."""
    results = []
    for _ in range(2):
        torch.empty(x.numel() * 2, dtype=x.dtype, device=x.device).fill_(float("nan"))
        results.append(edge_softmax(graph, x, y))
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0, equal_nan=False)
    return results[0]


def check(graph, shape, dtype, seed=1):
    x = softmax_scores(graph, shape, dtype, seed).cuda()
    out = runs_twice(graph, x)
    assert out.shape == x.shape and out.dtype == dtype
    close(out, softmax_oracle(graph, x.double()), dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    y = (out.double() * torch.randn(out.shape, generator=gen, dtype=torch.float64).cuda()).to(dtype)
    close(runs_twice(graph, out, y), softmax_oracle(graph, out.double(), y.double()), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=dname)
@pytest.mark.parametrize("shape", [(), (1,), (2,), (4, 1), (8,), (8, 1), (2, 3), (9,), (12,), (16,), (130,)],
                         ids=lambda s: "x".join(map(str, s)) or "1d")
def test_kernel_against_oracle(shape, idtype, dtype):
    """Chunks of 1, 4 and 8 elements, whole or cut short (widths 2, 6, 9, 12, 130), in 16-byte
    vectors where the width is a multiple of one (4 float32, 8 halves, 2 float64) and one by one
    elsewhere; most rows are held in registers, the hub row (a third of the edges) gets a block."""
    check(hub_graph(idtype).to("cuda"), shape, dtype)


@pytest.mark.parametrize("degree", [1, 3, 40, 5000], ids=lambda d: f"avg{d}")
def test_team_sizes_and_a_huge_row(degree):
    """Average in-degrees that give teams of 1, 1, 16 and 32 lanes (4 positions held a lane),
    rows held in registers and rows read again; the last graph is one row of 5,000 edges beside a
    row of one."""
    gen = torch.Generator().manual_seed(degree)
    rows = 64 if degree < 5000 else 2
    edges = rows * degree
    dst = torch.randint(0, rows, (edges,), generator=gen) if degree < 5000 else torch.cat(
        [torch.zeros(edges - 1, dtype=torch.long), torch.ones(1, dtype=torch.long)])
    src = torch.randint(0, rows, (edges,), generator=gen)
    graph = UGraph.from_coo(src, dst, rows, rows, torch.int32).to("cuda")
    for dtype in (torch.float32, torch.float16):
        check(graph, (4, 1), dtype, seed=degree)


@pytest.mark.parametrize("split", [False, True], ids=["one_launch", "split"])
@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=dname)
def test_rows_of_every_tier(idtype, split, monkeypatch):
    """A graph (1.8M edges, average in-degree 3) whose rows take all three tiers of the kernel on a
    GPU of 132 SMs: rows of up to 32 edges a one-lane team each, the 40 rows of 100 a warp each
    (read again in each pass), and the rows of 3,000 and 6,000 a block each (past 4 E / 4,224
    resident warps = 1,740 in-edges, beside a longest row past three times that). In one launch
    and split: each tier writes the statistics of its own rows."""
    split_every_call(monkeypatch, split)
    gen = torch.Generator().manual_seed(7)
    nodes = 600_000
    dst = torch.cat([torch.randint(0, nodes, (1_800_000,), generator=gen), torch.arange(10, 50).repeat_interleave(100),
                     torch.arange(4).repeat_interleave(6000), torch.arange(4, 6).repeat_interleave(3000)])
    src = torch.randint(0, nodes, (dst.numel(),), generator=gen)
    graph = UGraph.from_coo(src, dst, nodes, nodes, idtype).to("cuda")
    for dtype, shape in ((torch.float32, (8, 1)), (torch.float16, (1,)), (torch.float32, (3,))):
        check(graph, shape, dtype, seed=3)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("idtype", (torch.int32, torch.int64), ids=dname)
@pytest.mark.parametrize("shape", [(), (4, 1), (3,), (8,), (12,), (130,)], ids=lambda s: "x".join(map(str, s)) or "1d")
def test_split_gives_the_one_launch_values(shape, idtype, dtype, monkeypatch):
    """The softmax split in two launches (each row's statistics, then every edge's result in
    edge-id order), forward and backward, against the oracle, and bit for bit the one launch's
    values: the same statistics in the same order, the same rounding. Widths in 16-byte vectors
    (4, 8, 12) and element by element (1, 3, 130); rows of every tier (the hub row a block)."""
    graph = hub_graph(idtype).to("cuda")
    x = softmax_scores(graph, shape, dtype, 5).cuda()
    gen = torch.Generator().manual_seed(6)
    grad = torch.randn(x.shape, generator=gen, dtype=torch.float64).cuda()
    results = {}
    for split in (False, True):
        split_every_call(monkeypatch, split)
        out = runs_twice(graph, x)
        y = (out.double() * grad).to(dtype)
        results[split] = out, runs_twice(graph, out, y)
    out, got = results[True]
    close(out, softmax_oracle(graph, x.double()), dtype)
    close(got, softmax_oracle(graph, out.double(), (out.double() * grad).to(dtype).double()), dtype)
    for a, b in zip(results[True], results[False]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_identity_edge_ids_and_no_edges():
    check(hub_graph(torch.int64, identity_eids=True).to("cuda"), (3,), torch.float32)
    empty = UGraph.from_coo(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 4, 4,
                            torch.int32).to("cuda")
    assert edge_softmax(empty, torch.zeros(0, 3, device="cuda")).shape == (0, 3)


def test_non_finite_scores_follow_dgls_operations():
    """Rows of DGL's chain's NaNs: all -inf (exp(-inf - -inf)), a NaN among finite scores (it
    never wins the max, and its exp makes the sum NaN), +inf (exp(inf - inf)); a finite row with
    -inf scores beside them is exact (exp(-inf) = 0)."""
    dst = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 3])
    graph = UGraph.from_coo(torch.arange(9) % 4, dst, 4, 4, torch.int32).to("cuda")
    x = torch.tensor([-torch.inf, -torch.inf, 1.0, torch.nan, torch.inf, 0.5, 0.0, 2.0, -torch.inf],
                     device="cuda")[:, None]
    got = edge_softmax(graph, x)
    want = softmax_oracle(graph, x.double())
    torch.testing.assert_close(got.double(), want, equal_nan=True)
    assert got[:6].isnan().all() and not got[6:].isnan().any()


# ---- under DGL ----------------------------------------------------------------------------------

def dgl_graph(seed=0, nodes=500, edges=6000):
    import dgl

    gen = torch.Generator().manual_seed(seed)
    g = dgl.graph((torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)),
                  num_nodes=nodes)
    return dgl.add_self_loop(dgl.remove_self_loop(g)).to("cuda")


def softmax_stats():
    import dgl_ugraph

    return dgl_ugraph.stats()["patterns"].get("edge_softmax", {"intercepted": 0, "fallback": 0, "reasons": {}})


@needs_cuda_dgl
@pytest.mark.parametrize("norm_by", ["dst", "src"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
def test_dgl_edge_softmax_runs_fused_and_matches_dgl(dtype, norm_by):
    import dgl
    import dgl_ugraph

    g = dgl_graph()
    gen = torch.Generator().manual_seed(3)
    score = (torch.randn(g.num_edges(), 4, 1, generator=gen, dtype=torch.float64) * 4).to(dtype).cuda()
    grad = torch.randn(score.shape, generator=gen, dtype=torch.float64).to(dtype).cuda()

    def run():
        x = score.clone().requires_grad_()
        out = dgl.ops.edge_softmax(g, x, norm_by=norm_by)
        (out * grad).sum().backward()
        return out.detach(), x.grad

    dgl_ugraph.enable()
    before = softmax_stats()["intercepted"]
    out, out_grad = run()
    assert softmax_stats()["intercepted"] == before + 1
    with dgl_ugraph.disabled():
        ref, ref_grad = run()
    rtol, atol = TOL[dtype]
    # DGL's chain rounds each of its five results to a half type: twice the kernel's error there.
    scale = 2 if dtype in (torch.float16, torch.bfloat16) else 1
    torch.testing.assert_close(out.double(), ref.double(), rtol=scale * rtol, atol=scale * atol)
    terms = (ref.double() * grad.double()).abs().max().item()
    torch.testing.assert_close(out_grad.double(), ref_grad.double(), rtol=scale * rtol, atol=scale * atol * terms)


@needs_cuda_dgl
def test_gatconv_on_and_off():
    import dgl_ugraph
    from dgl.nn import GATConv

    g = dgl_graph(seed=4)
    x = torch.randn(g.num_nodes(), 16, device="cuda")
    torch.manual_seed(0)
    conv = GATConv(16, 8, 4).cuda()

    def run():
        conv.zero_grad(set_to_none=True)
        out = conv(g, x)
        out.square().sum().backward()
        return [out.detach()] + [p.grad.clone() for p in conv.parameters()]

    dgl_ugraph.enable()
    ours = run()
    with dgl_ugraph.disabled():
        theirs = run()
    # Gradients of the attention vectors sum over every edge, in another order (and with atomics)
    # on each side: their error is relative to the largest of them.
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * b.abs().max().item())


@needs_cuda_dgl
def test_what_keeps_dgls_path_is_counted_with_its_reason():
    import dgl
    import dgl_ugraph

    dgl_ugraph.enable()
    g = dgl_graph(seed=5)
    score = torch.randn(g.num_edges(), 2, device="cuda")
    eids = torch.arange(0, g.num_edges(), 2, device="cuda")
    with dgl_ugraph.disabled():
        want = dgl.ops.edge_softmax(g, score[eids], eids=eids)
    torch.testing.assert_close(dgl.ops.edge_softmax(g, score[eids], eids=eids), want)
    with torch.autocast("cuda", dtype=torch.float16):
        dgl.ops.edge_softmax(g, score)
    reasons = " | ".join(softmax_stats()["reasons"])
    assert "an edge subset (eids)" in reasons and "autocast" in reasons


@needs_cuda_dgl
def test_long_rows_run_the_five_calls_unless_split():
    """A row longer than SOFTMAX_FUSED_MAX_DEGREE in a softmax that would run in one launch: DGL's
    five calls run it on dgl_ugraph's kernels, and stats() says so (no fallback). Split (past
    SOFTMAX_SPLIT_ELEMENTS scores), a graph with such a row runs fused, and so do wide scores with
    a backward; each softmax and its gradient equal DGL's."""
    import dgl
    import dgl_ugraph
    from dgl_ugraph.dgl import recognition

    gen = torch.Generator().manual_seed(6)
    g = dgl_graph(seed=6)
    hub = dgl.graph((torch.arange(2000) % 50, torch.zeros(2000, dtype=torch.long)), num_nodes=50).to("cuda")
    edges, nodes = ops.SOFTMAX_SPLIT_ELEMENTS // 2 + 1000, 20_000
    big_dst = torch.cat([torch.zeros(3000, dtype=torch.long), torch.randint(0, nodes, (edges - 3000,), generator=gen)])
    big = dgl.graph((torch.randint(0, nodes, (edges,), generator=gen), big_dst), num_nodes=nodes).to("cuda")
    cases = {"hub": (hub, (2000, 2)), "wide": (g, (g.num_edges(), ops.SOFTMAX_SPLIT_ELEMENTS // g.num_edges() + 1, 1)),
             "big_hub": (big, (edges, 2, 1))}
    dgl_ugraph.enable()
    configs = {}
    for name, (graph, shape) in cases.items():
        score = torch.randn(shape, generator=gen).cuda()
        grad = torch.randn(shape, generator=gen).cuda()

        def run():
            x = score.clone().requires_grad_()
            out = dgl.ops.edge_softmax(graph, x)
            (out * grad).sum().backward()
            return out.detach(), x.grad

        dgl_ugraph.reset_stats()
        out, out_grad = run()
        configs[name] = {r["config"] for r in dgl_ugraph.stats()["signatures"] if r["pattern"] == "edge_softmax"}
        with dgl_ugraph.disabled():
            ref, ref_grad = run()
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
        terms = (ref * grad).abs().max().item()
        torch.testing.assert_close(out_grad, ref_grad, rtol=1e-5, atol=1e-6 * terms)
    (hub_config,) = configs["hub"]
    assert hub_config.startswith(f"as DGL's five calls (a row of 2000 in-edges, past the fused kernel's "
                                 f"{recognition.SOFTMAX_FUSED_MAX_DEGREE} in one launch"), hub_config
    assert configs["wide"] == configs["big_hub"] == {"cuda"}, configs


@needs_cuda_dgl
def test_second_derivatives_flow_as_through_dgls_softmax():
    """create_graph: the backward runs DGL's differentiable calls, so a gradient of the gradient
    equals DGL's."""
    import dgl
    import dgl_ugraph

    g = dgl_graph(seed=7)
    score = torch.randn(g.num_edges(), 2, dtype=torch.float64, device="cuda")
    weight = torch.randn(score.shape, dtype=torch.float64, device="cuda")

    def run():
        x = score.clone().requires_grad_()
        (first,) = torch.autograd.grad((dgl.ops.edge_softmax(g, x) * weight).sum(), x, create_graph=True)
        (second,) = torch.autograd.grad(first.square().sum(), x)
        return first.detach(), second

    dgl_ugraph.enable()
    ours = run()
    with dgl_ugraph.disabled():
        theirs = run()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
