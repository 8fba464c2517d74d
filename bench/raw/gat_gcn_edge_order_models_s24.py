"""Session 24 probe: GAT and GCN (models/, the paper's sizes) on CUDA under DGL 2.4 with the
plugin on, each graph as generated (random edge ids) and renumbered by
dgl.reorder_graph(g, edge_permute_algo='dst') (edge ids in CSC order), inference and a training
step, interleaved; DGL's own kernels (plugin off) on both orders too. Writes $OUT/gat_order.csv."""
import csv, os, statistics, sys
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import torch, dgl
import dgl_ugraph
from bench_models import build_model, features, inference_fn, training_fn, interleaved_ms
from dgl_ugraph.tuning import graph_suite as gs

dgl_ugraph.enable()
names = sys.argv[1].split(",")
by_name = {s.name: s for s in gs.PAPER_STANDINS}
out = open(os.path.join(os.environ.get("OUT", "/tmp"), "gat_order.csv"), "w", newline="")
w = csv.writer(out); w.writerow(["model", "graph", "V", "E", "mode", "order", "impl", "ms_median", "reps"])
DEV = os.environ.get("DEV", "cuda")  # cpu: a dry run
sync = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
for name in names:
    spec = by_name[name]
    src, dst, n = gs.make(spec if DEV == "cuda" else gs.scaled(spec, 0.01))
    # Both models add self-loops (models/gat.py, models/gcn.py: the same prepare_graph); the
    # renumbering comes after, as a user would reorder the graph the model runs on.
    g0 = build_model("GAT", 1, 2)[1](dgl.graph((src, dst), num_nodes=n))
    graphs = {"given": g0, "dst": dgl.reorder_graph(g0, edge_permute_algo="dst", store_ids=False)}
    graphs = {k: g.to(DEV).formats(["csc", "coo", "csr"]) for k, g in graphs.items()}
    feat, labels, classes = features(n, None, None)
    feat, labels = feat.to(DEV), labels.to(DEV)
    for model_name in ("GAT", "GCN"):
        model = build_model(model_name, feat.shape[1], classes)[0].to(DEV)
        gs_ = graphs
        for mode in ("inference", "training"):
            fns = {}
            for order, g in gs_.items():
                fn = inference_fn(model, g, feat) if mode == "inference" else training_fn(model, labels, g, feat)
                fns[f"ugraph|{order}"] = fn
                def off(fn=fn):
                    with dgl_ugraph.disabled():
                        return fn()
                fns[f"dglown|{order}"] = off
            times = interleaved_ms(fns, reps=5, warmup=2, min_s=0.3, max_reps=30, max_s=20, sync=sync)
            for key, t in times.items():
                impl, order = key.split("|")
                w.writerow([model_name, name, n, g0.num_edges(), mode, order, impl, f"{statistics.median(t):.4f}", len(t)])
            out.flush()
            med = {k: statistics.median(t) for k, t in times.items()}
            print(name, model_name, mode, {k: round(v, 3) for k, v in med.items()}, flush=True)
