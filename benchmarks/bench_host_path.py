"""Host cost of a repeat operator call on CPU: the Python around the compiled core,
on a graph so small that the kernel itself is a fraction of a microsecond.

Per operator, each call timed back to back (per round, the median of 5 blocks of calls/5
calls; medians and quartiles of per-call microseconds over the rounds):
  empty      - torch.empty of the output: the allocation every path pays;
  raw        - the compiled core's run_cpu on params packed once: the kernel and the binding;
  prepared   - core.ops.Prepared.run: the same through the Python launch;
  plan       - core.ops.Plan.run with the call's operands: outputs, data pointers, launch;
  ugrapher   - dgl_ugraph.ugrapher, the narrow API (policy key, plan cache, Plan.run);
  dgl_path   - DGL's _gspmm/_gsddmm entry point with the plugin on (recognition, graph cache,
               Plan.run), as DGL's autograd functions call it;
  dgl        - DGL's own function, the plugin off;
and, from the same rounds, ugrapher_host = ugrapher - raw (what the narrow API adds to the
binding's call) and dispatch = dgl_path - prepared (benchmarks/results/dispatch.csv's measure).

On the GPU the same Python runs, except the launch (torch.empty goes to the caching allocator
and run_cuda launches asynchronously), so these are the host costs that a small graph pays there.

With --against TREE, a second checkout (its compiled core in place, e.g. a worktree of the base
commit) runs the same benchmark in a process of its own; the two alternate round by round, so
that both see the same machine load. Each tree's process imports its own dgl_ugraph.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_host_path.py [--against ../base] [--rounds 15]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
COLUMNS = ["machine", "torch", "dgl", "threads", "tree", "commit", "op", "F", "impl", "us_median", "us_p25",
           "us_p75", "rounds", "calls"]
BLOCKS = 5  # per round and implementation
IMPLS = ("empty", "raw", "prepared", "plan", "ugrapher", "dgl_path", "dgl")


# ---- the worker: one tree's dgl_ugraph, timing one round per request ----------------------------

def _worker(nodes: int, edges: int, width: int, calls: int, threads: int) -> None:
    # Imported here, not at the top: the driver imports nothing of dgl_ugraph, and each worker
    # imports its own tree's (its PYTHONPATH).
    import torch
    torch.set_num_threads(threads)
    import dgl
    from dgl.backend.pytorch import sparse

    import dgl_ugraph
    from dgl_ugraph.core import ops
    from dgl_ugraph.core.abstraction import OpInfo
    from dgl_ugraph.dgl import interception
    from dgl_ugraph.dgl.cache import entry_for
    from dgl_ugraph.selection import policy

    gen = torch.Generator().manual_seed(0)
    g = dgl.graph((torch.randint(0, nodes, (edges,), generator=gen),
                   torch.randint(0, nodes, (edges,), generator=gen)), num_nodes=nodes)
    g.create_formats_()
    gidx = g._graph
    dgl_ugraph.enable()
    own = dict(interception._dgl)
    ours = {"_gspmm": sparse._gspmm, "_gsddmm": sparse._gsddmm}
    ugraph = entry_for(gidx).ugraph
    x = torch.randn(nodes, width, generator=gen)
    w = torch.rand(edges, 1, generator=gen)
    el, er = torch.randn(nodes, 4, 1, generator=gen), torch.randn(nodes, 4, 1, generator=gen)
    cases = {
        "copy_u-sum": (lambda fn: fn["_gspmm"](gidx, "copy_lhs", "sum", x, None),
                       OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")),
        "u_mul_e-sum": (lambda fn: fn["_gspmm"](gidx, "mul", "sum", x, w),
                        OpInfo("mul", "sum", x, "src", w, "edge", "dst")),
        "copy_u-max": (lambda fn: fn["_gspmm"](gidx, "copy_lhs", "max", x, None),
                       OpInfo("copy_lhs", "max", x, "src", None, "null", "dst")),
        "u_add_v": (lambda fn: fn["_gsddmm"](gidx, "add", el, er, "u", "v"),
                    OpInfo("add", "none", el, "src", er, "dst", "edge")),
    }
    core = ops._ext.core()
    impls = {}
    for name, (call, op) in cases.items():
        prepared = policy.prepare(ugraph, op)
        plan = ops.Plan(ugraph, op)
        c = prepared.outputs[0]
        impls[name] = {
            "empty": lambda c=c: torch.empty(c.shape, dtype=c.dtype, device=c.device),
            "raw": lambda p=prepared.params: core.run_cpu(p),
            "prepared": prepared.run,
            "plan": lambda plan=plan, op=op: plan.run(op.A, op.B),
            "ugrapher": lambda op=op: policy.ugrapher(ugraph, op),
            "dgl_path": lambda call=call: call(ours),
            "dgl": lambda call=call: call(own),
        }

    block = max(1, calls // BLOCKS)

    def per_call_us(fn) -> float:
        """The median over BLOCKS blocks of back-to-back calls: a preemption on a shared
        machine spoils one block, not the round."""
        times = []
        for _ in range(BLOCKS):
            t0 = time.perf_counter_ns()
            for _ in range(block):
                fn()
            times.append((time.perf_counter_ns() - t0) / block / 1e3)
        return statistics.median(times)

    for by_impl in impls.values():  # warm-up: decisions, plans, the allocator
        for fn in by_impl.values():
            for _ in range(50):
                fn()
    meta = dict(machine=platform.processor() or platform.machine(), torch=torch.__version__,
                dgl=dgl.__version__, threads=torch.get_num_threads())
    print(json.dumps(meta), flush=True)
    for line in sys.stdin:
        reverse = line.strip() == "reverse"
        out = {}
        for name, by_impl in impls.items():
            order = list(by_impl)[::-1] if reverse else list(by_impl)
            out[name] = {k: per_call_us(by_impl[k]) for k in order}
        print(json.dumps(out), flush=True)


# ---- the driver ---------------------------------------------------------------------------------

def _commit(tree: pathlib.Path) -> str:
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head + ("+dirty" if dirty else "")


def _start(tree: pathlib.Path, args) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", "--nodes", str(args.nodes),
           "--edges", str(args.edges), "--width", str(args.width), "--calls", str(args.calls),
           "--threads", str(args.threads)]
    return subprocess.Popen(cmd, env=env, cwd=str(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _quartiles(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return round(statistics.median(xs), 2), round(q[0], 2), round(q[2], 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default=None, help="a second checkout to time in alternation (e.g. the base)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--edges", type=int, default=400)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="torch and core threads (1: no pool wake-ups)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "host_path_cpu.csv"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.nodes, args.edges, args.width, args.calls, args.threads)
        return
    trees = {"this": ROOT}
    if args.against:
        trees["against"] = pathlib.Path(args.against).resolve()
    workers = {k: _start(t, args) for k, t in trees.items()}
    meta = {k: json.loads(w.stdout.readline()) for k, w in workers.items()}
    samples = {k: {} for k in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for k in order:
            workers[k].stdin.write("reverse\n" if r % 2 else "forward\n")
            workers[k].stdin.flush()
            for op, by_impl in json.loads(workers[k].stdout.readline()).items():
                for impl, us in by_impl.items():
                    samples[k].setdefault((op, impl), []).append(us)
    for w in workers.values():
        w.stdin.close()
        w.wait()
    rows = []
    for k, tree in trees.items():
        s = samples[k]
        for op in dict.fromkeys(op for op, _ in s):
            s[(op, "ugrapher_host")] = [u - r for u, r in zip(s[(op, "ugrapher")], s[(op, "raw")])]
            s[(op, "dispatch")] = [d - p for d, p in zip(s[(op, "dgl_path")], s[(op, "prepared")])]
            for impl in IMPLS + ("ugrapher_host", "dispatch"):
                med, p25, p75 = _quartiles(s[(op, impl)])
                rows.append(dict(meta[k], tree=k, commit=_commit(tree), op=op, F=args.width, impl=impl,
                                 us_median=med, us_p25=p25, us_p75=p75, rounds=args.rounds, calls=args.calls))
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        w.writerows(rows)
    by = {(r["tree"], r["op"], r["impl"]): r for r in rows}
    print(f"{'op':12} {'impl':14} " + " ".join(f"{k + ' (' + _commit(t) + ')':>26}" for k, t in trees.items()))
    for op in dict.fromkeys(r["op"] for r in rows):
        for impl in IMPLS + ("ugrapher_host", "dispatch"):
            cells = []
            for k in trees:
                r = by[(k, op, impl)]
                cells.append(f"{r['us_median']:8.2f} [{r['us_p25']:6.2f},{r['us_p75']:6.2f}]")
            print(f"{op:12} {impl:14} " + " ".join(f"{c:>26}" for c in cells))
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
