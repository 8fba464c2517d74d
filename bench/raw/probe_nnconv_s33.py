"""Session 33: NNConv-max ran at 0.94x DGL on sim-amazon0505 (bench_convs). Its aggregation alone:
u_mul_e with x (N, k, 1) and w (E, k, k) -> (N, k, k), sum and max, through dgl.ops, CUDA events
(median of 15 after 3 warm-ups): DGL, the selector's choice, autotuning over the top 40 predicted,
and forced configurations."""
import os
import sys
import pathlib

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import dgl  # noqa: E402
import dgl_ugraph  # noqa: E402
from bench_models import graph_cases, tier_up_now  # noqa: E402
from cuda_events import median_ms  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
gname = sys.argv[1] if len(sys.argv) > 1 else "sim-amazon0505"
K = int(sys.argv[2]) if len(sys.argv) > 2 else 16
FORCED = ["warp_vertex:1:1", "warp_vertex:2:1", "warp_vertex:4:1", "warp_vertex:4:2", "warp_vertex:1:4",
          "warp_edge:8:1", "warp_edge:32:1", "warp_edge:32:4", "thread_vertex:1:64", "thread_edge:8:64"]
loaders = dict(graph_cases(only={gname}, standins=[gname[4:]] if gname.startswith("sim-") else [], scale={}))
src, dst, n = loaders[gname]()[:3]
g = dgl.graph((src, dst), num_nodes=n).to(DEV)
gen = torch.Generator().manual_seed(0)
x = torch.randn(n, K, 1, generator=gen).to(DEV)
w = torch.randn(g.num_edges(), K, K, generator=gen).to(DEV)
dgl_ugraph.enable()


def ms(fn):
    if DEV != "cuda":
        fn()
        return 0.0
    return median_ms(fn)


def config():
    rows = [r for r in dgl_ugraph.stats()["signatures"] if r["runs_on"] == "dgl_ugraph"]
    return rows[-1].get("config") if rows else None


print(f"{gname}: {n} nodes, {g.num_edges()} edges; x {tuple(x.shape)}, w {tuple(w.shape)}")
for op in ("u_mul_e_max", "u_mul_e_sum"):
    f = getattr(dgl.ops, op)
    with dgl_ugraph.disabled():
        ref = f(g, x, w)
        t_dgl = ms(lambda: f(g, x, w))
    with tier_up_now():
        for label, env in [("selector", {}), ("autotune top 40", {"DGL_UGRAPH_AUTOTUNE": "1",
                                                                   "DGL_UGRAPH_AUTOTUNE_TOPK": "40"})] + \
                [(c, {"DGL_UGRAPH_STRATEGY": c}) for c in FORCED]:
            os.environ.update(env)
            try:
                dgl_ugraph.reset_stats()
                out = f(g, x, w)
                ok = torch.allclose(out, ref, rtol=1e-5, atol=1e-5)
                t = ms(lambda: f(g, x, w))
                print(f"{op:12} {label:20} {config()!s:22} {t:8.3f} ms  dgl {t_dgl:8.3f} ms  x{t_dgl / max(t, 1e-9):5.2f}"
                      f"  {'ok' if ok else 'MISMATCH'}", flush=True)
            finally:
                for k in env:
                    del os.environ[k]
