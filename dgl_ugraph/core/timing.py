"""Timing configurations on the GPU: the engine behind the collector (dgl_ugraph.tuning) and
online autotuning (selection.autotune, which gets `measure_on_gpu` injected by its callers).

`time_configs` times a list of configurations of one operator call: one screening run of each,
queued back to back with no host synchronization in between, then repeated runs of those within
`cut` x the best screening time (a configuration much slower than the best cannot win, so one
run of it is enough). A batch runs in the compiled core's own loop (ug_cuda_time), queued behind
a gate that holds the GPU until the whole batch is queued, so the events measure kernel time and
never the host's launch gaps; a batch that outgrew the GPU's launch queue (the gate timed out) is
timed again in halves.
"""
from __future__ import annotations

import contextlib
import math
import statistics
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from dgl_ugraph.core import _ext, ops
from dgl_ugraph.core.abstraction import OpInfo, ParallelInfo


class Refused(Exception):
    """The core says this configuration cannot run this call."""


class DeviceLost(Exception):
    """The GPU context failed (a sticky CUDA error): nothing more can run in this process."""


@dataclass
class Timing:
    """One configuration's result. status: ok (repeated), cut (one run, far from the best),
    beyond (an audit timing outside the search space), refused or error (not timed)."""

    config: ParallelInfo
    status: str = "pending"
    ms: float = math.nan
    first_ms: float = math.nan
    reps: int = 0
    message: str = ""


@dataclass(frozen=True)
class TimingPolicy:
    """How hard to time: `cut` None repeats every configuration; repetitions give about
    `target_ms` of kernel time per configuration (many on small cases, few on large ones)."""

    cut: Optional[float] = 2.5
    target_ms: float = 2.0
    min_reps: int = 1
    max_reps: int = 10
    batch_launches: int = 192  # per batch: launches and events must fit the GPU's queue (gate)
    batch_retries: int = 2  # re-timings, in halves, of a batch that starved

    def reps_for(self, best_ms: float) -> int:
        return max(self.min_reps, min(self.max_reps, math.ceil(self.target_ms / max(best_ms, 1e-4))))


def time_configs(runner, configs: Sequence[ParallelInfo], policy: TimingPolicy = TimingPolicy(),
                 extra: Sequence[ParallelInfo] = (), isolate: bool = False,
                 on_try: Optional[Callable[[ParallelInfo], None]] = None) -> List[Timing]:
    """Times `configs` (and `extra`, reported as status 'beyond', never cut and never counted as
    the best) on `runner`. `isolate` synchronizes after every run and calls `on_try(config)`
    first, so that a configuration that kills the GPU context can be named: DeviceLost then
    propagates with that configuration the last one tried."""
    timings = {c: Timing(c) for c in list(configs) + [c for c in extra if c not in configs]}
    extra = [c for c in extra if c not in configs]
    screened = _run_batch(runner, [(c, 1) for c in timings], timings, policy, isolate, on_try)
    for c, samples in screened.items():
        timings[c].first_ms = samples[0]
    ranked = [c for c in configs if c in screened]
    if ranked:
        best = min(screened[c][0] for c in ranked)
        reps = policy.reps_for(best)
        again = [c for c in list(ranked) + [c for c in extra if c in screened]
                 if policy.cut is None or c in extra or screened[c][0] <= policy.cut * best]
        repeated = _run_batch(runner, [(c, reps) for c in again], timings, policy, isolate, on_try)
        for c in screened:
            t = timings[c]
            if c in repeated:
                t.status, t.ms, t.reps = ("beyond" if c in extra else "ok"), statistics.median(repeated[c]), len(repeated[c])
            elif t.status == "pending":
                t.status, t.ms, t.reps = "cut", t.first_ms, 1
    return list(timings.values())


class LaunchFailed(Exception):
    """A configuration of a batch failed to queue; `index` is its position in the batch."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def _handle(runner, config: ParallelInfo, timings: Dict[ParallelInfo, Timing]):
    """The runner's handle of `config`, or None once its failure is recorded."""
    try:
        return runner.set(config)
    except Refused as exc:
        timings[config].status, timings[config].message = "refused", str(exc)
    except Exception as exc:  # noqa: BLE001 - a failed configuration is recorded, never fatal
        timings[config].status, timings[config].message = "error", f"{type(exc).__name__}: {exc}"
    return None


def _chunks(items, limit: int):
    """Consecutive groups of at most `limit` launches (an item bigger than that goes alone)."""
    group, size = [], 0
    for item in items:
        if group and size + item[2] > limit:
            yield group
            group, size = [], 0
        group.append(item)
        size += item[2]
    if group:
        yield group


