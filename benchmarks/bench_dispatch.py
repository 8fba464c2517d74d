"""Per-call cost of the plugin's dispatch: DGL's _gspmm/_gsddmm entry points called
back to back on one cora-sized graph object, as DGL's autograd functions call them.

For each operator, interleaved round by round in one run:
  dgl      - DGL's own function (the plugin off): DGL's kernel and its Python around it;
  ugraph   - the plugin's replacement: recognition, the graph cache, selection, allocation and
             our kernel;
  dispatch - the same call with the core's launch made a no-op (Plan's run_cpu_with and
             run_cuda_with): every step of the plugin's call but the kernel, the outputs'
             allocation included;
  kernel   - our kernel alone, its call packed once (Prepared.run) into outputs allocated once;
  plan     - the signature's plan run alone (core.ops.Plan: new outputs, data pointers, launch),
             which every repeat call of the plugin ends in.
dispatch is what the plugin adds per call for a graph object DGL has passed before, timed whole
rather than as the small difference of two kernel-sized times (on a slow host those move by more
than it). ugraph - kernel (`ugraph_minus_kernel`) adds to it what the kernel pays for writing
into new outputs rather than the ones it wrote the call before, which DGL's kernel pays as well:
ugraph - plan is the DGL layer, plan - kernel the outputs'
allocation, that writing and the data pointers. With --device cuda (DGL built for CUDA), also:
  ugrapher     - dgl_ugraph.ugrapher, the narrow kernel API (its repeat calls reuse a plan):
                 ugrapher - plan is the plan lookup;
  cusparse     - torch.sparse.mm on a CSR tensor built once (the sums);
  empty_launch - one torch kernel launch on a one-element tensor: the floor of any GPU call;
  two_outputs  - a torch operation that, like max/min with args, returns values and int64
                 indices of the output's shape from one launch (torch.max over a trailing unit
                 dimension): what torch itself pays for a call with two new outputs.
A round's calls end with a device synchronization, inside the time. Column `config` names the
configuration the selector chose (the same for every impl of ours). Medians (and quartiles) of
per-call microseconds over the rounds go to benchmarks/results/dispatch.csv (benchmarks/results/dispatch_gpu.csv on CUDA);
on CUDA, `over_empty` is the median over the rounds of an impl's time over the same round's empty
launch (a host's slow spell moves both).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_dispatch.py [--rounds 15] [--calls 300] [--device cuda]
"""
from __future__ import annotations

import argparse
import contextlib
import pathlib
import platform
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import interception  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402
from dgl_ugraph.dgl.cache import entry_for  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

COLUMNS = ["machine", "torch", "dgl", "threads", "op", "F", "config", "impl", "us_median", "us_p25", "us_p75",
           "over_empty"]


