"""bench_models.py --record-traces and --gpu: the traces recorded from the CPU DGL run, and their
replay on a GPU through our kernels, through cuSPARSE/torch, and beside PyG's models."""
from __future__ import annotations

import pathlib
import statistics
import time

import torch

from .graphs import DEFAULT_STANDINS, features, gpu_graph_cases, graph_cases
from .models import build_model, make_dgl_graph, pyg_model
from .parity import parity
from .replay import Replayer, ReplayGraph, TorchSparse, UGraphSparse, init_params
from .report import COLUMNS, write_rows
from .timing import cpu_device_name, cuda_ms
from .traces import load_traces, record_trace, save_traces, trace_path


def record_all(args):
    """Records one trace per (model, graph) of the CPU benchmark into benchmarks/results/traces/<model>.json.gz,
    and checks each by replaying it on CPU through our kernels against DGL's output."""
    only = set(args.only.split(",")) if args.only else None
    standins = [s for s in (args.standins.split(",") if args.standins else DEFAULT_STANDINS) if s]
    models = args.models.split(",")
    traces = {m: {} for m in models}
    for gname, load in graph_cases(not args.no_datasets, standins, only):
        src, dst, n, feat, labels = load()
        feat, labels, classes = features(n, feat, labels)
        for model_name in models:
            torch.manual_seed(0)
            model, prepare = build_model(model_name, feat.shape[1], classes)
            prep = "self_loop" if prepare is not None else None
            g = make_dgl_graph(src, dst, n, prepare)
            trace, ref = record_trace(model, g, feat, model_name, gname, prep)
            graph = ReplayGraph(src, dst, n, prep)
            params = {k: v for k, v in model.state_dict().items()}
            ours = Replayer(trace, graph, UGraphSparse(graph), params, feat).run()
            theirs = Replayer(trace, graph, TorchSparse(graph), params, feat).run()
            d1, ok1 = parity([ours], [ref])
            d2, ok2 = parity([theirs], [ref])
            trace["replay_check"] = {"ugraph_maxdiff": float(f"{d1:.3g}"), "torch_maxdiff": float(f"{d2:.3g}"),
                                     "ok": bool(ok1 and ok2)}
            traces[model_name][gname] = trace
            print(f"{model_name:9} {gname:28} {len(trace['ops']):4d} ops  replay ugraph {d1:.1e} torch {d2:.1e} "
                  f"{'ok' if ok1 and ok2 else 'FAIL'}", flush=True)
    pathlib.Path(args.traces).mkdir(parents=True, exist_ok=True)
    for model_name, per_graph in traces.items():
        save_traces(pathlib.Path(args.traces) / f"{model_name}.json.gz", model_name, per_graph)
    print(f"wrote {len(models)} trace files to {args.traces}")


def run_gpu(args):
    """Inference on the GPU: trace replay through our kernels (`ugraph`), the same replay with
    cuSPARSE/torch in place of our kernels (`torch_cusparse`), and PyG's models (`pyg`). Host
    wall time per forward (synchronized), median of --gpu-reps after warm-up: host overhead of
    each path counts, as it does for a user."""
    device = torch.device(args.gpu_device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA device (--gpu-device cpu runs the same path on CPU, for tests)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_device_name()
    try:
        import torch_geometric
        have_pyg = True
        print(f"{device_name}; torch {torch.__version__}; torch_geometric {torch_geometric.__version__}", flush=True)
    except ImportError:
        have_pyg = False
        print(f"{device_name}; torch {torch.__version__}; no torch_geometric: the pyg rows are left out", flush=True)
    models = args.models.split(",")
    only = set(args.only.split(",")) if args.only else None
    write_rows(args.out, [], COLUMNS, append=args.append)
    t0 = time.time()
    files = {m: load_traces(trace_path(args.traces, m)) for m in models}
    trace_graphs = list(dict.fromkeys(g for m in models for g in files[m]["traces"]))
    for gname, tname, load in gpu_graph_cases(trace_graphs, not args.gpu_scaled):
        if only and gname not in only and tname not in only:
            continue
        if time.time() - t0 > args.budget_s:
            print(f"budget reached: stopping before {gname}", flush=True)
            break
        src, dst, n, feat, labels = load()
        feat, labels, classes = features(n, feat, labels)
        feat_gpu = feat.to(device)
        graphs = {}
        for model_name in models:
            trace = files[model_name]["traces"].get(tname)
            if trace is None:
                continue
            prep = trace["prepare"]
            if prep not in graphs:
                graphs[prep] = ReplayGraph(src, dst, n, prep, device)
            graph = graphs[prep]
            params = init_params(trace, n, graph.e, device)
            ours = Replayer(trace, graph, UGraphSparse(graph), params, feat_gpu)
            theirs = Replayer(trace, graph, TorchSparse(graph), params, feat_gpu)
            with torch.no_grad():
                maxdiff, ok = parity([ours.run()], [theirs.run()])
                fns = {"ugraph": ours.run, "torch_cusparse": theirs.run}
                if have_pyg:
                    torch.manual_seed(0)
                    net = pyg_model(model_name, feat.shape[1], classes)
                    if net is not None:
                        net = net.to(device).eval()
                        edge_index = torch.stack([src, dst]).to(device)
                        fns["pyg"] = lambda net=net, ei=edge_index, x=feat_gpu: net(x, ei)
                times = {impl: cuda_ms(fn, args.gpu_reps, 3) for impl, fn in fns.items()}
            rows = [dict(device=device_name, model=model_name, graph=gname, mode="inference", impl=impl,
                         ms=round(statistics.median(ts), 4), V=n, E=graph.e, feat=feat.shape[1], classes=classes,
                         ms_min=round(min(ts), 4), ms_max=round(max(ts), 4), reps=len(ts),
                         parity_maxdiff=f"{maxdiff:.3g}", parity_ok=int(ok), ugraph_share="")
                    for impl, ts in times.items()]
            write_rows(args.out, rows, COLUMNS, append=True)
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{model_name:9} {gname:28} " + "  ".join(f"{k} {v:8.3f} ms" for k, v in med.items())
                  + f"  x{med['torch_cusparse'] / med['ugraph']:.2f} vs torch"
                  + (f"  x{med['pyg'] / med['ugraph']:.2f} vs pyg" if "pyg" in med else "")
                  + f"  parity {maxdiff:.1e} {'ok' if ok else 'FAIL'}", flush=True)
        del graphs, feat_gpu
        torch.cuda.empty_cache()
    print(f"done in {time.time() - t0:.0f} s; rows in {args.out}")
