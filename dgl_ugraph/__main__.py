"""python -m dgl_ugraph: run a DGL script with the plugin on, show the build, or run the demo.

    python -m dgl_ugraph script.py [args...]   run script.py unchanged, with dgl_ugraph on
    python -m dgl_ugraph -m package.module [args...]
    python -m dgl_ugraph info                  what was built, and what this machine has
    python -m dgl_ugraph demo [--edges N ...]  GCN/GAT/GIN/SAGE with the plugin on and off, timed fairly
    python -m dgl_ugraph tune [--quick]        re-collect strategy timings on this GPU and retrain

DGL_UGRAPH=0 keeps DGL's own kernels even here (handy for A/B runs of one command line).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import runpy
import sys
import time

from dgl_ugraph import settings
from dgl_ugraph.core import _ext
from dgl_ugraph.dgl import interception
from dgl_ugraph.dgl import patterns
from dgl_ugraph.dgl.stats import report, reset_stats, stats

USAGE = __doc__.split("\n\n")[1]


def run_script(argv):
    """Runs a script (or `-m module`) as `python` would, with dgl_ugraph enabled by the package
    import that got us here (it enables itself when the script imports DGL)."""
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.exit("python -m dgl_ugraph -m needs a module name")
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    path = argv[0]
    if not os.path.exists(path):
        sys.exit(f"python -m dgl_ugraph: can't open file {path!r}\n{USAGE}")
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    runpy.run_path(path, run_name="__main__")


def info():
    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from importlib.metadata import version
        pkg_version = version("dgl_ugraph")
    except Exception:
        pkg_version = "source checkout"
    print(f"dgl_ugraph {pkg_version} at {here}")
    if _ext._C is None:
        print(f"compiled core: not available ({_ext.LOAD_ERROR})")
    else:
        build = _ext._C.build_info()
        print("compiled core:")
        for key in sorted(build):
            print(f"  {key}: {build[key]}")
        keys = sorted(_ext.compiled_cuda_keys())
        if keys:
            print("  CUDA strategies/dtypes: " + ", ".join(f"{s}/{d}" for s, d in keys))
    cuda = torch.cuda.is_available()
    gpu = f"{torch.cuda.get_device_name(0)} (capability {'.'.join(map(str, torch.cuda.get_device_capability(0)))})" \
        if cuda else "none"
    print(f"torch {torch.__version__} (built with CUDA {torch.version.cuda}); GPU seen: {gpu}")
    low, high = interception.SUPPORTED_DGL
    try:
        import dgl
        print(f"DGL {dgl.__version__} (dgl_ugraph supports {low[0]}.{low[1]} to {high[0]}.{high[1]}); "
              f"interception {'on' if interception.is_enabled() else 'off'} (DGL_UGRAPH={settings.on_import_text()})")
    except ImportError:
        print("DGL: not installed (the kernel API dgl_ugraph.ugrapher still works)")
    print("tested on CPU with: " + ", ".join(f"DGL {d} + torch {t}" for d, t in interception.TESTED))
    table = patterns.table()
    print(f"switching table: {patterns.table_path()} ({len(table['mapped'])} mapped kernel patterns, "
          f"{len(table['unsupported'])} unsupported, {len(table['builtins'])} DGL builtins described)")


def skewed_graph(nodes: int, edges: int, seed: int = 0):
    """Sources uniform, destinations Zipf-like: a few hub rows hold many in-edges, as in social graphs."""
    import torch

    import dgl

    gen = torch.Generator().manual_seed(seed)
    popularity = 1.0 / torch.arange(1, nodes + 1, dtype=torch.float64) ** 0.9
    dst = torch.multinomial(popularity, edges, replacement=True, generator=gen)
    dst = torch.randperm(nodes, generator=gen)[dst]
    src = torch.randint(0, nodes, (edges,), generator=gen)
    return dgl.add_self_loop(dgl.graph((src, dst), num_nodes=nodes))


def _demo_models(feat: int, classes: int):
    import torch.nn as nn

    import dgl.nn as dglnn

    class TwoLayer(nn.Module):
        def __init__(self, first, second, heads=False):
            super().__init__()
            self.first, self.second, self.heads = first, second, heads

        def forward(self, g, x):
            h = self.first(g, x)
            h = h.flatten(1).relu() if self.heads else h.relu()
            h = self.second(g, h)
            return h.mean(1) if self.heads else h

    hidden = 32
    return {
        "GCN": lambda: TwoLayer(dglnn.GraphConv(feat, hidden), dglnn.GraphConv(hidden, classes)),
        "GAT (4 heads)": lambda: TwoLayer(dglnn.GATConv(feat, hidden // 4, 4), dglnn.GATConv(hidden, classes, 1),
                                          heads=True),
        "GIN-sum": lambda: TwoLayer(dglnn.GINConv(nn.Linear(feat, hidden), "sum"),
                                    dglnn.GINConv(nn.Linear(hidden, classes), "sum")),
        "GIN-max": lambda: TwoLayer(dglnn.GINConv(nn.Linear(feat, hidden), "max"),
                                    dglnn.GINConv(nn.Linear(hidden, classes), "max")),
        "SAGE-mean": lambda: TwoLayer(dglnn.SAGEConv(feat, hidden, "mean"), dglnn.SAGEConv(hidden, classes, "mean")),
        "SAGE-pool": lambda: TwoLayer(dglnn.SAGEConv(feat, hidden, "pool"), dglnn.SAGEConv(hidden, classes, "pool")),
    }


def _step(model, g, x):
    """One forward and backward; returns the output and every parameter's gradient."""
    model.zero_grad()
    out = model(g, x)
    out.square().sum().backward()
    return out.detach(), [p.grad.detach().clone() for p in model.parameters()]


