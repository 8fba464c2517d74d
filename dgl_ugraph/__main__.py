"""python -m dgl_ugraph: run a DGL script with the plugin on, show the build, or run the demo.

    python -m dgl_ugraph script.py [args...]   run script.py unchanged, with dgl_ugraph on
    python -m dgl_ugraph -m package.module [args...]
    python -m dgl_ugraph info                  what was built, and what this machine has
    python -m dgl_ugraph demo [--edges N ...]  GCN/GAT/GIN/SAGE with the plugin on and off
    python -m dgl_ugraph tune [--quick]        re-collect strategy timings on this GPU and retrain

DGL_UGRAPH=0 keeps DGL's own kernels even here (handy for A/B runs of one command line).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time

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

    from . import _ext, patterns
    from .integration import SUPPORTED_DGL, TESTED, is_enabled

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
    low, high = SUPPORTED_DGL
    try:
        import dgl
        print(f"DGL {dgl.__version__} (dgl_ugraph supports {low[0]}.{low[1]} to {high[0]}.{high[1]}); "
              f"interception {'on' if is_enabled() else 'off'} (DGL_UGRAPH={os.environ.get('DGL_UGRAPH', 'unset')})")
    except ImportError:
        print("DGL: not installed (the kernel API dgl_ugraph.ugrapher still works)")
    print("tested on CPU with: " + ", ".join(f"DGL {d} + torch {t}" for d, t in TESTED))
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


def _timed(model, g, x, repeats, cuda):
    import torch

    result = _step(model, g, x)  # warm-up: graph formats, caches
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        _step(model, g, x)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return result, sorted(times)[len(times) // 2]


def demo(argv):
    parser = argparse.ArgumentParser(prog="python -m dgl_ugraph demo",
                                     description="GCN/GAT/GIN/SAGE forward+backward with dgl_ugraph on and off")
    parser.add_argument("--nodes", type=int, default=40000)
    parser.add_argument("--edges", type=int, default=400000)
    parser.add_argument("--feat", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    try:
        import dgl  # noqa: F401  (enables dgl_ugraph through the import hook)
    except ImportError:
        sys.exit("the demo needs DGL (pip install dgl); the kernel API works without it")
    import torch

    from . import integration, report, reset_stats, stats

    if not integration.is_enabled():
        integration.enable()
    device = torch.device(args.device)
    g = skewed_graph(args.nodes, args.edges).to(device)
    deg = g.in_degrees().double()
    print(f"graph: {g.num_nodes()} nodes, {g.num_edges()} edges (with self-loops); in-degree mean "
          f"{deg.mean():.1f}, std {deg.std():.1f}, max {int(deg.max())}; features {args.feat}, {device}")
    x = torch.randn(g.num_nodes(), args.feat, generator=torch.Generator().manual_seed(1)).to(device)
    cuda = device.type == "cuda"
    reset_stats()
    print("parity: max |on - off| / max |off| over the output and over each parameter's gradient")
    print(f"{'model':14s} {'output':>9s} {'gradients':>10s} {'dgl_ugraph':>11s} {'DGL':>9s}")
    for name, make in _demo_models(args.feat, 8).items():
        torch.manual_seed(0)
        model = make().to(device)
        (out_on, grads_on), t_on = _timed(model, g, x, args.repeats, cuda)
        with integration.disabled():
            (out_off, grads_off), t_off = _timed(model, g, x, args.repeats, cuda)
        d_out = _relative(out_on, out_off)
        d_grad = max(_relative(a, b) for a, b in zip(grads_on, grads_off))
        print(f"{name:14s} {d_out:9.1e} {d_grad:10.1e} {t_on * 1e3:9.1f}ms {t_off * 1e3:7.1f}ms")
    print("(times: median forward+backward step, plugin on vs off)")
    print(report(stats()))


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
        from . import tune

        sys.exit(tune.main(argv[1:]))
    else:
        run_script(argv)


if __name__ == "__main__":
    main()
