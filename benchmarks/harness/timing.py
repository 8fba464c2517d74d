"""Timing: implementations interleaved round by round, paired speedups, and the state each
implementation runs in, entered outside the timed region."""
from __future__ import annotations

import contextlib
import os
import platform
import statistics
import time
from typing import Callable, Dict, List
from unittest import mock

import torch

# The plugin with DGL's own module forwards (its kernels still run them): what the module
# patterns' lean paths add on top of the kernels.
KERNELS_ONLY = "ugraph_kernels"


# The Amdahl bound of any replacement of what the plugin replaces: DGL's program with every
# gspmm/gsddmm call (and, on CPU, every fused edge-softmax call) answered by a copy of the result
# recorded from a real run (a kernel must at least write its output, so the copy is the floor).
# baseline ms / this ms is the most the plugin could gain.
SPARSE_FREE = "dgl_sparse_free"


def interleaved_ms(fns: Dict[str, Callable], reps: int, warmup: int, min_s: float, max_reps: int = 60,
                   max_s: float = 30.0, sync: Callable[[], None] = lambda: None) -> Dict[str, List[float]]:
    """Times each fn, interleaved (a, b, c, then b, c, a, ...), after `warmup` untimed calls of each: at least
    `reps` times, and on until each has run `min_s` seconds in all (at most `max_reps` times), so
    that sub-millisecond cases get enough repeats for a median that load spikes from other
    processes cannot move; stops after `max_s` seconds once `reps` are done. On a GPU, `sync`
    (torch.cuda.synchronize) ends each call, so a time is the host's wall time until the device
    has finished: kernels and every host overhead, as the user waits for them."""
    for _ in range(warmup):
        for impl, fn in fns.items():
            _call(impl, fn)
    sync()
    times = {impl: [] for impl in fns}
    order = list(fns)
    start = time.perf_counter()
    i = 0
    while True:
        # Each round starts one place later: a step pays for what the step before it left behind
        # (glibc returns the big freed blocks to the OS, and the next step faults them back in),
        # and a fixed order would bill that to the same implementation every round.
        for impl in order[i % len(order):] + order[:i % len(order)]:
            fn = fns[impl]
            with state(impl, fn):
                t0 = time.perf_counter()
                fn()
                sync()
                times[impl].append((time.perf_counter() - t0) * 1e3)
        i += 1
        if i >= reps and (i >= max_reps or time.perf_counter() - start > max_s
                          or min(sum(t) for t in times.values()) >= 1e3 * min_s):
            return times


def paired_speedup(base: List[float], ours: List[float]) -> float:
    """Median over interleaved rounds of base / ours within the round."""
    return statistics.median(b / o for b, o in zip(base, ours))


def state(impl, fn):
    """The context `impl` runs `fn` in: the plugin off (`dgl`), DGL's sparse calls answered from
    the record (the bound), the plugin on with DGL's module forwards (kernels-only) or on. A timed
    call runs inside it: switching the plugin off and on re-patches DGL (about 0.6 ms of host time
    on the 2-core machine), which is no part of either implementation's call."""
    import dgl_ugraph

    if impl == "dgl":
        return dgl_ugraph.disabled()
    if impl == SPARSE_FREE:
        return fn.sparse_free.replaying()
    dgl_ugraph.enable()
    if impl == KERNELS_ONLY:
        from dgl_ugraph.dgl import modules
        return modules.disabled()
    return contextlib.nullcontext()


def _call(impl, fn):
    with state(impl, fn):
        return fn()


class SparseFree:
    """Records the results of one run's sparse calls (in call order), then answers the same
    calls of later runs with copies of them."""

    NAMES = ("_gspmm", "_gsddmm", "_edge_softmax_forward", "_edge_softmax_backward")

    def __init__(self, fn):
        self.fn, self.results = fn, []

    def _patched(self, make):
        from dgl_ugraph.dgl import interception

        return interception.replaced(make, self.NAMES)

    def record(self):
        def make(original):
            def wrapper(*args, **kwargs):
                out = original(*args, **kwargs)
                self.results.append(out)
                return out
            return wrapper
        self.results = []
        with self._patched(make):
            self.fn()

    def replaying(self):
        counter = iter(range(1 << 62))

        def copy(x):
            if isinstance(x, torch.Tensor):
                return x.clone()
            if isinstance(x, tuple):
                return tuple(copy(y) for y in x)
            return x

        def make(original):
            def wrapper(*args, **kwargs):
                return copy(self.results[next(counter) % len(self.results)])
            return wrapper
        return self._patched(make)


def tier_up_now():
    """DGL_UGRAPH_TIER_UP=0 for the block: graphs called in it tier up at once, and stay so."""
    return mock.patch.dict(os.environ, {"DGL_UGRAPH_TIER_UP": "0"})


def ugraph_share(fn) -> float:
    """Share of the gspmm/gsddmm calls of one run of fn that ran on dgl_ugraph."""
    import dgl_ugraph

    dgl_ugraph.enable()
    dgl_ugraph.reset_stats()
    fn()
    s = dgl_ugraph.stats()
    return s["intercepted"] / s["calls"] if s["calls"] else float("nan")


def cpu_device_name() -> str:
    model = platform.processor() or "cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu ({model}, {os.cpu_count()} cores, torch {torch.__version__.split('+')[0]} {torch.get_num_threads()} threads)"


def cuda_ms(fn, reps: int, warmup: int) -> List[float]:
    """Host wall time of each call until the device is idle again, in ms."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return times