def operators(g, f: int, gen: torch.Generator):
    """name -> (DGL-level call on gidx, the same operator as our OpInfo)."""
    n, e, dev = g.num_nodes(), g.num_edges(), g.device
    x = torch.randn(n, f, generator=gen).to(dev)
    w = torch.rand(e, 1, generator=gen).to(dev)
    el, er = torch.randn(n, 4, 1, generator=gen).to(dev), torch.randn(n, 4, 1, generator=gen).to(dev)
    return {
        "copy_u-sum": (lambda fn, gi: fn["_gspmm"](gi, "copy_lhs", "sum", x, None),
                       OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")),
        "u_mul_e-sum": (lambda fn, gi: fn["_gspmm"](gi, "mul", "sum", x, w),
                        OpInfo("mul", "sum", x, "src", w, "edge", "dst")),
        "copy_u-max": (lambda fn, gi: fn["_gspmm"](gi, "copy_lhs", "max", x, None),
                       OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")),
        "u_add_v": (lambda fn, gi: fn["_gsddmm"](gi, "add", el, er, "u", "v"),
                    OpInfo("add", "none", el, "src", er, "dst", "edge")),
    }


def per_call_us(fn, calls: int, sync=lambda: None) -> float:
    sync()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter_ns() - t0) / calls / 1e3


@contextlib.contextmanager
def launches_stubbed(plans):
    """The plans' launches made no-ops for the `dispatch` impl (Plan.run calls them last, after its
    outputs and data pointers), restored after."""
    def nothing(*_):
        return None
    saved = [(p, p._run_cpu_with, p._run_cuda_with) for p in plans]
    for p, _, _ in saved:
        p._run_cpu_with = p._run_cuda_with = nothing
    try:
        yield
    finally:
        for p, cpu, cuda in saved:
            p._run_cpu_with, p._run_cuda_with = cpu, cuda


def gpu_baselines(g, name: str, op: OpInfo) -> dict:
    """The launch floor; for max, torch's own call with two outputs of its shape; for the sums,
    cuSPARSE on a CSR tensor built once."""
    tiny = torch.zeros(1, device=g.device)
    out = {"empty_launch": lambda: tiny.add_(1)}
    if name == "copy_u-max":
        unit = torch.randn(g.num_nodes(), op.A.shape[1], 1, device=g.device)
        out["two_outputs"] = lambda: torch.max(unit, 2)
    if name in ("copy_u-sum", "u_mul_e-sum"):
        indptr, col, eid = g.adj_tensors("csc")
        vals = op.B[eid.long(), 0] if op.B is not None else torch.ones(g.num_edges(), device=g.device)
        csr = torch.sparse_csr_tensor(indptr.long(), col.long(), vals, (g.num_nodes(), g.num_nodes()))
        out["cusparse"] = lambda: torch.sparse.mm(csr, op.A)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--widths", default="16,64")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--out", default=None, help="default: benchmarks/results/dispatch.csv, benchmarks/results/dispatch_gpu.csv on CUDA")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    out_path = args.out or str(ROOT / "benchmarks" / "results" / ("dispatch_gpu.csv" if cuda else "dispatch.csv"))
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    machine = torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine()

    gen = torch.Generator().manual_seed(0)
    n, e = 2708, 10556  # cora's size
    g = dgl.graph((torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)), num_nodes=n)
    g = g.to(args.device)
    g.create_formats_()
    gidx = g._graph
    dgl_ugraph.enable()
    own = dict(interception._dgl)  # DGL's functions, as enable() captured them
    ours = {"_gspmm": sparse._gspmm, "_gsddmm": sparse._gsddmm}
    assert ours["_gspmm"] is not own["_gspmm"], "the plugin is not routing DGL's calls"
    ugraph = entry_for(gidx).ugraph
    rows = []
    for f in (int(w) for w in args.widths.split(",")):
        for name, (call, op) in operators(g, f, gen).items():
            prepared = policy.prepare(ugraph, op)
            config = str(policy.choose(ugraph, prepared.signature)) if cuda else ""
            impls = {"dgl": lambda: call(own, gidx), "ugraph": lambda: call(ours, gidx),
                     "dispatch": lambda: call(ours, gidx), "kernel": prepared.run,
                     "plan": (lambda plan_: lambda: plan_.run(op.A, op.B))(policy.plan(ugraph, op))}
            if cuda:
                impls["ugrapher"] = lambda: policy.ugrapher(ugraph, op)
                impls.update(gpu_baselines(g, name, op))
            for fn in impls.values():  # warm-up: the decision, the graph cache, allocator pools
                per_call_us(fn, 20, sync)
            # The plans this operator's DGL-level call runs (its decisions were made by the warm-up).
            plans = [d.plan for d in entry_for(gidx).decisions.values() if d.plan is not None]
            assert plans, f"{name}: the plugin's call made no plan"
            samples = {k: [] for k in impls}
            for r in range(args.rounds):
                order = list(impls) if r % 2 == 0 else list(reversed(impls))
                for k in order:
                    with launches_stubbed(plans) if k == "dispatch" else contextlib.nullcontext():
                        samples[k].append(per_call_us(impls[k], args.calls, sync))
            samples["ugraph_minus_kernel"] = [u - k for u, k in zip(samples["ugraph"], samples["kernel"])]
            empty = samples.get("empty_launch")
            over = {impl: round(statistics.median(x / e for x, e in zip(xs, empty)), 3) if empty else ""
                    for impl, xs in samples.items()}
            for impl, xs in samples.items():
                q = statistics.quantiles(xs, n=4)
                rows.append(dict(machine=machine, torch=torch.__version__,
                                 dgl=dgl.__version__, threads=torch.get_num_threads(), op=name, F=f,
                                 config=config, impl=impl,
                                 us_median=round(statistics.median(xs), 2), us_p25=round(q[0], 2),
                                 us_p75=round(q[2], 2), over_empty=over[impl]))
            line = " ".join(f"{r['impl']}={r['us_median']:.1f}" for r in rows[-len(samples):])
            if empty:
                line += f" | ugrapher/empty_launch by round x{over['ugrapher']}"
            print(f"{name:12} F={f:<3} {config} us per call: {line}", flush=True)
    write_rows(out_path, rows, COLUMNS)
    print(f"wrote {len(rows)} rows to {out_path}")


if __name__ == "__main__":
    main()