def _time(runner, items, timings, policy: TimingPolicy) -> Dict[ParallelInfo, List[float]]:
    """Times (config, handle, runs) items in batches of at most `policy.batch_launches` launches;
    a starved batch is timed again in halves, a configuration that fails to queue is recorded and
    the rest of its batch timed again."""
    out: Dict[ParallelInfo, List[float]] = {}
    pending = [(list(chunk), policy.batch_launches, policy.batch_retries)
               for chunk in _chunks(items, policy.batch_launches)]
    while pending:
        batch, limit, retries = pending.pop(0)
        try:
            samples, starved = runner.time([(h, n) for _, h, n in batch])
        except LaunchFailed as exc:
            c = batch[exc.index][0]
            timings[c].status, timings[c].message = "error", str(exc)
            rest = batch[:exc.index] + batch[exc.index + 1:]
            if rest:
                pending.append((rest, limit, retries))
            continue
        if starved:
            runner.starved_batches += 1
            if retries > 0 and (len(batch) > 1 or batch[0][2] > 1):
                half = max(1, limit // 2)
                pending.extend((list(chunk), half, retries - 1) for chunk in _chunks(batch, half))
                continue
        out.update({c: s for (c, _, _), s in zip(batch, samples)})
    return out


def _run_batch(runner, items, timings, policy: TimingPolicy, isolate, on_try) -> Dict[ParallelInfo, List[float]]:
    handles = [(c, h, n) for c, n in items for h in [_handle(runner, c, timings)] if h is not None]
    if not isolate:
        return _time(runner, handles, timings, policy)
    out = {}
    for item in handles:
        if on_try is not None:
            on_try(item[0])
        out.update(_time(runner, [item], timings, policy))
    return out


# ---- the CUDA runner -------------------------------------------------------------------------------

_UG_ERR_CUDA = 4  # params.h: a CUDA call failed


class CudaRunner:
    """One operator call prepared once; each configuration is a copy of its params with the
    strategy, grouping and tiling rewritten, so that every configuration writes the same output
    buffers. A batch is timed by the core's own loop (ug_cuda_time): no Python between launches."""

    def __init__(self, graph, op: OpInfo, first: ParallelInfo, gate_timeout_ms: float = 2000.0):
        self.core = _ext.core()
        self.prep = ops.prepare(graph, op, first)
        if self.prep.params is None:
            raise Refused("the call has an empty output")
        self.params = self.prep.params
        self.device = graph.device
        self.handle = torch.cuda.current_stream(self.device).cuda_stream
        self.gate_timeout_ms = gate_timeout_ms
        # The runner's own workspaces, grown on demand (the prepared call's belongs to its first
        # configuration only), one for each mode of ops.new_workspace, so that each configuration
        # is timed as a call would run it: zero-filled, which every call leaves zeroed, and
        # uninitialized.
        self.workspaces = {0: None, 1: None}
        self._retired: list = []
        self.starved_batches = 0

    def set(self, pinfo: ParallelInfo):
        p = self.prep.params_for(pinfo)
        status, why = self.core.cuda_check(p)
        if status:
            raise Refused(why or f"status {status}")
        need = int(self.core.cuda_workspace_bytes(p))
        if need:
            zeroed = ops.workspace_zeroed(need)
            workspace = self.workspaces[zeroed]
            if workspace is None or need > workspace.numel():
                # Handles made earlier may point at the old buffer: it lives until the next batch ends.
                self._retired.append(workspace)
                workspace = self.workspaces[zeroed] = ops.new_workspace(need, self.device)[0]
            p.workspace, p.workspace_bytes = workspace.data_ptr(), workspace.numel()
            p.workspace_zeroed = zeroed
        return p

    def time(self, batch) -> Tuple[List[List[float]], bool]:
        # The core's loop makes its events and gate on the current device, which must be the one
        # of the graph's stream (another GPU's, when a call's tensors are not on the current one).
        index = ops.cuda_index(self.device)
        with torch.cuda.device(index) if index is not None else contextlib.nullcontext():
            status, why, failed, ms, starved = self.core.cuda_time([p for p, _ in batch], [n for _, n in batch],
                                                                   self.handle, self.gate_timeout_ms)
        self._retired = []
        if status == _UG_ERR_CUDA and failed < 0:
            raise DeviceLost(why)
        if status:
            raise LaunchFailed(max(failed, 0), why)
        out, at = [], 0
        for _, n in batch:
            out.append(list(ms[at:at + n]))
            at += n
        return out, bool(starved)


def measure_on_gpu(graph, op: OpInfo, configs: Sequence[ParallelInfo]) -> Dict[ParallelInfo, float]:
    """Median times of `configs` on the call's own tensors (outputs go to scratch buffers)."""
    runner = CudaRunner(graph, op, configs[0])
    timings = time_configs(runner, configs, TimingPolicy(cut=None, target_ms=1.0, min_reps=3, max_reps=20))
    return {t.config: t.ms for t in timings if t.status == "ok"}
