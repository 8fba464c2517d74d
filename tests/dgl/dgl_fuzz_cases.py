"""The DGL fuzz's cases and checks, shared by tests/dgl/test_dgl_fuzz.py (CPU, drawn by Hypothesis) and
tests/gpu/test_dgl_gpu.py (CUDA, drawn from a seed). A case draws its choices from a chooser
(pick/integer/boolean), so either drawer makes the same kinds of cases; the graph's device is the
device of every operand.

Each case runs twice, through dgl_ugraph and through DGL, at four levels: the kernel functions
themselves (values and max/min argument indices), dgl.ops with autograd, update_all and
apply_edges with dgl.function builtins, and edge_softmax. A max/min
tie may pick another argument than DGL, never another value; gradients then follow the argument,
so they are compared where the arguments agree.
"""
import contextlib
import itertools
import random

import torch

import dgl
import dgl.function as fn
import dgl_ugraph
from dgl.backend.pytorch import sparse
from dgl_errors import message
from dgl_ugraph.dgl import interception

# (rtol, atol as a share of the tensor's largest magnitude): summation order is free, and half
# types round once (about 3 units in the last place each)
TOL = {torch.float64: (1e-9, 1e-12), torch.float32: (1e-5, 1e-5), torch.float16: (3e-3, 3e-3),
       torch.bfloat16: (2e-2, 2e-2)}
HALF = (torch.float16, torch.bfloat16)
GSPMM_OPS = ("add", "sub", "mul", "div", "copy_lhs", "copy_rhs")
GSDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
REDUCERS = ("sum", "max", "min", "mean")
TARGETS = tuple(itertools.product("uve", "uve"))
MESSAGES = ["copy_u", "copy_e"] + [f"{a}_{op}_{b}" for a, b in itertools.permutations("uve", 2)
                                   for op in ("add", "sub", "mul", "div", "dot")]
SMALL_EDGES = (0, 1, 2, 5, 17, 40)


class SeededChooser:
    """Every choice of a case from one seed, so that the seed alone replays it."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def pick(self, seq):
        seq = list(seq)
        return seq[self.rng.randrange(len(seq))]

    def integer(self, lo, hi):
        return self.rng.randint(lo, hi)

    def boolean(self):
        return self.rng.random() < 0.5


def _on(g, device):
    return g if device == "cpu" else g.to(device)


def draw_graphs(ch, device="cpu", max_nodes=12, edge_counts=SMALL_EDGES):
    """(graph, oracle graph): the oracle is the same graph for DGL to run. For a graph made from
    a CSC without edge ids it is its COO twin (edges numbered in CSC order), because DGL's own
    libxsmm kernel fails on such a CSC ("Check notnull: edges"), which dgl_ugraph runs fine.
    Empty rows, self-loops, multi-edges, no edges at all, skewed rows and bipartite blocks."""
    bipartite = ch.boolean()
    n_src = ch.integer(1, max_nodes)
    n_dst = ch.integer(1, max_nodes) if bipartite else n_src
    n_edges = ch.pick(edge_counts)
    hub = ch.boolean()  # one destination takes half of the edges: a skewed row
    idtype = ch.pick([torch.int32, torch.int64])
    seed = ch.integer(0, 2 ** 31 - 1)
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n_src, (n_edges,), generator=gen)
    dst = torch.randint(0, n_dst, (n_edges,), generator=gen)
    if hub:
        dst[: n_edges // 2] = 0
    if bipartite:
        g = _on(dgl.create_block((src, dst), num_src_nodes=n_src, num_dst_nodes=n_dst, idtype=idtype), device)
        return g, g
    if ch.boolean():
        g = _on(dgl.graph((src, dst), num_nodes=n_src, idtype=idtype), device)
        return g, g
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(n_dst + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n_dst), 0)
    g = dgl.graph(("csc", (indptr, src[order], torch.tensor([], dtype=torch.int64))), num_nodes=n_src, idtype=idtype)
    return _on(g, device), _on(dgl.graph((src[order], dst[order]), num_nodes=n_src, idtype=idtype), device)


def draw_feature_shapes(ch, op, dtype=torch.float32, wide=False):
    """Per-row shapes of lhs and rhs that broadcast (or match in the last dim, for dot); () is a
    1-D tensor. `wide` adds one-dimensional widths up to 70 and dots up to 64 long, as a GPU
    kernel's lanes and tiles see them. DGL's CUDA SDDMM sums a dot in the operand's own type
    (binary::Dot), and its gspmm backward takes such a dot over the last dimension when the edge
    operand broadcasts it (_need_reduce_last_dim), so in a half type a long dot differs from ours
    (summed in float32) by DGL's rounding: there, dots stay short and wide operands do not
    broadcast."""
    one_wide = wide and ch.boolean()
    if one_wide:
        out = (ch.pick((2, 7, 32, 33, 64, 70)),)
    else:
        out = tuple(ch.integer(1, 3) for _ in range(ch.integer(0, 3)))

    def operand():
        if one_wide and dtype in HALF:
            return out
        shape = tuple(d if ch.boolean() else 1 for d in out)
        drop = ch.integer(0, len(shape))
        return shape[drop:]

    lhs, rhs = operand(), operand()
    if op == "dot":
        long_dot = wide and dtype not in HALF and ch.boolean()
        k = ch.pick((7, 32, 64)) if long_dot else ch.integer(1, 4)
        lhs, rhs = lhs + (k,), rhs + (k,)
    return lhs, rhs


def rows(g, target):
    return {"u": g.num_src_nodes(), "v": g.num_dst_nodes(), "e": g.num_edges()}[target]


def tensor(n, shape, dtype, seed, grad, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.rand((n,) + shape, generator=gen, dtype=torch.float64) + 0.5).to(dtype)  # away from 0: div
    return x.to(device).requires_grad_(grad)


def assert_close(ours, theirs, dtype, what, scale=0.0):
    """Within TOL[dtype], absolute error relative to the larger of theirs' magnitude and `scale`."""
    rtol, atol = TOL[dtype]
    scale = max(theirs.detach().abs().max().item() if theirs.numel() else 0.0, scale)
    torch.testing.assert_close(ours, theirs, rtol=rtol, atol=atol * max(scale, 1.0), equal_nan=True,
                               msg=lambda found: f"{what}: {found}")


