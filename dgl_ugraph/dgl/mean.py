"""The mean reducer above `_gspmm`: dgl.ops.gspmm with reduce_op 'mean', which update_all with
fn.mean, every dgl.ops.*_mean and SAGEConv's mean aggregator reach.

DGL lowers a mean to a sum on `_gspmm` and then, in PyTorch, asks for every in-degree, clamps
them to at least 1, casts them to the result's dtype, reshapes them and divides into a new tensor
(dgl/ops/spmm.py). Here the sum still goes through DGL's gspmm (with DGL's autograd), but the
`_gspmm` it reaches is told (`take`) to run the unified operator's gather mean: the kernel divides
each row by its clamped in-degree as it stores it, with no pass over the result. Autograd then
records the division's gradient (`_DividedGrad`: the gradient divided by the same degrees), which
is what it records for DGL's `sum / degrees`.

A copy_u mean (SAGEConv's mean aggregator, fn.copy_u with fn.mean) on CUDA whose source features
need their gradient runs inside an autograd function of its own (`_FusedMean`) instead of DGL's:
its forward is the kernel's gather mean, called directly (`interception.mean_forward`), and its
backward is one aggregation on the reverse graph that scales each message by its
destination's reciprocal degree as it reads it (`interception.mean_backward`: edge_op mul, A the
gradient and B the reciprocals, both typed src on the reverse graph), where DGL divides the whole
gradient into a new tensor and then runs the reverse sum over it. A message differs from DGL's
quotient by at most an ulp. Where autograd records the backward (create_graph) it is DGL's own
division and differentiable reverse sum.

When it fuses (H200, core 30d43064, 35 graphs x F in 16/64/256, kernel times): the fused call against the division plus the reverse copy sum is 2.06x
geomean, 1.03-2.3x on every graph of over 1M edges at F >= 64; it loses only at F = 16 on graphs of
over 1M edges and 10 or more edges a node (0.75-0.98x: big-skewed, big-balanced, artist,
soc-BlogCatalog), where the per-edge load of B costs more than the division's pass saves, so those
keep the two steps (`FUSE_NARROW_MAX_DEGREE`). Dividing in the kernel (edge_op div, DGL's quotients
to the bit) lost on 30 of the 105 cases (0.61x at worst): a float division per element. On the CPU
core the fused call lost to the division and copy sum on the larger graphs (1.5-2x on a 20K-node,
2M-edge graph), so CPU means keep the two steps.

Where the sum runs on DGL's kernel instead (a call dgl_ugraph refuses, or one whose kernel
failed), the division uses a divisor the graph cache computes once per graph, dtype and rank, in
place on the sum that nobody else holds (where it is no view): the same division by the same
values, so the same bits, without four tensor operations and an allocation per call.

Heterographs (several edge types) and graphs the cache cannot hold take DGL's own gspmm.
"""
from __future__ import annotations

import inspect
import math
import threading
import warnings

import torch

from dgl_ugraph.dgl import cache

_SIGNATURE = ("g", "op", "reduce_op", "lhs_data", "rhs_data")
_dgl = {}  # module name -> DGL's own gspmm there, captured by enable()
_own = [None]  # DGL's gspmm, which `_gspmm` calls (kept after disable for calls in flight)
# The fused backward's reverse aggregation, (gidx, grad, divisor, reciprocal) -> the source
# gradient, and the forward's gather mean, (gidx, x, divisor) -> the mean; given by interception,
# which routes kernel calls (kept across disable, for backward passes in flight).
_reverse = [None]
_forward = [None]
# Where a copy_u mean's backward is fused (see the module's docstring), and the narrow rows
# (under FUSE_MIN_WIDTH features) that are not: graphs of FUSE_NARROW_MIN_EDGES edges or more with
# FUSE_NARROW_MAX_DEGREE or more edges a source node.
FUSED_DEVICES = ("cuda",)
FUSE_MIN_WIDTH = 32
FUSE_NARROW_MIN_EDGES = 1 << 20
FUSE_NARROW_MAX_DEGREE = 10
_lock = threading.Lock()
class _State(threading.local):
    """Per thread: `armed` while a mean's sum is on its way to _gspmm, `divided` once the kernel
    that ran it divided it (take) or not (undivided). The class attributes are every thread's
    defaults: every sum reads `armed`, and a missing attribute would cost it an exception."""

    armed = False
    divided = False


