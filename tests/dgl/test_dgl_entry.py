"""DGL's autograd entry points (`dgl.backend.pytorch.sparse.gspmm/gsddmm`), which DGL's backward
passes call: straight to the kernel where autograd records nothing, DGL's own entry (its
autograd.Function) where it does (create_graph, a recorded forward) or where autocast is on,
with DGL's results and gradients either way."""
import functools

import pytest
import torch

dgl = pytest.importorskip("dgl")
import dgl.function as fn  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.core import ops  # noqa: E402
from dgl_ugraph.dgl import interception  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")


@pytest.fixture
def dgl_entries(monkeypatch):
    """Counts the calls that reach DGL's own gspmm/gsddmm through the plugin."""
    calls = []

    def counting(own, name):
        @functools.wraps(own)  # its signature is DGL's: disable() and enable() take it for DGL's own
        def entry(*args, **kwargs):
            calls.append(name)
            return own(*args, **kwargs)
        return entry

    for name in ("gspmm", "gsddmm"):
        monkeypatch.setitem(interception._dgl, name, counting(interception._dgl[name], name))
    return calls


def _graph(seed=0, n=30, e=150):
    gen = torch.Generator().manual_seed(seed)
    return dgl.graph((torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)),
                     num_nodes=n)


def _step(g, x, w, create_graph=False):
    """A GAT-like step: u_mul_e-sum, u_dot_v, an edge softmax; returns the loss's gradients."""
    g.ndata["x"] = x
    g.edata["w"] = w
    g.update_all(fn.u_mul_e("x", "w", "m"), fn.sum("m", "h"))
    g.apply_edges(fn.u_dot_v("h", "x", "s"))
    a = dgl.ops.edge_softmax(g, g.edata["s"])
    loss = (a * g.edata["s"]).sum() + g.ndata["h"].pow(2).sum()
    return torch.autograd.grad(loss, (x, w), create_graph=create_graph)


def _inputs(g, seed=1):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_nodes(), 4, generator=gen, dtype=torch.float64).requires_grad_()
    w = torch.randn(g.num_edges(), 1, generator=gen, dtype=torch.float64).requires_grad_()
    return x, w


def test_the_entry_points_are_replaced_while_on_and_dgl_s_while_off():
    for name in ("gspmm", "gsddmm"):
        assert getattr(sparse, name) is interception._REPLACEMENTS[name]
    with dgl_ugraph.disabled():
        for name in ("gspmm", "gsddmm"):
            assert getattr(sparse, name) is interception._dgl[name]


def test_a_backward_pass_goes_straight_to_the_kernels_with_dgl_s_gradients(dgl_entries):
    g = _graph()
    x, w = _inputs(g)
    ours = _step(g, x, w)
    assert dgl_entries == []  # every backward call went straight to the kernels
    assert dgl_ugraph.stats()["fallback"] == 0
    with dgl_ugraph.disabled():
        theirs = _step(g, x, w)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_a_second_order_gradient_goes_through_dgl_s_autograd_and_equals_dgl(dgl_entries):
    g = _graph(1)
    x, w = _inputs(g, 2)
    gx, gw = _step(g, x, w, create_graph=True)
    ours = torch.autograd.grad(gx.pow(2).sum() + gw.pow(2).sum(), (x, w))
    assert dgl_entries  # recorded: DGL's entry built the graph of the backward
    with dgl_ugraph.disabled():
        gx, gw = _step(g, x, w, create_graph=True)
        theirs = torch.autograd.grad(gx.pow(2).sum() + gw.pow(2).sum(), (x, w))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "copy_lhs", "copy_rhs"])
