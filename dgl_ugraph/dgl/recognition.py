"""Recognition: whether dgl_ugraph runs one DGL kernel call exactly as DGL would, decided once
per (graph, signature) and kept in the graph's cache entry.

The switching table maps DGL's (op, reduce_op, targets) to uGrapher's op_info, and the operands'
dtype, device, rows and broadcast shapes decide whether dgl_ugraph can run it exactly as DGL
would; a CUDA call gets its configuration from selection's policy. Whatever cannot run here goes
to DGL's own function, with the reason in stats(); DGL then computes it or raises its own error.
A signature whose kernel raised runs on DGL from then on.
"""
from __future__ import annotations

import warnings
from typing import Optional

import torch

from dgl_ugraph.core import _ext, ops
from dgl_ugraph.core.abstraction import OpInfo, broadcast
from dgl_ugraph.core.timing import measure_on_gpu
from dgl_ugraph.dgl import cache, patterns
from dgl_ugraph.dgl.stats import DGL, UGRAPHER, record
from dgl_ugraph.selection.policy import choose_for

# DGL's CPU kernels refuse float16 ("Feature data can only be bfloat16/float32/float64 on CPU").
KERNEL_DTYPES = {"cpu": (torch.float32, torch.float64, torch.bfloat16),
           "cuda": (torch.float32, torch.float64, torch.float16, torch.bfloat16)}


class UGraphFallbackWarning(RuntimeWarning):
    """dgl_ugraph failed on a call it should run; DGL's kernels run it instead."""


_warned = set()
_failed = {}  # (pattern, signature) -> reason: signatures whose kernel raised, run on DGL from then on


def warn_once(key, message: str):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, UGraphFallbackWarning, stacklevel=4)


class Decision:
    """How one (graph, signature) runs: on dgl_ugraph (pattern set) or on DGL (pattern None)."""

    __slots__ = ("record", "pattern", "choice", "out_shape", "expand_lhs", "expand_rhs", "squeeze_out",
                 "failure_key", "error", "plan", "plain")

    def __init__(self, record, pattern=None, choice=None, out_shape=(), expand_lhs=False,
                 expand_rhs=False, squeeze_out=False, failure_key=None):
        self.record = record
        self.pattern = pattern
        self.choice = choice  # selection's Choice for a CUDA call, None on CPU
        self.out_shape = out_shape
        self.expand_lhs = expand_lhs
        self.expand_rhs = expand_rhs
        self.squeeze_out = squeeze_out
        # Operands and output as DGL passes them: a repeat call goes straight to the plan.
        self.plain = not (expand_lhs or expand_rhs or squeeze_out)
        self.failure_key = failure_key
        self.error = None  # a message to raise as DGLError where DGL's own kernel would crash the process
        self.plan = None  # ops.Plan, made by the first call that runs on dgl_ugraph


