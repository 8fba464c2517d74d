"""Ways to allocate one CUDA output of (N, F) from Python, with its release, per call (issue 14:
max's second output): Tensor.new_empty(shape), torch.empty(shape, dtype, device), torch.empty_like
of a zero-stride template of the output's shape (4 bytes of storage), and a pair through unbind of
one allocation; beside an empty launch. 2,000-call loops, medians of 15 rounds, interleaved."""
import statistics
import time

import torch

dev = torch.device("cuda")
N = 2708
tiny = torch.zeros(1, device=dev)
rows = []
for F in (16, 64):
    shape = (N, F)
    f32 = torch.empty(0, device=dev)
    i64 = torch.empty(0, dtype=torch.int64, device=dev)
    t32 = torch.empty(1, device=dev).expand(shape)
    t64 = torch.empty(1, dtype=torch.int64, device=dev).expand(shape)
    pair64 = torch.empty(1, dtype=torch.int64, device=dev).expand((2,) + shape)
    impls = {
        "empty_launch": lambda: tiny.add_(1),
        "new_empty_f32": lambda: f32.new_empty(shape),
        "new_empty_both": lambda: (f32.new_empty(shape), i64.new_empty(shape)),
        "torch_empty_both": lambda: (torch.empty(shape, device=dev), torch.empty(shape, dtype=torch.int64, device=dev)),
        "empty_like_f32": lambda: torch.empty_like(t32),
        "empty_like_both": lambda: (torch.empty_like(t32), torch.empty_like(t64)),
        "unbind_pair_i64": lambda: torch.empty_like(pair64).unbind(0),
        "two_outputs_torch_max": (lambda u: lambda: torch.max(u, 2))(torch.randn(N, F, 1, device=dev)),
    }
    assert torch.empty_like(t32).is_contiguous() and torch.empty_like(t32).shape == shape

    def per_call(fn, calls=2000):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / calls / 1e3

    for fn in impls.values():
        per_call(fn, 200)
    s = {k: [] for k in impls}
    for r in range(15):
        for k in (list(impls) if r % 2 == 0 else list(reversed(impls))):
            s[k].append(per_call(impls[k]))
    print(f"F={F} " + " ".join(f"{k}={statistics.median(v):.2f}" for k, v in s.items()), flush=True)
