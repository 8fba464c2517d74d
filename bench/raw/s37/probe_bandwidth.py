"""The device's memory bandwidth by direction, for the floor of max with args (issue 13): a read-only
pass (torch.sum of a float32 tensor), a write-only pass (fill_) and a copy (read + write), each
over 4 GiB, timed with CUDA events after a warm-up (bench/raw/cuda_events.py); medians of 20.
Bytes moved / time."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from cuda_events import median_ms  # noqa: E402

n = 1 << 30  # float32 elements: 4 GiB
x = torch.randn(n, device="cuda")
y = torch.empty_like(x)


def gbps(fn, nbytes):
    return nbytes / median_ms(fn, reps=20) / 1e6


print(torch.cuda.get_device_name())
print(f"read  (sum)  {gbps(lambda: x.sum(), 4 * n):7.0f} GB/s")
print(f"write (fill) {gbps(lambda: y.fill_(1.0), 4 * n):7.0f} GB/s")
print(f"copy         {gbps(lambda: y.copy_(x), 8 * n):7.0f} GB/s (read + write)")
