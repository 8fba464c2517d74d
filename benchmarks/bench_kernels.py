"""Kernel benchmark on the GPU: our strategies vs cuSPARSE and the torch scatter/gather path.

For each (graph, operator, F): the selector's choice (`ugraph`), the best configuration found by
search (`ugraph_best`) and each strategy's best (`ugraph_<strategy>`), each launched from a
prepared call (the host path is bench_dispatch.py's subject); cuSPARSE through torch.sparse.mm on
CSR (sum cases): `cusparse` as DGL calls it (for u_mul_e, the edge weights gathered into CSR
order first, DGL's IndexSelect, in the time) and `cusparse_presorted` (weights already in CSR
order: cuSPARSE alone); and the index_add_/scatter_reduce/gather path PyG uses
(`torch_scatter`). copy_u-mean's baselines: `cusparse` (DGL's own mean: cuSPARSE's sum, then a
division into a new tensor), `ugraph_sum_div` (our sum divided in place, dgl_ugraph's mean before
the kernel divided it) and `ugraph_replay` (the kernel's mean, timed the same way as those two).
Each graph's run starts with `empty_launch` (op empty_launch, F 0): one torch
kernel on a one-element tensor, timed as the baselines are, the floor under that graph's cases.
--reverse runs every graph with its edges reversed: the aggregations that the backward passes
issue.

Times are kernel times without the host's launch gaps, every impl of a case timed in the same
run, beside the device-to-device copy bandwidth measured in that run (column `timing` says how):
- our configurations (`core_loop`): the compiled core's timing loop, as the collector and the
  autotuner time them (batches queued behind a gate, CUDA events between launches). The search
  runs over the grid and the selector's choice; then the best, each strategy's best and the
  choice are timed again together, every one repeated, and those times are the rows (the
  search's minimum alone would favour ugraph_best with its luckiest sample);
- the baselines (`graph_replay`): CUDA-event medians over replays of a captured CUDA graph of
  back-to-back calls; `events`, per-call CUDA events, where a call is long enough that the launch
  gaps do not count or where capture fails.
On a small graph, per-call events around a Python call measure mostly the host: a 8 us kernel
read 20-30 us that way. Every search timing is also written to a raw file: it is predictor
training data.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import itertools
import math
import pathlib
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.core import _ext, ops, timing  # noqa: E402
from dgl_ugraph.core.abstraction import STRATEGIES, OpInfo, ParallelInfo  # noqa: E402
from dgl_ugraph.core.capability import why_not  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402

# name -> (edge_op, gather, (A type, A shape(F)), (B type, B shape(F)))
OPERATORS = {
    "copy_u-sum": ("copy_lhs", "sum", ("src", lambda f: (f,)), None),
    "u_mul_e-sum": ("mul", "sum", ("src", lambda f: (f,)), ("edge", lambda f: (1,))),
    "copy_u-max": ("copy_lhs", "max", ("src", lambda f: (f,)), None),
    "copy_u-mean": ("copy_lhs", "mean", ("src", lambda f: (f,)), None),
    # GAT's aggregation, the attention (E, H, 1) over H heads of F / H features: H = 4 keeps the
    # unnumbered name; the GAT bar names H = 1, 4 and 8.
    "gat_u_mul_e-sum": ("mul", "sum", ("src", lambda f: (4, f // 4)), ("edge", lambda f: (4, 1))),
    "gat1_u_mul_e-sum": ("mul", "sum", ("src", lambda f: (1, f)), ("edge", lambda f: (1, 1))),
    "gat8_u_mul_e-sum": ("mul", "sum", ("src", lambda f: (8, f // 8)), ("edge", lambda f: (8, 1))),
    "u_add_v": ("add", "none", ("src", lambda f: (4, f // 4)), ("dst", lambda f: (4, f // 4))),
    "u_mul_v": ("mul", "none", ("src", lambda f: (4, f // 4)), ("dst", lambda f: (4, f // 4))),
    "u_dot_v": ("dot", "none", ("src", lambda f: (f,)), ("dst", lambda f: (f,))),
}
# The suite's operators; the ones below run where --ops names them.
SUITE_OPS = tuple(OPERATORS)
# NNConv's aggregation: node rows (k, 1) broadcast against per-edge (k, k) matrices, F = k * k
# outputs a row (F a square: 16, 64, 256); the edge operand is k times the node one.
OPERATORS.update({
    f"nnconv_u_mul_e-{red}": ("mul", red, ("src", lambda f: (math.isqrt(f), 1)),
                              ("edge", lambda f: (math.isqrt(f), math.isqrt(f))))
    for red in ("sum", "max")})
GAT_OPS = tuple(name for name in OPERATORS if name.startswith("gat"))
# "none" times the selector's choice alone (no search, no ugraph_best rows): the whole suite then
# fits one device call, for bars that need only impl=ugraph and the baselines.
GRIDS = {
    "quick": ((1, 4, 16, 64), (1, 2, 4, 8, 32, 64)),
    "full": ((1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8, 16, 32, 64)),
    "none": ((), ()),
}
COLUMNS = ["device", "graph", "V", "E", "std_deg", "op", "F", "dtype", "impl", "config", "ms",
           "bytes_compulsory", "bytes_noreuse", "copy_GBps", "timing"]
# The search screens every configuration once and repeats those within 2.5x of the best; the
# finalists are then all repeated for about FINAL_MS of kernel time each.
SEARCH_POLICY = timing.TimingPolicy(cut=2.5, target_ms=2.0, min_reps=3, max_reps=20)
FINAL_POLICY = timing.TimingPolicy(cut=None, target_ms=5.0, min_reps=10, max_reps=100)


def time_ms(fn, reps: int, warmup: int = 2) -> float:
    """Median of per-call CUDA-event times over `reps` back-to-back calls."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def replay_ms(fn, reps: int = 10, target_ms: float = 1.0, max_calls: int = 64):
    """(ms, method): the median per-call time of `fn` over `reps` replays of a CUDA graph of
    back-to-back calls (enough calls for about `target_ms` a replay), or per-call events for a
    call of at least half that (its launch gap is noise there) or one that cannot be captured."""
    est = time_ms(fn, 3, 2)
    if est >= target_ms / 2:
        return time_ms(fn, reps, 0), "events"
    calls = max(1, min(max_calls, math.ceil(target_ms / max(est, 1e-3))))
    graph = torch.cuda.CUDAGraph()
    try:
        # Capture wants the call's lazy setup (handles, workspaces) done on a side stream first.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
    except Exception as exc:  # noqa: BLE001 - a library call that cannot be captured is timed per call
        torch.cuda.synchronize()
        print(f"  capture failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
              "timed with per-call events", flush=True)
        return time_ms(fn, reps, 0), "events"
    return time_ms(graph.replay, reps, 1) / calls, "graph_replay"


