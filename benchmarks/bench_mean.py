"""The mean reducer through DGL on the GPU: what a user of update_all(copy_u, mean) (SAGEConv's
mean aggregator) waits for, per call, with the kernel's gather mean against the two paths it
replaces, interleaved round by round in one run:
  fused     - dgl_ugraph on: DGL's sum reaches the kernel as gather mean, divided at the store;
  divided_grad - (training only) dgl_ugraph on, the mean's backward as DGL runs it: the gradient
              divided into a new tensor, then the reverse sum (where `fused` runs the backward as
              one reverse aggregation dividing each message as it reads it);
  dgl_div   - dgl_ugraph on with the mean hook off: our kernel's sum, then DGL's own division
              (in-degrees, clamp, cast, reshape, divide into a new tensor);
  dgl       - dgl_ugraph off: DGL's cuSPARSE sum and its division.
Modes: inference (no_grad) and training (forward and backward of a weighted sum of the result).
Each call is timed to torch.cuda.synchronize(), after warm-up; medians over rounds.

    python benchmarks/bench_mean.py --out benchmarks/results/mean_dgl.csv     (on the GPU machine, CUDA DGL loaded)
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import dgl  # noqa: E402
from bench_dispatch import per_call_us  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import mean  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

COLUMNS = ["device", "graph", "V", "E", "F", "mode", "impl", "ms_median", "ms_p25", "ms_p75"]
GRAPHS = ("cora", "pubmed", "ppi", "com-amazon", "amazon0505", "OVCAR-8H")


def timed(fn, calls: int) -> float:
    """Milliseconds per call, to the device's synchronization."""
    return per_call_us(fn, calls, torch.cuda.synchronize) / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mean_dgl.csv"))
    ap.add_argument("--widths", default="64,256")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    args = ap.parse_args()
    device = torch.cuda.get_device_name()
    wanted = set(args.graphs.split(","))
    rows = []
    for spec in gs.PAPER_STANDINS:
        if spec.name not in wanted:
            continue
        src, dst, n = gs.make(spec)
        g = dgl.graph((src, dst), num_nodes=n).to("cuda")
        g.create_formats_()
        for f in (int(w) for w in args.widths.split(",")):
            x = torch.rand(n, f, device="cuda") + 0.5
            weights = torch.randn(n, f, device="cuda")

            def infer():
                with torch.no_grad():
                    return dgl.ops.copy_u_mean(g, x)

            def train():
                h = x.detach().requires_grad_()
                (dgl.ops.copy_u_mean(g, h) * weights).sum().backward()
                return h.grad

            for mode, fn in (("inference", infer), ("training", train)):
                def dgl_div():
                    mean.disable()
                    try:
                        return fn()
                    finally:
                        mean.enable()

                def native():
                    with dgl_ugraph.disabled():
                        return fn()
                def divided_grad():
                    reverse, mean._reverse[0] = mean._reverse[0], None
                    try:
                        return fn()
                    finally:
                        mean._reverse[0] = reverse
                impls = {"fused": fn, "dgl_div": dgl_div, "dgl": native}
                if mode == "training":
                    impls["divided_grad"] = divided_grad
                for _ in range(20):  # past the graph's tier-up (its first 16 calls run on DGL's kernels)
                    fn()
                ref = native()
                for name, call in impls.items():
                    torch.testing.assert_close(call(), ref, rtol=1e-4, atol=1e-5)
                est = timed(fn, 3)
                calls = max(3, min(200, int(20 / max(est, 1e-3))))
                samples = {k: [] for k in impls}
                for r in range(args.rounds):
                    for k in (impls if r % 2 == 0 else reversed(list(impls))):
                        samples[k].append(timed(impls[k], calls))
                for k, xs in samples.items():
                    q = statistics.quantiles(xs, n=4)
                    rows.append(dict(device=device, graph=spec.name, V=n, E=g.num_edges(), F=f, mode=mode, impl=k,
                                     ms_median=round(statistics.median(xs), 4), ms_p25=round(q[0], 4),
                                     ms_p75=round(q[2], 4)))
                line = " ".join(f"{r['impl']}={r['ms_median']:.4f}" for r in rows[-len(impls):])
                print(f"{spec.name:12} F={f:<4} {mode:9} ms per call: {line}", flush=True)
        del g
        torch.cuda.empty_cache()
    write_rows(args.out, rows, COLUMNS)


if __name__ == "__main__":
    main()
