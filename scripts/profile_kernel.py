"""One kernel case run a few times under a profiler: a graph of bench_kernels' suite, one of its
operators, one width, dtype and configuration. For Nsight Compute on the GPU machine:

    ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --launch-skip 2 --launch-count 1 python scripts/profile_kernel.py amazon0505 u_mul_e-sum 64 \
        warp_vertex:4:1

It prints the median CUDA-event time of the configuration, so that a run without a profiler is a
quick A/B of configurations too (several configurations may be given).
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


def load(name: str) -> UGraph:
    """A graph of bench_kernels' suite by its name there: a stand-in, a large graph or
    ds-<dataset>, each also as <name>-rev (its edges reversed, as bench_kernels --reverse runs)."""
    base = name[:-len("-rev")] if name.endswith("-rev") else name
    for spec in gs.PAPER_STANDINS + gs.LARGE:
        if spec.name == base:
            src, dst, n = gs.make(spec)
            break
    else:
        found = [d for d in gs.shared_datasets() if "ds-" + d[0] == base]
        if not found:
            raise SystemExit(f"no graph {name!r} in the suite or the shared datasets (ds-<name>)")
        _, src, dst, n = found[0]
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
    args = ap.parse_args()
    graph = load(args.graph)
    op = make_inputs(args.op, graph, args.F, getattr(torch, args.dtype), torch.Generator(device="cuda").manual_seed(0))
    others = baselines(args.op, op, graph)
    for config in args.configs:
        fn = others[config] if config in others else ops.prepare(graph, op, ParallelInfo.parse(config)).run
        print(f"{args.graph} {args.op} F={args.F} {args.dtype} {config}: "
              f"{time_ms(fn, args.reps, warmup=2):.4f} ms", flush=True)


if __name__ == "__main__":
    main()
