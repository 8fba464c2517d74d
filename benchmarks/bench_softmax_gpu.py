"""CUDA edge softmax under DGL: dgl_ugraph's fused kernel, the five-call chain on dgl_ugraph's
kernels (what the plugin ran before it), and DGL's own kernels.

    python benchmarks/bench_softmax_gpu.py [--graphs amazon0505,pubmed] [--heads 1 8] [--out benchmarks/results/softmax_gpu.csv]
                                        [--ungated] [--impls fused fused_1 chain dgl] [--kernels]

On the GPU machine with the CUDA DGL build loaded (scripts/gpu_check.sh, stage dgl). Graphs: the
full-size stand-ins of graph_suite.PAPER_STANDINS by name, with self-loops, as GATConv sees them;
float32 scores of shape (E, heads, 1). Three measurements per graph and width, the three
implementations interleaved after a warm-up, medians of --repeat calls:
  forward       dgl.ops.edge_softmax under no_grad (CUDA events);
  fwd+bwd       dgl.ops.edge_softmax and its backward (wall time to synchronize);
  gatconv       a GATConv layer (64 -> heads x 8) forward and backward (wall time to synchronize).
Each implementation's softmax and gradient are first checked against DGL's float64 ones.
--ungated lifts the plugin's rule for long rows (recognition.SOFTMAX_FUSED_MAX_DEGREE), so that
the fused kernel runs every case; impl fused_1 is the fused kernel in one launch, never split
(ops.SOFTMAX_SPLIT_ELEMENTS).

--kernels times the fused kernel alone instead, in one launch and split (what: kernel_forward
and kernel_backward; impl one_launch and split): ops.edge_softmax on the graph's CSC as the plugin
takes it from DGL, 20 calls back to back between CUDA events (the GPU's time, not the host's),
the two alternating for --repeat rounds, medians per call.
"""
from __future__ import annotations

import argparse
import contextlib
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
import torch  # noqa: E402
from dgl.nn import GATConv  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.core import ops  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.dgl import interception, recognition  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

IMPLS = ("fused", "chain", "dgl")
SPLIT = {name: getattr(ops, name) for name in ("SOFTMAX_SPLIT_ELEMENTS", "SOFTMAX_SPLIT_FORWARD_ROW_BYTES",
                                               "SOFTMAX_SPLIT_FORWARD_STATS_BYTES")}
NEVER = {"SOFTMAX_SPLIT_ELEMENTS": 1 << 62}
ALWAYS = {"SOFTMAX_SPLIT_ELEMENTS": 0, "SOFTMAX_SPLIT_FORWARD_ROW_BYTES": 0, "SOFTMAX_SPLIT_FORWARD_STATS_BYTES": 1 << 62}


def set_split(values: dict) -> None:
    """ops' split rule: SPLIT's values, each replaced by one given here."""
    for name, value in SPLIT.items():
        setattr(ops, name, values.get(name, value))


@contextlib.contextmanager
def mode(impl: str):
    """dgl_ugraph's fused softmax (fused; fused_1 never split); the plugin on with DGL's softmax
    function, whose five calls then run on dgl_ugraph's kernels (chain); the plugin off (dgl)."""
    if impl == "dgl":
        with dgl_ugraph.disabled():
            yield
        return
    dgl_ugraph.enable()
    if impl == "chain":
        interception._disable_cuda_softmax()
    set_split(NEVER if impl == "fused_1" else {})
    try:
        yield
    finally:
        interception._enable_cuda_softmax()
        set_split({})


def event_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def wall_ms(fn) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


def interleaved(fn, clock, repeat: int, impls) -> dict:
    """Median time of fn per implementation. Each switch is followed by an untimed call: turning
    the plugin back on after DGL's turn costs the next call its graph caches, which would land on
    whichever implementation comes next."""
    times = {impl: [] for impl in impls}
    for r in range(repeat):
        for impl in (impls if r % 2 == 0 else impls[::-1]):
            with mode(impl):
                fn()
                times[impl].append(clock(fn))
    return {impl: statistics.median(t) for impl, t in times.items()}


