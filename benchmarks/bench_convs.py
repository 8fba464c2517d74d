"""DGL's own graph convolutions (benchmarks/models/convs.py's table, about 40 module configurations), one layer
at a time, plugin on and off: what a user of each dgl.nn conv gains.

For each (conv, graph, mode), one module and one set of random inputs at the --dims widths; the
two sides interleave (harness/timing.py's interleaved_ms: warm-up, then rounds in rotating order, each
call timed to the device's synchronization). Modes: inference (eval, no_grad) and training (the
forward and the backward of a fixed random projection of every output, onto the parameters and
the inputs). Parity and `ugraph_share` are taken first, on dgl_ugraph's kernels from the graph's
first call (harness/timing.py's tier_up_now); the times are the steady state after. Parity is checked on
a float64 copy of the case (in float32 a ReLU whose input lies within rounding of 0 flips with the
summation order, and one flipped unit moves a gradient by a percent of its scale), or in float32
where DGL's own module refuses float64 (`parity_dtype`). `paired_x` is the median over rounds of
dgl / ugraph.

Graphs: the names of --graphs from the shared datasets and the uGrapher stand-ins (graph_suite;
`sim-` prefixed), on --device.

    python benchmarks/bench_convs.py --device cuda --out $OUT/convs_gpu.csv
    python benchmarks/bench_convs.py --summarize a.csv,b.csv --out benchmarks/results/convs.csv --md benchmarks/results/convs.md  # merge runs
    PYTHONPATH=. .venv/bin/python benchmarks/bench_convs.py --device cpu --graphs cora --convs GATConv,SAGEConv-mean  # dry run
"""
from __future__ import annotations

import argparse
import copy
import csv
import pathlib
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "models")]

import dgl  # noqa: E402
from dgl import DGLError  # noqa: E402

import convs  # noqa: E402  (benchmarks/models/convs.py)
import dgl_ugraph  # noqa: E402
from harness.graphs import graph_cases  # noqa: E402
from harness.parity import parity  # noqa: E402
from harness.timing import interleaved_ms, paired_speedup, tier_up_now, ugraph_share  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

COLUMNS = ["device", "conv", "graph", "V", "E", "mode", "impl", "ms", "ms_p25", "ms_p75", "reps", "paired_x",
           "parity_dtype", "parity_maxdiff", "parity_ok", "ugraph_share"]
# Widths of a hidden layer; NNConv's edge network writes nnconv^2 values an edge.
DIMS = convs.Dims(feat=64, out=64, edge=16, heads=4, rels=4, hidden=64, nnconv=16)
MODES = ("inference", "training")
RTOL = {torch.float32: 1e-4, torch.float64: 1e-9}


class Case:
    """One module on one graph with its inputs and projection weights, and its two modes' steps."""

    def __init__(self, name: str, g: dgl.DGLGraph, dims: convs.Dims, dtype: torch.dtype = torch.float32):
        make, self.call = convs.table(dims)[name]
        self.g = convs.graph_for(name, g)
        torch.manual_seed(0)
        self.module = make().to(g.device, dtype)
        self.state = copy.deepcopy(self.module.state_dict())
        self.inputs = convs.Inputs(self.g, dtype, 0, dims)
        with torch.no_grad():
            self.weights = convs.projections(convs.outputs(self.module, self.inputs, self.call), 0)

    def inference(self):
        self.module.eval()
        with torch.no_grad():
            return convs.outputs(self.module, self.inputs, self.call)

    def training(self):
        convs.clear_grads(self.module, self.inputs)
        return convs.train_step(self.module, self.inputs, self.call, self.weights)

    def results(self, mode: str) -> list:
        """The mode's outputs, and in training every gradient, from the saved state."""
        if mode == "training":
            outs, grads = convs.step_results(self.module, self.state, self.inputs, self.call)
            return outs + list(grads.values())
        self.module.load_state_dict(self.state)
        return [t.detach() for t in self.inference()]


