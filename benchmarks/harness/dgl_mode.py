"""bench_models.py under real DGL (CPU, and --device cuda): each case with the plugin on and off,
the bound and PyG interleaved; the float64 parity re-check; per-pattern profiles."""
from __future__ import annotations

import csv
import os
import pathlib
import statistics
import time
from typing import Dict, List

import torch

from . import RESULTS
from .graphs import (DEFAULT_STANDINS, STANDIN_SCALE, SYNTHETIC_LARGE, features, graph_cases, gs,
                     prepare_inputs)
from .models import build_model, inference_fn, make_dgl_graph, pyg_fns, training_fn
from .parity import parity, results_on_and_off
from .report import COLUMNS, device_kind, write_rows
from .timing import (KERNELS_ONLY, SPARSE_FREE, SparseFree, cpu_device_name, interleaved_ms, paired_speedup,
                     tier_up_now, ugraph_share)


# Implementations a case can do without, in the order they are left out when the device runs out
# of memory: the bound holds every sparse result of a run, PyG every message of a layer.
OPTIONAL_IMPLS = (SPARSE_FREE, "pyg")


def timed_impls(impls, args, sync, label) -> Dict[str, List[float]]:
    """interleaved_ms over impls; an optional implementation that does not fit in device memory
    is left out of the case, with a note (and no row)."""
    while True:
        try:
            return interleaved_ms(impls, args.reps, args.warmup, args.min_s, args.max_reps, args.case_max_s, sync)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            drop = next((k for k in OPTIONAL_IMPLS if k in impls), None)
            if drop is None:
                raise
            print(f"{label}: {drop} ran out of device memory; left out of this case", flush=True)
            impls = {k: v for k, v in impls.items() if k != drop}


def bench_case(model_name, gname, inputs, args, device_name, edge_index=None) -> List[dict]:
    """Rows of one model on one graph (inputs from prepare_inputs), per mode: DGL with the plugin
    off and on, the bound (--sparse-free) and, given PyG's edge_index, PyG's model."""
    src, dst, n, feat, labels, classes = inputs
    device = feat.device
    torch.manual_seed(0)
    model, prepare = build_model(model_name, feat.shape[1], classes)
    model = model.to(device)
    g = make_dgl_graph(src, dst, n, prepare, device)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    pyg = pyg_fns(model_name, feat, labels, classes, edge_index) if edge_index is not None else None
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    for mode in args.modes:
        # Parity and share on dgl_ugraph's kernels from the first call: the graph tiers up at once
        # (a CUDA graph's first calls would run on DGL's kernels, cache.py), and the steps timed
        # after are the steady state a training run spends its time in.
        with tier_up_now():
            fn, ours, ref = results_on_and_off(model, g, feat, labels, state, mode)
            maxdiff, ok = parity(ours, ref)
            share = ugraph_share(fn)
        impls = {"dgl": fn, "ugraph": fn}
        if args.kernels_only:
            impls[KERNELS_ONLY] = fn
        if pyg is not None:
            impls["pyg"] = pyg[mode]
        if args.sparse_free:
            fn.sparse_free = SparseFree(fn)
            try:
                fn.sparse_free.record()
                impls[SPARSE_FREE] = fn
            except torch.cuda.OutOfMemoryError:
                fn.sparse_free.results = []
                torch.cuda.empty_cache()
                print(f"{model_name} {gname} {mode}: {SPARSE_FREE}'s recorded results do not fit in device memory; "
                      "left out of this case", flush=True)
        times = timed_impls(impls, args, sync, f"{model_name} {gname} {mode}")
        if SPARSE_FREE in impls:
            fn.sparse_free.results = []  # the recorded results: device memory the next case needs
        paired = {impl: paired_speedup(times["dgl"], ts) for impl, ts in times.items() if impl != "dgl"}
        for impl, ts in times.items():
            rows.append(dict(device=device_name, model=model_name, graph=gname, mode=mode, impl=impl,
                             ms=round(statistics.median(ts), 4), V=n, E=g.num_edges(), feat=feat.shape[1],
                             classes=classes, ms_min=round(min(ts), 4), ms_max=round(max(ts), 4), reps=len(ts),
                             parity_maxdiff=f"{maxdiff:.3g}", parity_ok=int(ok),
                             ugraph_share=round(share, 4) if impl == "ugraph" else "",
                             paired_x=round(paired[impl], 4) if impl in paired else ""))
        med = {k: statistics.median(v) for k, v in times.items()}
        d, u = med["dgl"], med["ugraph"]
        bound = f"  bound x{paired[SPARSE_FREE]:5.2f}" if SPARSE_FREE in paired else ""
        vs_pyg = f"  pyg {med['pyg']:9.2f} ms (x{med['pyg'] / u:5.2f})" if "pyg" in med else ""
        vs_pyg += f"  kernels-only x{paired[KERNELS_ONLY]:5.2f}" if KERNELS_ONLY in paired else ""
        print(f"{model_name:9} {gname:28} {mode:9} dgl {d:9.2f} ms  ugraph {u:9.2f} ms  "
              f"x{paired['ugraph']:5.2f}{bound}{vs_pyg}  "
              f"parity {maxdiff:.1e} {'ok' if ok else 'FAIL'}  share {share:.2f}", flush=True)
    model.load_state_dict(state)
    return rows


