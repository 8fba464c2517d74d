"""CPU kernels against DGL 2.1's own CPU kernels on one synthetic power-law graph.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_cpu.py [--nodes 200000] [--edges 4000000] [--feat 64]

DGL runs natively: `import dgl_ugraph` would route DGL's SpMM/SDDMM through us, so this script
sets DGL_UGRAPH=0 first and checks that DGL's own functions are in place before timing. Both
sides run on the same tensors and the same CSC, with torch and our OpenMP team at --threads
threads, for int64 and int32 ids (DGL's default is int64). Every op is warmed up and timed
--repeat times, DGL and ours alternating (the machine is shared: alternation keeps drift out of
the ratio), either back to back per op or in rounds over all ops (--order), and medians are
reported. Results are checked against DGL's before timing: max exactly, sums within rtol 1e-5 of
the magnitude of what they add up (the same op on |inputs|), since float32 sums of a hub row's
20,000 terms in another order differ by more than 1e-5 of a small result.
Writes benchmarks/results/cpu_kernels.csv (device, graph, V, E, op, F, dtype, impl, ms).
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
from dgl_ugraph.core.ops import prepare  # noqa: E402


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


class Case:
    """One op on one graph: DGL's call, ours, and a DGL call on |inputs| that bounds the
    rounding of sums (None: the results must be equal)."""

    def __init__(self, graph: str, op: str, dgl_fn, info, ug, magnitude):
        self.graph, self.op, self.dgl_fn, self.magnitude = graph, op, dgl_fn, magnitude
        self.ours_fn = lambda: prepare(ug, info).run()  # allocates C (and args), as DGL does
        self.times = {"dgl": [], "ugraph": []}

    def agrees(self) -> bool:
        want, got = self.dgl_fn(), self.ours_fn()[0]
        bound = 0.0 if self.magnitude is None else 1e-5 * (want.abs() + self.magnitude())
        if ((got == want) | ((got - want).abs() <= bound)).all():  # == covers the -inf of empty rows
            return True
        print(f"{self.graph} {self.op}: MISMATCH vs DGL, max abs diff {(got - want).abs().max().item():.3g}")
        return False


def graph_cases(args, idname: str):
    idtype = getattr(torch, idname)
    g = power_law_graph(args.nodes, args.edges, args.seed, idtype)
    indptr, indices, eids = g.adj_tensors("csc")
    ug = UGraph.from_csc(indptr, indices, eids, g.num_src_nodes())
    deg = (indptr[1:] - indptr[:-1]).double()
    name = f"powerlaw-{idname}"
    print(f"{name}: V={g.num_nodes()} E={g.num_edges()} in-degree mean {deg.mean():.1f} std {deg.std():.1f} "
          f"max {int(deg.max())}")
    gen = torch.Generator().manual_seed(args.seed + 1)
    V, E, F = g.num_nodes(), g.num_edges(), args.feat
    x = torch.randn(V, F, generator=gen)
    y = torch.randn(V, F, generator=gen)
    w = torch.rand(E, 1, generator=gen) + 0.5
    absx, absy, absw = x.abs(), y.abs(), w.abs()
    return [
        Case(name, "copy_u-sum", lambda: dgl.ops.gspmm(g, "copy_lhs", "sum", x, None),
             OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"), ug,
             lambda: dgl.ops.gspmm(g, "copy_lhs", "sum", absx, None)),
        Case(name, "u_mul_e-sum", lambda: dgl.ops.gspmm(g, "mul", "sum", x, w),
             OpInfo("mul", "sum", x, "src", w, "edge", "dst"), ug,
             lambda: dgl.ops.gspmm(g, "mul", "sum", absx, absw)),
        Case(name, "copy_u-max", lambda: dgl.ops.gspmm(g, "copy_lhs", "max", x, None),
             OpInfo("copy_lhs", "max", x, "src", None, "null", "dst"), ug, None),
        Case(name, "u_dot_v", lambda: dgl.ops.gsddmm(g, "dot", x, y, "u", "v"),
             OpInfo("dot", "none", x, "src", y, "dst", "edge"), ug,
             lambda: dgl.ops.gsddmm(g, "dot", absx, absy, "u", "v")),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--edges", type=int, default=4_000_000)
    ap.add_argument("--feat", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--idtype", choices=("int32", "int64", "both"), default="both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--order", choices=("per-op", "rounds"), default="per-op",
                    help="per-op: an op's samples back to back, its data warm in cache (the usual "
                         "microbenchmark); rounds: every op once per round, so each starts with "
                         "the caches full of the previous op's data")
    ap.add_argument("--csv", default=str(ROOT / "benchmarks" / "results" / "cpu_kernels.csv"))
    args = ap.parse_args()

    # One OpenMP runtime serves both: torch loads its libgomp globally and the core binds to it.
    torch.set_num_threads(args.threads)
    for name in ("_gspmm", "_gsddmm"):
        if getattr(dgl_sparse, name) is not getattr(dgl._sparse_ops, name):
            raise SystemExit(f"DGL's {name} is patched: this would time dgl_ugraph against itself")
    device = device_name(args.threads)
    print(f"{device}; DGL {dgl.__version__}, libxsmm {'on' if dgl.is_libxsmm_enabled() else 'off'}; "
          f"load average {os.getloadavg()[0]:.1f}")
    cases = [c for idname in (("int64", "int32") if args.idtype == "both" else (args.idtype,))
             for c in graph_cases(args, idname)]
    failed = not all([c.agrees() for c in cases])  # also the warm-up
    # DGL and ours alternate, so drift in the load from elsewhere on the machine (it is shared)
    # hits both alike.
    if args.order == "per-op":
        for c in cases:
            c.agrees()  # warm this op's data again after the others ran
            for _ in range(args.repeat):
                c.times["dgl"].append(timed(c.dgl_fn))
                c.times["ugraph"].append(timed(c.ours_fn))
    else:
        for _ in range(args.repeat):
            for c in cases:
                c.times["dgl"].append(timed(c.dgl_fn))
                c.times["ugraph"].append(timed(c.ours_fn))
    print(f"load average {os.getloadavg()[0]:.1f}")

    rows = []
    print(f"{'graph':<16} {'op':<12} {'DGL ms':>9} {'ours ms':>9} {'speed-up':>9}")
    for c in cases:
        med = {k: statistics.median(v) for k, v in c.times.items()}
        print(f"{c.graph:<16} {c.op:<12} {med['dgl']:9.1f} {med['ugraph']:9.1f} {med['dgl'] / med['ugraph']:8.2f}x")
        for impl, ms in med.items():
            rows.append((device, c.graph, args.nodes, args.edges, c.op, args.feat, "float32", impl, round(ms, 2)))
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
