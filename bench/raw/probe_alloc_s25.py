"""Where copy_u-max's extra host microseconds go (issue 14): per-call wall time of the pieces of
ops.Plan.run on a cora-sized graph, and candidate output allocations. Medians over rounds."""
import statistics, sys, time
import torch
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core import ops
from dgl_ugraph.selection import policy

import os
dev = torch.device(os.environ.get("PROBE_DEV", "cuda"))
gen = torch.Generator().manual_seed(0)
n, e = 2708, 10556
src = torch.randint(0, n, (e,), generator=gen); dst = torch.randint(0, n, (e,), generator=gen)
g = UGraph.from_coo(src.to(dev), dst.to(dev), n, n)
sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
ROUNDS, CALLS = (15, 300) if dev.type == "cuda" else (2, 3)

def per_call(fn):
    sync(); t0 = time.perf_counter_ns()
    for _ in range(CALLS):
        fn()
    sync()
    return (time.perf_counter_ns() - t0) / CALLS / 1e3

def measure(impls):
    for f in impls.values():
        per_call(f)
    s = {k: [] for k in impls}
    for r in range(ROUNDS):
        for k in (list(impls) if r % 2 == 0 else list(reversed(impls))):
            s[k].append(per_call(impls[k]))
    return {k: statistics.median(v) for k, v in s.items()}

tiny = torch.zeros(1, device=dev)
DEVNAME = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
rows = []
for F in (16, 64):
    x = torch.randn(n, F, device=dev)
    opsum = OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")
    opmax = OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")
    psum, pmax = policy.plan(g, opsum), policy.plan(g, opmax)
    shape = (n, F)
    f32 = x.new_empty(0); i64 = torch.empty(0, dtype=torch.int64, device=dev); u8 = torch.empty(0, dtype=torch.uint8, device=dev)
    cb = n * F * 4
    def split_alloc():
        buf = u8.new_empty(cb + n * F * 8)
        return buf[:cb].view(torch.float32).view(shape), buf[cb:].view(torch.int64).view(shape)
    stub = lambda *a: None
    psum_stub, pmax_stub = policy.plan(g, opsum), policy.plan(g, opmax)
    psum_stub._run_cuda_with = stub; pmax_stub._run_cuda_with = stub
    impls = {
        "empty_launch": lambda: tiny.add_(1),
        "alloc_f32": lambda: f32.new_empty(shape),
        "alloc_i64": lambda: i64.new_empty(shape),
        "alloc_both": lambda: (f32.new_empty(shape), i64.new_empty(shape)),
        "alloc_torch_empty_both": lambda: (torch.empty(shape, dtype=torch.float32, device=dev), torch.empty(shape, dtype=torch.int64, device=dev)),
        "alloc_split": split_alloc,
        "alloc_i32": lambda: torch.empty(0, dtype=torch.int32, device=dev).new_empty(shape),
        "plan_sum": lambda: psum.run(x, None),
        "plan_max": lambda: pmax.run(x, None),
        "plan_sum_nolaunch": lambda: psum_stub.run(x, None),
        "plan_max_nolaunch": lambda: pmax_stub.run(x, None),
        "kernel_sum": policy.prepare(g, opsum).run,
        "kernel_max": policy.prepare(g, opmax).run,
        "ugrapher_sum": lambda: policy.ugrapher(g, opsum),
        "ugrapher_max": lambda: policy.ugrapher(g, opmax),
    }
    for rep in range(2):
        res = measure(impls)
        print(f"F={F} rep={rep} " + " ".join(f"{k}={v:.2f}" for k, v in res.items()), flush=True)
        for k, v in res.items():
            rows.append(f"{DEVNAME},{F},{rep},{k},{v:.3f}")
    if dev.type == "cuda":
        print("configs", policy.choose(g, ops.prepare(g, opsum).signature), policy.choose(g, ops.prepare(g, opmax).signature))
out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/probe_alloc.csv"
open(out, "w").write("device,F,rep,impl,us\n" + "\n".join(rows) + "\n")