@contextlib.contextmanager
def standard_arg_strides():
    """DGL's max/min arguments come back through DLPack with strides like (1, 1) for shape (1, 2)
    (one destination node), and torch 2.2's gather then reads the wrong elements in DGL's own
    backward, giving wrong gradients. The oracle gets its arguments with standard strides."""
    dgl_gspmm = sparse._gspmm

    def gspmm(*args):
        out, (arg_u, arg_e) = dgl_gspmm(*args)
        return out, tuple(None if a is None else torch.empty(a.shape, dtype=a.dtype, device=a.device).copy_(a)
                          for a in (arg_u, arg_e))

    sparse._gspmm = gspmm
    try:
        yield
    finally:
        sparse._gspmm = dgl_gspmm


class Raised(Exception):
    """DGL raised, and dgl_ugraph raised the same error: nothing further to compare."""


def run_both(call, graphs):
    """call(graph) through dgl_ugraph, then call(oracle graph) through DGL: (ours, theirs). Where
    DGL raises (it does on some valid inputs, e.g. max on a graph without edges, backward), ours
    must raise the same."""
    g, oracle = graphs
    try:
        ours = call(g)
    except Exception as exc:
        ours = exc
    with dgl_ugraph.disabled(), standard_arg_strides():
        try:
            theirs = call(oracle)
        except Exception as exc:
            assert isinstance(ours, Exception), f"DGL raises {exc!r}, dgl_ugraph does not"
            assert type(ours) is type(exc) and message(ours) == message(exc), (ours, exc)
            raise Raised() from exc
    if isinstance(ours, Exception):
        raise ours
    return ours, theirs


def grads_of(out, inputs, upstream):
    inputs = [x for x in inputs if x is not None and x.requires_grad]
    if not inputs or not out.requires_grad:
        return []
    return list(torch.autograd.grad(out, inputs, upstream, allow_unused=True))


def winners_agree(g, op, lhs, rhs, out, arg_u, arg_e):
    """Our arguments point at messages whose value is the output: a tie, not an error."""
    shape = out.shape[1:]
    msg = None
    if arg_u is not None:
        a = lhs.detach().reshape(lhs.shape[0], *([1] * (len(shape) - lhs.dim() + 1)), *lhs.shape[1:])
        a = torch.gather(a.expand(-1, *shape), 0, arg_u.long())
    if arg_e is not None:
        b = rhs.detach().reshape(rhs.shape[0], *([1] * (len(shape) - rhs.dim() + 1)), *rhs.shape[1:])
        b = torch.gather(b.expand(-1, *shape), 0, arg_e.long())
    msg = {"copy_lhs": lambda: a, "copy_rhs": lambda: b, "add": lambda: a + b, "sub": lambda: a - b,
           "mul": lambda: a * b, "div": lambda: a / b}[op]()
    has_edges = (g.in_degrees() > 0).reshape(-1, *([1] * len(shape))).expand_as(out)
    return bool(torch.equal(msg[has_edges], out[has_edges]))