_state = _State()


def take() -> bool:
    """Called by the replaced `_gspmm` for each sum it gets: True (once) when the sum is the one a
    mean sent, which it then runs as gather mean."""
    if _state.armed:
        _state.armed = False
        _state.divided = True
        return True
    return False


def undivided(ret):
    """Says that the mean's sum ran on DGL's kernel, undivided; returns DGL's result."""
    _state.divided = False
    return ret


class _DividedGrad(torch.autograd.Function):
    """A mean that the kernel divided: the identity forward, and backward the gradient divided by
    the degrees, as autograd records DGL's `sum / degrees`. The sum is marked as changed in place,
    so the result is the sum's own tensor (no view, which in-place use downstream would refuse)."""

    @staticmethod
    def forward(ctx, ret, divisor):
        ctx.divisor = divisor
        if ret._is_view():  # a view cannot be marked dirty here
            return ret.clone()
        ctx.mark_dirty(ret)
        return ret

    @staticmethod
    def backward(ctx, grad):
        return grad / ctx.divisor, None


class _FusedMean(torch.autograd.Function):
    """copy_u mean with the source gradient: forward, the kernel's gather mean; backward, the
    reverse aggregation of each message scaled by its destination's reciprocal degree in one call."""

    @staticmethod
    def forward(ctx, x, g, entry):
        # The kernel's gather mean straight from here: the sum's way through DGL's gspmm, its
        # autograd function and `take` costs host time and computes nothing (a copy_u mean's
        # result has the features' dtype and rank).
        ctx.gidx, ctx.divisor = g._graph, _divisor(entry, x.dtype, x.dim())
        ctx.reciprocal = _reciprocal(entry, x.dtype, x.dim())
        ret = _forward[0](ctx.gidx, x, ctx.divisor)
        # A view (1-D features come back squeezed) would be refused in-place use downstream.
        return ret.clone() if ret._is_view() else ret

    @staticmethod
    def backward(ctx, grad):
        if torch.is_grad_enabled():  # create_graph: DGL's differentiable division and reverse sum
            from dgl.backend.pytorch import sparse

            return sparse.gspmm(ctx.gidx.reverse(), "copy_lhs", "sum", grad / ctx.divisor, None), None, None
        return _reverse[0](ctx.gidx, grad, ctx.divisor, ctx.reciprocal), None, None


def _modules():
    # Looked up on first use: this module must import without DGL, for kernel-only use.
    import dgl.ops
    import dgl.ops.spmm
    # dgl.ops.spmm's own global serves update_all and the generated dgl.ops.*_mean functions;
    # dgl.ops holds another binding of the same function for direct dgl.ops.gspmm calls.
    return {"dgl.ops.spmm": dgl.ops.spmm, "dgl.ops": dgl.ops}


def _divisor(entry, dtype: torch.dtype, rank: int) -> torch.Tensor:
    """DGL's divisor for a mean with a result of `dtype` and `rank` on the graph of `entry`: the
    in-degrees clamped to at least 1, in that dtype, shaped to broadcast over its rows; cached on
    the entry."""
    key = (dtype, rank)
    found = entry.divisors.get(key)
    if found is None:
        deg = entry.degrees(False).clamp(min=1).to(dtype)
        found = entry.divisors[key] = deg.reshape((deg.shape[0],) + (1,) * (rank - 1))
    return found


def _reciprocal(entry, dtype: torch.dtype, rank: int) -> torch.Tensor:
    """1 / `_divisor`, cached beside it."""
    key = (dtype, rank, "reciprocal")
    found = entry.divisors.get(key)
    if found is None:
        found = entry.divisors[key] = 1.0 / _divisor(entry, dtype, rank)
    return found


