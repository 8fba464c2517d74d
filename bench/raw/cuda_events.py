"""The bench/raw probes' CUDA-event timing: the median of `reps` calls, each between two events,
after `warmup` untimed calls."""
import statistics

import torch


def median_ms(fn, warmup: int = 3, reps: int = 15) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)