def kernel_gspmm_check(graphs, op, red, lhs, rhs, dtype):
    """Direct _gspmm: DGL's exact return structure, values, and arguments up to ties. Returns
    whether the arguments equal DGL's (so gradients are comparable)."""
    g, oracle = graphs
    ours = sparse._gspmm(g._graph, op, red, lhs, rhs)
    theirs = interception._dgl["_gspmm"](oracle._graph, op, red, lhs, rhs)
    (out, (arg_u, arg_e)), (ref, (ref_u, ref_e)) = ours, theirs
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref, dtype, f"_gspmm {op}/{red} value")
    same_args = True
    for a, r in ((arg_u, ref_u), (arg_e, ref_e)):
        assert (a is None) == (r is None)
        if a is not None:
            assert a.dtype == r.dtype == g.idtype and a.shape == r.shape
            same_args &= torch.equal(a, r)
    if not same_args:
        assert winners_agree(g, op, lhs, rhs, out, arg_u, arg_e), f"_gspmm {op}/{red}: arguments point at losers"
    return same_args


def check_gspmm(graphs, op, red, dtype, ch, wide=False):
    g = graphs[0]
    lshape, rshape = draw_feature_shapes(ch, op, dtype, wide)
    seed = ch.integer(0, 2 ** 31 - 1)
    grad_l, grad_r = ch.pick([(True, True), (True, False), (False, True)])
    lhs = tensor(g.num_src_nodes(), lshape, dtype, seed, grad_l, g.device) if op != "copy_rhs" else None
    rhs = tensor(g.num_edges(), rshape, dtype, seed + 1, grad_r, g.device) if op != "copy_lhs" else None
    same_args = True
    if red != "mean":
        # What GSpMM.forward passes to _gspmm: sub/div become add/mul, ranks padded to match.
        kop, kl, kr = {"sub": ("add", lhs, -rhs if rhs is not None else None),
                       "div": ("mul", lhs, 1.0 / rhs if rhs is not None else None)}.get(op, (op, lhs, rhs))
        if kl is not None and kr is not None:
            kl, kr = dgl.ops.spmm.reshape_lhs_rhs(kl, kr)
        with torch.no_grad():
            kernel_gspmm_check(graphs, op, red, *(dgl.ops.spmm.reshape_lhs_rhs(lhs, rhs)
                                                  if lhs is not None and rhs is not None else (lhs, rhs)), dtype)
            same_args = kernel_gspmm_check(graphs, kop, red, kl, kr, dtype)
    out, ref = run_both(lambda gr: dgl.ops.gspmm(gr, op, red, lhs, rhs), graphs)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref, dtype, f"gspmm {op}/{red} value")
    if red in ("max", "min") and (not same_args or dtype in HALF):
        # Ties: the gradient follows the argument. Half types: the gradient is torch's
        # scatter_add of the upstream at the arguments (compared above), whose atomics add, in no
        # fixed order, every empty row's upstream into row 0 and round in the half type itself.
        return
    upstream = tensor(ref.shape[0], tuple(ref.shape[1:]), dtype, seed + 2, False, g.device)
    grads = run_both(lambda gr: grads_of(dgl.ops.gspmm(gr, op, red, lhs, rhs), [lhs, rhs], upstream), graphs)
    for ours, theirs in zip(*grads):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert_close(ours, theirs, dtype, f"gspmm {op}/{red} gradient")


def check_gsddmm(graphs, op, targets, dtype, direct, ch, wide=False):
    g, oracle = graphs
    lt, rt = targets
    lshape, rshape = draw_feature_shapes(ch, op, dtype, wide)
    seed = ch.integer(0, 2 ** 31 - 1)
    lhs = tensor(rows(g, lt), lshape, dtype, seed, ch.boolean(), g.device) if op != "copy_rhs" else None
    rhs = tensor(rows(g, rt), rshape, dtype, seed + 1, ch.boolean(), g.device) if op != "copy_lhs" else None
    if direct:  # the kernel function as edge_softmax calls it: sub and div arrive unchanged
        if lhs is not None and rhs is not None:
            lhs, rhs = dgl.ops.sddmm.reshape_lhs_rhs(lhs, rhs)
        with torch.no_grad():
            out, ref = sparse._gsddmm(g._graph, op, lhs, rhs, lt, rt), \
                interception._dgl["_gsddmm"](oracle._graph, op, lhs, rhs, lt, rt)
        assert out.shape == ref.shape and out.dtype == ref.dtype
        assert_close(out, ref, dtype, f"_gsddmm {op} {lt}{rt} value")
        return
    out, ref = run_both(lambda gr: dgl.ops.gsddmm(gr, op, lhs, rhs, lt, rt), graphs)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref, dtype, f"gsddmm {op} {lt}{rt} value")
    upstream = tensor(ref.shape[0], tuple(ref.shape[1:]), dtype, seed + 2, False, g.device)
    grads = run_both(lambda gr: grads_of(dgl.ops.gsddmm(gr, op, lhs, rhs, lt, rt), [lhs, rhs], upstream), graphs)
    for ours, theirs in zip(*grads):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert_close(ours, theirs, dtype, f"gsddmm {op} {lt}{rt} gradient")


