"""Mini-batch training with neighbor sampling, plugin on and off: every step's message passing runs
on graphs (blocks) never seen before, each called a few times in its life, where full-graph
training calls one graph thousands of times. What the plugin does with such graphs (its tier-up:
dgl_ugraph/dgl/cache.py) decides this case.

For each (model, graph), one set of sampled batches per implementation (`dgl_ugraph.disabled()`:
`dgl`; on: `ugraph`), drawn by one NeighborSampler from the same seed nodes, so that neither side
runs on blocks whose formats the other already built; the two sides' steps interleave, batch by
batch, in alternating order. A step is the forward, the loss, the backward and an SGD step
(learning rate 0: every step sees the same weights), timed to the device's synchronization;
sampling is outside the time (the same for both sides). Parity: one batch run by both sides on a
copy of the model in --parity-dtype (float64: summation order cannot hide a wrong value), the
plugin's side on its own kernels from the blocks' first call (no tier-up), the loss and every
gradient within RTOL. Medians over the steps after --warmup; `paired_x` is the
median of dgl / ugraph per batch index.

Models (dgl.nn, one conv per block, the usual mini-batch sizes): SAGE-mean (3 x SAGEConv mean,
hidden 256), GCN (3 x GraphConv, hidden 256), GAT (3 x GATConv, 4 heads x 64, the last one head).
Graphs: the uGrapher stand-ins named by --graphs (graph_suite), fanouts 15/10/5, batches of 1,024
seed nodes.

    python benchmarks/bench_minibatch.py --device cuda --out $OUT/minibatch_gpu.csv
    PYTHONPATH=. .venv/bin/python benchmarks/bench_minibatch.py --device cpu --graphs pubmed --steps 6   # dry run
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import functools
import pathlib
import pstats
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import dgl  # noqa: E402
import dgl.nn as dglnn  # noqa: E402

import dgl_ugraph  # noqa: E402
from harness.timing import cuda_ms, tier_up_now  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

COLUMNS = ["device", "model", "graph", "V", "E", "impl", "steps", "ms_median", "ms_p25", "ms_p75", "paired_x",
           "block_edges", "parity_maxdiff"]
FEAT, HIDDEN, CLASSES, HEADS = 128, 256, 47, 4
FANOUTS = (15, 10, 5)
RTOL = {torch.float32: 1e-4, torch.float64: 1e-9}


class Stack(nn.Module):
    """One conv per block; ReLU between."""

    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, blocks, x):
        for k, (layer, block) in enumerate(zip(self.layers, blocks)):
            x = layer(block, x)
            if x.dim() == 3:  # GAT's heads
                x = x.flatten(1) if k < len(self.layers) - 1 else x.mean(1)
            if k < len(self.layers) - 1:
                x = F.relu(x)
        return x


def build(name: str) -> nn.Module:
    sizes = (FEAT, HIDDEN, HIDDEN, CLASSES)
    if name == "SAGE-mean":
        return Stack([dglnn.SAGEConv(i, o, "mean") for i, o in zip(sizes, sizes[1:])])
    if name == "GCN":
        return Stack([dglnn.GraphConv(i, o, allow_zero_in_degree=True) for i, o in zip(sizes, sizes[1:])])
    if name == "GAT":
        dims = (FEAT, HIDDEN, HIDDEN)
        return Stack([dglnn.GATConv(i, HIDDEN // HEADS, HEADS, allow_zero_in_degree=True) for i in dims[:2]]
                     + [dglnn.GATConv(HIDDEN, CLASSES, 1, allow_zero_in_degree=True)])
    raise ValueError(f"unknown model {name!r}")


def sample(g, seeds, n_batches: int, batch: int, device, seed: int):
    """n_batches (input nodes, output nodes, blocks) of `batch` seed nodes each."""
    torch.manual_seed(seed)
    sampler = dgl.dataloading.NeighborSampler(list(FANOUTS))
    loader = dgl.dataloading.DataLoader(g, seeds, sampler, batch_size=batch, shuffle=True, drop_last=True,
                                        device=device)
    out = []
    for item in loader:
        out.append(item)
        if len(out) == n_batches:
            break
    return out


def run_step(model, opt, feat, labels, batch):
    inputs, outputs, blocks = batch
    loss = F.cross_entropy(model(blocks, feat[inputs]), labels[outputs])
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def parity(model, feat, labels, batch, dtype) -> float:
    """The largest difference, relative to the reference's scale, of the loss and gradients of a
    copy of the model in `dtype`."""
    model = copy.deepcopy(model).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    feat = feat.to(dtype)

    def grads():
        loss = run_step(model, opt, feat, labels, batch)
        return [loss.detach()] + [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    with tier_up_now():  # the blocks on dgl_ugraph's kernels from their first call
        ours = grads()
    with dgl_ugraph.disabled():
        theirs = grads()
    return max(((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item() for a, b in zip(ours, theirs))


def profile_steps(model, opt, feat, labels, batches, sync, what: str):
    run_step(model, opt, feat, labels, batches[0])
    sync()
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    for batch in batches[1:]:
        run_step(model, opt, feat, labels, batch)
    sync()
    profile.disable()
    print(f"\n=== {what}: {(time.perf_counter() - t0) * 1e3 / (len(batches) - 1):.3f} ms a step under cProfile ===")
    for key in ("cumulative", "tottime"):
        pstats.Stats(profile).sort_stats(key).print_stats(30)


def profile_kernels(model, opt, feat, labels, batches, sync, what: str):
    run_step(model, opt, feat, labels, batches[0])
    sync()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for batch in batches[1:]:
            run_step(model, opt, feat, labels, batch)
        sync()
    print(f"\n=== {what}: {len(batches) - 1} steps ===")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--graphs", default="amazon0505,com-amazon,ppi")
    ap.add_argument("--models", default="SAGE-mean,GCN,GAT")
    ap.add_argument("--steps", type=int, default=24, help="timed batches per implementation")
    ap.add_argument("--warmup", type=int, default=3, help="batches left out of the medians")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--parity-dtype", default="float64", choices=("float32", "float64"),
                    help="the dtype of the parity check's copy of the model (the timed steps are float32)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--profile", choices=("host", "kernels"), default=None,
                    help="instead: cProfile of --steps plugin-on steps of each model on each graph (host), or "
                         "torch.profiler's device kernels of as many steps, plugin on and off (kernels)")
    args = ap.parse_args()
    device = torch.device(args.device)
    dtype = getattr(torch, args.parity_dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    device_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    dgl_ugraph.enable()
    rows = []
    specs = {s.name: s for s in gs.PAPER_STANDINS + gs.LARGE}
    for gname in args.graphs.split(","):
        src, dst, n = gs.make(specs[gname])
        g = dgl.graph((src, dst), num_nodes=n).to(device)
        gen = torch.Generator().manual_seed(0)
        feat = torch.randn(n, FEAT, generator=gen).to(device)
        labels = torch.randint(0, CLASSES, (n,), generator=gen).to(device)
        seeds = torch.randperm(n, generator=gen)[: max(args.batch * (args.steps + args.warmup + 1), n // 4)]
        seeds = seeds.to(device)
        total = args.steps + args.warmup
        for mname in args.models.split(","):
            torch.manual_seed(0)
            model = build(mname).to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.0)
            batches = {"dgl": sample(g, seeds, total, args.batch, device, 1),
                       "ugraph": sample(g, seeds, total, args.batch, device, 2)}
            if args.profile == "host":
                profile_steps(model, opt, feat, labels, batches["ugraph"], sync, f"{mname} on {gname}")
                continue
            if args.profile == "kernels":
                for impl, batch_list in batches.items():
                    with dgl_ugraph.disabled() if impl == "dgl" else contextlib.nullcontext():
                        profile_kernels(model, opt, feat, labels, batch_list, sync, f"{mname} on {gname}, {impl}")
                continue
            check = sample(g, seeds, 1, args.batch, device, 3)[0]
            diff = parity(model, feat, labels, check, dtype)
            times = {"dgl": [], "ugraph": []}
            for k in range(total):
                for impl in (("dgl", "ugraph") if k % 2 == 0 else ("ugraph", "dgl")):
                    step = functools.partial(run_step, model, opt, feat, labels, batches[impl][k])
                    with dgl_ugraph.disabled() if impl == "dgl" else contextlib.nullcontext():
                        times[impl].append(cuda_ms(step, 1, 0)[0])
            kept = {k: v[args.warmup:] for k, v in times.items()}
            paired = statistics.median(d / u for d, u in zip(kept["dgl"], kept["ugraph"]))
            edges = statistics.median(sum(b.num_edges() for b in batch[2]) for batch in batches["ugraph"])
            for impl, xs in kept.items():
                q = statistics.quantiles(xs, n=4)
                rows.append(dict(device=device_name, model=mname, graph=gname, V=n, E=g.num_edges(), impl=impl,
                                 steps=len(xs), ms_median=round(statistics.median(xs), 4), ms_p25=round(q[0], 4),
                                 ms_p75=round(q[2], 4), paired_x=round(paired, 4) if impl == "ugraph" else "",
                                 block_edges=int(edges), parity_maxdiff=f"{diff:.2e}"))
            ok = "ok" if diff <= RTOL[dtype] else "MISMATCH"
            print(f"{mname:9} {gname:12} dgl {statistics.median(kept['dgl']):8.3f} ms  ugraph "
                  f"{statistics.median(kept['ugraph']):8.3f} ms  paired x{paired:.2f}  "
                  f"({int(edges)} block edges a step; parity {diff:.1e} {ok})", flush=True)
        del g, feat, labels
        if device.type == "cuda":
            torch.cuda.empty_cache()
    s = dgl_ugraph.stats()
    print(f"plugin calls {s['calls']}, on DGL {s['fallback']}")
    if args.out:
        write_rows(args.out, rows, COLUMNS)


if __name__ == "__main__":
    main()
