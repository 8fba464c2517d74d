"""Where a model's GPU time goes, plugin on and off: torch.profiler's CUDA kernel table of one
model's forward (and backward with --training) on one graph, under real DGL. A thin CLI over
bench_models' models and graphs.

    python benchmarks/profile_gpu.py --model GAT --graph amazon0505 [--training] [--top 15]
    python benchmarks/profile_gpu.py --model GIN --graph cora --training --host

--host profiles the host instead: on a small graph a step's time is Python and launches, so it
prints the wall time per step (median) and cProfile's functions by own time, plugin on and off.
"""
from __future__ import annotations

import argparse
import cProfile
import pathlib
import pstats
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import bench_models as bm  # noqa: E402
import dgl_ugraph  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="GAT")
    ap.add_argument("--graph", default="amazon0505", help="a uGrapher stand-in or LARGE graph of graph_suite")
    ap.add_argument("--training", action="store_true")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script")
    ap.add_argument("--host", action="store_true", help="cProfile of the host, not the CUDA kernels")
    ap.add_argument("--steps", type=int, default=200, help="--host: steps timed and profiled")
    args = ap.parse_args()
    spec = next(s for s in gs.PAPER_STANDINS + gs.LARGE if s.name == args.graph)
    src, dst, n = gs.make(spec)
    feat, labels, classes = bm.features(n, None, None)
    model, prepare = bm.build_model(args.model, feat.shape[1], classes)
    model = model.to(args.device)
    g = bm.make_dgl_graph(src, dst, n, prepare, device=args.device)
    feat, labels = feat.to(args.device), labels.to(args.device)
    fn = bm.training_fn(model, labels, g, feat) if args.training else bm.inference_fn(model, g, feat)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    if args.host:
        return profile_host(fn, sync, args)
    for state in ("on", "off"):
        (dgl_ugraph.enable if state == "on" else dgl_ugraph.disable)()
        for _ in range(3):
            fn()
        sync()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA if args.device == "cuda" else torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                fn()
            sync()
        print(f"\n=== {args.model} {'training' if args.training else 'inference'} on {args.graph}, "
              f"plugin {state} (3 steps) ===")
        print(prof.key_averages().table(sort_by="cuda_time_total" if args.device == "cuda" else "cpu_time_total", row_limit=args.top, max_name_column_width=90))
    print(dgl_ugraph.report())


def profile_host(fn, sync, args):
    mode = "training" if args.training else "inference"
    for state in ("on", "off"):
        (dgl_ugraph.enable if state == "on" else dgl_ugraph.disable)()
        for _ in range(20):
            fn()
        sync()
        times = []
        for _ in range(args.steps):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.steps):
            fn()
        sync()
        profile.disable()
        print(f"\n=== {args.model} {mode} on {args.graph}, plugin {state}: "
              f"{statistics.median(times) * 1e3:.3f} ms per step (median of {args.steps}) ===")
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
