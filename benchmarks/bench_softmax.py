"""CPU edge softmax: DGL's fused kernel, dgl_ugraph's fused kernel, and the five-call chain.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_softmax.py [--graph pubmed] [--heads 1 4 8] [--repeat 30]

The chain is what dgl_ugraph ran before its fused kernel: the calls of DGL's CUDA branch
(copy_e max, e_sub_v, torch.exp, copy_e sum, e_div_v forward; copy_e sum, e_mul_v and a
subtraction backward), each on dgl_ugraph's kernels. The graph is a dataset of
../shared/datasets (or $DGL_UGRAPH_DATASETS) with self-loops, as GATConv sees it; float32 scores
of shape (E, heads, 1), as GATConv passes them. The three run round-robin, --repeat rounds after
a warm-up, so machine noise lands on all of them alike; reported: median and quartiles (ms).
Writes benchmarks/results/softmax_cpu.csv. Exits 0 with a note when the dataset is absent.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

# As in bench_models.py: spinning OpenMP pools (torch's, DGL's) fight for 2 shared cores.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import interception  # noqa: E402
from dgl_ugraph.tuning.graph_suite import datasets_dir, shared_dataset  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402


def load(name: str):
    found = shared_dataset(name)
    if found is None:
        return None
    src, dst, n = found
    return dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=n)))


def chain_forward(gidx, score):
    score_max = sparse._gspmm(gidx, "copy_rhs", "max", None, score)[0]
    score = torch.exp(sparse._gsddmm(gidx, "sub", score, score_max, "e", "v"))
    score_sum = sparse._gspmm(gidx, "copy_rhs", "sum", None, score)[0]
    return sparse._gsddmm(gidx, "div", score, score_sum, "e", "v")


def chain_backward(gidx, out, sds):
    accum = sparse._gspmm(gidx, "copy_rhs", "sum", None, sds)[0]
    return sds - sparse._gsddmm(gidx, "mul", out, accum, "e", "v")


def quartiles(xs):
    q = np.percentile(np.asarray(xs) * 1e3, [25, 50, 75])
    return float(q[0]), float(q[1]), float(q[2])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="pubmed")
    ap.add_argument("--heads", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "softmax_cpu.csv"))
    args = ap.parse_args(argv)
    g = load(args.graph)
    if g is None:
        print(f"{args.graph}.npz not found under {datasets_dir() or '../shared/datasets'}: nothing measured")
        return 0
    dgl_ugraph.enable()
    gidx = g._graph
    native_fwd, native_bwd = interception._dgl["_edge_softmax_forward"], interception._dgl["_edge_softmax_backward"]
    rows = []
    print(f"{args.graph}: {g.num_nodes()} nodes, {g.num_edges()} edges with self-loops; float32; "
          f"{torch.get_num_threads()} threads; {args.repeat} rounds; ms: median [q1-q3]")
    print(f"{'heads':>5s} {'pass':8s} {'DGL fused':>20s} {'dgl_ugraph fused':>20s} {'chain (5 calls)':>20s} "
          f"{'vs DGL':>7s} {'vs chain':>8s}")
    for heads in args.heads:
        gen = torch.Generator().manual_seed(heads)
        score = torch.randn(g.num_edges(), heads, 1, generator=gen) * 4
        out = native_fwd(gidx, score, "copy_rhs")
        sds = out * torch.randn(out.shape, generator=gen)
        impls = {
            "forward": {"dgl": lambda: native_fwd(gidx, score, "copy_rhs"),
                        "ugraph": lambda: interception._edge_softmax_forward(gidx, score, "copy_rhs"),
                        "chain": lambda: chain_forward(gidx, score)},
            "backward": {"dgl": lambda: native_bwd(gidx, out, sds),
                         "ugraph": lambda: interception._edge_softmax_backward(gidx, out, sds),
                         "chain": lambda: chain_backward(gidx, out, sds)},
        }
        for direction, fns in impls.items():
            ref = fns["dgl"]()
            for name, fn in fns.items():  # warm-up, and each result checked against DGL's
                torch.testing.assert_close(fn(), ref, rtol=1e-5, atol=1e-6, msg=f"{name} {direction}")
            times = {name: [] for name in fns}
            for r in range(args.repeat):
                order = list(fns) if r % 2 == 0 else list(reversed(list(fns)))
                for name in order:
                    start = time.perf_counter()
                    fns[name]()
                    times[name].append(time.perf_counter() - start)
            q = {name: quartiles(t) for name, t in times.items()}
            cells = " ".join(f"{q[n][1]:7.2f} [{q[n][0]:5.2f}-{q[n][2]:5.2f}]" for n in ("dgl", "ugraph", "chain"))
            print(f"{heads:5d} {direction:8s} {cells} {q['dgl'][1] / q['ugraph'][1]:6.2f}x "
                  f"{q['chain'][1] / q['ugraph'][1]:7.2f}x")
            for name in fns:
                rows.append({"graph": args.graph, "V": g.num_nodes(), "E": g.num_edges(), "heads": heads,
                             "pass": direction, "impl": name, "threads": torch.get_num_threads(),
                             "q1_ms": round(q[name][0], 4), "median_ms": round(q[name][1], 4),
                             "q3_ms": round(q[name][2], 4)})
    write_rows(args.out, rows)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