def _relative(ours, theirs) -> float:
    return ((ours - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30)).item()


def _quartiles(xs):
    """(first quartile, median, third quartile), interpolating as numpy's default does."""
    s = sorted(xs)

    def at(q):
        pos = q * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return at(0.25), at(0.5), at(0.75)


def verdict(on_times, off_times):
    """(speedup, (q1, q3) of the paired ratios, 'faster' | 'slower' | 'within noise').

    The speedup is the ratio of the medians. Steps i of both sides ran next to each other, so
    off_i / on_i cancels what the machine was doing at that moment; a difference is outside the
    noise when the middle half of those paired ratios lies entirely above (or below) 1."""
    ratios = [off / on for on, off in zip(on_times, off_times)]
    q1, _, q3 = _quartiles(ratios)
    speedup = _quartiles(off_times)[1] / _quartiles(on_times)[1]
    kind = "faster" if q1 > 1.0 else "slower" if q3 < 1.0 else "within noise"
    return speedup, (q1, q3), kind


def _interleaved(model, g, x, steps, warmup, sync):
    """Times `steps` forward+backward steps with the plugin on and as many with it off, one of
    each after the other (the side that goes first alternates), after `warmup` untimed steps per
    side that build every cache (graph formats, our CSC and reverse graph, decisions, DGL's own).
    Returns the first step's results of each side and both lists of seconds."""
    def one(on):
        ctx = contextlib.nullcontext() if on else interception.disabled()
        with ctx:
            sync()
            start = time.perf_counter()
            result = _step(model, g, x)
            sync()
            return result, time.perf_counter() - start

    first = {}
    for _ in range(warmup):
        for on in (True, False):
            first.setdefault(on, one(on)[0])
    times = {True: [], False: []}
    for i in range(steps):
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            times[on].append(one(on)[1])
    return first[True], first[False], times[True], times[False]


def pick_device(name: str):
    """`auto`: the GPU when torch sees one and DGL runs there (DGL's CPU builds refuse CUDA
    graphs), else the CPU. Returns the device and why it was chosen."""
    import torch

    if name != "auto":
        return torch.device(name), "asked for"
    if not torch.cuda.is_available():
        return torch.device("cpu"), "auto: torch sees no GPU"
    import dgl

    try:
        with interception.disabled():
            g = dgl.graph(([0], [0])).to("cuda")
            dgl.ops.copy_u_sum(g, torch.ones(1, 1, device="cuda"))
    except Exception as exc:  # a CPU build of DGL raises on the first CUDA graph
        return torch.device("cpu"), f"auto: torch sees a GPU but DGL does not run there ({str(exc).splitlines()[0][:80]})"
    return torch.device("cuda"), "auto: GPU"