def _message(msg):
    """The dgl.function message builtin of that name, writing "m"."""
    if msg.startswith("copy"):
        return getattr(fn, msg)(msg[-1], "m")
    a, _, b = msg.split("_")
    return getattr(fn, msg)(a, b, "m")


def _run_builtin(graphs, dtype, width, seed, call):
    """call(graph) with source, destination and edge features "u", "v", "e" of one width set
    (each requiring grad) gives a tensor; returns ((value, gradients of its sum) through
    dgl_ugraph, the same through DGL)."""
    g = graphs[0]
    feats = {"u": tensor(g.num_src_nodes(), (width,), dtype, seed, True, g.device),
             "v": tensor(g.num_dst_nodes(), (width,), dtype, seed + 1, True, g.device),
             "e": tensor(g.num_edges(), (width,), dtype, seed + 2, True, g.device)}

    def run(gr):
        with gr.local_scope():
            gr.srcdata["u"], gr.dstdata["v"], gr.edata["e"] = feats["u"], feats["v"], feats["e"]
            out = call(gr)
        grads = torch.autograd.grad(out.sum(), list(feats.values()), allow_unused=True) if out.requires_grad else ()
        return out.detach(), grads

    return run_both(run, graphs)


def _assert_grads(grads, ref_grads, dtype, what):
    for ours, theirs in zip(grads, ref_grads):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert_close(ours, theirs, dtype, what)


def check_update_all(graphs, msg, red, dtype, width, seed):
    def call(gr):
        gr.update_all(_message(msg), getattr(fn, red)("m", "h"))
        return gr.dstdata["h"]

    (out, grads), (ref, ref_grads) = _run_builtin(graphs, dtype, width, seed, call)
    assert_close(out, ref, dtype, f"update_all {msg}/{red} value")
    if red in ("max", "min"):
        return  # arguments (hence gradients) may differ on ties; the kernel-level check compares them
    _assert_grads(grads, ref_grads, dtype, f"update_all {msg}/{red} gradient")


def check_apply_edges(graphs, msg, dtype, width, seed):
    def call(gr):
        gr.apply_edges(_message(msg))
        return gr.edata["m"]

    (out, grads), (ref, ref_grads) = _run_builtin(graphs, dtype, width, seed, call)
    assert_close(out, ref, dtype, f"apply_edges {msg} value")
    _assert_grads(grads, ref_grads, dtype, f"apply_edges {msg} gradient")


def check_edge_softmax(graphs, shape, norm_by, dtype, seed):
    """dgl.ops.edge_softmax and its gradient. On CPU DGL runs fused kernels of its own, on CUDA
    the gspmm/gsddmm chain that dgl_ugraph then runs."""
    g = graphs[0]
    if g.is_block:
        return  # DGL's edge_softmax takes graphs whose sources are their destinations
    gen = torch.Generator().manual_seed(seed)
    score = (torch.randn((g.num_edges(),) + shape, generator=gen, dtype=torch.float64) * 4).to(dtype).to(g.device)
    grad = torch.randn(score.shape, generator=gen, dtype=torch.float64).to(dtype).to(g.device)

    def run(gr):
        x = score.clone().requires_grad_()
        out = dgl.ops.edge_softmax(gr, x, norm_by=norm_by)
        (out * grad).sum().backward()
        return out.detach(), x.grad

    (out, out_grad), (ref, ref_grad) = run_both(run, graphs)
    assert_close(out, ref, dtype, "edge_softmax value")
    # The gradient is a difference of rounded products, out * grad - out * accum: its error is
    # relative to their size, not to the difference.
    terms = (ref * grad).abs().max().item() if ref.numel() else 0.0
    assert_close(out_grad, ref_grad, dtype, "edge_softmax gradient", terms)