def test_unrecorded_calls_keep_dgl_s_rewrite_of_sub_and_div(op, dgl_entries):
    g = _graph(2)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(g.num_nodes(), 3, generator=gen)
    e = torch.rand(g.num_edges(), 3, generator=gen) + 0.5
    v = torch.rand(g.num_nodes(), 3, generator=gen) + 0.5
    with torch.no_grad():
        ours = (sparse.gspmm(g._graph, op, "sum", x, e), sparse.gsddmm(g._graph, op, x, v, "u", "v"))
        assert dgl_entries == []
        with dgl_ugraph.disabled():
            theirs = (sparse.gspmm(g._graph, op, "sum", x, e), sparse.gsddmm(g._graph, op, x, v, "u", "v"))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_autocast_goes_through_dgl_s_entry(dgl_entries):
    if not torch.cuda.is_available():
        pytest.skip("DGL's entry casts under CUDA autocast, which needs a GPU")
    g = _graph(3).to("cuda")
    x = torch.randn(g.num_nodes(), 3, device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        out = sparse.gspmm(g._graph, "copy_lhs", "sum", x, None)
    assert dgl_entries == ["gspmm"]
    with dgl_ugraph.disabled(), torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        want = sparse.gspmm(g._graph, "copy_lhs", "sum", x, None)
    assert out.dtype == want.dtype
    torch.testing.assert_close(out, want)


@pytest.mark.parametrize("message,reduce_op", [(fn.copy_u("x", "m"), fn.max), (fn.u_mul_e("x", "w", "m"), fn.min),
                                               (fn.u_add_e("x", "w", "m"), fn.max), (fn.copy_e("w", "m"), fn.min)])
def test_a_max_min_no_backward_reads_runs_without_its_args(monkeypatch, message, reduce_op):
    """On operands that need no gradient (inference: features computed under no_grad), DGL's
    GSpMM would compute max/min's args and drop them: the plugin writes the output alone, DGL's
    values to the bit. A call with an operand that needs its gradient keeps its args for DGL's
    backward."""
    made = []

    def prepare(*args, **kwargs):
        made.append(kwargs["args"])
        return ops_prepare(*args, **kwargs)

    ops_prepare = ops.prepare
    monkeypatch.setattr(ops, "prepare", prepare)
    g = _graph(seed=5)
    x, w = _inputs(g, seed=6)
    g.ndata["x"], g.edata["w"] = x.detach(), w.detach().expand(-1, 4).contiguous()
    with torch.no_grad():
        g.update_all(message, reduce_op("m", "h"))
        ours = g.ndata.pop("h")
        g.update_all(message, reduce_op("m", "h"))  # the plan again
        assert torch.equal(g.ndata.pop("h"), ours)
    assert made == [False]
    with dgl_ugraph.disabled(), torch.no_grad():
        g.update_all(message, reduce_op("m", "h"))
        assert torch.equal(g.ndata.pop("h"), ours)
    # Recorded: the args are made, and the gradients are DGL's.
    g.ndata["x"], g.edata["w"] = x, w.expand(-1, 4).contiguous()
    g.update_all(message, reduce_op("m", "h"))
    mine = torch.autograd.grad(g.ndata.pop("h").pow(2).sum(), (x, w), allow_unused=True)
    assert made == [False, True]
    with dgl_ugraph.disabled():
        g.edata["w"] = w.expand(-1, 4).contiguous()
        g.update_all(message, reduce_op("m", "h"))
        theirs = torch.autograd.grad(g.ndata.pop("h").pow(2).sum(), (x, w), allow_unused=True)
    for a, b in zip(mine, theirs):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_first_call_copies_an_operand_of_scattered_features_once(monkeypatch):
    """A graph's first call runs the call it prepared: an operand whose features are not
    contiguous (the gradient of a sum, a scalar expanded) is copied for the kernel once, not once
    more by the plan it leaves; a repeat call, through the plan, copies its own."""
    copies = []
    real = ops._features_contiguous

    def counting(t):
        out = real(t)
        if out.data_ptr() != t.data_ptr():
            copies.append(tuple(t.shape))
        return out

    monkeypatch.setattr(ops, "_features_contiguous", counting)
    g = _graph(seed=5)
    x = torch.tensor(1.5).expand(g.num_nodes(), 4)
    with dgl_ugraph.disabled():
        want = dgl.ops.copy_u_sum(g, x)
    assert torch.equal(dgl.ops.copy_u_sum(g, x), want) and len(copies) == 1
    assert torch.equal(dgl.ops.copy_u_sum(g, x), want) and len(copies) == 2
    assert dgl_ugraph.stats()["fallback"] == 0
