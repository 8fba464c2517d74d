"""Session 33: is GINConv-mean-weighted's float32 training mismatch on sim-amazon0505 (3.9e-2 of
scale in the input gradient, H200) conditioning? On CPU: DGL's and dgl_ugraph's float32 results
each against DGL's float64 result, per output and gradient (scale-relative max |diff|)."""
import sys
import pathlib

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "models")]

import dgl  # noqa: E402
import convs  # noqa: E402
import dgl_ugraph  # noqa: E402
from bench_convs import DIMS, Case  # noqa: E402
from bench_models import graph_cases  # noqa: E402

gname = sys.argv[1] if len(sys.argv) > 1 else "sim-amazon0505"
scale = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
loaders = dict(graph_cases(only={f"{gname}@{scale:g}" if scale != 1 else gname},
                           standins=[gname[4:]], scale={gname[4:]: scale}))
(label, load), = loaders.items()
src, dst, n = load()[:3]
g = dgl.graph((src, dst), num_nodes=n)
print(f"{label}: {n} nodes, {g.num_edges()} edges")
dgl_ugraph.enable()


def results(dtype, on):
    case = Case("GINConv-mean-weighted", g, DIMS)
    case.module.to(dtype)
    case.state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in case.state.items()}
    case.inputs = convs.Inputs(case.g, dtype, 0, DIMS)
    case.weights = [w.to(dtype) for w in case.weights]
    if on:
        return case.results("training")
    with dgl_ugraph.disabled():
        return case.results("training")


truth = results(torch.float64, False)
dgl32, ours32 = results(torch.float32, False), results(torch.float32, True)
labels = ["out", "w0", "b0", "w2", "b2", "grad x", "grad w"]
for k, t in enumerate(truth):
    scale_ = t.abs().max().clamp(min=1e-30)
    e_dgl = ((dgl32[k].double() - t).abs().max() / scale_).item()
    e_ours = ((ours32[k].double() - t).abs().max() / scale_).item()
    e_pair = ((ours32[k].double() - dgl32[k].double()).abs().max() / scale_).item()
    print(f"{labels[k]:7} DGL float32 vs float64 {e_dgl:.2e}   dgl_ugraph float32 vs float64 {e_ours:.2e}   "
          f"the two float32s {e_pair:.2e}")