# Timing defaults per device: on 2 shared CPU cores a case repeats until each implementation ran
# half a second (load spikes), and at least 9 times: a step of half a second swings by 2x between
# spells of the machine, and the paired median of 5 rounds still read 0.88x where the medians
# read 1.03x (GIN on sim-Yeast@0.05, training). A GPU is steadier,
# and its run must fit one call to the machine.
TIMING = {"cpu": dict(reps=9, warmup=1, min_s=0.5, max_reps=60, case_max_s=20.0, budget_s=2400.0),
          "cuda": dict(reps=3, warmup=1, min_s=0.05, max_reps=30, case_max_s=4.0, budget_s=300.0)}


def run_dgl(args):
    """The models/ networks under real DGL with the plugin on and off, on args.device; on a GPU
    also PyG's models (when torch_geometric imports) on the same graphs, features and widths."""
    import dgl
    import dgl_ugraph

    dgl_ugraph.enable()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    if gpu:
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda needs a GPU")
        torch.backends.cuda.matmul.allow_tf32 = False  # the same float32 dense math in every impl
        torch.backends.cudnn.allow_tf32 = False
        device_name = f"{torch.cuda.get_device_name(device)} (torch {torch.__version__}, DGL {dgl.__version__})"
    else:
        device_name = cpu_device_name()
    use_pyg = gpu if args.pyg is None else args.pyg
    pyg_note = "no PyG rows"
    if use_pyg:
        try:
            import torch_geometric
            pyg_note = f"torch_geometric {torch_geometric.__version__}"
        except ImportError:
            if args.pyg:
                raise
            use_pyg, pyg_note = False, "no torch_geometric: the pyg rows are left out"
    print(f"{device_name}; dgl_ugraph from {os.path.dirname(dgl_ugraph.__file__)}; {pyg_note}; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}", flush=True)
    if not args.no_datasets:
        found = gs.datasets_dir()
        print(f"datasets: {found}" if found else "datasets: none found (set DGL_UGRAPH_DATASETS): only synthetic "
              "graphs run", flush=True)
    only = set(args.only.split(",")) if args.only else None
    standins = [s for s in (args.standins.split(",") if args.standins is not None else DEFAULT_STANDINS) if s]
    large = [s for s in (args.large.split(",") if args.large is not None else
                         ([spec.name for spec in SYNTHETIC_LARGE] if gpu else [])) if s]
    if gpu:  # full size, largest first: a budget that runs out drops the smallest stand-ins
        edges = {spec.name: spec.num_edges for spec in gs.PAPER_STANDINS}
        standins = sorted(standins, key=lambda name: -edges[name])
    models = args.models.split(",")
    write_rows(args.out, [], COLUMNS, append=args.append)
    t0 = time.time()
    cases = graph_cases(not args.no_datasets, standins, only, {} if gpu else STANDIN_SCALE, large)
    for gname, load in cases:
        if time.time() - t0 > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s reached: stopping before {gname}", flush=True)
            break
        inputs = prepare_inputs(load(), device)
        edge_index = torch.stack([inputs[0], inputs[1]]) if use_pyg else None
        for i, model_name in enumerate(models):
            if i and time.time() - t0 > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s reached: stopping before {model_name} on {gname}", flush=True)
                break
            try:
                rows = bench_case(model_name, gname, inputs, args, device_name, edge_index)
            except torch.cuda.OutOfMemoryError as exc:
                print(f"{model_name} {gname}: DGL ran out of device memory, case left out ({str(exc).splitlines()[0]})",
                      flush=True)
                rows = []
            write_rows(args.out, rows, COLUMNS, append=True)
        del inputs, edge_index
        if gpu:
            torch.cuda.empty_cache()
    print(f"done in {time.time() - t0:.0f} s; rows in {args.out}")