def checked_parity(cname: str, g: dgl.DGLGraph, modes) -> dict:
    """{mode: (dtype, worst difference relative to scale, within RTOL)} of the case's results with
    dgl_ugraph on against off, on its own kernels from the first call: in float64, or in float32
    where DGL's own module raises in float64 (APPNPConv, TWIRLSConv: float32 degree norms)."""
    for dtype in (torch.float64, torch.float32):
        with tier_up_now():
            try:
                with dgl_ugraph.disabled():
                    case = Case(cname, g, DIMS, dtype)
                    refs = {mode: case.results(mode) for mode in modes}
            except DGLError:
                continue
            dgl_ugraph.enable()
            return {mode: (dtype,) + parity(case.results(mode), refs[mode], RTOL[dtype]) for mode in modes}
    raise RuntimeError(f"DGL's own {cname} runs in neither float64 nor float32")


def bench(cname: str, g: dgl.DGLGraph, gname: str, args, device_name: str, sync) -> list:
    modes = args.modes.split(",")
    checked = checked_parity(cname, g, modes)
    case = Case(cname, g, DIMS)
    rows = []
    for mode in modes:
        dtype, maxdiff, ok = checked[mode]
        with tier_up_now():
            share = ugraph_share(getattr(case, mode))
        fn = getattr(case, mode)
        times = interleaved_ms({"dgl": fn, "ugraph": fn}, args.reps, args.warmup, args.min_s, args.max_reps,
                               args.case_max_s, sync)
        paired = paired_speedup(times["dgl"], times["ugraph"])
        for impl, ts in times.items():
            q = statistics.quantiles(ts, n=4) if len(ts) > 1 else ts * 3
            rows.append(dict(device=device_name, conv=cname, graph=gname, V=case.g.num_nodes(), E=case.g.num_edges(),
                             mode=mode, impl=impl, ms=round(statistics.median(ts), 4), ms_p25=round(q[0], 4),
                             ms_p75=round(q[2], 4), reps=len(ts),
                             paired_x=round(paired, 4) if impl == "ugraph" else "",
                             parity_dtype=str(dtype).replace("torch.", ""), parity_maxdiff=f"{maxdiff:.3g}", parity_ok=int(ok),
                             ugraph_share=round(share, 4) if impl == "ugraph" else ""))
        print(f"{cname:26} {gname:20} {mode:9} dgl {statistics.median(times['dgl']):9.3f} ms  ugraph "
              f"{statistics.median(times['ugraph']):9.3f} ms  x{paired:5.2f}  parity {maxdiff:.1e} ({dtype}) "
              f"{'ok' if ok else 'FAIL'}  share {share:.2f}", flush=True)
    return rows


