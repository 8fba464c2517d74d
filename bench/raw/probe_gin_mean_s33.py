"""Session 33: GINConv mean with edge weights failed parity in training on sim-amazon0505 (3.9e-2,
float32; bench_convs). Which output or gradient differs, in float32 and float64, twice; then the
u_mul_e mean alone through dgl.ops, forward and backward, per operand."""
import sys
import pathlib

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "models")]

import dgl  # noqa: E402
import convs  # noqa: E402
import dgl_ugraph  # noqa: E402
from bench_convs import DIMS, Case  # noqa: E402
from bench_models import graph_cases, tier_up_now  # noqa: E402

dgl_ugraph.enable()
names = sys.argv[1].split(",") if len(sys.argv) > 1 else ["sim-amazon0505"]
conv_names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["GINConv-mean-weighted"]
loaders = dict(graph_cases(only=set(names), standins=[w[4:] for w in names if w.startswith("sim-")], scale={}))


def rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp(min=1e-30)).item()


for gname in names:
    src, dst, n = loaders[gname]()[:3]
    g = dgl.graph((src, dst), num_nodes=n).to("cuda")
    print(f"== {gname}: {n} nodes, {g.num_edges()} edges, max in-degree {int(g.in_degrees().max())}")
    for cname in conv_names:
        for dtype in (torch.float32, torch.float64):
            case = Case(cname, g, DIMS)
            case.module.to(dtype)
            case.state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in case.state.items()}
            case.inputs = convs.Inputs(case.g, dtype, 0, DIMS)
            case.weights = [w.to(dtype) for w in case.weights]
            labels = ["out"] + [f"param {k}" for k, p in case.module.named_parameters()] + \
                [f"input {k}" for k in case.inputs.leaves()]
            with tier_up_now():
                with dgl_ugraph.disabled():
                    ref = case.results("training")
                runs = [case.results("training") for _ in range(2)]
            for k, r in enumerate(ref):
                worst = [rel(run[k], r) for run in runs]
                flag = "  <--" if max(worst) > (1e-4 if dtype == torch.float32 else 1e-9) else ""
                print(f"{cname} {str(dtype):14} {labels[k] if k < len(labels) else k:28} "
                      f"run1 {worst[0]:.2e} run2 {worst[1]:.2e} ours-vs-ours {rel(runs[0][k], runs[1][k]):.2e}{flag}")
    # the operator alone: u_mul_e mean, x (N, 64), w (E,) -> (E, 1)
    for dtype in (torch.float32, torch.float64):
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(n, 64, generator=gen, dtype=torch.float64).to("cuda", dtype).requires_grad_()
        w = (torch.rand(g.num_edges(), 1, generator=gen, dtype=torch.float64) + 0.1).to("cuda", dtype).requires_grad_()
        proj = torch.randn(n, 64, generator=gen, dtype=torch.float64).to("cuda", dtype)
        res = {}
        for side in ("dgl", "ugraph"):
            x.grad = w.grad = None
            with tier_up_now():
                if side == "dgl":
                    with dgl_ugraph.disabled():
                        out = dgl.ops.u_mul_e_mean(g, x, w)
                        (out * proj).sum().backward()
                else:
                    out = dgl.ops.u_mul_e_mean(g, x, w)
                    (out * proj).sum().backward()
            res[side] = (out.detach(), x.grad.clone(), w.grad.clone())
        for label, a, b in zip(("out", "grad x", "grad w"), res["ugraph"], res["dgl"]):
            print(f"u_mul_e_mean {str(dtype):14} {label:8} {rel(a, b):.2e}")
    s = dgl_ugraph.stats()
    print("signatures:", [(r["pattern"], r.get("config"), r["runs_on"]) for r in s["signatures"]][:20])