def meta(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return (t.shape, t.dtype, t.device)
    return ("object", type(t))


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _stats_signature(lhs, rhs, idtype: str) -> tuple:
    x = lhs if isinstance(lhs, torch.Tensor) else rhs
    if not isinstance(x, torch.Tensor):
        return ("-", None, None, "-", idtype)

    def feat(t):
        return tuple(t.shape[1:]) if isinstance(t, torch.Tensor) else None

    return (_name(x.dtype), feat(lhs), feat(rhs), str(x.device), idtype)


def _why_not(entry, pattern, lhs, rhs) -> Optional[str]:
    """None if dgl_ugraph computes this call exactly as DGL would, else the reason it cannot."""
    graph = entry.ugraph
    used = [(side, t, ttype) for side, t, ttype in (("lhs", lhs, pattern.A_type), ("rhs", rhs, pattern.B_type))
            if ttype != "null"]
    for side, t, _ in used:
        if not isinstance(t, torch.Tensor):
            return f"{side} is {type(t).__name__}, not a tensor (DGL raises)"
        if t.dim() == 0:
            return f"{side} is a 0-d tensor (DGL decides)"
    dtypes = {t.dtype for _, t, _ in used}
    if len(dtypes) > 1:
        return f"lhs is {_name(lhs.dtype)} and rhs {_name(rhs.dtype)}: DGL raises its dtype-mismatch error"
    dtype = dtypes.pop()
    devices = {t.device for _, t, _ in used}
    if devices != {graph.device}:
        return f"operands on {sorted(map(str, devices))}, graph on {graph.device} (DGL decides)"
    if graph.device.type not in KERNEL_DTYPES:
        return f"device {graph.device.type}: dgl_ugraph runs on cpu and cuda"
    if dtype not in KERNEL_DTYPES[graph.device.type]:
        if dtype == torch.float16 and graph.device.type == "cpu":
            return "float16 on CPU: DGL's CPU kernels refuse it (DGL raises)"
        return f"{_name(dtype)} features: DGL's kernels take floating point only (DGL decides)"
    for side, t, ttype in used:
        if t.shape[0] != graph.rows(ttype):
            if t.shape[0] == 0:
                return _ZeroRows(f"{side} has 0 rows for {graph.rows(ttype)} {ttype} items: DGL's own gsddmm "
                                 "kernel crashes the process on it, so dgl_ugraph raises DGLError")
            return f"{side} has {t.shape[0]} rows for {graph.rows(ttype)} {ttype} items (DGL raises)"
    return None


class _ZeroRows(str):
    """A reason that DGL must not get the call: an operand without rows where the graph has some.
    DGL 2.1's CPU gsddmm dereferences it (a segmentation fault, tests/dgl/test_reliability_inputs.py);
    its gspmm raises DGLError ("Check notnull"). dgl_ugraph raises a DGLError that names it."""


def _shapes(pattern, op, lhs, rhs):
    """(out feature shape, expand_lhs, expand_rhs, squeeze_out) as DGL computes them, or a reason."""
    from dgl._sparse_ops import infer_broadcast_shape

    use_lhs, use_rhs = pattern.A_type != "null", pattern.B_type != "null"
    expand_lhs = use_lhs and lhs.dim() == 1
    expand_rhs = use_rhs and rhs.dim() == 1
    a_shape = (tuple(lhs.shape[1:]) or (1,)) if use_lhs else None
    b_shape = (tuple(rhs.shape[1:]) or (1,)) if use_rhs else None
    try:
        expected = tuple(infer_broadcast_shape(op, a_shape or (), b_shape or ()))
        ours = broadcast(pattern.edge_op, a_shape, b_shape).out_shape
    except Exception as exc:  # DGL's own check refuses the shapes: let DGL raise it
        return f"feature shapes {a_shape} and {b_shape}: {str(exc).splitlines()[0]} (DGL raises)"
    if ours != expected:
        return f"broadcast of {a_shape} and {b_shape} gives {ours} here but {expected} in DGL"
    squeeze_out = (expand_lhs or not use_lhs) and (expand_rhs or not use_rhs)
    return ours, expand_lhs, expand_rhs, squeeze_out


def _refusal(key: str, sig, reason) -> Optional[Decision]:
    """DGL's decision for a call that does not run here, or None when it does: the recognition's
    reason, else an earlier failure of this signature, else a missing compiled core."""
    if reason is None and (key, sig) in _failed:
        reason = _failed[(key, sig)]
    if reason is None and _ext._C is None:
        reason = _ext.LOAD_ERROR
        warn_once("core", f"dgl_ugraph: {reason}; DGL's own kernels run every call")
    if reason is None:
        return None
    d = Decision(record(key, sig, DGL, reason))
    if isinstance(reason, _ZeroRows):
        d.error = f"{key}: the {reason.split(':')[0]}"
    return d


def _decide(entry, key: str, op: str, lhs, rhs) -> Decision:
    graph = entry.ugraph
    sig = _stats_signature(lhs, rhs, _name(entry.idtype))
    found = patterns.lookup(key)
    if isinstance(found, str):
        return Decision(record(key, sig, DGL, found))
    reason = _why_not(entry, found, lhs, rhs)
    shapes = None
    if reason is None:
        shapes = _shapes(found, op, lhs, rhs)
        if isinstance(shapes, str):
            reason = shapes
    refused = _refusal(key, sig, reason)
    if refused is not None:
        return refused
    out_shape, expand_lhs, expand_rhs, squeeze_out = shapes
    op_info = f"({found.edge_op}, {found.gather_op}, {found.A_type}, {found.B_type}, {found.C_type})"
    choice = None
    config = "cpu"
    if graph.device.type == "cuda":
        try:
            probe = make_op_info(found, lhs.unsqueeze(-1) if expand_lhs else lhs, rhs.unsqueeze(-1) if expand_rhs else rhs)
            choice = choose_for(graph, probe, measure_on_gpu)
        except (TypeError, ValueError) as exc:  # no compiled strategy fits, or a bad DGL_UGRAPH_STRATEGY
            return Decision(record(key, sig, DGL, str(exc)))
        config = str(choice.parallel_info)
    rec = record(key, sig, UGRAPHER, config, op_info)
    return Decision(rec, found, choice, out_shape, expand_lhs, expand_rhs, squeeze_out, (key, sig))


def make_op_info(pattern, lhs, rhs) -> OpInfo:
    return OpInfo(pattern.edge_op, pattern.gather_op, lhs if pattern.A_type != "null" else None, pattern.A_type,
                  rhs if pattern.B_type != "null" else None, pattern.B_type, pattern.C_type)


def after_failure(entry, sig_key, decision: Decision, exc: Exception) -> Decision:
    """Our kernel raised on a call it accepted: this signature runs on DGL from now on."""
    reason = f"the dgl_ugraph kernel raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    key, sig = decision.failure_key
    if decision.failure_key not in _failed:
        _failed[decision.failure_key] = reason
        # One warning per kind of failure, not per signature: a core that fails (say, out of
        # memory) fails every signature of a model, and the user needs to hear it once. Each
        # signature's reason is in stats().
        warn_once(("kernel", type(exc).__name__),
                  f"dgl_ugraph: {key} {sig}: {reason}; DGL's own kernels run it from now on (further "
                  f"{type(exc).__name__} failures go to dgl_ugraph.stats() without a warning)")
    fallback = Decision(record(key, sig, DGL, _failed[decision.failure_key]))
    entry.decisions[sig_key] = fallback
    return fallback


def count_fallback(key: str, reason: str, lhs, rhs, gidx):
    """Counts one call of `key` that DGL runs, and why."""
    record(key, _stats_signature(lhs, rhs, gidx.dtype), DGL, reason).calls += 1


def _pattern_key(sig_key) -> str:
    if sig_key[0] == "edge_softmax":
        return sig_key[1]
    if sig_key[0] == "mean_backward":
        return patterns.MEAN_BACKWARD
    if sig_key[0] == "norm_sum":
        return patterns.NORM_SUM
    if sig_key[0] == "gspmm":
        return patterns.spmm_key(sig_key[1], sig_key[2])
    return patterns.sddmm_key(sig_key[1], sig_key[2], sig_key[3])


def _integer_features(lhs, rhs) -> Optional[str]:
    """The refusal that the operands alone decide, before the graph is looked at. Besides sparing
    a graph conversion for a call DGL will refuse, this keeps DGL's error DGL's: under DGL 2.4
    with torch 2.11, converting a CUDA graph's formats leaves deprecation warnings pending, which
    a warnings filter (pytest's, or -W error) turns into a SystemError in place of DGL's DGLError."""
    for t in (lhs, rhs):
        if isinstance(t, torch.Tensor) and t.dim() > 0 and not t.is_floating_point():
            return f"{_name(t.dtype)} features: DGL's kernels take floating point only (DGL decides)"
    return None


WARMING = ("warm-up: a CUDA graph's first calls run on DGL's kernels (DGL_UGRAPH_TIER_UP, 16 unless set), "
           "so that a graph used a few times, as a sampled block, never pays for dgl_ugraph's cache of it")


def decision_for(gidx, sig_key, op, lhs, rhs):
    """(graph entry, decision), or (None, None) once it is recorded why DGL runs the call."""
    # A repeat call: a gidx object passed before, a signature decided on its graph. The key
    # holds the operands' dtypes, so the integer check below passed for it.
    entry = cache.seen(gidx)
    if entry is not None:
        d = entry.decisions.get(sig_key)
        if d is not None and (d.choice is None or d.choice.current()):
            return entry, d
    reason = _integer_features(lhs, rhs)
    if reason is not None:
        record(_pattern_key(sig_key), _stats_signature(lhs, rhs, _name(gidx.dtype)), DGL, reason).calls += 1
        return None, None
    x = lhs if isinstance(lhs, torch.Tensor) else rhs
    if entry is None and isinstance(x, torch.Tensor) and x.is_cuda and cache.warming(gidx, count=True):
        count_fallback(_pattern_key(sig_key), WARMING, lhs, rhs, gidx)
        return None, None
    try:
        entry = cache.entry_for(gidx)
        if entry.__class__ is str:
            count_fallback(_pattern_key(sig_key), entry, lhs, rhs, gidx)
            return None, None
        d = entry.decisions.get(sig_key)
        if d is None or (d.choice is not None and not d.choice.current()):
            # A CUDA configuration is chosen again when deterministic mode was switched since.
            key = _pattern_key(sig_key)
            d = entry.decisions[sig_key] = (_decide_softmax(entry, key, lhs, rhs) if sig_key[0] == "edge_softmax"
                                            else _decide(entry, key, op, lhs, rhs))
        return entry, d
    except Exception as exc:  # recognition itself failed: never the reason a run breaks
        key = _pattern_key(sig_key)
        reason = f"dgl_ugraph could not recognize the call ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        warn_once(("recognition", key), f"dgl_ugraph: {key}: {reason}; DGL's own kernels run it")
        record(key, _stats_signature(lhs, rhs, "-"), DGL, reason).calls += 1
        return None, None


# ---- edge softmax ------------------------------------------------------------------------------
# DGL's CPU EdgeSoftmax runs fused kernels of its own, which loop over the elements of an edge
# row outermost and gather every edge once per element. dgl_ugraph runs its own fused kernel
# (csrc/cpu/softmax.cpp): the same operations in the same order, each destination row's scores
# gathered once into a scratch that stays in cache. On CUDA, DGL lowers the softmax to five
# generalized calls; dgl_ugraph runs the whole softmax as one fused kernel forward and one
# backward (csrc/cuda/softmax.cu, interception's edge_softmax above EdgeSoftmax). Whatever those
# kernels cannot run (an unsupported dtype or graph, or a kernel that failed) runs on DGL's own
# path, whole.

# The fused CUDA softmax (csrc/cuda/softmax.cu) gives each destination row a team sized to the
# average row, a warp or a block, by its length, and runs split in two launches on large graphs
# whose edge ids scatter each row (core.ops.softmax_splits). Against the five calls on
# dgl_ugraph's kernels in the same run (H100, core 719e977d, benchmarks/bench_softmax_gpu.py with
# no rule; 0.1-5.3M edges, 1 and 8 heads) it
# wins the forward (1.19-2.56x) and the forward with its backward (1.07-1.66x) on every graph, the
# backward split past 2^20 scores. In one launch, rows past SOFTMAX_FUSED_MAX_DEGREE in-edges lose to the five
# calls (soc-BlogCatalog, rows of up to 8,842: 0.73x with 8 heads), since each of its
# passes walks such a row again; split, the same graph wins (1.16-1.38x). So a call of such rows
# runs fused where it splits, and on the five calls, whose kernels balance skewed rows, otherwise.
SOFTMAX_FUSED_MAX_DEGREE = 1 << 10  # the longest row's in-edges


# The operands _why_not checks: the forward reads one edge tensor, the backward two; the CUDA
# softmax is one call (its backward runs inside its autograd function).
_SOFTMAX_OPERANDS = {"edge_softmax_forward": patterns.Pattern("edge_softmax_forward", "-", "-", "edge", "null", "edge"),
                     "edge_softmax_backward": patterns.Pattern("edge_softmax_backward", "-", "-", "edge", "edge", "edge"),
                     "edge_softmax": patterns.Pattern("edge_softmax", "-", "-", "edge", "null", "edge")}


def _past_fused_softmax(graph, x) -> Optional[str]:
    """Why the fused CUDA softmax leaves this call to the five calls, or None where it runs it."""
    if graph.stats.max > SOFTMAX_FUSED_MAX_DEGREE and not ops.softmax_splits(graph, x, backward=False):
        return (f"a row of {graph.stats.max} in-edges, past the fused kernel's {SOFTMAX_FUSED_MAX_DEGREE} "
                "in one launch")
    return None


def _decide_softmax(entry, key: str, x, y) -> Decision:
    graph = entry.ugraph
    sig = _stats_signature(x, y, _name(entry.idtype))
    device = patterns.fused()[key]["device"]
    reason = _why_not(entry, _SOFTMAX_OPERANDS[key], x, y)
    if reason is None and graph.device.type != device:
        reason = f"this fused edge softmax runs on {device.upper()} (DGL calls it only there), the graph is on {graph.device}"
    if reason is None and device == "cuda" and not _ext.has_cuda():
        reason = "this build of dgl_ugraph has no CUDA core"
    if reason is None and y is not None and x.shape != y.shape:
        reason = f"output {tuple(x.shape)} and its product with the gradient {tuple(y.shape)} differ in shape"
    refused = _refusal(key, sig, reason)
    if refused is not None:
        return refused
    past = _past_fused_softmax(graph, x) if device == "cuda" else None
    if past is not None:  # no pattern: DGL's function runs, and its five calls run here, each counted
        return Decision(record(key, sig, UGRAPHER, f"as DGL's five calls ({past})", "five generalized calls"))
    rec = record(key, sig, UGRAPHER, device, "fused edge softmax over each destination's in-edges")
    return Decision(rec, _SOFTMAX_OPERANDS[key], failure_key=(key, sig))
