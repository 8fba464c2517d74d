"""Session 34: int64 DGL graphs narrowed to int32 in the graph cache (cache.NARROW_DEVICES) against
the same graph kept at int64, interleaved in one process: two DGL graph objects of the same edges,
one cached each way. First DGL's ops alone (dgl.ops on 64-wide features: copy_u sum, copy_u max
with its args, u_mul_e sum), then the example models' inference and training steps
(bench_models.interleaved_ms, synchronized wall time; paired = median over rounds of wide / narrow)."""
import sys
import pathlib

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import dgl  # noqa: E402
import dgl_ugraph  # noqa: E402
import bench_models as bm  # noqa: E402
from dgl_ugraph.dgl import cache  # noqa: E402

dgl_ugraph.enable()
GRAPHS = sys.argv[1].split(",") if len(sys.argv) > 1 else ["sim-amazon0505", "sim-soc-BlogCatalog", "sim-com-amazon"]
loaders = dict(bm.graph_cases(datasets=False, standins=[g[4:] for g in GRAPHS], scale={}))
sync = torch.cuda.synchronize


def pair(g_narrow, g_wide):
    """Caches g_narrow and its reverse (the backward's graph) narrowed, g_wide and its reverse not:
    NARROW_DEVICES is read when an entry is built."""
    for g, devices, want in ((g_narrow, ("cuda",), torch.int32), (g_wide, (), torch.int64)):
        cache.NARROW_DEVICES = devices
        for gidx in (g._graph, g._graph.reverse()):
            assert cache.entry_for(gidx).ugraph.idtype == want
    cache.NARROW_DEVICES = ("cuda",)


def report(label, times):
    x = bm.paired_speedup(times["wide"], times["narrow"])
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(f"{label:44} narrow {med['narrow']:8.3f} ms  wide {med['wide']:8.3f} ms  paired x{x:.3f}", flush=True)


for gname in GRAPHS:
    src, dst, n, feat, labels, classes = bm.prepare_inputs(loaders[gname](), "cuda")
    with bm.tier_up_now():
        gn, gw = (dgl.graph((src, dst), num_nodes=n) for _ in range(2))
        pair(gn, gw)
        x = torch.randn(n, 64, device="cuda", requires_grad=True)
        w = torch.randn(gn.num_edges(), 1, device="cuda")
        print(f"== {gname}: {n} nodes, {gn.num_edges()} edges", flush=True)
        for op, call in (("copy_u_sum F=64", lambda g: dgl.ops.copy_u_sum(g, x)),
                         ("copy_u_max F=64 (args)", lambda g: dgl.ops.copy_u_max(g, x)),
                         ("u_mul_e_sum F=64", lambda g: dgl.ops.u_mul_e_sum(g, x, w))):
            report(op, bm.interleaved_ms({"narrow": lambda: call(gn), "wide": lambda: call(gw)}, reps=40, warmup=3,
                                         min_s=0.3, sync=sync))
        for model_name in ("GCN", "GAT", "GIN", "SAGE-mean", "SAGE-pool"):
            model, prepare = bm.build_model(model_name, feat.shape[1], classes)
            model = model.to("cuda")
            hn, hw = (prepare(g) if prepare else g for g in (gn, gw))
            if prepare:
                pair(hn, hw)
            for mode, make in (("inference", lambda h: bm.inference_fn(model, h, feat)),
                               ("training", lambda h: bm.training_fn(model, labels, h, feat))):
                report(f"{model_name} {mode}", bm.interleaved_ms({"narrow": make(hn), "wide": make(hw)}, reps=20,
                                                                 warmup=2, min_s=0.5, sync=sync))
    cache.clear()
    torch.cuda.empty_cache()
