"""Which operations of a CPU mini-batch step take longer with the plugin on (session 35: GCN's
step is 0.87-0.93x DGL's on pubmed, and the time inside the plugin's calls explains little of it).
Both sides run the same sampled blocks (sampled twice with the same seeds, so that each side has its
own block objects and builds its own formats), interleaved batch by batch; torch.profiler's
self CPU time per operator, summed over the steps, on each side."""
import collections
import contextlib
import statistics
import sys
import time

import torch
import dgl

sys.path[:0] = [".", "scripts"]
import bench_minibatch as bm  # noqa: E402
import dgl_ugraph  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

model_name = sys.argv[1] if len(sys.argv) > 1 else "GCN"
gname = sys.argv[2] if len(sys.argv) > 2 else "pubmed"
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 24
dgl_ugraph.enable()
specs = {s.name: s for s in gs.PAPER_STANDINS + gs.LARGE}
src, dst, n = gs.make(specs[gname])
g = dgl.graph((src, dst), num_nodes=n)
gen = torch.Generator().manual_seed(0)
feat = torch.randn(n, bm.FEAT, generator=gen)
labels = torch.randint(0, bm.CLASSES, (n,), generator=gen)
seeds = torch.randperm(n, generator=gen)[: 512 * (steps + 2)]
torch.manual_seed(0)
model = bm.build(model_name)
opt = torch.optim.SGD(model.parameters(), lr=0.0)


def batches():
    dgl.seed(7)
    return bm.sample(g, seeds, steps + 2, 512, torch.device("cpu"), 1)


sides = {"dgl": batches(), "ugraph": batches()}
same = all(a[2][0].num_edges() == b[2][0].num_edges() for a, b in zip(sides["dgl"], sides["ugraph"]))
print("same blocks on both sides:", same)
self_us = {k: collections.Counter() for k in sides}
calls = {k: collections.Counter() for k in sides}
wall = {k: [] for k in sides}
for i in range(steps + 2):
    for side in (("dgl", "ugraph") if i % 2 == 0 else ("ugraph", "dgl")):
        ctx = dgl_ugraph.disabled() if side == "dgl" else contextlib.nullcontext()
        with ctx, torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            bm.run_step(model, opt, feat, labels, sides[side][i])
            t = (time.perf_counter() - t0) * 1e3
        if i < 2:
            continue
        wall[side].append(t)
        for ev in prof.key_averages():
            self_us[side][ev.key] += ev.self_cpu_time_total
            calls[side][ev.key] += ev.count
for side in sides:
    print(side, "step ms median", round(statistics.median(wall[side]), 3))
keys = set(self_us["dgl"]) | set(self_us["ugraph"])
rows = sorted(keys, key=lambda k: -abs(self_us["ugraph"][k] - self_us["dgl"][k]))
print(f"{'op':40} {'dgl us/step':>12} {'ours us/step':>12} {'diff':>9} {'calls d/o':>12}")
for k in rows[:30]:
    d, o = self_us["dgl"][k] / steps, self_us["ugraph"][k] / steps
    print(f"{k[:40]:40} {d:12.1f} {o:12.1f} {o - d:9.1f} {calls['dgl'][k] // steps:5}/{calls['ugraph'][k] // steps}")
print("total self", sum(self_us["dgl"].values()) / steps, sum(self_us["ugraph"].values()) / steps)