def copy_bandwidth_gbps() -> float:
    x = torch.empty(2 ** 28, dtype=torch.float32, device="cuda").uniform_()
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), 20, 3)
    return 2 * x.numel() * 4 / (ms * 1e-3) / 1e9


def operator_call(name, graph: UGraph, f: int, make) -> OpInfo:
    """Operator `name` at width f on the graph, each operand made by make(shape)."""
    edge_op, gather, a_spec, b_spec = OPERATORS[name]
    rows = {"src": graph.num_src, "dst": graph.num_dst, "edge": graph.num_edges}

    def tensor(spec):
        if spec is None:
            return None, "null"
        ttype, shape = spec
        return make((rows[ttype],) + shape(f)), ttype

    a, at = tensor(a_spec)
    b, bt = tensor(b_spec)
    return OpInfo(edge_op, gather, a, at, b, bt, "edge" if gather == "none" else "dst")


def make_inputs(name, graph: UGraph, f: int, dtype, gen):
    return operator_call(name, graph, f, lambda shape: torch.rand(
        shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype) + 0.5)


def byte_counts(op: OpInfo, graph: UGraph, out: torch.Tensor):
    isz = graph.col.element_size()
    fsz = out.element_size()
    operands = [(t, ty) for t, ty in ((op.A, op.A_type), (op.B, op.B_type)) if t is not None]
    # Every output: C, and for max/min an arg per operand the op reads (graph.idtype, C's shape).
    args = len(operands) if op.gather_op in ("max", "min") else 0
    written = out.numel() * (fsz + args * isz)
    compulsory = sum(t.numel() * fsz for t, _ in operands) + written
    noreuse = written
    for t, ty in operands:
        noreuse += graph.num_edges * (t.numel() // t.shape[0]) * fsz
    idx = graph.num_edges * isz * (2 if op.gather_op == "none" else 1)  # col (+ row for SDDMM)
    if graph.eid is not None and (op.gather_op == "none" or "edge" in (op.A_type, op.B_type)):
        idx += graph.num_edges * isz
    if op.gather_op != "none":
        idx += (graph.num_dst + 1) * isz
    return compulsory + idx, noreuse + idx


def baselines(name, op: OpInfo, graph: UGraph):
    """{impl: callable} for the cuSPARSE and torch paths that compute this operator."""
    col, row = graph.col.long(), graph.row.long()
    eid = graph.eid.long() if graph.eid is not None else torch.arange(graph.num_edges, device="cuda")
    out = {}
    a, b = op.A, op.B

    def csr_of(vals):
        return torch.sparse_csr_tensor(graph.indptr.long(), col, vals, (graph.num_dst, graph.num_src))
    if name == "copy_u-mean":
        # DGL's own mean (cuSPARSE's sum, then its division into a new tensor), and dgl_ugraph's
        # before the division moved into the kernel (our sum, divided in place); ugraph_replay is
        # the kernel's mean timed the same way.
        deg = torch.diff(graph.indptr.long()).clamp(min=1).to(a.dtype).reshape((-1,) + (1,) * (a.dim() - 1))
        sum_plan = policy.plan(graph, OpInfo("copy_lhs", "sum", a, "src", None, "null", "dst"))
        mean_plan = policy.plan(graph, op)
        if a.dtype in (torch.float32, torch.float64):
            ones = csr_of(torch.ones(graph.num_edges, device="cuda", dtype=a.dtype))
            out["cusparse"] = lambda: torch.sparse.mm(ones, a) / deg
        out["ugraph_sum_div"] = lambda: sum_plan.run(a, None)[0].div_(deg)
        out["ugraph_replay"] = lambda: mean_plan.run(a, None)[0]
    if name in ("copy_u-sum", "u_mul_e-sum") and a.dtype in (torch.float32, torch.float64):
        if b is None:
            csr = csr_of(torch.ones(graph.num_edges, device="cuda", dtype=a.dtype))
            out["cusparse"] = lambda: torch.sparse.mm(csr, a)
        else:
            presorted = csr_of(b[eid, 0].contiguous())
            out["cusparse"] = lambda: torch.sparse.mm(csr_of(b[eid, 0]), a)
            out["cusparse_presorted"] = lambda: torch.sparse.mm(presorted, a)
    n_out = graph.num_dst
    if name == "copy_u-sum":
        out["torch_scatter"] = lambda: torch.zeros((n_out,) + a.shape[1:], device="cuda", dtype=a.dtype).index_add_(0, row, a.index_select(0, col))
    elif name in ("u_mul_e-sum",) + GAT_OPS:
        out["torch_scatter"] = lambda: torch.zeros((n_out,) + a.shape[1:], device="cuda", dtype=a.dtype).index_add_(0, row, a.index_select(0, col) * b.index_select(0, eid))
    elif name == "copy_u-max":
        idx = row.view(-1, 1).expand(-1, a.shape[1])
        out["torch_scatter"] = lambda: torch.full((n_out, a.shape[1]), float("-inf"), device="cuda", dtype=a.dtype).scatter_reduce_(0, idx, a.index_select(0, col), "amax", include_self=True)
    elif name in ("u_add_v", "u_mul_v", "u_dot_v"):
        fn = {"u_add_v": torch.add, "u_mul_v": torch.mul}.get(name)

        def sddmm():
            x, y = a.index_select(0, col), b.index_select(0, row)
            msg = fn(x, y) if fn else (x * y).sum(-1, keepdim=True)
            res = torch.empty_like(msg)
            res[eid] = msg
            return res
        out["torch_scatter"] = sddmm
    return out


def op_dtype_bytes(op: OpInfo) -> int:
    return (op.A if op.A is not None else op.B).element_size()


def dot_slabs(sig, dtype_bytes: int) -> int:
    """Slabs of a dot message row in the warp strategies (csrc/cuda/team.cuh, dot_layout): a
    head's products over L lanes of 16-byte vectors (scalars where K or a broadcast forbids
    them), T / L heads per team of at most 32 lanes."""
    vec = 16 // dtype_bytes
    vec = vec if sig.reduce_size % vec == 0 and not sig.broadcast else 1
    lanes = min(32, 1 << max(0, math.ceil(sig.reduce_size / vec) - 1).bit_length())
    heads_per_slab = min(32 // lanes, 1 << max(0, sig.out_len - 1).bit_length())
    return max(1, math.ceil(sig.out_len / heads_per_slab))


def grid_configs(op: OpInfo, graph: UGraph, grid, strategies=STRATEGIES) -> list:
    """The grid's configurations that the compiled core can run for this call, without tilings
    past the point where a worker owns nothing."""
    sig, _ = ops.signature(graph, op)
    compiled = _ext.compiled_cuda_keys()
    groupings, tilings = grid
    out = []
    for strategy in strategies:
        if why_not(strategy, sig, graph.num_edges, compiled):
            continue
        # A thread owns one element, a dot's warp team a slab of heads (team.cuh's dot_layout),
        # the other ops' warp teams a slab of 32 lanes x 16 bytes.
        if not strategy.startswith("warp"):
            max_t = max(1, sig.width)
        elif op.edge_op == "dot":
            max_t = dot_slabs(sig, op_dtype_bytes(op))
        else:
            max_t = max(1, math.ceil(sig.out_len * op_dtype_bytes(op) / (32 * 16)))
        out += [ParallelInfo(strategy, g, t) for g, t in itertools.product(groupings, tilings) if t <= max_t]
    return out


def best_per_strategy(times: dict) -> dict:
    """{strategy: its fastest configuration in `times` ({config: ms})}, in STRATEGIES order."""
    return {s: min(mine, key=times.get) for s in STRATEGIES for mine in [[c for c in times if c.strategy == s]] if mine}


def finalists(searched: dict, chosen: ParallelInfo) -> list:
    """What is timed again after the search: the best configuration, each strategy's best and the
    selector's choice, once each."""
    return list(dict.fromkeys([min(searched, key=searched.get), *best_per_strategy(searched).values(), chosen]))


def search(op: OpInfo, graph: UGraph, grid, strategies, chosen: ParallelInfo):
    """({config: ms} of the search over the grid and `chosen`, {config: ms} of the finalists
    timed again together), both on the core's timing loop."""
    configs = list(dict.fromkeys(grid_configs(op, graph, grid, strategies) + [chosen]))
    runner = timing.CudaRunner(graph, op, chosen)
    searched = {t.config: t.ms for t in timing.time_configs(runner, configs, SEARCH_POLICY)
                if t.status in ("ok", "cut")}
    if not searched:
        raise RuntimeError(f"no configuration of {configs} ran")
    final = {t.config: t.ms for t in timing.time_configs(runner, finalists(searched, chosen), FINAL_POLICY)
             if t.status == "ok"}
    return searched, final


def graphs(args):
    specs = ([] if args.no_standins else list(gs.PAPER_STANDINS)) + ([] if args.no_large else list(gs.LARGE))
    if args.scale != 1.0:
        specs = [gs.scaled(s, args.scale) for s in specs]
    only = set(args.only.split(",")) if args.only else None
    skip = set(args.skip.split(",")) if args.skip else set()

    def wanted(name):
        return name not in skip and (only is None or name in only)
    for spec in specs:
        if wanted(spec.name):
            yield (spec.name,) + gs.make(spec)
    if not args.no_datasets:
        if gs.datasets_dir() is None:
            print("datasets: none found (set DGL_UGRAPH_DATASETS): the real graphs are left out", flush=True)
        # Prefixed: the stand-ins of Table 3 share names (cora, citeseer, pubmed) with real graphs.
        yield from (("ds-" + d[0],) + d[1:] for d in gs.shared_datasets() if wanted("ds-" + d[0]))


def empty_launch_row(graph, gname, device, copy_gbps) -> dict:
    """impl=empty_launch: one torch kernel on a one-element tensor, timed as the baselines are
    (CUDA-graph replay): the floor under every case of this graph's run (op empty_launch, F 0)."""
    tiny = torch.zeros(1, device="cuda")
    ms, how = replay_ms(lambda: tiny.add_(1))
    return dict(device=device, graph=gname, V=graph.num_dst, E=graph.num_edges, std_deg=round(graph.stats.std, 3),
                op="empty_launch", F=0, dtype="float32", impl="empty_launch", config="", ms=round(ms, 5),
                bytes_compulsory=0, bytes_noreuse=0, copy_GBps=round(copy_gbps, 1), timing=how)


def bench_case(graph, gname, name, f, dtype, gen, grid, args, device, copy_gbps):
    """(rows, search rows) of one (graph, operator, F, dtype) case."""
    st = graph.stats
    op = make_inputs(name, graph, f, dtype, gen)
    c = policy.ugrapher(graph, op)[0]
    bc, bn = byte_counts(op, graph, c)
    del c
    base = dict(device=device, graph=gname, V=graph.num_dst, E=graph.num_edges, std_deg=round(st.std, 3), op=name,
                F=f, dtype=str(dtype).replace("torch.", ""), bytes_compulsory=bc, bytes_noreuse=bn,
                copy_GBps=round(copy_gbps, 1))
    chosen = policy.choose(graph, ops.signature(graph, op)[0])
    case = []
    if grid[0]:
        searched, final = search(op, graph, grid, args.strategies.split(","), chosen)
        for strategy, c in best_per_strategy(final).items():
            case.append(dict(base, impl=f"ugraph_{strategy}", config=str(c), ms=round(final[c], 5), timing="core_loop"))
        best = min(final, key=final.get)
        case.append(dict(base, impl="ugraph_best", config=str(best), ms=round(final[best], 5), timing="core_loop"))
    else:
        searched = {}
        final = {t.config: t.ms for t in timing.time_configs(timing.CudaRunner(graph, op, chosen), [chosen], FINAL_POLICY)
                 if t.status == "ok"}
    search_rows = [dict(base, impl=c.strategy, config=str(c), ms=round(ms, 5), timing="core_loop")
                   for c, ms in searched.items()]
    if chosen in final:
        case.append(dict(base, impl="ugraph", config=str(chosen), ms=round(final[chosen], 5), timing="core_loop"))
    else:
        print(f"{gname} {name} F={f}: the selector's choice {chosen} did not run", flush=True)
    for impl, fn in baselines(name, op, graph).items():
        try:
            ms, how = replay_ms(fn)
            case.append(dict(base, impl=impl, config="", ms=round(ms, 5), timing=how))
        except torch.OutOfMemoryError:  # torch's gather path materializes E x F messages
            print(f"{gname} {name} F={f}: {impl} does not fit in device memory", flush=True)
            torch.cuda.empty_cache()
    print(f"{gname:28} {name:16} F={f:<4} " + " ".join(
        f"{r['impl']}={r['ms']:.4f}" for r in case if not r["impl"].startswith("ugraph_") or r["impl"] == "ugraph_best"),
        flush=True)
    return case, search_rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "kernels.csv"))
    ap.add_argument("--search-out", default=str(ROOT / "benchmarks" / "results" / "kernels_search.csv.gz"))
    ap.add_argument("--widths", default="16,64,256")
    ap.add_argument("--ops", default=",".join(SUITE_OPS), help=f"of {', '.join(OPERATORS)}")
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--grid", choices=GRIDS, default="quick")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="the strategies searched for ugraph_best")
    ap.add_argument("--scale", type=float, default=1.0, help="shrink the synthetic graphs (smoke runs)")
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--no-datasets", action="store_true")
    ap.add_argument("--no-standins", action="store_true", help="leave out the uGrapher paper's stand-ins")
    ap.add_argument("--only", default="", help="comma-separated graph names to run (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated graph names to leave out")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new graphs after this")
    ap.add_argument("--reverse", action="store_true", help="reverse every graph's edges (named <graph>-rev)")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.cuda.get_device_name()
    copy_gbps = copy_bandwidth_gbps()
    print(f"{device}: copy bandwidth {copy_gbps:.0f} GB/s (read+write)", flush=True)
    widths = [int(x) for x in args.widths.split(",")]
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    grid = GRIDS[args.grid]
    t0 = time.time()
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows, search_rows = [], []
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    # Rows are written as each case ends, so that a run cut short keeps what it measured.
    with open(args.out, "w", newline="") as out_fh, gzip.open(args.search_out, "wt", newline="") as search_fh:
        out_csv, search_csv = csv.DictWriter(out_fh, COLUMNS), csv.DictWriter(search_fh, COLUMNS)
        out_csv.writeheader()
        search_csv.writeheader()
        for gname, src, dst, n in graphs(args):
            if time.time() - t0 > args.budget_s:
                print(f"budget reached: stopping before {gname}", flush=True)
                break
            if args.reverse:
                gname, src, dst = gname + "-rev", dst, src
            graph = UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)
            floor = empty_launch_row(graph, gname, device, copy_gbps)
            rows.append(floor)
            out_csv.writerow(floor)
            for name, f, dtype in itertools.product(args.ops.split(","), widths, dtypes):
                if name.startswith("nnconv") and math.isqrt(f) ** 2 != f:
                    continue  # its F is k * k
                try:
                    case, found = bench_case(graph, gname, name, f, dtype, gen, grid, args, device, copy_gbps)
                except torch.OutOfMemoryError:  # an E x F message tensor on the largest graphs
                    print(f"{gname} {name} F={f}: does not fit in device memory", flush=True)
                    torch.cuda.empty_cache()
                    continue
                rows += case
                search_rows += found
                out_csv.writerows(case)
                search_csv.writerows(found)
                out_fh.flush()
            del graph
            torch.cuda.empty_cache()
    print(f"wrote {len(rows)} rows to {args.out} and {len(search_rows)} search timings to {args.search_out} "
          f"in {time.time() - t0:.0f} s")
    if not rows:
        # A suite part that measured nothing would pass for one that measured: an acceptance run
        # must say so.
        sys.exit("no graph was measured: check --only/--skip/--no-* and the datasets folder")


if __name__ == "__main__":
    main()
