"""The one place that decides how a CUDA call runs, in this order:

1. the forced setting (DGL_UGRAPH_STRATEGY), where the core can run it;
2. the autotuned winner (DGL_UGRAPH_AUTOTUNE=1, when the call's operands and a timing function
   are given): remembered per device, else the model's top-k (the shortlist without a model)
   timed once;
3. the learned model of the GPU family (`predictor`);
4. the hand-written rules (`rules.heuristic`).
The choice of 3 or 4 then takes `rules.l2_tiling`'s tiling where an aggregation's gathered rows
outgrow the L2 (an autotuned or forced choice is kept as it is).

Always among the strategies the compiled core can run (`core.capability`), and past 1, never one
that would leave a thread alone on the graph's longest row (`rules.straggler`). Timing is injected:
the callers hand in `core.timing.measure_on_gpu`, so choosing never runs a kernel itself.
"""
from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from dgl_ugraph import settings
from dgl_ugraph.core import _ext, ops
from dgl_ugraph.core.abstraction import OpInfo, ParallelInfo, Signature
from dgl_ugraph.core.capability import candidates
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.core.timing import measure_on_gpu
from dgl_ugraph.selection import autotune, predictor
from dgl_ugraph.selection.autotune import Measure
from dgl_ugraph.selection.rules import heuristic, l2_tiling, steady

_failed: List[str] = []


def choose(graph: UGraph, sig: Signature, op: Optional[OpInfo] = None,
           measure: Optional[Measure] = None) -> ParallelInfo:
    """The configuration of a CUDA call, by the order above. TypeError where no compiled
    strategy can run it; ValueError for a malformed DGL_UGRAPH_STRATEGY."""
    allowed = candidates(sig, graph.num_edges, _ext.compiled_cuda_keys())
    if not allowed:
        raise TypeError(f"no compiled CUDA strategy can run {sig}")
    forced = settings.forced_strategy()
    if forced:
        pinfo = _forced(forced)
        if pinfo.strategy in allowed:
            return pinfo
    allowed = steady(allowed, graph.stats)
    chosen = learned(graph, sig, allowed, op, measure)
    if chosen is not None:
        return chosen
    chosen = heuristic(sig, graph.stats, allowed)
    if graph.device.type != "cuda":  # no L2 to fit (a CPU graph asks only in tests)
        return chosen
    return with_l2_tiling(chosen, graph, sig, predictor.device_info(graph.device))


_warned_forced: set = set()


def _forced(text: str) -> ParallelInfo:
    """DGL_UGRAPH_STRATEGY's configuration. A malformed one raises ValueError (the call runs on
    DGL, with the reason in stats()) after one warning per value: set for every CUDA case, it
    would otherwise send them all to DGL unnoticed."""
    try:
        return ParallelInfo.parse(text)
    except ValueError as exc:
        if text not in _warned_forced:
            _warned_forced.add(text)
            warnings.warn(f"DGL_UGRAPH_STRATEGY={text!r} is not strategy[:grouping[:tiling]] ({exc}): every CUDA "
                          "call runs on DGL's kernels until it is fixed or unset", RuntimeWarning, stacklevel=2)
        raise ValueError(f"DGL_UGRAPH_STRATEGY={text!r}: {exc}") from exc


def with_l2_tiling(pinfo: ParallelInfo, graph: UGraph, sig: Signature, dev: predictor.DeviceInfo) -> ParallelInfo:
    """`rules.l2_tiling` on this graph and device."""
    return l2_tiling(pinfo, sig, graph.num_src, graph.num_edges, dev.l2_bytes)


def shortlist(sig: Signature, stats, allowed: Sequence[str]) -> List[ParallelInfo]:
    """What autotuning times when no model serves the device: the heuristic's choice, then per
    strategy a few groupings and tilings that span the space's corners."""
    out = [heuristic(sig, stats, list(allowed))]
    for s in allowed:
        top = min(predictor.max_tiling(s, sig.width), 64)
        for g, t in ((1, 1), (4, 1), (1, min(4, top)), (8, min(8, top)), (32, min(32, top))):
            c = ParallelInfo(s, g, max(t, 1))
            if c not in out:
                out.append(c)
    return out


def learned(graph, sig: Signature, allowed: Sequence[str], op: Optional[OpInfo] = None,
            measure: Optional[Measure] = None) -> Optional[ParallelInfo]:
    """Steps 2 and 3: the autotuned or the model's choice for a CUDA call among `allowed`
    strategies, or None when the heuristic should serve (no model for this GPU family and no
    autotuning, not a CUDA graph). A failure here never fails the call: it is reported once and
    the heuristic serves from then on."""
    if graph.device.type != "cuda" or _failed:
        return None
    try:
        dev = predictor.device_info(graph.device)
        model = predictor.load(dev.family)
        tuning = (op is not None and measure is not None and settings.autotune()
                  and not torch.cuda.is_current_stream_capturing())
        if model is None and not tuning:
            return None
        case = predictor.CaseInfo.from_graph(graph)
        if not tuning:
            return with_l2_tiling(model.choose(case, sig, dev, allowed), graph, sig, dev)
        core_hash = str(_ext.core().build_info().get("cuda_source_hash", ""))
        if model is not None:
            ranked, k = model.rank(case, sig, dev, allowed), settings.autotune_top_k()
        else:
            ranked = shortlist(sig, graph.stats, allowed)
            k = len(ranked)
        return autotune.tuner_for(dev, core_hash).choose(graph, op, case, sig, ranked, k, measure)
    except Exception as exc:  # noqa: BLE001 - selection must never break the operator
        _failed.append(f"{type(exc).__name__}: {exc}")
        warnings.warn(f"dgl_ugraph: the strategy predictor failed ({_failed[0]}); the heuristic serves from now on",
                      RuntimeWarning, stacklevel=2)
        return None