def kernel_times(graph: UGraph, score, grad, repeat: int) -> dict:
    """Median ms per call of the fused kernel's forward and backward, in one launch and split."""
    out = ops.edge_softmax(graph, score)
    y = out * grad
    calls = {"kernel_forward": lambda: ops.edge_softmax(graph, score),
             "kernel_backward": lambda: ops.edge_softmax(graph, out, y)}
    times = {}
    for what, fn in calls.items():
        for r in range(repeat):
            for impl in (("one_launch", "split") if r % 2 == 0 else ("split", "one_launch")):
                set_split(NEVER if impl == "one_launch" else ALWAYS)
                fn()
                times.setdefault((what, impl), []).append(event_ms(lambda: [fn() for _ in range(20)]) / 20)
    set_split({})
    return {key: statistics.median(t) for key, t in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="amazon0505,amazon0601,soc-BlogCatalog,ppi,pubmed")
    ap.add_argument("--heads", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "softmax_gpu.csv"))
    ap.add_argument("--ungated", action="store_true", help="the fused kernel runs every case (no size rule)")
    ap.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS + ("fused_1",))
    ap.add_argument("--kernels", action="store_true", help="the kernel alone, in one launch and split")
    args = ap.parse_args(argv)
    impls = tuple(args.impls)
    if args.ungated:
        recognition.SOFTMAX_FUSED_MAX_DEGREE = 1 << 62
    by_name = {s.name: s for s in gs.PAPER_STANDINS}
    rows = []
    for name in args.graphs.split(","):
        src, dst, n = gs.make(by_name[name])
        g = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=n))).to("cuda")
        g = g.formats(["csc", "coo", "csr"])
        # --kernels: the graph as the plugin takes it from DGL, its caches built once for every width.
        graph = UGraph.from_csc(*g.adj_tensors("csc"), g.num_src_nodes()) if args.kernels else None
        x = torch.randn(n, 64, device="cuda")
        for heads in args.heads:
            gen = torch.Generator().manual_seed(heads)
            score = (torch.randn(g.num_edges(), heads, 1, generator=gen) * 4).cuda()
            grad = torch.randn(score.shape, generator=gen).cuda()
            if args.kernels:
                ms = kernel_times(graph, score, grad, args.repeat)
                for what in ("kernel_forward", "kernel_backward"):
                    one, split = ms[what, "one_launch"], ms[what, "split"]
                    print(f"{name} E={g.num_edges()} heads={heads} {what}: one_launch={one:.4f} split={split:.4f} ms; "
                          f"one/split {one / split:.2f}x", flush=True)
                rows += [{"device": torch.cuda.get_device_name(), "graph": name, "V": n, "E": g.num_edges(),
                          "heads": heads, "what": what, "impl": impl, "ms": round(t, 5)} for (what, impl), t in ms.items()]
                continue
            torch.manual_seed(0)
            conv = GATConv(64, 8, heads).cuda()

            def softmax():
                with torch.no_grad():
                    return dgl.ops.edge_softmax(g, score)

            def softmax_fb():
                s = score.clone().requires_grad_()
                out = dgl.ops.edge_softmax(g, s)
                out.backward(grad)
                return out.detach(), s.grad

            def layer():
                conv.zero_grad(set_to_none=True)
                conv(g, x).square().sum().backward()

            # Each implementation's error against DGL's own float64 softmax, within four times
            # DGL's own float32 error (long rows' sums differ in their order).
            with mode("dgl"):
                score64 = score.double().requires_grad_()
                out64 = dgl.ops.edge_softmax(g, score64)
                out64.backward(grad.double())
                want = {"softmax": out64.detach(), "gradient": score64.grad}
            errors = {}
            for impl in impls:
                with mode(impl):
                    got = dict(zip(("softmax", "gradient"), softmax_fb()))
                for part, w in want.items():
                    errors[impl, part] = ((got[part].double() - w).abs().max() / w.abs().max()).item()
            print(f"{name} heads={heads} error against float64 (share of the largest value): "
                  + " ".join(f"{impl} {part} {err:.1e}" for (impl, part), err in errors.items()), flush=True)
            for (impl, part), err in errors.items():
                assert err <= max(4 * errors["dgl", part], 1e-5), f"{impl} {part}: error {err:.2e}, DGL's {errors['dgl', part]:.2e}"
            for what, fn, clock in (("forward", softmax, event_ms), ("fwd+bwd", softmax_fb, wall_ms),
                                    ("gatconv", layer, wall_ms)):
                ms = interleaved(fn, clock, args.repeat, impls)
                print(f"{name} E={g.num_edges()} heads={heads} {what}: " + " ".join(f"{k}={v:.3f}" for k, v in ms.items())
                      + " ms; " + ", ".join(f"{k}/fused {v / ms['fused']:.2f}x" for k, v in ms.items() if k != "fused"),
                      flush=True)
                rows += [{"device": torch.cuda.get_device_name(), "graph": name, "V": n, "E": g.num_edges(),
                          "heads": heads, "what": what, "impl": impl, "ms": round(t, 4)} for impl, t in ms.items()]
        write_rows(args.out, rows)  # after each graph: a run cut short keeps what it measured
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
