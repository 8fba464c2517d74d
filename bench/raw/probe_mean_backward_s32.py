"""Session 32: what a copy_u mean's backward costs on the GPU as shipped against one fused call.

The source gradient of a copy_u mean is the reverse graph's sum of grad / deg over each source's
out-edges (deg: the forward destinations' in-degrees, at least 1). As shipped: DGL's division of
the whole gradient into a new tensor, then the reverse copy_lhs sum on our kernel (`divide+copy`).
Fused: one reverse aggregation that divides each message as it reads it (`div_src`: edge_op div,
A the gradient and B the degrees, both typed src on the reverse graph), or multiplies by the
reciprocal (`mul_src`, not DGL's bits). Each fused form is timed under the selector's choice and
under the copy's choice. Kernel times by the core's timing loop (CUDA events, medians); the
division by CUDA events around torch's division, median of 20. float32, the suite's stand-ins,
the shared datasets and the two large graphs.

    python bench/raw/probe_mean_backward_s32.py --out $OUT/mean_backward.csv
"""
from __future__ import annotations

import argparse
import csv
import statistics
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dgl_ugraph.core.abstraction import OpInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.core.ops import Plan  # noqa: E402
from dgl_ugraph.core.timing import measure_on_gpu  # noqa: E402
from dgl_ugraph.selection.policy import choose_for  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

COLUMNS = ["device", "graph", "V", "E", "F", "impl", "config", "ms"]


def division_ms(grad, deg, reps=20):
    out = torch.empty_like(grad)
    times = []
    for _ in range(reps + 3):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.div(grad, deg, out=out)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times[3:])


def graphs(large: bool):
    for spec in gs.PAPER_STANDINS:
        yield (spec.name,) + gs.make(spec)
    yield from gs.shared_datasets()
    if large:
        for spec in gs.LARGE:
            yield (spec.name,) + gs.make(spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--widths", default="16,64,256")
    ap.add_argument("--no-large", action="store_true")
    args = ap.parse_args()
    device = torch.cuda.get_device_name()
    gen = torch.Generator(device="cuda").manual_seed(0)
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        for name, src, dst, n in graphs(not args.no_large):
            src, dst = src.cuda(), dst.cuda()
            rev = UGraph.from_coo(dst, src, n, n, torch.int32)  # the backward's graph: edges reversed
            deg = torch.bincount(dst.long(), minlength=n).clamp(min=1).float().reshape(n, 1)
            for f in (int(x) for x in args.widths.split(",")):
                grad = torch.randn(n, f, device="cuda", generator=gen)
                divided = grad / deg
                copy = OpInfo("copy_lhs", "sum", divided, "src", None, "null", "dst")
                fused = {"div_src": OpInfo("div", "sum", grad, "src", deg, "src", "dst"),
                         "mul_src": OpInfo("mul", "sum", grad, "src", 1.0 / deg, "src", "dst")}
                copy_cfg = choose_for(rev, copy).parallel_info
                ms = {"copy": measure_on_gpu(rev, copy, [copy_cfg])[copy_cfg], "divide": division_ms(grad, deg)}
                case = [dict(impl="divide", config="torch", ms=ms["divide"]),
                        dict(impl="copy", config=str(copy_cfg), ms=ms["copy"])]
                # Correctness first: each fused form against the shipped path in float64.
                ref = torch.zeros(n, f, dtype=torch.float64, device="cuda").index_add_(
                    0, src.long(), (grad.double() / deg.double())[dst.long()])
                for impl, op in fused.items():
                    cfg = choose_for(rev, op).parallel_info
                    configs = list(dict.fromkeys([cfg, copy_cfg]))
                    timed = measure_on_gpu(rev, op, configs)
                    for c in configs:
                        out = Plan(rev, op, c).run(op.A, op.B)[0]
                        err = (out.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
                        if err > 1e-5:
                            raise SystemExit(f"{name} F={f} {impl} {c}: relative error {err:.2e}")
                        tag = "" if c == cfg else "@copy_cfg"
                        case.append(dict(impl=impl + tag, config=str(c), ms=timed.get(c, float("nan"))))
                shipped = ms["divide"] + ms["copy"]
                best = min(r["ms"] for r in case if r["impl"].startswith("div_src"))
                print(f"{name:28} F={f:<4} divide {ms['divide']:.4f} + copy {ms['copy']:.4f} = {shipped:.4f} ms; "
                      + "  ".join(f"{r['impl']} {r['ms']:.4f}" for r in case[2:])
                      + f"  shipped/div_src best {shipped / best:.3f}x", flush=True)
                for r in case:
                    r.update(device=device, graph=name, V=n, E=int(src.numel()), F=f, ms=round(r["ms"], 5))
                    w.writerow(r)
                fh.flush()
                del grad, divided, ref
            del rev, src, dst
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
