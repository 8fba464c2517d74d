"""One kernel case run a few times under a profiler: a graph of bench_kernels' suite, one of its
operators, one width, dtype and configuration. For Nsight Compute on the GPU machine:

    ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --launch-skip 2 --launch-count 1 python benchmarks/profile_kernel.py amazon0505 u_mul_e-sum 64 \
        warp_vertex:4:1

It prints the median CUDA-event time of the configuration, so that a run without a profiler is a
quick A/B of configurations too (several configurations may be given). --kernels adds each launch
of one call (the edge strategies' row passes and the aggregation) with its mean device time, from
torch.profiler, as CSV rows on stdout.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_kernels import OPERATORS, baselines, make_inputs, time_ms  # noqa: E402

from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.core import ops  # noqa: E402
from dgl_ugraph.core.abstraction import ParallelInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402


def load(name: str, order: str = "given") -> UGraph:
    """A graph of bench_kernels' suite by its name there: a stand-in, a large graph or
    ds-<dataset>, each also as <name>-rev (its edges reversed, as bench_kernels --reverse runs).
    order: its edge ids as generated ("given"; random for the stand-ins), or renumbered in the
    order of the edges' destinations ("dst", as dgl.reorder_graph's edge_permute_algo='dst'
    leaves them: edge data in CSC order) or sources ("src", CSR order); a -rev graph keeps the
    edge ids of the graph it reverses."""
    base = name[:-len("-rev")] if name.endswith("-rev") else name
    for spec in gs.PAPER_STANDINS + gs.LARGE:
        if spec.name == base:
            src, dst, n = gs.make(spec)
            break
    else:
        found = gs.shared_dataset(base[len("ds-"):]) if base.startswith("ds-") else None
        if found is None:
            raise SystemExit(f"no graph {name!r} in the suite or the shared datasets (ds-<name>)")
        src, dst, n = found
    if order != "given":
        perm = torch.sort(dst if order == "dst" else src, stable=True).indices
        src, dst = src[perm], dst[perm]
    if base != name:
        src, dst = dst, src
    return UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph")
    ap.add_argument("op", choices=OPERATORS)
    ap.add_argument("F", type=int)
    ap.add_argument("configs", nargs="+",
                    help="strategy:grouping:tiling, or a baseline of bench_kernels (cusparse, torch_scatter)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kernels", action="store_true", help="also each kernel's mean device time per call")
    ap.add_argument("--order", choices=("given", "dst", "src"), default="given", help="edge-id order (see load)")
    args = ap.parse_args()
    graph = load(args.graph, args.order)
    op = make_inputs(args.op, graph, args.F, getattr(torch, args.dtype), torch.Generator(device="cuda").manual_seed(0))
    others = baselines(args.op, op, graph)
    for config in args.configs:
        fn = others[config] if config in others else ops.prepare(graph, op, ParallelInfo.parse(config)).run
        print(f"{args.graph} {args.op} F={args.F} {args.dtype} {config}: "
              f"{time_ms(fn, args.reps, warmup=2):.4f} ms", flush=True)
        if args.kernels:
            for name, us in kernel_us(fn, args.reps):
                print(f"kernel,{args.graph},{args.op},{args.F},{args.dtype},{config},{name},{us:.2f}", flush=True)


def kernel_us(fn, reps: int):
    """(kernel name, mean device microseconds per call) for each kernel that `reps` calls of fn
    launch, in the order of their first launch; the name keeps its first template argument only
    (edge_rows_pass<false and <true are the clearing and the finishing pass)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    total, order = {}, []
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = ev.name.replace("void ", "").split("(")[0]
        if "<" in name:
            base, args = name.split("<", 1)
            name = base + "<" + args.split(",")[0]
        if name not in total:
            order.append(name)
            total[name] = 0.0
        total[name] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
    return [(name, total[name] / reps) for name in order]


if __name__ == "__main__":
    main()