# torch's deterministic mode, read by every repeat call: the flag itself, without the public
# wrapper's frame where this torch has it.
_deterministic = getattr(torch._C, "_get_deterministic_algorithms", torch.are_deterministic_algorithms_enabled)


def selection_state() -> tuple:
    """What a CUDA configuration is chosen from besides the call and the graph: the settings
    this module reads and torch's deterministic mode. Cheap enough for every call."""
    return settings.selection_state(), _deterministic()


@dataclass(frozen=True)
class Choice:
    """A CUDA call's configuration and the selection state it was chosen under."""

    parallel_info: ParallelInfo
    state: tuple

    def current(self) -> bool:
        """False once a setting or deterministic mode changed since: the call must be chosen
        again."""
        return self.state == selection_state()


def choose_for(graph: UGraph, op_info: OpInfo, measure: Optional[Measure] = None) -> Choice:
    """The configuration of one call of the unified operator on a CUDA graph. TypeError where
    this build cannot run it there (no CUDA core, no compiled strategy), ValueError for a
    malformed DGL_UGRAPH_STRATEGY."""
    if not _ext.has_cuda():
        raise TypeError("this build of dgl_ugraph has no CUDA core")
    state = selection_state()
    return Choice(choose(graph, ops.signature(graph, op_info)[0], op_info, measure), state)


def prepare(graph: UGraph, op_info: OpInfo, parallel_info: Optional[ParallelInfo] = None,
            measure: Optional[Measure] = measure_on_gpu, args: bool = True) -> ops.Prepared:
    """`ops.prepare`, with the configuration `choose` gives a CUDA call that has none (autotuning
    times candidates with `measure`)."""
    prepared = ops.prepare(graph, op_info, parallel_info, args)
    if prepared.pending:
        prepared.configure(choose(graph, prepared.signature, op_info, measure))
    return prepared


def plan(graph: UGraph, op_info: OpInfo, parallel_info: Optional[ParallelInfo] = None,
         measure: Optional[Measure] = measure_on_gpu, args: bool = True) -> ops.Plan:
    """`ops.Plan` for the kernel API's repeated calls, configured as `prepare` configures."""
    return ops.Plan(graph, op_info, first=prepare(graph, op_info, parallel_info, measure, args))


# Plans of ugrapher's repeat calls: per graph object (UGraph.plans), its most recent signatures.
_PLANS_PER_GRAPH = 64
_plans_lock = threading.Lock()


def _plan_key(op_info: OpInfo, parallel_info: Optional[ParallelInfo], args: bool) -> tuple:
    """What a plan fixes: the operator (C_type follows from gather_op), whether max/min write
    their args, its operands' shapes, dtype and device (.device: get_device() gives -1 for CPU and
    meta tensors alike), and what its configuration was chosen from: the parallel info given, or
    the selection state. Built from attributes alone, on every call, with selection_state's parts
    read directly (a frame less)."""
    a, b = op_info.A, op_info.B
    return (op_info.edge_op, op_info.gather_op, args, op_info.A_type, op_info.B_type, parallel_info,
            settings.selection_state(), _deterministic(),
            None if a is None else a.shape, None if a is None else a.dtype, None if a is None else a.device,
            None if b is None else b.shape, None if b is None else b.dtype, None if b is None else b.device)


def _remember(graph: UGraph, key: tuple, plan_: ops.Plan) -> None:
    with _plans_lock:
        plans = graph.plans
        plans[key] = plan_
        if len(plans) > _PLANS_PER_GRAPH:
            plans.popitem(last=False)


def ugrapher(graph: UGraph, op_info: OpInfo, parallel_info: Optional[ParallelInfo] = None,
             measure: Optional[Measure] = measure_on_gpu, args: bool = True):
    """Runs the unified operator. Returns (C, argA, argB); the args are None unless gather_op is
    max/min, the edge_op reads that operand and `args` is True (False: C alone, the same values,
    without the winners' rows that only a backward pass reads). On CUDA, without
    `parallel_info`, the policy chooses one; on CPU, parallel_info is ignored.

    A repeat call (same graph object, operator, operand shapes, dtype, device and settings)
    reuses the first call's checks, choice and packed params (`ops.Plan`): it allocates its
    outputs and launches."""
    key = _plan_key(op_info, parallel_info, args)
    plan_ = graph.plans.get(key)
    if plan_ is not None:
        return plan_.run(op_info.A, op_info.B)
    prepared = prepare(graph, op_info, parallel_info, measure, args)
    result = prepared.run()
    _remember(graph, key, ops.Plan(graph, op_info, first=prepared))
    return result
