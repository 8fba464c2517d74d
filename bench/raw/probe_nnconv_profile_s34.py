"""Session 34: NNConv's aggregation (u_mul_e, x (N,16,1) by w (E,16,16)) on sim-amazon0505 took
5.0 ms (max) / 2.84 ms (sum) through dgl.ops with warp_vertex:4:4 (probe_nnconv_s33.py), while
bench_kernels timed the same configuration at 2.29 / 2.08 ms on the same graph. Where do the
milliseconds go? For an int64 and an int32 graph: CUDA-event medians of dgl.ops (plugin on,
forced configuration) and of the kernel API's plan (no DGL), then the profiler's kernel table."""
import os
import sys
import pathlib
from unittest import mock

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import dgl  # noqa: E402
import dgl_ugraph  # noqa: E402
from bench_models import graph_cases, tier_up_now  # noqa: E402
from cuda_events import median_ms as ms  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo, ParallelInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402

K = 16
CONFIGS = sys.argv[1].split(",") if len(sys.argv) > 1 else ["warp_vertex:4:4", "warp_edge:64:4"]
src, dst, n = dict(graph_cases(only={"sim-amazon0505"}, standins=["amazon0505"], scale={}))["sim-amazon0505"]()[:3]
gen = torch.Generator().manual_seed(0)
x = torch.randn(n, K, 1, generator=gen).cuda()
w = torch.randn(len(src), K, K, generator=gen).cuda()


def table(fn):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    for key in ("device_time_total", "cuda_time_total"):
        try:
            return prof.key_averages().table(sort_by=key, row_limit=8, max_name_column_width=70)
        except (AttributeError, KeyError, ValueError):
            continue
    return "(no table)"


def parse(cfg):
    s, g, t = cfg.split(":")
    return ParallelInfo(s, int(g), int(t))


dgl_ugraph.enable()
for idtype in (torch.int64, torch.int32):
    g = dgl.graph((src, dst), num_nodes=n, idtype=idtype).to("cuda")
    indptr, indices, eids = g.adj_tensors("csc")
    ug = UGraph.from_csc(indptr, indices, eids, n)
    same = "yes" if ug.eid is None else f"perm (first {ug.eid[:4].tolist()})"
    print(f"== idtype {idtype}: {n} nodes, {g.num_edges()} edges; CSC eid {same}", flush=True)
    for opname, red in (("u_mul_e_max", "max"), ("u_mul_e_sum", "sum")):
        f = getattr(dgl.ops, opname)
        with dgl_ugraph.disabled():
            t_dgl = ms(lambda: f(g, x, w))
        print(f"{opname} dgl {t_dgl:.3f} ms", flush=True)
        for cfg in CONFIGS:
            with tier_up_now(), mock.patch.dict(os.environ, {"DGL_UGRAPH_STRATEGY": cfg}):
                t_ops = ms(lambda: f(g, x, w))
                prof_ops = table(lambda: f(g, x, w))
            p = policy.plan(ug, OpInfo("mul", red, x, "src", w, "edge", "dst"), parse(cfg))
            t_plan = ms(lambda: p.run(x, w))
            pn = policy.plan(ug, OpInfo("mul", red, x, "src", w, "edge", "dst"), parse(cfg), args=False)
            t_noargs = ms(lambda: pn.run(x, w))
            print(f"{opname} {cfg:18} dgl.ops {t_ops:.3f} ms  plan {t_plan:.3f} ms  plan-no-args {t_noargs:.3f} ms", flush=True)
            print(prof_ops, flush=True)
