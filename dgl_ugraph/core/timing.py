"""Timing configurations on the GPU: the engine behind the collector (dgl_ugraph.tuning) and
online autotuning (selection.autotune, which gets `measure_on_gpu` injected by its callers).

`time_configs` times a list of configurations of one operator call: one screening run of each,
queued back to back with no host synchronization in between, then repeated runs of those within
`cut` x the best screening time (a configuration much slower than the best cannot win, so one
run of it is enough). The GPU is kept ahead of the host by a spin kernel queued first (the
"spacer"), so CUDA events measure kernel time, not launch gaps; a batch whose spacer ran out
before the host finished queueing is timed again with a longer one.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch

from dgl_ugraph.core import _ext, ops
from dgl_ugraph.core.abstraction import STRATEGY_CODE, OpInfo, ParallelInfo


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
    batch_retries: int = 2  # re-timings of a batch whose spacer ran out

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
    runner.begin()
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


def _enqueue(runner, config: ParallelInfo, n: int, timings: Dict[ParallelInfo, Timing]):
    try:
        runner.set(config)
    except Refused as exc:
        timings[config].status, timings[config].message = "refused", str(exc)
        return None
    except Exception as exc:  # noqa: BLE001 - a failed configuration is recorded, never fatal
        timings[config].status, timings[config].message = "error", f"{type(exc).__name__}: {exc}"
        return None
    try:
        return runner.record(n)
    except Exception as exc:  # noqa: BLE001
        timings[config].status, timings[config].message = "error", f"{type(exc).__name__}: {exc}"
        return None


def _run_batch(runner, items, timings, policy: TimingPolicy, isolate, on_try) -> Dict[ParallelInfo, List[float]]:
    if not items:
        return {}
    if isolate:
        out = {}
        for c, n in items:
            if on_try is not None:
                on_try(c)
            handle = _enqueue(runner, c, n, timings)
            runner.sync()
            if handle is not None:
                out[c] = runner.elapsed(handle)
        return out
    for attempt in range(policy.batch_retries + 1):
        marker = runner.pad(sum(n for _, n in items))
        handles = [(c, _enqueue(runner, c, n, timings)) for c, n in items]
        starved = runner.starved(marker)
        runner.sync()
        if not starved:
            break
        runner.starved_batches += 1
    return {c: runner.elapsed(h) for c, h in handles if h is not None}


# ---- the CUDA runner -------------------------------------------------------------------------------

_sleep_cycles_per_ms: Dict[int, float] = {}
_event_pools: Dict[int, List[torch.cuda.Event]] = {}  # reused by every runner: creating events costs
_launch_ms: Dict[int, float] = {}  # host time per queued run, learned from each batch


def _cycles_per_ms(device: torch.device) -> float:
    """How many torch.cuda._sleep cycles make a millisecond on this GPU (0: no spacer)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sleep_cycles_per_ms:
        sleep = getattr(torch.cuda, "_sleep", None)
        rate = 0.0
        if sleep is not None:
            with torch.cuda.device(index):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                sleep(1000)
                start.record()
                sleep(2_000_000)
                end.record()
                end.synchronize()
                rate = 2_000_000 / max(start.elapsed_time(end), 1e-3)
        _sleep_cycles_per_ms[index] = rate
    return _sleep_cycles_per_ms[index]


class CudaRunner:
    """One operator call prepared once; configurations are switched by rewriting its params, so
    a configuration costs three field writes, a check and a launch, and every configuration writes
    the same output buffers."""

    def __init__(self, graph, op: OpInfo, first: ParallelInfo):
        self.core = _ext.core()
        self.prep = ops.prepare(graph, op, first)
        if self.prep.params is None:
            raise Refused("the call has an empty output")
        self.params = self.prep.params
        self.device = graph.device
        self.stream = torch.cuda.current_stream(self.device)
        self.handle = self.stream.cuda_stream
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        self.index = index
        self.pool = _event_pools.setdefault(index, [])
        self.used = 0
        self.workspace = None
        self._retired: list = []
        self.capacity = int(self.params.workspace_bytes)
        self.starved_batches = 0
        self._clock = 0.0
        self._launches = 0
        self._cycles = _cycles_per_ms(self.device)

    def begin(self) -> None:
        self.used = 0  # every event handed out before was read: they can be reused

    def _event(self) -> torch.cuda.Event:
        if self.used == len(self.pool):
            self.pool.append(torch.cuda.Event(enable_timing=True))
        ev = self.pool[self.used]
        self.used += 1
        return ev

    def set(self, pinfo: ParallelInfo) -> None:
        p = self.params
        p.strategy, p.grouping, p.tiling = STRATEGY_CODE[pinfo.strategy], pinfo.grouping, pinfo.tiling
        status, why = self.core.cuda_check(p)
        if status:
            raise Refused(why or f"status {status}")
        need = int(self.core.cuda_workspace_bytes(p))
        if need > self.capacity:
            # The old buffer may still be read by queued runs: keep it until the next sync.
            self._retired.append(self.workspace)
            self.workspace = torch.empty(need, dtype=torch.uint8, device=self.device)
            self.capacity = need
            p.workspace = self.workspace.data_ptr()
        p.workspace_bytes = self.capacity if need else 0

    def record(self, n: int):
        events = [self._event() for _ in range(n + 1)]
        events[0].record(self.stream)
        for i in range(n):
            self.core.run_cuda(self.params, self.handle)
            events[i + 1].record(self.stream)
        return events

    def elapsed(self, events) -> List[float]:
        return [a.elapsed_time(b) for a, b in zip(events[:-1], events[1:])]

    def pad(self, launches: int):
        """Queues a spin kernel long enough to cover the host's queueing of `launches` runs."""
        self._launches = max(launches, 1)
        self._clock = time.perf_counter()
        if not self._cycles:
            return None
        ms = min(200.0, 0.05 + 1.5 * self._launches * _launch_ms.get(self.index, 0.03))
        torch.cuda._sleep(int(ms * self._cycles))
        marker = self._event()
        marker.record(self.stream)
        return marker

    def starved(self, marker) -> bool:
        """True when the spacer had run out before the host finished queueing (the GPU may have
        waited on the host inside a timed region)."""
        per_launch = (time.perf_counter() - self._clock) * 1e3 / self._launches
        ran_out = marker is not None and marker.query()
        before = _launch_ms.get(self.index, 0.03)
        _launch_ms[self.index] = max(per_launch, before * (2.0 if ran_out else 0.9))
        return ran_out

    def sync(self) -> None:
        try:
            torch.cuda.synchronize(self.device)
        except Exception as exc:  # noqa: BLE001 - RuntimeError, or torch.AcceleratorError in newer torch
            raise DeviceLost(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
        self._retired = []


def measure_on_gpu(graph, op: OpInfo, configs: Sequence[ParallelInfo]) -> Dict[ParallelInfo, float]:
    """Median times of `configs` on the call's own tensors (outputs go to scratch buffers)."""
    runner = CudaRunner(graph, op, configs[0])
    timings = time_configs(runner, configs, TimingPolicy(cut=None, target_ms=1.0, min_reps=3, max_reps=20))
    return {t.config: t.ms for t in timings if t.status == "ok"}
