"""CPU kernels against DGL 2.1's own CPU kernels on one synthetic power-law graph.

    PYTHONPATH=. .venv/bin/python scripts/bench_cpu.py [--nodes 200000] [--edges 4000000] [--feat 64]

DGL runs natively: `import dgl_ugraph` would route DGL's SpMM/SDDMM through us, so this script
sets DGL_UGRAPH=0 first and checks that DGL's own functions are in place before timing. Both
sides run on the same tensors and the same CSC, with torch and our OpenMP team at --threads
threads, for int64 and int32 ids (DGL's default is int64). Each op is warmed up, then DGL and
ours alternate --repeat times (the machine is shared, so alternating keeps drift out of the
ratio) and the median is reported. Results are checked against DGL's before timing: max
exactly, sums within rtol 1e-5 of the magnitude of what they add up (the same op on |inputs|),
since float32 sums of a hub row's 20,000 terms in another order differ by more than 1e-5 of a
small result. Writes bench/cpu_kernels.csv (device, graph, V, E, op, F, dtype, impl, ms).
"""
from __future__ import annotations

import argparse
import csv
import os
import pathlib
import platform
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
os.environ["DGL_UGRAPH"] = "0"  # `import dgl_ugraph` would route DGL's SpMM/SDDMM through us
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
import torch  # noqa: E402
from dgl.backend.pytorch import sparse as dgl_sparse  # noqa: E402

from dgl_ugraph import OpInfo, UGraph  # noqa: E402
from dgl_ugraph.ops import prepare  # noqa: E402


def device_name(threads: int) -> str:
    """CPU model, the widest vector ISA (DGL's libxsmm kernels need AVX-512 for max/min), threads."""
    model, isa = platform.processor() or "cpu", "AVX2"
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        for line in info.splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        isa = "AVX-512" if " avx512f" in info else "AVX2" if " avx2" in info else "SSE"
    except OSError:
        pass
    return f"{model} ({isa}), {threads} threads"


def power_law_graph(num_nodes: int, num_edges: int, seed: int, idtype):
    """Uniform sources; destinations drawn with weight 1/(rank+10)^0.9 over a random rank order,
    so in-degrees are power-law-ish (a few hubs with tens of thousands of in-edges)."""
    gen = torch.Generator().manual_seed(seed)
    weight = 1.0 / (torch.arange(num_nodes, dtype=torch.float64) + 10) ** 0.9
    dst = torch.randperm(num_nodes, generator=gen)[torch.multinomial(weight, num_edges, True, generator=gen)]
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    g = dgl.graph((src, dst), num_nodes=num_nodes, idtype=idtype)
    g.create_formats_()
    return g


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def bench_graph(args, idname: str):
    """Times the four ops on one graph with idname ids; returns the CSV rows and whether any
    result disagreed with DGL's."""
    idtype = getattr(torch, idname)
    g = power_law_graph(args.nodes, args.edges, args.seed, idtype)
    indptr, indices, eids = g.adj_tensors("csc")
    ug = UGraph.from_csc(indptr, indices, eids, g.num_src_nodes())
    deg = (indptr[1:] - indptr[:-1]).double()
    graph_name = f"powerlaw-{idname}"
    print(f"\ngraph ({idname} ids): V={g.num_nodes()} E={g.num_edges()} in-degree mean {deg.mean():.1f} std {deg.std():.1f} "
          f"max {int(deg.max())}; F={args.feat}; {device_name(args.threads)}; DGL {dgl.__version__}, "
          f"libxsmm {'on' if dgl.is_libxsmm_enabled() else 'off'}; load average {os.getloadavg()[0]:.1f}")

    gen = torch.Generator().manual_seed(args.seed + 1)
    V, E, F = g.num_nodes(), g.num_edges(), args.feat
    x = torch.randn(V, F, generator=gen)
    y = torch.randn(V, F, generator=gen)
    w = torch.rand(E, 1, generator=gen) + 0.5

    absx, absy, absw = x.abs(), y.abs(), w.abs()
    # (name, DGL call, our op, DGL call on |inputs| bounding the rounding of sums; None: exact)
    cases = [
        ("copy_u-sum", lambda: dgl.ops.gspmm(g, "copy_lhs", "sum", x, None),
         OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"),
         lambda: dgl.ops.gspmm(g, "copy_lhs", "sum", absx, None)),
        ("u_mul_e-sum", lambda: dgl.ops.gspmm(g, "mul", "sum", x, w),
         OpInfo("mul", "sum", x, "src", w, "edge", "dst"),
         lambda: dgl.ops.gspmm(g, "mul", "sum", absx, absw)),
        ("copy_u-max", lambda: dgl.ops.gspmm(g, "copy_lhs", "max", x, None),
         OpInfo("copy_lhs", "max", x, "src", None, "null", "dst"), None),
        ("u_dot_v", lambda: dgl.ops.gsddmm(g, "dot", x, y, "u", "v"),
         OpInfo("dot", "none", x, "src", y, "dst", "edge"),
         lambda: dgl.ops.gsddmm(g, "dot", absx, absy, "u", "v")),
    ]
    rows, failed = [], False
    print(f"{'op':<12} {'DGL ms':>9} {'ours ms':>9} {'speed-up':>9}")
    for name, dgl_fn, info, magnitude in cases:
        ours_fn = lambda info=info: prepare(ug, info).run()  # noqa: E731  (allocates C, as DGL does)
        want, got = dgl_fn(), ours_fn()[0]
        bound = 0.0 if magnitude is None else 1e-5 * (want.abs() + magnitude())
        if not ((got == want) | ((got - want).abs() <= bound)).all():  # == covers the -inf of empty rows
            bad = (got - want).abs().max().item()
            print(f"{name}: MISMATCH vs DGL, max abs diff {bad:.3g}")
            failed = True
        times = {"dgl": [], "ugraph": []}
        for _ in range(args.repeat):
            times["dgl"].append(timed(dgl_fn))
            times["ugraph"].append(timed(ours_fn))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{name:<12} {med['dgl']:9.1f} {med['ugraph']:9.1f} {med['dgl'] / med['ugraph']:8.2f}x")
        for impl, ms in med.items():
            rows.append((device_name(args.threads), graph_name, V, E, name, F, "float32", impl, round(ms, 2)))
    return rows, failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--edges", type=int, default=4_000_000)
    ap.add_argument("--feat", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--idtype", choices=("int32", "int64", "both"), default="both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default=str(ROOT / "bench" / "cpu_kernels.csv"))
    args = ap.parse_args()

    # One OpenMP runtime serves both: torch loads its libgomp globally and the core binds to it.
    torch.set_num_threads(args.threads)
    for name in ("_gspmm", "_gsddmm"):
        if getattr(dgl_sparse, name) is not getattr(dgl._sparse_ops, name):
            raise SystemExit(f"DGL's {name} is patched: this would time dgl_ugraph against itself")

    rows, failed = [], False
    for idname in (("int64", "int32") if args.idtype == "both" else (args.idtype,)):
        graph_rows, graph_failed = bench_graph(args, idname)
        rows += graph_rows
        failed |= graph_failed

    out = pathlib.Path(args.csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("device", "graph", "V", "E", "op", "F", "dtype", "impl", "ms"))
        writer.writerows(rows)
    print(f"wrote {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
