"""The mean reducer above `_gspmm` (dgl_ugraph/dgl/mean.py): the kernel's gather mean gives the
very bits of DGL's own sum-then-divide on the same kernels (on CPU, where every row is divided
whole), forward and backward, on every kind of graph it serves; a mean whose sum runs on DGL's
kernel is divided by the hook; DGL's own gspmm for what it does not serve; DGL's functions back
when the plugin is off."""
import contextlib
import warnings
from types import SimpleNamespace

import pytest
import torch

dgl = pytest.importorskip("dgl")
import dgl.function as fn  # noqa: E402
import dgl.ops  # noqa: E402
import dgl.ops.spmm  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import cache, interception, mean, patterns, routing  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")


@contextlib.contextmanager
def dgl_division():
    """The plugin's kernels with DGL's own division: the reference."""
    mean.disable()
    try:
        yield
    finally:
        mean.enable()


def _skewed(n, e, seed, idtype=torch.int64):
    gen = torch.Generator().manual_seed(seed)
    dst = torch.multinomial(1.0 / torch.arange(1, n + 1).double(), e, replacement=True, generator=gen)
    src = torch.randint(0, n, (e,), generator=gen)
    return dgl.add_nodes(dgl.graph((src, dst), num_nodes=n, idtype=idtype), 5)  # isolated nodes


def _run(call, *inputs):
    """(result, gradient of each input) of a loss that weighs every element differently."""
    out = call(*inputs)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=out.dtype)
    grads = torch.autograd.grad((out * weights).sum(), inputs)
    return out, grads