def demo(argv):
    parser = argparse.ArgumentParser(prog="python -m dgl_ugraph demo",
                                     description="GCN/GAT/GIN/SAGE forward+backward with dgl_ugraph on and off")
    parser.add_argument("--nodes", type=int, default=40000)
    parser.add_argument("--edges", type=int, default=400000)
    parser.add_argument("--feat", type=int, default=32)
    parser.add_argument("--steps", type=int, default=15, help="timed steps per side (at least 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per side before timing")
    parser.add_argument("--device", default="auto", help="auto (GPU if DGL runs there), cpu, cuda, cuda:N")
    args = parser.parse_args(argv)
    if args.steps < 10:
        parser.error("--steps must be at least 10: fewer gives no usable spread")
    if args.warmup < 1:
        parser.error("--warmup must be at least 1: the first step builds the caches")
    # Other work on the machine before the demo's own: what the timings cannot separate from the plugin.
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    # Every step reuses one graph, as training does: it tiers up on its first call (and stays so),
    # so that the warm-up builds dgl_ugraph's caches and the first step's results, compared with
    # DGL's, are dgl_ugraph's (a CUDA graph's first calls would otherwise run on DGL's kernels).
    settings.default_tier_up(0)
    try:
        import dgl  # noqa: F401  (enables dgl_ugraph through the import hook)
    except ImportError:
        sys.exit("the demo needs DGL (pip install dgl); the kernel API works without it")
    import torch

    if not interception.is_enabled():
        interception.enable()
    device, why = pick_device(args.device)
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    g = skewed_graph(args.nodes, args.edges).to(device)
    deg = g.in_degrees().double()
    threads = "" if cuda else f", {torch.get_num_threads()} threads"
    x = torch.randn(g.num_nodes(), args.feat, generator=torch.Generator().manual_seed(1)).to(device)
    reset_stats()
    rows, verdicts, spreads = [], {}, []
    models = _demo_models(args.feat, 8)
    for i, (name, make) in enumerate(models.items()):
        print(f"measuring {name} ({i + 1} of {len(models)})", file=sys.stderr, flush=True)
        torch.manual_seed(0)
        model = make().to(device)
        (out_on, grads_on), (out_off, grads_off), t_on, t_off = _interleaved(model, g, x, args.steps, args.warmup, sync)
        d_out = _relative(out_on, out_off)
        d_grad = max(_relative(a, b) for a, b in zip(grads_on, grads_off))
        speedup, (r1, r3), kind = verdict(t_on, t_off)
        verdicts[name] = (speedup, kind)
        spreads.append((r3 - r1) / 2)

        def cell(ts):
            q1, med, q3 = (t * 1e3 for t in _quartiles(ts))
            return f"{med:7.1f} [{q1:5.1f}-{q3:5.1f}]"

        rows.append(f"{name:14s} {d_out:8.1e} {d_grad:8.1e} {cell(t_on):>20s} {cell(t_off):>20s} {speedup:7.2f}x "
                    f"{f'[{r1:.2f}-{r3:.2f}]':>15s}  {kind}")
    # What the plugin did comes first; then what the machine did, then the details.
    print(summary(verdicts))
    note = load_note(load_before, os.cpu_count() or 1, _quartiles(spreads)[1])
    if note:
        print(note)
    print()
    print(f"graph: {g.num_nodes()} nodes, {g.num_edges()} edges (with self-loops); in-degree mean "
          f"{deg.mean():.1f}, std {deg.std():.1f}, max {int(deg.max())}; features {args.feat}; "
          f"{device} ({why}{threads})")
    print(f"{args.steps} forward+backward steps per side, plugin on and off interleaved step by step, after "
          f"{args.warmup} untimed per side; times: median [first-third quartile] in ms")
    print(f"{'model':14s} {'output':>8s} {'grads':>8s} {'dgl_ugraph':>20s} {'DGL':>20s} {'speedup':>8s} "
          f"{'paired [q1-q3]':>15s}  verdict")
    print("\n".join(rows))
    print("(output, grads: max |on - off| / max |off|; speedup: DGL's median / dgl_ugraph's; paired: "
          "the quartiles of DGL / dgl_ugraph over adjacent step pairs; within noise when they straddle 1)")
    print(report(stats()))


def summary(verdicts) -> str:
    """One line, the demo's first: which models are faster, within noise or slower, and the
    geomean speedup."""
    groups = {kind: [f"{name} {s:.2f}x" for name, (s, k) in verdicts.items() if k == kind]
              for kind in ("faster", "within noise", "slower")}
    parts = [f"{kind}: {', '.join(names) if names else 'none'}" for kind, names in groups.items()]
    if not groups["slower"] and not groups["within noise"]:
        head = "every model is faster with dgl_ugraph, outside the noise"
    elif not groups["slower"]:
        head = "no model is slower with dgl_ugraph outside the noise"
    else:
        head = "some models are slower with dgl_ugraph outside the noise"
    geomean = math.exp(sum(math.log(s) for s, _ in verdicts.values()) / len(verdicts))
    return f"summary: {head}; {geomean:.2f}x DGL's speed, geomean of {len(verdicts)} models ({'; '.join(parts)})"


# Other work above half the cores, or paired ratios whose middle half spans more than this either
# side: the machine's share of the differences is then worth a line of its own.
BUSY_LOAD_SHARE = 0.5
NOISY_SPREAD = 0.05


def load_note(load_before, cores: int, spread: float):
    """A line on the load that the demo cannot tell from the plugin, or None: the 1-minute load
    average before the demo started (None where the system has none) against the cores, and
    `spread`, the median over models of half the paired ratios' interquartile range."""
    busy = load_before is not None and load_before > BUSY_LOAD_SHARE * cores
    if not busy and spread <= NOISY_SPREAD:
        return None
    what = (f"other work ran on this machine (load average {load_before:.1f} on {cores} cores before the "
            "demo started), and " if busy else "")
    return (f"load: {what}paired step times varied by about ±{spread:.0%}: a speedup within that of 1.00x "
            "is the machine's, not the plugin's; an idle machine gives a cleaner reading")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return
    if argv[0] == "info":
        info()
    elif argv[0] == "demo":
        demo(argv[1:])
    elif argv[0] == "tune":
        # Imported only here: the offline tooling (numpy graph generation, tqdm, lightgbm at
        # training) is no cost of running a script with the plugin.
        from dgl_ugraph.tuning import run

        sys.exit(run.main(argv[1:]))
    else:
        run_script(argv)


if __name__ == "__main__":
    main()