def markdown(rows: list) -> str:
    """A table of paired_x per conv (rows) and graph x mode (columns), with geomeans, and the
    cases whose parity failed."""
    ours = [r for r in rows if r["impl"] == "ugraph"]
    graphs = list(dict.fromkeys(r["graph"] for r in ours))
    modes = list(dict.fromkeys(r["mode"] for r in ours))
    cols = [(g, m) for g in graphs for m in modes]
    cell = {(r["conv"], r["graph"], r["mode"]): float(r["paired_x"]) for r in ours}
    device = ours[0]["device"] if ours else ""
    # The results files of the device's kind, and how their rows are measured.
    name, run = (("convs_cpu", "bench_convs.py --device cpu --graphs ... --out CSV") if device == "cpu" else
                 ("convs", "bash scripts/gpu_check.sh build dgl-convs"))
    lines = [f"# DGL's graph convolutions with dgl_ugraph ({device})", "",
             f"Regenerate: `python benchmarks/bench_convs.py --summarize benchmarks/results/{name}.csv "
             f"--md benchmarks/results/{name}.md` (the rows: `{run}`, merged with --summarize A.csv,B.csv --out; "
             "a later run's rows replace an earlier one's).", "",
             "Speedup over DGL's own kernels (median over interleaved rounds of DGL's time / ours), one layer, "
             "hidden widths of 64 (benchmarks/bench_convs.py). Inference: eval, no_grad; training: forward and "
             "backward.", "",
             "| conv | " + " | ".join(f"{g} {m}" for g, m in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for conv in dict.fromkeys(r["conv"] for r in ours):
        vals = [f"{cell[(conv, g, m)]:.2f}" if (conv, g, m) in cell else "" for g, m in cols]
        lines.append(f"| {conv} | " + " | ".join(vals) + " |")
    lines.append("| **geomean** | " + " | ".join(
        f"**{statistics.geometric_mean(v for (c, g2, m2), v in cell.items() if (g2, m2) == (g, m)):.2f}**" for g, m in cols) + " |")
    slower = sorted((v, c, g, m) for (c, g, m), v in cell.items() if v < 1.0)
    lines += ["", f"Cases slower than DGL: {len(slower)} of {len(cell)}" +
              (": " + "; ".join(f"{c} on {g} ({m}) {v:.2f}x" for v, c, g, m in slower) if slower else "") + "."]
    failed = [r for r in ours if str(r["parity_ok"]) != "1"]
    lines.append(f"Parity failures: {len(failed)}" + (": " + "; ".join(
        f"{r['conv']} on {r['graph']} ({r['mode']}, {r.get('parity_dtype') or 'float32'}) {r['parity_maxdiff']}"
        for r in failed) if failed else "") + ".")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--graphs", default="cora,karate_wikipedia,sim-amazon0505")
    ap.add_argument("--convs", default=None, help="comma-separated names of benchmarks/models/convs.py's table (default: all)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--min-s", type=float, default=0.2, help="time each side at least this long a case")
    ap.add_argument("--max-reps", type=int, default=40)
    ap.add_argument("--case-max-s", type=float, default=10.0)
    ap.add_argument("--budget-s", type=float, default=float("inf"), help="start no case after this many seconds")
    ap.add_argument("--out", default=None)
    ap.add_argument("--md", default=None, help="a markdown summary of the rows")
    ap.add_argument("--summarize", default=None,
                    help="instead of running: merge these CSVs (comma-separated) into --out and --md; a "
                         "later file's row replaces an earlier one of the same device, conv, graph, mode and impl")
    args = ap.parse_args()
    if args.summarize:
        merged = {}
        for path in args.summarize.split(","):
            with open(path, newline="") as fh:
                for r in csv.DictReader(fh):
                    merged[tuple(r[k] for k in ("device", "conv", "graph", "mode", "impl"))] = r
        rows = list(merged.values())
        if args.out:
            write_rows(args.out, rows, COLUMNS)
        if args.md:
            pathlib.Path(args.md).write_text(markdown(rows))
        return
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    names = args.convs.split(",") if args.convs else list(convs.table(DIMS))
    wanted = args.graphs.split(",")
    loaders = dict(graph_cases(only=set(wanted), standins=[w[4:] for w in wanted if w.startswith("sim-")], scale={}))
    missing = [w for w in wanted if w not in loaders]
    if missing:
        print(f"no such graph here (datasets absent?): {', '.join(missing)}")
    start = time.perf_counter()
    rows = []
    if args.out:  # rows are added as each case ends, so that a run cut short keeps what it measured
        write_rows(args.out, [], COLUMNS)
    for gname in (w for w in wanted if w in loaders):
        src, dst, n = loaders[gname]()[:3]
        g = dgl.graph((src, dst), num_nodes=n).to(device)
        for cname in names:
            if time.perf_counter() - start > args.budget_s:
                print(f"budget of {args.budget_s:g} s spent: {cname} on {gname} and after not run")
                break
            try:
                case = bench(cname, g, gname, args, device_name, sync)
            except torch.cuda.OutOfMemoryError:
                print(f"{cname} on {gname}: out of device memory, left out")
            else:
                rows += case
                if args.out:
                    write_rows(args.out, case, COLUMNS, append=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if args.md and rows:
        pathlib.Path(args.md).write_text(markdown(rows))


if __name__ == "__main__":
    main()