def _check_bitwise(call, *shapes, dtype=torch.float32):
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(s, generator=gen, dtype=dtype).requires_grad_() for s in shapes]
    ours, our_grads = _run(call, *inputs)
    with dgl_division():
        theirs, their_grads = _run(call, *inputs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert torch.equal(ours, theirs)
    for a, b in zip(our_grads, their_grads):
        assert torch.equal(a, b)


def _update_all(g, msg):
    def call(x):
        g.srcdata["h"] = x
        g.update_all(msg, fn.mean("m", "out"))
        return g.dstdata.pop("out")
    return call


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_update_all_copy_u_mean_is_dgls_to_the_bit(dtype, idtype):
    g = _skewed(200, 1500, 0, idtype)
    assert (g.in_degrees() == 0).any()
    _check_bitwise(_update_all(g, fn.copy_u("h", "m")), (g.num_nodes(), 16), dtype=dtype)


def test_ops_means_with_edge_operands_and_feature_ranks():
    g = _skewed(120, 900, 1)
    n, e = g.num_nodes(), g.num_edges()
    _check_bitwise(lambda x, w: dgl.ops.u_mul_e_mean(g, x, w), (n, 4, 8), (e, 4, 1))
    _check_bitwise(lambda x, w: dgl.ops.u_div_e_mean(g, x, w.abs() + 0.5), (n, 8), (e, 1))
    _check_bitwise(lambda w: dgl.ops.copy_e_mean(g, w), (e, 3))
    _check_bitwise(lambda x: dgl.ops.gspmm(g, "copy_lhs", "mean", x, None), (n,))


def test_the_kernel_divides_the_mean_and_no_sum_runs():
    g = _skewed(80, 500, 5)
    x = torch.randn(g.num_nodes(), 8, requires_grad=True)
    dgl_ugraph.reset_stats()
    out = dgl.ops.copy_u_mean(g, x)
    forward = dgl_ugraph.stats()["patterns"]
    assert set(forward) == {"gspmm:copy_lhs:mean:u:*"}
    assert forward["gspmm:copy_lhs:mean:u:*"]["intercepted"] == 1
    assert out.grad_fn.__class__.__name__ == "_DividedGradBackward"  # on CPU the backward is DGL's order
    with torch.no_grad():  # no autograd: the kernel's tensor itself
        assert dgl.ops.copy_u_mean(g, x).grad_fn is None


@pytest.fixture
def fused_on_cpu(monkeypatch):
    """The fused backward, which serves CUDA means, on this CPU suite's graphs."""
    monkeypatch.setattr(mean, "FUSED_DEVICES", ("cuda", "cpu"))


def _check_close(call, *shapes, dtype=torch.float64):
    gen = torch.Generator().manual_seed(2)
    inputs = [torch.randn(s, generator=gen, dtype=dtype).requires_grad_() for s in shapes]
    ours, our_grads = _run(call, *inputs)
    with dgl_ugraph.disabled():
        theirs, their_grads = _run(call, *inputs)
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(ours, theirs, rtol=tol, atol=tol)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


@pytest.mark.usefixtures("fused_on_cpu")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_a_fused_copy_u_mean_is_dgls_forward_and_backward(dtype, idtype):
    g = _skewed(200, 1500, 11, idtype)
    n = g.num_nodes()
    assert (g.in_degrees() == 0).any() and (g.out_degrees() == 0).any()
    for shape in ((n, 16), (n, 4, 3), (n,)):
        _check_close(lambda x: dgl.ops.copy_u_mean(g, x), shape, dtype=dtype)
    _check_close(_update_all(g, fn.copy_u("h", "m")), (n, 40), dtype=dtype)
    seeds = torch.arange(12, dtype=idtype)
    block = dgl.to_block(dgl.in_subgraph(g, seeds), dst_nodes=seeds)

    def on_block(x):
        block.srcdata["h"] = x
        block.update_all(fn.copy_u("h", "m"), fn.mean("m", "out"))
        return block.dstdata.pop("out")
    _check_close(on_block, (block.num_src_nodes(), 5), dtype=dtype)
    empty = dgl.graph(([], []), num_nodes=6, idtype=idtype)
    _check_close(lambda x: dgl.ops.copy_u_mean(empty, x), (6, 3), dtype=dtype)


@pytest.mark.usefixtures("fused_on_cpu")
def test_a_fused_means_backward_is_one_reverse_call():
    g = _skewed(80, 500, 8)
    x = torch.randn(g.num_nodes(), 8, requires_grad=True)
    out = dgl.ops.copy_u_mean(g, x)
    assert out.grad_fn.__class__.__name__ == "_FusedMeanBackward"
    dgl_ugraph.reset_stats()
    out.backward(torch.randn(out.shape))
    backward = dgl_ugraph.stats()["patterns"]
    assert set(backward) == {patterns.MEAN_BACKWARD}
    assert backward[patterns.MEAN_BACKWARD]["intercepted"] == 1 and backward[patterns.MEAN_BACKWARD]["fallback"] == 0
    w = torch.randn(g.num_edges(), 1, requires_grad=True)  # another op: DGL's backward
    assert dgl.ops.u_mul_e_mean(g, x, w).grad_fn.__class__.__name__ == "_DividedGradBackward"


def test_which_means_fuse_their_backward(monkeypatch):
    def fused(width, edges, sources, op="copy_lhs", grad=True):
        x = torch.randn(2, width, requires_grad=grad)
        return mean._fused(op, x, SimpleNamespace(num_edges=edges, num_src=sources))

    assert not fused(64, 10, 3)  # the CPU core keeps the division and the copy sum
    monkeypatch.setattr(mean, "FUSED_DEVICES", ("cpu",))
    assert fused(32, 40_000_000, 2_000_000)  # wide rows always
    assert fused(16, 900_000, 20_000)  # a narrow row on a graph under 2^20 edges
    assert fused(16, 4_000_000, 1_000_000)  # narrow, large, under 10 edges a source
    assert not fused(16, 40_000_000, 4_000_000)  # narrow, large, 10 edges a source
    assert not fused(64, 10, 3, op="copy_rhs") and not fused(64, 10, 3, grad=False)


@pytest.mark.usefixtures("fused_on_cpu")
def test_a_fused_means_second_derivative_is_dgls():
    """create_graph records the backward: DGL's division and its differentiable reverse sum."""
    g = _skewed(60, 400, 9)
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(g.num_nodes(), 3, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(g.num_nodes(), 3, generator=gen, dtype=torch.float64, requires_grad=True)

    def second(h, u):
        (grad,) = torch.autograd.grad((dgl.ops.copy_u_mean(g, h) * u).sum(), h, create_graph=True)
        return torch.autograd.grad((grad * grad).sum(), u)[0]

    ours = second(x, v)
    with dgl_ugraph.disabled():
        theirs = second(x, v)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("fused_on_cpu")
def test_a_fused_backward_whose_kernel_fails_runs_on_dgl(monkeypatch, isolated_failures):
    g = _skewed(70, 400, 10)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(g.num_nodes(), 5, generator=gen, requires_grad=True)
    with dgl_ugraph.disabled():
        ref, ref_grads = _run(lambda h: dgl.ops.copy_u_mean(g, h), x)
    dgl.ops.copy_u_mean(g, x)  # the forward's plan, made before the failures
    real = routing.Plan

    def broken_on_reverse(graph, op_info, *args, **kwargs):
        if op_info.B_type == "src":
            raise RuntimeError("injected failure")
        return real(graph, op_info, *args, **kwargs)

    monkeypatch.setattr(routing, "Plan", broken_on_reverse)
    with pytest.warns(dgl_ugraph.UGraphFallbackWarning, match="injected failure"):
        out, grads = _run(lambda h: dgl.ops.copy_u_mean(g, h), x)
    assert torch.equal(out, ref) and torch.equal(grads[0], ref_grads[0])
    assert "injected failure" in str(dgl_ugraph.stats()["patterns"][patterns.MEAN_BACKWARD]["reasons"])


def test_in_place_use_of_a_kernel_divided_mean_keeps_its_gradient():
    g = _skewed(90, 700, 6)
    _check_bitwise(lambda x: dgl.ops.copy_u_mean(g, x).mul_(3).relu_(), (g.num_nodes(), 6))
    _check_bitwise(lambda x: dgl.ops.copy_u_mean(g, x).sigmoid_(), (g.num_nodes(),))  # 1-D: a view


def test_a_mean_whose_sum_runs_on_dgl_is_divided_by_the_hook(monkeypatch, isolated_failures):
    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    g = _skewed(70, 400, 7)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(g.num_nodes(), 5, generator=gen, requires_grad=True)
    with dgl_ugraph.disabled():
        ref, ref_grads = _run(lambda h: dgl.ops.copy_u_mean(g, h), x)
    monkeypatch.setattr(routing, "Plan", broken)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dgl_ugraph.UGraphFallbackWarning)
        for _ in range(2):
            out, grads = _run(lambda h: dgl.ops.copy_u_mean(g, h), x)
            assert torch.equal(out, ref) and torch.equal(grads[0], ref_grads[0])
    assert not mean._state.armed


def test_blocks_divide_by_their_destination_degrees():
    g = _skewed(60, 400, 2)
    seeds = torch.arange(12)
    block = dgl.to_block(dgl.in_subgraph(g, seeds), dst_nodes=seeds)
    assert block.num_src_nodes() > block.num_dst_nodes()

    def call(x):
        block.srcdata["h"] = x
        block.update_all(fn.copy_u("h", "m"), fn.mean("m", "out"))
        return block.dstdata.pop("out")
    _check_bitwise(call, (block.num_src_nodes(), 5))


def test_the_divisor_is_computed_once_per_graph_dtype_and_rank():
    g = _skewed(50, 300, 3)
    x = torch.randn(g.num_nodes(), 4)
    dgl.ops.copy_u_mean(g, x)
    entry = cache.entry_for(g._graph)
    divisor = entry.divisors[(torch.float32, 2)]
    dgl.ops.copy_u_mean(g, x + 1)
    assert entry.divisors[(torch.float32, 2)] is divisor
    dgl.ops.copy_u_mean(g, x.double())
    assert set(entry.divisors) == {(torch.float32, 2), (torch.float64, 2)}
    assert torch.equal(divisor.flatten(), g.in_degrees().clamp(min=1).float())


def test_other_reducers_and_heterographs_take_dgls_gspmm():
    g = _skewed(40, 200, 4)
    x = torch.randn(g.num_nodes(), 6)
    for reduce_op in ("sum", "max", "min"):
        ours = dgl.ops.gspmm(g, "copy_lhs", reduce_op, x, None)
        with dgl_division():
            assert torch.equal(ours, dgl.ops.gspmm(g, "copy_lhs", reduce_op, x, None))
    hg = dgl.heterograph({("a", "r", "b"): ([0, 1, 2], [0, 0, 1]), ("b", "s", "b"): ([0, 1], [1, 1])})
    hg.nodes["a"].data["h"] = torch.randn(3, 2)
    hg.nodes["b"].data["h"] = torch.randn(2, 2)
    hg.multi_update_all({"r": (fn.copy_u("h", "m"), fn.mean("m", "o")), "s": (fn.copy_u("h", "m"), fn.mean("m", "o"))},
                        "sum")
    ours = hg.nodes["b"].data.pop("o")
    with dgl_ugraph.disabled():
        hg.multi_update_all({"r": (fn.copy_u("h", "m"), fn.mean("m", "o")),
                             "s": (fn.copy_u("h", "m"), fn.mean("m", "o"))}, "sum")
    assert torch.allclose(ours, hg.nodes["b"].data["o"])


def test_disable_puts_dgls_gspmm_back_and_enable_is_idempotent():
    assert dgl.ops.spmm.gspmm is mean._gspmm and dgl.ops.gspmm is mean._gspmm
    dgl_ugraph.enable()
    assert mean._own[0] is not mean._gspmm
    with dgl_ugraph.disabled():
        assert dgl.ops.spmm.gspmm is mean._own[0] and dgl.ops.gspmm is mean._own[0]
    assert dgl.ops.spmm.gspmm is mean._gspmm