def recheck_parity(args):
    """For each case of --device whose float32 parity failed, runs the same check in float64 on
    that device: if dgl_ugraph and DGL then agree to ~1e-12, the float32 difference is rounding
    (summation order) amplified by the model (GIN's five train-mode BatchNorms), not a wrong
    result. --only limits it to those graphs."""
    path = pathlib.Path(args.out or RESULTS / "models.csv")
    rows = list(csv.DictReader(open(path, newline="")))
    kind = "cuda" if torch.device(args.device).type == "cuda" else "cpu"
    only = {g for g in args.only.split(",") if g}
    failed = sorted({(r["model"], r["graph"], r["mode"]) for r in rows
                     if r["parity_ok"] == "0" and device_kind(r["device"]) == kind and (not only or r["graph"] in only)})
    wanted = {g for _, g, _ in failed}
    # The graphs as the run built them: the stand-ins at full size and the large graphs on cuda.
    loads = dict(graph_cases(True, DEFAULT_STANDINS, wanted, scale={} if kind == "cuda" else STANDIN_SCALE,
                             large=[s.name for s in gs.LARGE] if kind == "cuda" else ()))
    found = {}
    for model_name, gname, mode in failed:
        src, dst, n, feat, labels = loads[gname]()
        feat, labels, classes = features(n, feat, labels)
        torch.manual_seed(0)
        model, prepare = build_model(model_name, feat.shape[1], classes)
        model = model.double().to(args.device)
        feat, labels = feat.double().to(args.device), labels.to(args.device)
        g = make_dgl_graph(src, dst, n, prepare, device=args.device)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        _, ours, ref = results_on_and_off(model, g, feat, labels, state, mode)
        d, ok = parity(ours, ref, 1e-10)
        found[(model_name, gname, mode)] = f"{d:.3g}"
        print(f"{model_name:9} {gname:28} {mode:9} float64 maxdiff {d:.2e} {'ok' if ok else 'FAIL'}", flush=True)
    for r in rows:
        if device_kind(r["device"]) == kind:
            r["parity_fp64_maxdiff"] = found.get((r["model"], r["graph"], r["mode"]), r.get("parity_fp64_maxdiff") or "")
    write_rows(path, rows, COLUMNS, append=False)


def profile_ops(model_name, gname, mode="inference", reps=15):
    """Time spent per gspmm/gsddmm pattern (and per CPU edge-softmax kernel) in one inference or
    training step, plugin off and on, interleaved rep by rep after a warm-up of each:
    {impl: {pattern: median ms per step}}, plus the step's median total under "total" and the
    median of what the step spent outside those calls under "outside the sparse calls"."""
    import dgl_ugraph
    from dgl.backend.pytorch import sparse

    name, load = next(iter(graph_cases(True, DEFAULT_STANDINS, {gname})))
    src, dst, n, feat, labels = load()
    feat, labels, classes = features(n, feat, labels)
    torch.manual_seed(0)
    model, prepare = build_model(model_name, feat.shape[1], classes)
    g = make_dgl_graph(src, dst, n, prepare)
    fn = inference_fn(model, g, feat) if mode == "inference" else training_fn(model, labels, g, feat)
    keys = {
        "_gspmm": lambda gi, op, red, u, e: f"gspmm {op}-{red} F={tuple((u if u is not None else e).shape[1:])}",
        "_gsddmm": lambda gi, op, l, r, lt="u", rt="v": f"gsddmm {lt}_{op}_{rt} F={tuple((l if l is not None else r).shape[1:])}",
        "_edge_softmax_forward": lambda gi, e, op: f"edge_softmax forward F={tuple(e.shape[1:])}",
        "_edge_softmax_backward": lambda gi, out, sds: f"edge_softmax backward F={tuple(out.shape[1:])}",
    }
    samples = {"dgl": [], "ugraph": []}

    def one(impl):
        """One step of impl with every sparse call timed: ({pattern: ms}, total ms)."""
        (dgl_ugraph.disable if impl == "dgl" else dgl_ugraph.enable)()
        acc = {}
        saved = {attr: getattr(sparse, attr) for attr in keys if hasattr(sparse, attr)}

        def timed(attr, original):
            def wrapper(*a, **k):
                t0 = time.perf_counter()
                out = original(*a, **k)
                key = keys[attr](*a, **k)
                acc[key] = acc.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
                return out
            return wrapper

        for attr, original in saved.items():
            setattr(sparse, attr, timed(attr, original))
        try:
            t0 = time.perf_counter()
            fn()
            total = (time.perf_counter() - t0) * 1e3
        finally:
            for attr, original in saved.items():
                setattr(sparse, attr, original)
            dgl_ugraph.enable()
        return acc, total

    for impl in ("dgl", "ugraph"):
        one(impl)
    for r in range(reps):
        for impl in (("dgl", "ugraph") if r % 2 == 0 else ("ugraph", "dgl")):
            samples[impl].append(one(impl))
    result = {}
    for impl, runs in samples.items():
        patterns = sorted({k for acc, _ in runs for k in acc})
        result[impl] = {k: statistics.median(acc.get(k, 0.0) for acc, _ in runs) for k in patterns}
        result[impl]["outside the sparse calls"] = statistics.median(total - sum(acc.values()) for acc, total in runs)
        result[impl]["total"] = statistics.median(total for _, total in runs)
    return result


def print_profiles(specs):
    """specs: MODEL:GRAPH or MODEL:GRAPH:training."""
    for spec in specs:
        model_name, gname, *mode = spec.split(":")
        mode = mode[0] if mode else "inference"
        prof = profile_ops(model_name, gname, mode)
        print(f"\n{model_name} on {gname}, {mode}, median ms per step over 15 interleaved steps "
              "(plugin off = dgl, on = ugraph):")
        print("| call | dgl ms | ugraph ms |\n|---|---|---|")
        last = ("outside the sparse calls", "total")
        for key in sorted(set(prof["dgl"]) | set(prof["ugraph"]), key=lambda k: (k in last, last.index(k) if k in last else 0, k)):
            print(f"| {key} | {prof['dgl'].get(key, 0):.3f} | {prof['ugraph'].get(key, 0):.3f} |")
