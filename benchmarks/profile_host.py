"""Host time per model call by package: where a forward (inference) or a training step spends the
host's time, for DGL's models with the plugin off (`dgl`), on with DGL's module forwards
(`ugraph_kernels`), on with the module patterns' lean paths (`ugraph`), and PyG's twins (`pyg`).

Each (model, graph, mode, impl) runs --calls calls under cProfile after warm-up calls, each
ended by the device's synchronization; every profiled function's own time (tottime; a tensor
operator such as `x * y` is no call to the profiler, so its time is its caller's) goes to the
package of its file: dgl_ugraph, dgl, torch_geometric, torch (torch's Python and its C functions,
which launch the kernels), or other (the benchmark, builtins, the synchronization's wait). The
rows give microseconds per call; `wall_us` is the profiled call's wall time, so the profiler's
own overhead is in it and the rows compare implementations, not absolute times (bench_models.py
times those).

    python benchmarks/profile_host.py --device cuda --graphs cora,pubmed --out $OUT/host_profile_gpu.csv
    PYTHONPATH=. .venv/bin/python benchmarks/profile_host.py --device cpu --graphs cora --calls 5   # dry run
"""
from __future__ import annotations

import argparse
import cProfile
import pathlib
import pstats
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import bench_models as bm  # noqa: E402  (benchmarks/bench_models.py)
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

PACKAGES = ("dgl_ugraph", "dgl", "torch_geometric", "torch", "other")
COLUMNS = ["device", "model", "graph", "mode", "impl", "calls", "wall_us"] + [f"{p}_us" for p in PACKAGES]


def package_of(filename: str, name: str) -> str:
    """The package a profiled function belongs to; C functions ('~') by the name cProfile gives."""
    if filename == "~":
        return "torch" if "torch" in name else "other"
    for package in PACKAGES[:-1]:
        if f"/{package}/" in filename:
            return package
    return "other"


def profile(run, calls: int, warmup: int, sync, top: int = 0) -> dict:
    """Microseconds per call by package, and the wall time per profiled call; with `top`, the
    functions of most own time are printed, with their microseconds and calls per call. `run`
    runs in the implementation's state (harness/timing.py's state), entered outside the profile."""
    for _ in range(warmup):
        run()
    sync()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(calls):
        run()
        sync()
    prof.disable()
    wall = (time.perf_counter() - t0) / calls * 1e6
    by_package = dict.fromkeys(PACKAGES, 0.0)
    stats = pstats.Stats(prof).stats
    for (filename, _, name), (_, ncalls, tottime, _, _) in stats.items():
        by_package[package_of(filename, name)] += tottime / calls * 1e6
    ranked = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in ranked:
        where = filename if filename == "~" else "/".join(filename.split("/")[-2:]) + f":{line}"
        print(f"    {tottime / calls * 1e6:8.1f} us own {cumtime / calls * 1e6:8.1f} us cum {ncalls / calls:5.1f} calls  "
              f"{name} ({where})")
    return {"wall_us": round(wall, 1), **{f"{p}_us": round(v, 1) for p, v in by_package.items()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--graphs", default="cora,pubmed")
    ap.add_argument("--models", default=",".join(bm.GPU_MODELS))
    ap.add_argument("--modes", default=",".join(bm.MODES))
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--impls", default="dgl,ugraph_kernels,ugraph,pyg")
    ap.add_argument("--top", type=int, default=0, help="print each run's N functions of most own time")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import dgl_ugraph

    dgl_ugraph.enable()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    try:
        import torch_geometric  # noqa: F401
        use_pyg = True
    except ImportError:
        use_pyg = False
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else bm.cpu_device_name()
    write_rows(args.out, [], COLUMNS)
    for gname, load in bm.graph_cases(True, (), set(args.graphs.split(","))):
        src, dst, n, feat, labels, classes = bm.prepare_inputs(load(), device)
        edge_index = torch.stack([src, dst])
        for model_name in args.models.split(","):
            torch.manual_seed(0)
            model, prepare = bm.build_model(model_name, feat.shape[1], classes)
            model = model.to(device)
            g = bm.make_dgl_graph(src, dst, n, prepare, device)
            pyg = bm.pyg_fns(model_name, feat, labels, classes, edge_index) if use_pyg else None
            rows = []
            with bm.tier_up_now():
                for mode in args.modes.split(","):
                    fn = bm.inference_fn(model, g, feat) if mode == "inference" else bm.training_fn(model, labels, g, feat)
                    impls = {"dgl": fn, bm.KERNELS_ONLY: fn, "ugraph": fn}
                    if pyg is not None:
                        impls["pyg"] = pyg[mode]
                    for impl, run in impls.items():
                        if impl not in args.impls.split(","):
                            continue
                        print(f"{model_name} {gname} {mode} {impl}:", flush=True)
                        with bm.state(impl, run):
                            row = profile(run, args.calls, args.warmup, sync, args.top)
                        rows.append(dict(device=name, model=model_name, graph=gname, mode=mode, impl=impl,
                                         calls=args.calls, **row))
                        print(f"{model_name:9} {gname:10} {mode:9} {impl:15} " +
                              " ".join(f"{k[:-3]} {v:8.1f}" for k, v in row.items()), flush=True)
            write_rows(args.out, rows, COLUMNS, append=True)
    print(f"rows in {args.out}")


if __name__ == "__main__":
    main()
