"""The device's memory bandwidth by direction, for the floor of max with args (issue 13): a read-only
pass (torch.sum of a float32 tensor), a write-only pass (fill_) and a copy (read + write), each
over 4 GiB, timed with CUDA events after a warm-up; medians of 20. Bytes moved / time."""
import statistics

import torch

n = 1 << 30  # float32 elements: 4 GiB
x = torch.randn(n, device="cuda")
y = torch.empty_like(x)


def gbps(fn, nbytes, reps=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return nbytes / statistics.median(times) / 1e9


print(torch.cuda.get_device_name())
print(f"read  (sum)  {gbps(lambda: x.sum(), 4 * n):7.0f} GB/s")
print(f"write (fill) {gbps(lambda: y.fill_(1.0), 4 * n):7.0f} GB/s")
print(f"copy         {gbps(lambda: y.copy_(x), 8 * n):7.0f} GB/s (read + write)")