def _mean_of_sum(g, op, lhs_data, rhs_data, entry):
    """The mean through DGL's gspmm of the sum on the graph of `entry`: divided in the kernel,
    else here."""
    _state.armed, _state.divided = True, False
    try:
        ret = _own[0](g, op, "sum", lhs_data, rhs_data)
    finally:
        _state.armed = False
    divisor = _divisor(entry, ret.dtype, ret.dim())
    if _state.divided:
        return _DividedGrad.apply(ret, divisor) if ret.requires_grad else ret
    # In place where the sum is a floating tensor of its own; autograd forbids it on a view that
    # DGL's autograd function returns (a reshaped broadcast result), and DGL's true division
    # turns an integer sum into a float one.
    if ret._is_view() or not ret.is_floating_point():
        return ret / divisor
    return ret.div_(divisor)


def _fused(op, x, graph) -> bool:
    """Whether the mean runs as `_FusedMean`: a copy_u mean whose floating source features need
    their gradient, outside autocast (where DGL's GSpMM casts them), on a device and a case where
    the fused backward wins (module docstring)."""
    if not (op == "copy_lhs" and _forward[0] is not None and isinstance(x, torch.Tensor) and x.requires_grad
            and torch.is_grad_enabled() and x.is_floating_point() and x.dim() > 0
            and x.device.type in FUSED_DEVICES and not torch.is_autocast_enabled()):
        return False
    return scaled_messages_win(math.prod(x.shape[1:]), graph)


def scaled_messages_win(width: int, graph) -> bool:
    """Whether an aggregation that scales each message by a per-node value as it reads it (B typed
    like A, a load an edge) beats a pass over the rows and the plain aggregation, at `width`
    features a row on `graph` (the narrow rows of large, dense graphs lose: module docstring)."""
    if width >= FUSE_MIN_WIDTH or graph.num_edges < FUSE_NARROW_MIN_EDGES:
        return True
    return graph.num_edges < FUSE_NARROW_MAX_DEGREE * max(graph.num_src, 1)


def _gspmm(g, op, reduce_op, lhs_data, rhs_data):
    own = _own[0]
    if reduce_op != "mean" or g._graph.number_of_etypes() != 1:
        return own(g, op, reduce_op, lhs_data, rhs_data)
    gidx = g._graph
    x = lhs_data if isinstance(lhs_data, torch.Tensor) else rhs_data
    if cache.seen(gidx) is None and isinstance(x, torch.Tensor) and x.is_cuda and cache.warming(gidx):
        return own(g, op, reduce_op, lhs_data, rhs_data)  # before the graph's tier-up: DGL's whole mean
    entry = cache.entry_for(gidx)
    if entry.__class__ is not cache.GraphEntry:
        return own(g, op, reduce_op, lhs_data, rhs_data)
    if _fused(op, lhs_data, entry.ugraph):
        return _FusedMean.apply(lhs_data, g, entry)
    return _mean_of_sum(g, op, lhs_data, rhs_data, entry)


def enable(reverse=None, forward=None) -> None:
    """Routes the mean reducer of dgl.ops.gspmm through `_gspmm`; a DGL whose gspmm has another
    signature keeps its own (with a warning), the kernels being rerouted all the same. `reverse`:
    the fused backward's reverse aggregation (interception's), kept until another is given."""
    with _lock:
        if reverse is not None:
            _reverse[0] = reverse
        if forward is not None:
            _forward[0] = forward
        if _dgl:
            return
        modules = _modules()
        own = modules["dgl.ops.spmm"].gspmm
        if own is _gspmm:
            return
        if tuple(inspect.signature(own).parameters) != _SIGNATURE:
            warnings.warn(f"dgl.ops.gspmm is not the expected gspmm{_SIGNATURE}: DGL divides means itself",
                          RuntimeWarning, stacklevel=3)
            return
        _own[0] = own
        for name, module in modules.items():
            if module.gspmm is own:  # another library's replacement stays where it is
                _dgl[name] = own
                module.gspmm = _gspmm


def disable() -> None:
    """Puts DGL's own gspmm back."""
    with _lock:
        for name, module in _modules().items():
            if name in _dgl and module.gspmm is _gspmm:
                module.gspmm = _dgl[name]
        _dgl.clear()
