"""End-to-end model benchmark: the models/ networks with dgl_ugraph on and off (issue 6).

CPU mode (default), on real DGL 2.1.0:
    PYTHONPATH=. .venv/bin/python benchmarks/bench_models.py              # all models x graphs x modes
    PYTHONPATH=. .venv/bin/python benchmarks/bench_models.py --record-traces   # op-sequence traces only

  Times inference (eval, no_grad) and one training step (train mode, forward + cross-entropy +
  backward; no optimizer step) of GCN, GAT, GIN, SAGE-mean, SAGE-gcn and SAGE-pool with the
  plugin on (`ugraph`) and off (`dgl`, inside `dgl_ugraph.disabled()`: DGL's own CPU kernels).
  Both implementations run the very same model object on the very same DGL graph; their repeats
  are interleaved (dgl, ugraph, dgl, ugraph, ...) so that load from other processes hits both
  alike, and each reports the median. A case's speedup is the median over its rounds of
  dgl / ugraph within the round (`paired_x`): on 2 shared cores a long training step swings by 2x
  between slow and fast spells of the machine, which a round's pair shares, while the medians
  of the two sides can fall in different spells. Every case is also checked for parity: eval outputs, and
  training outputs plus every parameter gradient (same dropout seed), equal within rtol 1e-4.

GPU mode under real DGL (`--device cuda`, on the GPU machine with the CUDA DGL build loaded; see
scripts/gpu_check.sh, stage `dgl`):
    python benchmarks/bench_models.py --device cuda --sparse-free --out $OUT/models_gpu.csv
    python benchmarks/bench_models.py --summarize --device cuda --out $OUT/models_gpu.csv
    python benchmarks/bench_models.py --merge $OUT/models_gpu.csv        # its rows into benchmarks/results/models.csv

  The same dgl.nn models (GCN, GAT, GIN, SAGE-mean, SAGE-pool) on cuda with the plugin on and off,
  beside the same models written in PyG 2.8 (`pyg`, when torch_geometric imports; pyg_model says
  how they differ) on the same graphs, features and widths, and the bound (`--sparse-free`), all
  interleaved in one run; inference and training; parity on vs off. Each call is timed to
  torch.cuda.synchronize() after one untimed warm-up call; the median of at least 3 calls, and of
  more until each implementation ran 50 ms (TIMING). Graphs: the shared datasets
  ($DGL_UGRAPH_DATASETS, else ../shared/datasets), graph_suite.LARGE (two 40M-edge graphs), the
  arxiv-like citation graph (graph_suite.ARXIV_LIKE: 169K nodes, 1.2M edges, 128 features) and
  the Table 3 stand-ins at full size, largest first; `--budget-s` (300 s) stops
  starting cases, and every finished case's rows are already in the CSV. An implementation that
  runs out of device memory on a case is left out of it, with a note. Rows carry the device's
  name; CPU and GPU rows share benchmarks/results/models.csv, and --summarize/plots.py take one device kind.

GPU replay mode (`--gpu`, on the device machine; needs no DGL): replays the operator sequences recorded
in benchmarks/results/traces/ (the exact gspmm/gsddmm calls, dense ops, activations and edge_softmax DGL issues
for each model, recorded from the CPU DGL run) through our kernels (`dgl_ugraph.ugrapher`,
impl `ugraph_replay`), through cuSPARSE/torch paths in place of ours (`torch_replay`), and
compares both with PyG 2.8's GCNConv/GATConv/GINConv/SAGEConv models of the same sizes (`pyg`).
Inference only (the trace records the forward pass).

Layer sizes follow the uGrapher paper: GCN 2 layers, hidden 16; SAGE 2 layers, hidden 16; GIN 5
GINConv layers of hidden 64 (MLP of 2 linears each) + a linear classifier; GAT 8 heads x hidden 8,
then one head to the classes.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import pathlib
import platform
import statistics
import sys
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple
from unittest import mock

# torch and DGL each bring an OpenMP pool; with the default (spinning) wait policy the two pools
# fight for the 2 cores, and on a loaded machine a 1 ms model takes 300 ms (measured here).
# Must be set before either library starts its threads; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: a snapshot of the package there wins

from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402

MODELS = ("GCN", "GAT", "GIN", "SAGE-mean", "SAGE-gcn", "SAGE-pool")
MODES = ("inference", "training")
COLUMNS = ["device", "model", "graph", "mode", "impl", "ms", "V", "E", "feat", "classes", "ms_min", "ms_max",
           "reps", "parity_maxdiff", "parity_ok", "ugraph_share", "parity_fp64_maxdiff", "paired_x"]
DEFAULT_FEAT = 64
DEFAULT_CLASSES = 4
RTOL = 1e-4

# Stand-ins of uGrapher's Table 3 (graph_suite.PAPER_STANDINS) on 2 CPU cores: scale factor so
# that every graph stays at or under about 0.25M edges (GAT training on 2 cores is the cost).
STANDIN_SCALE = {
    "citeseer": 1.0, "cora": 1.0, "pubmed": 1.0, "PROTEINS_full": 1.0, "ppi": 0.25,
    "OVCAR-8H": 0.05, "Yeast": 0.05, "DD": 0.1, "TWITTER-Real-Graph-Partial": 0.1, "SW-620H": 0.05,
    "amazon0505": 0.05, "artist": 0.1, "com-amazon": 0.1, "soc-BlogCatalog": 0.1, "amazon0601": 0.05,
}
DEFAULT_STANDINS = tuple(STANDIN_SCALE)
# The synthetic graphs named by --large: the two 40M-edge graphs and the arxiv-like citation graph.
SYNTHETIC_LARGE = gs.LARGE + (gs.ARXIV_LIKE,)


# ---- graphs ---------------------------------------------------------------------------------------


def standin_name(name: str, scale: float) -> str:
    """Stand-ins are prefixed `sim-` (Table 3 shares cora/citeseer/pubmed with the real graphs)."""
    return f"sim-{name}" if scale == 1.0 else f"sim-{name}@{scale:g}"


def graph_cases(datasets: bool = True, standins=DEFAULT_STANDINS, only=None, scale=STANDIN_SCALE,
                large=()) -> Iterator[Tuple[str, dict]]:
    """(name, lazy loader) for each benchmark graph: the shared datasets, then the large graphs of
    graph_suite.LARGE named in `large`, then the stand-ins (each at its `scale`, 1.0 where absent).
    A loader returns (src, dst, num_nodes, feat, labels); feat and labels may be None."""
    if datasets:
        root = gs.datasets_dir()
        for name, src, dst, n in gs.shared_datasets():
            if only and name not in only:
                continue
            with np.load(root / f"{name}.npz") as z:
                feat = torch.from_numpy(z["feat"]).float() if "feat" in z else None
                labels = torch.from_numpy(z["label"].astype(np.int64)) if "label" in z else None
            yield name, (lambda s=src, d=dst, n=n, f=feat, l=labels: (s, d, n, f, l))
    for spec in SYNTHETIC_LARGE:
        if spec.name in large and not (only and spec.name not in only):
            yield spec.name, (lambda spec=spec: gs.make(spec) + _synthetic_data(spec))
    by_name = {s.name: s for s in gs.PAPER_STANDINS}
    for name in standins:
        factor = scale.get(name, 1.0)
        label = standin_name(name, factor)
        if only and label not in only:
            continue
        spec = by_name[name] if factor == 1.0 else gs.scaled(by_name[name], factor)
        yield label, (lambda spec=spec: gs.make(spec) + (None, None))


def _synthetic_data(spec) -> tuple:
    """(features, labels) of a synthetic graph: the arxiv-like graph's seeded random features of
    arxiv's width and classes, else (None, None) for `features`' defaults."""
    if spec.name != gs.ARXIV_LIKE.name:
        return None, None
    gen = torch.Generator().manual_seed(0)
    feat = torch.randn(spec.num_nodes, gs.ARXIV_FEATURES, generator=gen)
    return feat, torch.randint(0, gs.ARXIV_CLASSES, (spec.num_nodes,), generator=gen)


def features(n: int, feat: Optional[torch.Tensor], labels: Optional[torch.Tensor], seed: int = 0):
    """The graph's own features and labels, else seeded random features of width 64 and 4
    random classes."""
    gen = torch.Generator().manual_seed(seed)
    if feat is None:
        feat = torch.randn(n, DEFAULT_FEAT, generator=gen)
    if labels is None or labels.numel() != n:
        labels = torch.randint(0, DEFAULT_CLASSES, (n,), generator=gen)
    classes = max(int(labels.max()) + 1, 2) if labels.numel() else 2
    return feat.contiguous(), labels, classes


# ---- models -----------------------------------------------------------------------------------------


def _model_modules():
    models_dir = str(ROOT / "benchmarks" / "models")
    if models_dir not in sys.path:
        sys.path.insert(0, models_dir)
    import gat
    import gcn
    import gin
    import sage
    return gcn, gat, gin, sage


def build_model(name: str, in_size: int, classes: int):
    """(model, prepare_graph or None) with the paper's layer sizes."""
    gcn, gat, gin, sage = _model_modules()
    if name == "GCN":
        return gcn.GCN(in_size, 16, classes), gcn.prepare_graph
    if name == "GAT":
        return gat.GAT(in_size, 8, classes, heads=(8, 1)), gat.prepare_graph
    if name == "GIN":  # benchmarks/models/gin.py counts the classifier: num_layers=6 is 5 GINConv layers
        return gin.GIN(in_size, 64, classes, "sum", num_layers=6), None
    if name.startswith("SAGE-"):
        return sage.SAGE(in_size, 16, classes, name.split("-", 1)[1]), None
    raise ValueError(f"unknown model {name!r}")


def make_dgl_graph(src, dst, n, prepare=None, device="cpu"):
    import dgl

    g = dgl.graph((src.to(device), dst.to(device)), num_nodes=n)
    if prepare is not None:
        g = prepare(g)
    return g.formats(["csc", "coo", "csr"])  # as the models use it; formats are built on first use


# ---- timing -------------------------------------------------------------------------------------------


def inference_fn(model, *inputs):
    def run():
        model.eval()
        with torch.no_grad():
            return model(*inputs)
    return run


def training_fn(model, labels, *inputs):
    """One training step without the optimizer: forward, cross-entropy, backward."""
    def run():
        model.train()
        model.zero_grad(set_to_none=True)
        out = model(*inputs)
        F.cross_entropy(out, labels).backward()
        return out
    return run


def training_result(model, g, feat, labels, state):
    """Training-mode output and every gradient, from a fixed state and dropout seed."""
    model.load_state_dict(state)
    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    out = model(g, feat)
    F.cross_entropy(out, labels).backward()
    return [out.detach()] + [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def parity(ours: List[torch.Tensor], theirs: List[torch.Tensor], rtol: float = RTOL) -> Tuple[float, bool]:
    """(worst |diff| relative to scale, all within rtol). Each tensor is compared elementwise
    with rtol, plus rtol of its scale for entries that cancel to nearly 0. A tensor's scale is its
    largest magnitude, floored at 1e-4 of the largest magnitude among the tensors of its kind
    (outputs, gradients): a gradient that is mathematically zero (a bias right before a
    BatchNorm) is pure rounding noise in both runs and is judged against that floor."""
    if len(ours) != len(theirs):
        return math.inf, False
    worst, ok = 0.0, True
    grad_peak = max([b.abs().max().item() for b in theirs[1:] if b.numel()] or [0.0])
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            return math.inf, False
        if not b.numel():
            continue
        if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
            return math.inf, False
        fin = torch.isfinite(b)
        a, b = a.double()[fin], b.double()[fin]
        if not b.numel():
            continue
        scale = max(b.abs().max().item(), 1e-4 * grad_peak if i else 0.0, 1e-30)
        diff = (a - b).abs()
        worst = max(worst, diff.max().item() / scale)
        if (diff - rtol * b.abs()).max().item() > rtol * scale:
            ok = False
    return worst, ok


def interleaved_ms(fns: Dict[str, Callable], reps: int, warmup: int, min_s: float, max_reps: int = 60,
                   max_s: float = 30.0, sync: Callable[[], None] = lambda: None) -> Dict[str, List[float]]:
    """Times each fn, interleaved (a, b, c, then b, c, a, ...), after `warmup` untimed calls of each: at least
    `reps` times, and on until each has run `min_s` seconds in all (at most `max_reps` times), so
    that sub-millisecond cases get enough repeats for a median that load spikes from other
    processes cannot move; stops after `max_s` seconds once `reps` are done. On a GPU, `sync`
    (torch.cuda.synchronize) ends each call, so a time is the host's wall time until the device
    has finished: kernels and every host overhead, as the user waits for them."""
    for _ in range(warmup):
        for impl, fn in fns.items():
            _call(impl, fn)
    sync()
    times = {impl: [] for impl in fns}
    order = list(fns)
    start = time.perf_counter()
    i = 0
    while True:
        # Each round starts one place later: a step pays for what the step before it left behind
        # (glibc returns the big freed blocks to the OS, and the next step faults them back in),
        # and a fixed order would bill that to the same implementation every round.
        for impl in order[i % len(order):] + order[:i % len(order)]:
            fn = fns[impl]
            with state(impl, fn):
                t0 = time.perf_counter()
                fn()
                sync()
                times[impl].append((time.perf_counter() - t0) * 1e3)
        i += 1
        if i >= reps and (i >= max_reps or time.perf_counter() - start > max_s
                          or min(sum(t) for t in times.values()) >= 1e3 * min_s):
            return times


def paired_speedup(base: List[float], ours: List[float]) -> float:
    """Median over interleaved rounds of base / ours within the round."""
    return statistics.median(b / o for b, o in zip(base, ours))


def state(impl, fn):
    """The context `impl` runs `fn` in: the plugin off (`dgl`), DGL's sparse calls answered from
    the record (the bound), the plugin on with DGL's module forwards (kernels-only) or on. A timed
    call runs inside it: switching the plugin off and on re-patches DGL (about 0.6 ms of host time
    on the 2-core machine), which is no part of either implementation's call."""
    import dgl_ugraph

    if impl == "dgl":
        return dgl_ugraph.disabled()
    if impl == SPARSE_FREE:
        return fn.sparse_free.replaying()
    dgl_ugraph.enable()
    if impl == KERNELS_ONLY:
        from dgl_ugraph.dgl import modules
        return modules.disabled()
    return contextlib.nullcontext()


def _call(impl, fn):
    with state(impl, fn):
        return fn()


# The plugin with DGL's own module forwards (its kernels still run them): what the module
# patterns' lean paths add on top of the kernels.
KERNELS_ONLY = "ugraph_kernels"


# The Amdahl bound of any replacement of what the plugin replaces: DGL's program with every
# gspmm/gsddmm call (and, on CPU, every fused edge-softmax call) answered by a copy of the result
# recorded from a real run (a kernel must at least write its output, so the copy is the floor).
# baseline ms / this ms is the most the plugin could gain.
SPARSE_FREE = "dgl_sparse_free"


class SparseFree:
    """Records the results of one run's sparse calls (in call order), then answers the same
    calls of later runs with copies of them."""

    NAMES = ("_gspmm", "_gsddmm", "_edge_softmax_forward", "_edge_softmax_backward")

    def __init__(self, fn):
        self.fn, self.results = fn, []

    def _patched(self, make):
        from dgl_ugraph.dgl import interception

        return interception.replaced(make, self.NAMES)

    def record(self):
        def make(original):
            def wrapper(*args, **kwargs):
                out = original(*args, **kwargs)
                self.results.append(out)
                return out
            return wrapper
        self.results = []
        with self._patched(make):
            self.fn()

    def replaying(self):
        counter = iter(range(1 << 62))

        def copy(x):
            if isinstance(x, torch.Tensor):
                return x.clone()
            if isinstance(x, tuple):
                return tuple(copy(y) for y in x)
            return x

        def make(original):
            def wrapper(*args, **kwargs):
                return copy(self.results[next(counter) % len(self.results)])
            return wrapper
        return self._patched(make)


def tier_up_now():
    """DGL_UGRAPH_TIER_UP=0 for the block: graphs called in it tier up at once, and stay so."""
    return mock.patch.dict(os.environ, {"DGL_UGRAPH_TIER_UP": "0"})


def ugraph_share(fn) -> float:
    """Share of the gspmm/gsddmm calls of one run of fn that ran on dgl_ugraph."""
    import dgl_ugraph

    dgl_ugraph.enable()
    dgl_ugraph.reset_stats()
    fn()
    s = dgl_ugraph.stats()
    return s["intercepted"] / s["calls"] if s["calls"] else float("nan")


def results_on_and_off(model, g, feat, labels, state, mode):
    """(the function to time, its results with the plugin on, the same with it off) for one mode;
    training results are the output and every gradient from `state` (the model is left there)."""
    import dgl_ugraph

    if mode == "inference":
        fn = inference_fn(model, g, feat)
        with dgl_ugraph.disabled():
            ref = [fn()]
        dgl_ugraph.enable()
        return fn, [fn()], ref
    with dgl_ugraph.disabled():
        ref = training_result(model, g, feat, labels, state)
    dgl_ugraph.enable()
    ours = training_result(model, g, feat, labels, state)
    model.load_state_dict(state)
    return training_fn(model, labels, g, feat), ours, ref


def prepare_inputs(loaded, device="cpu"):
    """(src, dst, n, feat, labels, classes) of a loaded graph, tensors on `device`; once per graph,
    for every model and implementation."""
    src, dst, n, feat, labels = loaded
    feat, labels, classes = features(n, feat, labels)
    return src.to(device), dst.to(device), n, feat.to(device), labels.to(device), classes


def pyg_fns(model_name, feat, labels, classes, edge_index):
    """{mode: fn} of PyG's model of the same sizes on the same inputs, or None where PyG has none."""
    torch.manual_seed(0)
    net = pyg_model(model_name, feat.shape[1], classes)
    if net is None:
        return None
    net = net.to(feat.device)
    return {"inference": inference_fn(net, feat, edge_index), "training": training_fn(net, labels, feat, edge_index)}


# Implementations a case can do without, in the order they are left out when the device runs out
# of memory: the bound holds every sparse result of a run, PyG every message of a layer.
OPTIONAL_IMPLS = (SPARSE_FREE, "pyg")


def timed_impls(impls, args, sync, label) -> Dict[str, List[float]]:
    """interleaved_ms over impls; an optional implementation that does not fit in device memory
    is left out of the case, with a note (and no row)."""
    while True:
        try:
            return interleaved_ms(impls, args.reps, args.warmup, args.min_s, args.max_reps, args.case_max_s, sync)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            drop = next((k for k in OPTIONAL_IMPLS if k in impls), None)
            if drop is None:
                raise
            print(f"{label}: {drop} ran out of device memory; left out of this case", flush=True)
            impls = {k: v for k, v in impls.items() if k != drop}


def bench_case(model_name, gname, inputs, args, device_name, edge_index=None) -> List[dict]:
    """Rows of one model on one graph (inputs from prepare_inputs), per mode: DGL with the plugin
    off and on, the bound (--sparse-free) and, given PyG's edge_index, PyG's model."""
    src, dst, n, feat, labels, classes = inputs
    device = feat.device
    torch.manual_seed(0)
    model, prepare = build_model(model_name, feat.shape[1], classes)
    model = model.to(device)
    g = make_dgl_graph(src, dst, n, prepare, device)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    pyg = pyg_fns(model_name, feat, labels, classes, edge_index) if edge_index is not None else None
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    for mode in args.modes:
        # Parity and share on dgl_ugraph's kernels from the first call: the graph tiers up at once
        # (a CUDA graph's first calls would run on DGL's kernels, cache.py), and the steps timed
        # after are the steady state a training run spends its time in.
        with tier_up_now():
            fn, ours, ref = results_on_and_off(model, g, feat, labels, state, mode)
            maxdiff, ok = parity(ours, ref)
            share = ugraph_share(fn)
        impls = {"dgl": fn, "ugraph": fn}
        if args.kernels_only:
            impls[KERNELS_ONLY] = fn
        if pyg is not None:
            impls["pyg"] = pyg[mode]
        if args.sparse_free:
            fn.sparse_free = SparseFree(fn)
            try:
                fn.sparse_free.record()
                impls[SPARSE_FREE] = fn
            except torch.cuda.OutOfMemoryError:
                fn.sparse_free.results = []
                torch.cuda.empty_cache()
                print(f"{model_name} {gname} {mode}: {SPARSE_FREE}'s recorded results do not fit in device memory; "
                      "left out of this case", flush=True)
        times = timed_impls(impls, args, sync, f"{model_name} {gname} {mode}")
        if SPARSE_FREE in impls:
            fn.sparse_free.results = []  # the recorded results: device memory the next case needs
        paired = {impl: paired_speedup(times["dgl"], ts) for impl, ts in times.items() if impl != "dgl"}
        for impl, ts in times.items():
            rows.append(dict(device=device_name, model=model_name, graph=gname, mode=mode, impl=impl,
                             ms=round(statistics.median(ts), 4), V=n, E=g.num_edges(), feat=feat.shape[1],
                             classes=classes, ms_min=round(min(ts), 4), ms_max=round(max(ts), 4), reps=len(ts),
                             parity_maxdiff=f"{maxdiff:.3g}", parity_ok=int(ok),
                             ugraph_share=round(share, 4) if impl == "ugraph" else "",
                             paired_x=round(paired[impl], 4) if impl in paired else ""))
        med = {k: statistics.median(v) for k, v in times.items()}
        d, u = med["dgl"], med["ugraph"]
        bound = f"  bound x{paired[SPARSE_FREE]:5.2f}" if SPARSE_FREE in paired else ""
        vs_pyg = f"  pyg {med['pyg']:9.2f} ms (x{med['pyg'] / u:5.2f})" if "pyg" in med else ""
        vs_pyg += f"  kernels-only x{paired[KERNELS_ONLY]:5.2f}" if KERNELS_ONLY in paired else ""
        print(f"{model_name:9} {gname:28} {mode:9} dgl {d:9.2f} ms  ugraph {u:9.2f} ms  "
              f"x{paired['ugraph']:5.2f}{bound}{vs_pyg}  "
              f"parity {maxdiff:.1e} {'ok' if ok else 'FAIL'}  share {share:.2f}", flush=True)
    model.load_state_dict(state)
    return rows


def cpu_device_name() -> str:
    model = platform.processor() or "cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu ({model}, {os.cpu_count()} cores, torch {torch.__version__.split('+')[0]} {torch.get_num_threads()} threads)"


# Timing defaults per device: on 2 shared CPU cores a case repeats until each implementation ran
# half a second (load spikes), and at least 9 times: a step of half a second swings by 2x between
# spells of the machine, and the paired median of 5 rounds still read 0.88x where the medians
# read 1.03x (bench/raw/models_cpu_run11.csv, GIN sim-Yeast@0.05 training). A GPU is steadier,
# and its run must fit one call to the machine.
TIMING = {"cpu": dict(reps=9, warmup=1, min_s=0.5, max_reps=60, case_max_s=20.0, budget_s=2400.0),
          "cuda": dict(reps=3, warmup=1, min_s=0.05, max_reps=30, case_max_s=4.0, budget_s=300.0)}


def run_dgl(args):
    """The models/ networks under real DGL with the plugin on and off, on args.device; on a GPU
    also PyG's models (when torch_geometric imports) on the same graphs, features and widths."""
    import dgl
    import dgl_ugraph

    dgl_ugraph.enable()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    if gpu:
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda needs a GPU")
        torch.backends.cuda.matmul.allow_tf32 = False  # the same float32 dense math in every impl
        torch.backends.cudnn.allow_tf32 = False
        device_name = f"{torch.cuda.get_device_name(device)} (torch {torch.__version__}, DGL {dgl.__version__})"
    else:
        device_name = cpu_device_name()
    use_pyg = gpu if args.pyg is None else args.pyg
    pyg_note = "no PyG rows"
    if use_pyg:
        try:
            import torch_geometric
            pyg_note = f"torch_geometric {torch_geometric.__version__}"
        except ImportError:
            if args.pyg:
                raise
            use_pyg, pyg_note = False, "no torch_geometric: the pyg rows are left out"
    print(f"{device_name}; dgl_ugraph from {os.path.dirname(dgl_ugraph.__file__)}; {pyg_note}; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}", flush=True)
    if not args.no_datasets:
        found = gs.datasets_dir()
        print(f"datasets: {found}" if found else "datasets: none found (set DGL_UGRAPH_DATASETS): only synthetic "
              "graphs run", flush=True)
    only = set(args.only.split(",")) if args.only else None
    standins = [s for s in (args.standins.split(",") if args.standins is not None else DEFAULT_STANDINS) if s]
    large = [s for s in (args.large.split(",") if args.large is not None else
                         ([spec.name for spec in SYNTHETIC_LARGE] if gpu else [])) if s]
    if gpu:  # full size, largest first: a budget that runs out drops the smallest stand-ins
        edges = {spec.name: spec.num_edges for spec in gs.PAPER_STANDINS}
        standins = sorted(standins, key=lambda name: -edges[name])
    models = args.models.split(",")
    write_rows(args.out, [], COLUMNS, append=args.append)
    t0 = time.time()
    cases = graph_cases(not args.no_datasets, standins, only, {} if gpu else STANDIN_SCALE, large)
    for gname, load in cases:
        if time.time() - t0 > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s reached: stopping before {gname}", flush=True)
            break
        inputs = prepare_inputs(load(), device)
        edge_index = torch.stack([inputs[0], inputs[1]]) if use_pyg else None
        for i, model_name in enumerate(models):
            if i and time.time() - t0 > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s reached: stopping before {model_name} on {gname}", flush=True)
                break
            try:
                rows = bench_case(model_name, gname, inputs, args, device_name, edge_index)
            except torch.cuda.OutOfMemoryError as exc:
                print(f"{model_name} {gname}: DGL ran out of device memory, case left out ({str(exc).splitlines()[0]})",
                      flush=True)
                rows = []
            write_rows(args.out, rows, COLUMNS, append=True)
        del inputs, edge_index
        if gpu:
            torch.cuda.empty_cache()
    print(f"done in {time.time() - t0:.0f} s; rows in {args.out}")


# ---- op-sequence traces (recorded on CPU with DGL, replayed anywhere without it) ------------------
#
# A trace is the forward pass of one model on one graph as DGL runs it, as JSON: every top-level
# torch call (captured with a TorchFunctionMode), every gspmm/gsddmm call DGL's autograd functions
# make (dgl.backend.pytorch.sparse._gspmm/_gsddmm), and edge_softmax as one op. Values are numbered;
# an argument is a value, a parameter (by state_dict name), the input features, a graph array
# (in/out-degrees) or a literal. Integers equal to the graph's node or edge count are stored as the
# symbols N and E, so a trace recorded on a scaled stand-in replays on the full-size graph (feature
# widths and classes stay literal: DGL's layers branch on them).

TRACE_VERSION = 1


class TraceError(RuntimeError):
    pass


def fn_name(func) -> str:
    """A name `resolve_fn` turns back into the same callable."""
    if getattr(func, "__name__", "") == "__get__" and hasattr(func, "__self__"):
        return "attr:" + func.__self__.__name__
    name = getattr(func, "__name__", None)
    qual = getattr(func, "__qualname__", name) or ""
    owner = qual.split(".")[0]
    if owner in ("Tensor", "TensorBase", "_TensorBase") and "." in qual:
        return "Tensor." + name
    if owner == "_VariableFunctionsClass" and getattr(torch, name, None) is func:
        return "torch:" + name
    module = getattr(func, "__module__", None)
    if module is None and getattr(torch.Tensor, name or "", None) is func:
        return "Tensor." + name
    if module and "<" not in qual:
        full = f"{module}:{qual}"
        try:
            if resolve_fn(full) is func:
                return full
        except (ImportError, AttributeError):
            pass
        if getattr(torch, name, None) is func:
            return "torch:" + name
    raise TraceError(f"cannot name {func!r} ({module}:{qual})")


def resolve_fn(name: str):
    import importlib

    if name.startswith("attr:"):
        attr = name[5:]
        return lambda obj: getattr(obj, attr)
    if name.startswith("Tensor."):
        return getattr(torch.Tensor, name[7:])
    module, qual = name.split(":", 1)
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


class _Recorder:
    def __init__(self, model, feat, n, e, in_deg, out_deg):
        self.ops, self.values, self.keep = [], {}, []
        self.params = {id(t): name for name, t in list(model.named_parameters()) + list(model.named_buffers())}
        self.feat, self.n, self.e = feat, n, e
        self.in_deg, self.out_deg = in_deg, out_deg
        self.depth = 0
        self.next_id = 0
        self.consts = 0
        self.opaque = 0

    def new_value(self, t) -> int:
        vid = self.next_id
        self.next_id += 1
        self.values[id(t)] = vid
        self.keep.append(t)
        return vid

    def ref(self, t):
        vid = self.values.get(id(t))
        if vid is not None:
            return {"v": vid}
        if id(t) in self.params:
            return {"param": self.params[id(t)]}
        if t is self.feat:
            return {"input": "feat"}
        for name, ref in (("in_degrees", self.in_deg), ("out_degrees", self.out_deg)):
            if t.shape == ref.shape and t.dtype == ref.dtype and torch.equal(t, ref):
                return {"graph": name}
        if t.numel() <= 64:
            self.consts += 1
            return {"const": t.detach().cpu().tolist(), "dtype": str(t.dtype).replace("torch.", ""),
                    "shape": list(t.shape)}
        # A tensor DGL's C API made (e.g. has_nodes' check inside out_degrees): it feeds DGL's own
        # argument checks only; replayed as ones of its shape. Were it to reach the output, the
        # replay check against DGL's output (record_all, the tests) would fail.
        self.opaque += 1
        return {"opaque": [self.enc(i) for i in t.shape], "dtype": str(t.dtype).replace("torch.", "")}

    def enc(self, x):
        if isinstance(x, torch.Tensor):
            return self.ref(x)
        if isinstance(x, bool) or x is None or isinstance(x, str):
            return x
        if isinstance(x, int):
            if x == self.n and x != self.e:
                return {"sym": "N"}
            if x == self.e and x != self.n:
                return {"sym": "E"}
            return x
        if isinstance(x, float):
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(x, torch.Size):
            return {"size": [self.enc(i) for i in x]}
        if isinstance(x, (tuple, list)):
            return {"tuple" if isinstance(x, tuple) else "list": [self.enc(i) for i in x]}
        if isinstance(x, dict):
            return {"dict": {k: self.enc(v) for k, v in x.items()}}
        if isinstance(x, torch.dtype):
            return {"dtype": str(x).replace("torch.", "")}
        if isinstance(x, torch.device):
            return {"device": True}
        if isinstance(x, slice):
            return {"slice": [self.enc(x.start), self.enc(x.stop), self.enc(x.step)]}
        if x is Ellipsis:
            return {"ellipsis": True}
        raise TraceError(f"cannot encode an argument of type {type(x).__name__}")

    def outs(self, result):
        if isinstance(result, torch.Tensor):
            return self.new_value(result)
        return [self.new_value(r) if isinstance(r, torch.Tensor) else None for r in result]

    def shape(self, t):
        return None if t is None else [self.enc(i) for i in t.shape]


def _traced_result(result) -> bool:
    if result is None or isinstance(result, torch.Tensor):
        return True
    return isinstance(result, (tuple, list)) and len(result) > 0 and all(
        isinstance(r, torch.Tensor) or r is None for r in result) and any(isinstance(r, torch.Tensor) for r in result)


def record_trace(model, g, feat, model_name: str = "", graph_name: str = "", prepare: Optional[str] = None):
    """(trace dict, output) of one eval forward of `model` on DGL graph `g` (run on DGL's own
    kernels, the plugin off)."""
    import sys as _sys

    import dgl_ugraph
    from dgl.backend.pytorch import sparse
    from torch.overrides import TorchFunctionMode

    es_module = _sys.modules["dgl.ops.edge_softmax"]
    rec = _Recorder(model, feat, g.num_nodes(), g.num_edges(), g.in_degrees(), g.out_degrees())

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if rec.depth:
                return func(*args, **kwargs)
            result = func(*args, **kwargs)
            if _traced_result(result):
                name = fn_name(func)
                node = {"op": "torch", "fn": name, "args": [rec.enc(a) for a in args],
                        "kwargs": {k: rec.enc(v) for k, v in kwargs.items()}}
                node["out"] = None if result is None else rec.outs(result)
                rec.ops.append(node)
            return result

    def sparse_wrapper(kind, original):
        def wrapper(gidx, op, *rest):
            rec.depth += 1
            try:
                result = original(gidx, op, *rest)
            finally:
                rec.depth -= 1
            if kind == "gspmm":
                reduce_op, u, e = rest
                args = {"op": op, "reduce_op": reduce_op, "u": None if u is None else rec.enc(u),
                        "e": None if e is None else rec.enc(e)}
                out = [rec.new_value(result[0])] + [rec.new_value(a) if a is not None else None for a in result[1]]
            else:
                lhs, rhs = rest[0], rest[1]
                lt, rt = (rest[2], rest[3]) if len(rest) > 2 else ("u", "v")
                args = {"op": op, "lhs": None if lhs is None else rec.enc(lhs),
                        "rhs": None if rhs is None else rec.enc(rhs), "lhs_target": lt, "rhs_target": rt}
                out = rec.new_value(result)
            rec.ops.append({"op": kind, "args": args, "reverse": gidx.number_of_nodes(0) != g.num_src_nodes()
                            and False, "out": out})
            return result
        return wrapper

    def softmax_wrapper(original):
        def wrapper(gidx, logits, eids, norm_by):
            rec.depth += 1
            try:
                result = original(gidx, logits, eids, norm_by)
            finally:
                rec.depth -= 1
            from dgl.base import is_all
            if not is_all(eids):
                raise TraceError("edge_softmax on a subset of edges is not traced")
            rec.ops.append({"op": "edge_softmax", "args": {"logits": rec.enc(logits), "norm_by": norm_by},
                            "out": rec.new_value(result)})
            return result
        return wrapper

    with dgl_ugraph.disabled():
        saved = (sparse._gspmm, sparse._gsddmm, es_module.edge_softmax_internal)
        sparse._gspmm = sparse_wrapper("gspmm", saved[0])
        sparse._gsddmm = sparse_wrapper("gsddmm", saved[1])
        es_module.edge_softmax_internal = softmax_wrapper(saved[2])
        try:
            model.eval()
            with torch.no_grad(), Mode():
                out = model(g, feat)
        finally:
            sparse._gspmm, sparse._gsddmm, es_module.edge_softmax_internal = saved
    if id(out) not in rec.values:
        raise TraceError("the model's output was not produced by a traced op")
    params = {name: {"shape": [rec.enc(i) for i in t.shape], "dtype": str(t.dtype).replace("torch.", "")}
              for name, t in list(model.named_parameters()) + list(model.named_buffers())}
    trace = {"version": TRACE_VERSION, "model": model_name, "graph": graph_name, "prepare": prepare,
             "N": g.num_nodes(), "E": g.num_edges(), "feat": list(feat.shape[1:]),
             "params": params, "output": rec.values[id(out)], "ops": rec.ops,
             "counts": _op_counts(rec.ops), "literal_consts": rec.consts, "opaque_inputs": rec.opaque}
    for op in trace["ops"]:
        op.pop("reverse", None)
    return trace, out


def _op_counts(ops) -> dict:
    counts = {}
    for op in ops:
        key = op["op"] if op["op"] != "torch" else op["fn"]
        if op["op"] == "gspmm":
            key = f"gspmm:{op['args']['op']}:{op['args']['reduce_op']}"
        elif op["op"] == "gsddmm":
            a = op["args"]
            key = f"gsddmm:{a['op']}:{a['lhs_target']}:{a['rhs_target']}"
        counts[key] = counts.get(key, 0) + 1
    return counts


# ---- replay -------------------------------------------------------------------------------------------


class ReplayGraph:
    """The graph a trace runs on, as index tensors on one device: src/dst in edge-id order, the
    uGrapher graph (CSC with edge ids) and, lazily, the cuSPARSE CSR of the torch path."""

    def __init__(self, src, dst, n, prepare=None, device="cpu"):
        src, dst = src.long(), dst.long()
        if prepare == "self_loop":  # dgl.add_self_loop(dgl.remove_self_loop(g)): loops last
            keep = src != dst
            loops = torch.arange(n, dtype=torch.long)
            src = torch.cat([src[keep], loops])
            dst = torch.cat([dst[keep], loops])
        elif prepare not in (None, ""):
            raise TraceError(f"unknown graph preparation {prepare!r}")
        from dgl_ugraph.core.graph import UGraph

        self.device = torch.device(device)
        self.n = n
        self.src, self.dst = src.to(self.device), dst.to(self.device)
        self.e = self.src.numel()
        idtype = torch.int32 if max(n, self.e) < 2 ** 31 - 1 else torch.int64
        self.ugraph = UGraph.from_coo(self.src, self.dst, n, n, idtype)
        self._csr = {}

    def degrees(self, which):
        idx = self.dst if which == "in_degrees" else self.src
        return torch.bincount(idx, minlength=self.n)

    def csr(self, values=None):
        """torch sparse CSR (dst x src) in CSC-position order, with `values` per edge id."""
        g = self.ugraph
        eid = g.eid.long() if g.eid is not None else torch.arange(self.e, device=self.device)
        key = "ones" if values is None else None
        if key and key in self._csr:
            return self._csr[key]
        vals = torch.ones(self.e, device=self.device) if values is None else values[eid]
        m = torch.sparse_csr_tensor(g.indptr.long(), g.col.long(), vals, (self.n, self.n))
        if key:
            self._csr[key] = m
        return m


def _dgl_broadcast_pair(x, y):
    """Feature dims aligned from the right after the row dim, as DGL broadcasts them."""
    if x is None or y is None:
        return x, y
    nx, ny = x.dim() - 1, y.dim() - 1
    if nx < ny:
        x = x.reshape((x.shape[0],) + (1,) * (ny - nx) + tuple(x.shape[1:]))
    elif ny < nx:
        y = y.reshape((y.shape[0],) + (1,) * (nx - ny) + tuple(y.shape[1:]))
    return x, y


def _binary(op, x, y):
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "div":
        return x / y
    if op == "dot":
        return (x * y).sum(-1, keepdim=True)
    raise TraceError(f"unknown binary op {op!r}")


class TorchSparse:
    """gspmm/gsddmm on torch alone: cuSPARSE (torch.sparse.mm on CSR) for sums it can express
    (copy_u, and u_mul_e with one scalar weight per edge), index_add_/scatter_reduce and
    gathers for the rest: the path a PyTorch user without our kernels has."""

    name = "torch"

    def __init__(self, graph: ReplayGraph):
        self.g = graph

    def _gather(self, t, target):
        g = self.g
        if t is None:
            return None
        if target == "u":
            return t.index_select(0, g.src)
        if target == "v":
            return t.index_select(0, g.dst)
        return t

    @staticmethod
    def _operands(op, lhs, rhs):
        """The operands the op reads, 1-D ones as columns, and whether the result is 1-D."""
        lhs = lhs if op != "copy_rhs" else None
        rhs = rhs if op != "copy_lhs" else None
        squeeze = (lhs is None or lhs.dim() == 1) and (rhs is None or rhs.dim() == 1)

        def column(t):
            return t.unsqueeze(-1) if t is not None and t.dim() == 1 else t
        return column(lhs), column(rhs), squeeze

    def gspmm(self, op, reduce_op, u, e):
        g = self.g
        lhs, rhs, squeeze = self._operands(op, u, e)
        if reduce_op == "sum" and lhs is not None and lhs.dim() == 2 and lhs.dtype in (torch.float32, torch.float64):
            if op == "copy_lhs":
                out = torch.sparse.mm(g.csr(), lhs)
                return (out.squeeze(-1) if squeeze else out), (None, None)
            if op == "mul" and rhs.dim() == 2 and rhs.shape[1] == 1:
                out = torch.sparse.mm(g.csr(rhs[:, 0].contiguous()), lhs)
                return (out.squeeze(-1) if squeeze else out), (None, None)
        x = self._gather(lhs, "u")
        y = rhs
        if op in ("copy_lhs",):
            msg = x
        elif op == "copy_rhs":
            msg = y
        else:
            x, y = _dgl_broadcast_pair(x, y)
            msg = _binary(op, x, y)
        shape = (g.n,) + tuple(msg.shape[1:])
        idx = g.dst
        if reduce_op == "sum":
            out = torch.zeros(shape, dtype=msg.dtype, device=msg.device).index_add_(0, idx, msg)
            arg_u = arg_e = None
        else:
            fill = float("-inf") if reduce_op == "max" else float("inf")
            full = idx.view((-1,) + (1,) * (msg.dim() - 1)).expand_as(msg)
            out = torch.full(shape, fill, dtype=msg.dtype, device=msg.device).scatter_reduce_(
                0, full, msg, "amax" if reduce_op == "max" else "amin", include_self=True)
            empty = torch.bincount(idx, minlength=g.n) == 0
            out[empty] = 0  # DGL gives 0 where a row has no edges
            arg_u = arg_e = None  # arguments are needed by backward passes only
        return (out.squeeze(-1) if squeeze else out), (arg_u, arg_e)

    def gsddmm(self, op, lhs, rhs, lhs_target, rhs_target):
        lhs, rhs, squeeze = self._operands(op, lhs, rhs)
        x, y = self._gather(lhs, lhs_target), self._gather(rhs, rhs_target)
        if op == "copy_lhs":
            out = x
        elif op == "copy_rhs":
            out = y
        else:
            out = _binary(op, *_dgl_broadcast_pair(x, y))
        return out.squeeze(-1) if squeeze else out

    def edge_softmax(self, logits, norm_by):
        return _edge_softmax(self, logits, norm_by)


def _edge_softmax(sp, score, norm_by):
    """DGL's CUDA EdgeSoftmax forward: max, sub, exp, sum, div (dgl/backend/pytorch/sparse.py)."""
    if norm_by != "dst":
        raise TraceError("edge_softmax by src is not replayed")
    score_max = sp.gspmm("copy_rhs", "max", None, score)[0]
    score = torch.exp(sp.gsddmm("sub", score, score_max, "e", "v"))
    score_sum = sp.gspmm("copy_rhs", "sum", None, score)[0]
    return sp.gsddmm("div", score, score_sum, "e", "v")


class UGraphSparse(TorchSparse):
    """gspmm/gsddmm through our kernels (`dgl_ugraph.ugrapher`), mapped by the switching
    table exactly as the DGL integration maps them."""

    name = "ugraph"

    def _pattern(self, key):
        from dgl_ugraph.dgl import patterns

        found = patterns.lookup(key)
        if isinstance(found, str):
            raise TraceError(f"{key}: {found}")
        return found

    def _run(self, pattern, lhs, rhs):
        from dgl_ugraph import ugrapher
        from dgl_ugraph.dgl.recognition import make_op_info

        # DGL's 1-D operands and output, as recognition's _shapes reads them (no DGL graph here:
        # the replay runs on a UGraph, so the DGL layer's routing itself cannot serve).
        use_l, use_r = pattern.A_type != "null", pattern.B_type != "null"
        squeeze = (not use_l or lhs.dim() == 1) and (not use_r or rhs.dim() == 1)
        if use_l and lhs.dim() == 1:
            lhs = lhs.unsqueeze(-1)
        if use_r and rhs.dim() == 1:
            rhs = rhs.unsqueeze(-1)
        out, arg_a, arg_b = ugrapher(self.g.ugraph, make_op_info(pattern, lhs, rhs))
        return (out.squeeze(-1) if squeeze else out), arg_a, arg_b

    def gspmm(self, op, reduce_op, u, e):
        from dgl_ugraph.dgl import patterns

        out, arg_a, arg_b = self._run(self._pattern(patterns.spmm_key(op, reduce_op)), u, e)
        return out, (arg_a, arg_b)

    def gsddmm(self, op, lhs, rhs, lhs_target, rhs_target):
        from dgl_ugraph.dgl import patterns

        return self._run(self._pattern(patterns.sddmm_key(op, lhs_target, rhs_target)), lhs, rhs)[0]


def _dtype(name):
    return getattr(torch, name)


def init_params(trace, n, e, device, seed=0) -> Dict[str, torch.Tensor]:
    """Seeded parameters of the traced shapes (the GPU run needs no trained weights): BatchNorm
    running_var 1, running_mean 0, other tensors uniform in +-1/sqrt(fan_in)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, spec in trace["params"].items():
        shape = [_sym(s, n, e) for s in spec["shape"]]
        dtype = _dtype(spec["dtype"])
        if name.endswith("running_var"):
            t = torch.ones(shape, dtype=dtype)
        elif name.endswith("running_mean") or name.endswith("num_batches_tracked") or not dtype.is_floating_point:
            t = torch.zeros(shape, dtype=dtype)
        else:
            fan_in = shape[-1] if len(shape) > 1 else max(shape[0] if shape else 1, 1)
            t = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype) / math.sqrt(fan_in)
        out[name] = t.to(device)
    return out


def _sym(x, n, e):
    if isinstance(x, dict) and "sym" in x:
        return n if x["sym"] == "N" else e
    return x


class Replayer:
    """Runs a trace on a ReplayGraph with a sparse backend (UGraphSparse or TorchSparse)."""

    def __init__(self, trace, graph: ReplayGraph, sparse, params: Dict[str, torch.Tensor], feat: torch.Tensor):
        if trace.get("version") != TRACE_VERSION:
            raise TraceError(f"trace version {trace.get('version')} (this script reads {TRACE_VERSION})")
        self.trace, self.g, self.sp = trace, graph, sparse
        self.params, self.feat = params, feat
        self.device = graph.device
        self.fns = {}
        for op in trace["ops"]:
            if op["op"] == "torch" and op["fn"] not in self.fns:
                self.fns[op["fn"]] = resolve_fn(op["fn"])
        self.degrees = {}

    def dec(self, x, vals):
        if isinstance(x, dict):
            if "v" in x:
                return vals[x["v"]]
            if "param" in x:
                return self.params[x["param"]]
            if "input" in x:
                return self.feat
            if "graph" in x:
                if x["graph"] not in self.degrees:
                    self.degrees[x["graph"]] = self.g.degrees(x["graph"])
                return self.degrees[x["graph"]]
            if "const" in x:
                return torch.tensor(x["const"], dtype=_dtype(x["dtype"]), device=self.device).reshape(x["shape"])
            if "opaque" in x:
                return torch.ones([self.dec(i, vals) for i in x["opaque"]], dtype=_dtype(x["dtype"]),
                                  device=self.device)
            if "sym" in x:
                return self.g.n if x["sym"] == "N" else self.g.e
            if "size" in x:
                return torch.Size([self.dec(i, vals) for i in x["size"]])
            if "tuple" in x:
                return tuple(self.dec(i, vals) for i in x["tuple"])
            if "list" in x:
                return [self.dec(i, vals) for i in x["list"]]
            if "dict" in x:
                return {k: self.dec(v, vals) for k, v in x["dict"].items()}
            if "dtype" in x:
                return _dtype(x["dtype"])
            if "device" in x:
                return self.device
            if "slice" in x:
                return slice(*(self.dec(i, vals) for i in x["slice"]))
            if "ellipsis" in x:
                return Ellipsis
            if "float" in x:
                return float(x["float"])
            raise TraceError(f"cannot decode {x!r}")
        return x

    def run(self):
        vals = {}
        dec = self.dec
        for op in self.trace["ops"]:
            kind, out = op["op"], op["out"]
            if kind == "torch":
                result = self.fns[op["fn"]](*[dec(a, vals) for a in op["args"]],
                                            **{k: dec(v, vals) for k, v in op["kwargs"].items()})
            elif kind == "gspmm":
                a = op["args"]
                res, (arg_u, arg_e) = self.sp.gspmm(a["op"], a["reduce_op"], dec(a["u"], vals), dec(a["e"], vals))
                result = [res, arg_u, arg_e]
            elif kind == "gsddmm":
                a = op["args"]
                result = self.sp.gsddmm(a["op"], dec(a["lhs"], vals), dec(a["rhs"], vals), a["lhs_target"],
                                        a["rhs_target"])
            elif kind == "edge_softmax":
                a = op["args"]
                result = self.sp.edge_softmax(dec(a["logits"], vals), a["norm_by"])
            else:
                raise TraceError(f"unknown op kind {kind!r}")
            if out is None:
                continue
            if isinstance(out, int):
                vals[out] = result
            else:
                for vid, r in zip(out, result):
                    if vid is not None:
                        vals[vid] = r
        return vals[self.trace["output"]]


def trace_path(traces_dir, model_name: str) -> pathlib.Path:
    return pathlib.Path(traces_dir) / f"{model_name}.json"


def record_all(args):
    """Records one trace per (model, graph) of the CPU benchmark into benchmarks/results/traces/<model>.json,
    and checks each by replaying it on CPU through our kernels against DGL's output."""
    only = set(args.only.split(",")) if args.only else None
    standins = [s for s in (args.standins.split(",") if args.standins else DEFAULT_STANDINS) if s]
    models = args.models.split(",")
    traces = {m: {} for m in models}
    for gname, load in graph_cases(not args.no_datasets, standins, only):
        src, dst, n, feat, labels = load()
        feat, labels, classes = features(n, feat, labels)
        for model_name in models:
            torch.manual_seed(0)
            model, prepare = build_model(model_name, feat.shape[1], classes)
            prep = "self_loop" if prepare is not None else None
            g = make_dgl_graph(src, dst, n, prepare)
            trace, ref = record_trace(model, g, feat, model_name, gname, prep)
            graph = ReplayGraph(src, dst, n, prep)
            params = {k: v for k, v in model.state_dict().items()}
            ours = Replayer(trace, graph, UGraphSparse(graph), params, feat).run()
            theirs = Replayer(trace, graph, TorchSparse(graph), params, feat).run()
            d1, ok1 = parity([ours], [ref])
            d2, ok2 = parity([theirs], [ref])
            trace["replay_check"] = {"ugraph_maxdiff": float(f"{d1:.3g}"), "torch_maxdiff": float(f"{d2:.3g}"),
                                     "ok": bool(ok1 and ok2)}
            traces[model_name][gname] = trace
            print(f"{model_name:9} {gname:28} {len(trace['ops']):4d} ops  replay ugraph {d1:.1e} torch {d2:.1e} "
                  f"{'ok' if ok1 and ok2 else 'FAIL'}", flush=True)
    pathlib.Path(args.traces).mkdir(parents=True, exist_ok=True)
    for model_name, per_graph in traces.items():
        with open(trace_path(args.traces, model_name), "w") as fh:
            json.dump({"version": TRACE_VERSION, "model": model_name, "traces": per_graph}, fh, separators=(",", ":"))
    print(f"wrote {len(models)} trace files to {args.traces}")


# ---- GPU mode ---------------------------------------------------------------------------------------


def pyg_model(name: str, in_size: int, classes: int):
    """PyG 2.8 models of the paper's sizes, as a PyG user writes them: an edge_index input, the
    layers, activations, normalizations and dropouts of models/*.py in the same places. None
    where PyG has no equivalent layer. What differs from the DGL models, all of it PyG's own way:
    - GCNConv and GATConv add the self-loops in every forward (the DGL models get a graph with
      self-loops once); GCNConv recomputes its symmetric normalization in every forward (DGL's
      GraphConv recomputes the degrees too);
    - aggregation is torch's scatter over an edge_index in the graph's edge order (PyG 2.8's
      default without torch_sparse/pyg-lib), where DGL runs sparse kernels on its CSC;
    - SAGE-pool: DGL's pool is max over relu(fc_pool(h)) with fc_pool square and biased, then
      fc_neigh + fc_self; SAGEConv(aggr="max", project=True) is that layer exactly (a biased
      square projection with relu, max, lin_l + lin_r), with the bias on lin_l instead of a
      separate one;
    - weights are PyG's own initialization (no parity is claimed: the rows time the same work)."""
    import torch.nn as nn
    from torch_geometric import nn as pnn

    class Net(nn.Module):
        def __init__(self, convs, act, final=None, norms=None, dropout=0.5, input_dropout=True):
            super().__init__()
            self.convs, self.act, self.final = nn.ModuleList(convs), act, final
            self.norms = nn.ModuleList(norms) if norms else None
            self.dropout = nn.Dropout(dropout)
            self.input_dropout = input_dropout

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                if i or self.input_dropout:
                    x = self.dropout(x)
                x = conv(x, edge_index)
                if self.norms is not None:
                    x = self.norms[i](x)
                if i != len(self.convs) - 1 or self.final is not None:
                    x = self.act(x)
            return self.final(self.dropout(x)) if self.final is not None else x

    if name == "GCN":  # benchmarks/models/gcn.py: dropout between the layers only
        return Net([pnn.GCNConv(in_size, 16), pnn.GCNConv(16, classes)], F.relu, input_dropout=False)
    if name == "GAT":  # benchmarks/models/gat.py: feat_drop before each layer, attn_drop on the attention
        return Net([pnn.GATConv(in_size, 8, heads=8, dropout=0.6), pnn.GATConv(64, classes, heads=1, dropout=0.6)],
                   F.elu, dropout=0.6)
    if name == "GIN":  # benchmarks/models/gin.py: dropout(relu(norm(conv))) per layer, then the classifier
        def mlp(i):
            return nn.Sequential(nn.Linear(i, 64, bias=False), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64))
        return Net([pnn.GINConv(mlp(in_size if i == 0 else 64), train_eps=True) for i in range(5)], F.relu,
                   final=nn.Linear(64, classes), norms=[nn.BatchNorm1d(64) for _ in range(5)], input_dropout=False)
    if name == "SAGE-mean":  # benchmarks/models/sage.py: dropout on the input and between the layers
        return Net([pnn.SAGEConv(in_size, 16, aggr="mean"), pnn.SAGEConv(16, classes, aggr="mean")], F.relu)
    if name == "SAGE-pool":
        return Net([pnn.SAGEConv(in_size, 16, aggr="max", project=True),
                    pnn.SAGEConv(16, classes, aggr="max", project=True)], F.relu)
    return None  # SAGE-gcn: PyG's SAGEConv has no gcn aggregator


def gpu_graph_cases(trace_graphs, full_size: bool = True):
    """(gpu graph name, trace graph name, loader) for the graphs the traces were recorded on:
    the shared datasets as they are, the stand-ins at full size (a trace stores N and E as
    symbols) unless full_size is False."""
    by_name = {s.name: s for s in gs.PAPER_STANDINS}
    data = {name: load for name, load in graph_cases(True, (), None)}
    for tname in trace_graphs:
        if tname.startswith("sim-"):
            base = tname[4:].split("@")[0]
            spec = by_name[base]
            if not full_size and "@" in tname:
                spec = gs.scaled(spec, float(tname.split("@")[1]))
                yield tname, tname, (lambda spec=spec: gs.make(spec) + (None, None))
            else:
                yield standin_name(base, 1.0), tname, (lambda spec=spec: gs.make(spec) + (None, None))
        elif tname in data:
            yield tname, tname, data[tname]
        else:
            print(f"skipped {tname}: not in the datasets folder here (set DGL_UGRAPH_DATASETS)", flush=True)


def cuda_ms(fn, reps: int, warmup: int) -> List[float]:
    """Host wall time of each call until the device is idle again, in ms."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def run_gpu(args):
    """Inference on the GPU: trace replay through our kernels (`ugraph`), the same replay with
    cuSPARSE/torch in place of our kernels (`torch_cusparse`), and PyG's models (`pyg`). Host
    wall time per forward (synchronized), median of --gpu-reps after warm-up: host overhead of
    each path counts, as it does for a user."""
    device = torch.device(args.gpu_device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA device (--gpu-device cpu runs the same path on CPU, for tests)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_device_name()
    try:
        import torch_geometric
        have_pyg = True
        print(f"{device_name}; torch {torch.__version__}; torch_geometric {torch_geometric.__version__}", flush=True)
    except ImportError:
        have_pyg = False
        print(f"{device_name}; torch {torch.__version__}; no torch_geometric: the pyg rows are left out", flush=True)
    models = args.models.split(",")
    only = set(args.only.split(",")) if args.only else None
    write_rows(args.out, [], COLUMNS, append=args.append)
    t0 = time.time()
    files = {m: json.load(open(trace_path(args.traces, m))) for m in models}
    trace_graphs = list(dict.fromkeys(g for m in models for g in files[m]["traces"]))
    for gname, tname, load in gpu_graph_cases(trace_graphs, not args.gpu_scaled):
        if only and gname not in only and tname not in only:
            continue
        if time.time() - t0 > args.budget_s:
            print(f"budget reached: stopping before {gname}", flush=True)
            break
        src, dst, n, feat, labels = load()
        feat, labels, classes = features(n, feat, labels)
        feat_gpu = feat.to(device)
        graphs = {}
        for model_name in models:
            trace = files[model_name]["traces"].get(tname)
            if trace is None:
                continue
            prep = trace["prepare"]
            if prep not in graphs:
                graphs[prep] = ReplayGraph(src, dst, n, prep, device)
            graph = graphs[prep]
            params = init_params(trace, n, graph.e, device)
            ours = Replayer(trace, graph, UGraphSparse(graph), params, feat_gpu)
            theirs = Replayer(trace, graph, TorchSparse(graph), params, feat_gpu)
            with torch.no_grad():
                maxdiff, ok = parity([ours.run()], [theirs.run()])
                fns = {"ugraph": ours.run, "torch_cusparse": theirs.run}
                if have_pyg:
                    torch.manual_seed(0)
                    net = pyg_model(model_name, feat.shape[1], classes)
                    if net is not None:
                        net = net.to(device).eval()
                        edge_index = torch.stack([src, dst]).to(device)
                        fns["pyg"] = lambda net=net, ei=edge_index, x=feat_gpu: net(x, ei)
                times = {impl: cuda_ms(fn, args.gpu_reps, 3) for impl, fn in fns.items()}
            rows = [dict(device=device_name, model=model_name, graph=gname, mode="inference", impl=impl,
                         ms=round(statistics.median(ts), 4), V=n, E=graph.e, feat=feat.shape[1], classes=classes,
                         ms_min=round(min(ts), 4), ms_max=round(max(ts), 4), reps=len(ts),
                         parity_maxdiff=f"{maxdiff:.3g}", parity_ok=int(ok), ugraph_share="")
                    for impl, ts in times.items()]
            write_rows(args.out, rows, COLUMNS, append=True)
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"{model_name:9} {gname:28} " + "  ".join(f"{k} {v:8.3f} ms" for k, v in med.items())
                  + f"  x{med['torch_cusparse'] / med['ugraph']:.2f} vs torch"
                  + (f"  x{med['pyg'] / med['ugraph']:.2f} vs pyg" if "pyg" in med else "")
                  + f"  parity {maxdiff:.1e} {'ok' if ok else 'FAIL'}", flush=True)
        del graphs, feat_gpu
        torch.cuda.empty_cache()
    print(f"done in {time.time() - t0:.0f} s; rows in {args.out}")


# ---- parity re-check and summary ------------------------------------------------------------------


def recheck_parity(args):
    """For each case of --device whose float32 parity failed, runs the same check in float64 on
    that device: if dgl_ugraph and DGL then agree to ~1e-12, the float32 difference is rounding
    (summation order) amplified by the model (GIN's five train-mode BatchNorms), not a wrong
    result. --only limits it to those graphs."""
    path = pathlib.Path(args.out or ROOT / "benchmarks" / "results" / "models.csv")
    rows = list(csv.DictReader(open(path, newline="")))
    kind = "cuda" if torch.device(args.device).type == "cuda" else "cpu"
    only = {g for g in args.only.split(",") if g}
    failed = sorted({(r["model"], r["graph"], r["mode"]) for r in rows
                     if r["parity_ok"] == "0" and device_kind(r["device"]) == kind and (not only or r["graph"] in only)})
    wanted = {g for _, g, _ in failed}
    # The graphs as the run built them: the stand-ins at full size and the large graphs on cuda.
    loads = dict(graph_cases(True, DEFAULT_STANDINS, wanted, scale={} if kind == "cuda" else STANDIN_SCALE,
                             large=[s.name for s in gs.LARGE] if kind == "cuda" else ()))
    found = {}
    for model_name, gname, mode in failed:
        src, dst, n, feat, labels = loads[gname]()
        feat, labels, classes = features(n, feat, labels)
        torch.manual_seed(0)
        model, prepare = build_model(model_name, feat.shape[1], classes)
        model = model.double().to(args.device)
        feat, labels = feat.double().to(args.device), labels.to(args.device)
        g = make_dgl_graph(src, dst, n, prepare, device=args.device)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        _, ours, ref = results_on_and_off(model, g, feat, labels, state, mode)
        d, ok = parity(ours, ref, 1e-10)
        found[(model_name, gname, mode)] = f"{d:.3g}"
        print(f"{model_name:9} {gname:28} {mode:9} float64 maxdiff {d:.2e} {'ok' if ok else 'FAIL'}", flush=True)
    for r in rows:
        if device_kind(r["device"]) == kind:
            r["parity_fp64_maxdiff"] = found.get((r["model"], r["graph"], r["mode"]), r.get("parity_fp64_maxdiff") or "")
    write_rows(path, rows, COLUMNS, append=False)


def device_kind(device: str) -> str:
    """cpu or cuda, from a row's device column (CPU rows start with "cpu")."""
    return "cpu" if device.startswith("cpu") else "cuda"


def graph_set(name: str) -> str:
    """real (the shared datasets), standin (uGrapher's Table 3 and the arxiv-like graph) or large
    (graph_suite.LARGE)."""
    if name.startswith("sim-") or name == gs.ARXIV_LIKE.name:
        return "standin"
    return "large" if name in {spec.name for spec in gs.LARGE} else "real"


GROUPS = {
    "cpu": [("all graphs", lambda c: True),
            ("shared datasets (real graphs)", lambda c: graph_set(c["graph"]) == "real"),
            ("paper stand-ins (synthetic)", lambda c: graph_set(c["graph"]) == "standin"),
            ("graphs with E >= 50K", lambda c: c["E"] >= 50_000),
            ("graphs with E < 10K", lambda c: c["E"] < 10_000)],
    "cuda": [("all graphs", lambda c: True),
             ("shared datasets (real graphs)", lambda c: graph_set(c["graph"]) == "real"),
             ("uGrapher Table 3 stand-ins, full size", lambda c: graph_set(c["graph"]) == "standin"),
             ("large synthetic graphs (40M edges)", lambda c: graph_set(c["graph"]) == "large"),
             ("graphs with E > 100K", lambda c: c["E"] > 100_000),
             ("graphs with E >= 1M", lambda c: c["E"] >= 1_000_000),
             ("graphs with E < 100K", lambda c: c["E"] < 100_000)],
}


def read_rows(path, kind: str) -> List[dict]:
    """The rows of one device kind; several devices of that kind are refused (one run, one device)."""
    rows = [r for r in csv.DictReader(open(path, newline="")) if device_kind(r["device"]) == kind]
    devices = sorted({r["device"] for r in rows})
    if len(devices) > 1:
        raise SystemExit(f"{path} has {kind} rows of several devices {devices}: summarize one run's CSV")
    return rows


def summarize(path, impl="ugraph", baseline="dgl", kind="cpu", details=True) -> str:
    """Markdown tables of a models CSV's rows of one device kind: geomean speedups (the paired
    speedup of a row that has one against dgl, else baseline ms / impl ms) overall, by graph set
    and per model, and (details) every case where impl is slower and the parity results."""
    rows = read_rows(path, kind)
    ms = {(r["mode"], r["model"], r["graph"], r["impl"]): r for r in rows}
    cases = []
    for (mode, model, graph, i), r in ms.items():
        b = ms.get((mode, model, graph, baseline))
        if i == impl and b is not None:
            cases.append(dict(mode=mode, model=model, graph=graph, E=int(r["E"]), feat=int(r["feat"]),
                              base=float(b["ms"]), ours=float(r["ms"]),
                              x=float(r["paired_x"]) if baseline == "dgl" and r.get("paired_x") else
                              float(b["ms"]) / float(r["ms"]),
                              parity=r["parity_ok"], fp64=r.get("parity_fp64_maxdiff") or "",
                              maxdiff=r["parity_maxdiff"]))

    def gm(xs):
        xs = list(xs)
        return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (float("nan"), 0)

    modes = [m for m in MODES if any(c["mode"] == m for c in cases)]
    lines = ["| cases | " + " | ".join(f"{m} geomean (cases)" for m in modes) + " |",
             "|---|" + "---|" * len(modes)]
    for label, keep in GROUPS[kind]:
        cells = []
        for m in modes:
            g, k = gm(c["x"] for c in cases if c["mode"] == m and keep(c))
            cells.append(f"{g:.2f}x ({k})" if k else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| model | " + " | ".join(f"{m}: geomean, min-max" for m in modes) + " |",
              "|---|" + "---|" * len(modes)]
    for model in MODELS:
        cells = []
        for m in modes:
            xs = [c["x"] for c in cases if c["mode"] == m and c["model"] == model]
            g, k = gm(xs)
            cells.append(f"{g:.2f}x, {min(xs):.2f}-{max(xs):.2f}" if k else "-")
        if any(cell != "-" for cell in cells):
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
    if not details:
        return "\n".join(lines)
    slow = sorted((c for c in cases if c["x"] < 1.0), key=lambda c: c["x"])
    lines += ["", f"Slower with {impl} than {baseline}: {len(slow)} of {len(cases)} cases; "
              f"{sum(c['x'] < 0.9 for c in slow)} by more than 10%, {sum(c['x'] < 0.75 for c in slow)} by more than 25%; "
              f"{sum(c['E'] > 100_000 for c in slow)} on graphs with more than 100K edges.",
              "", "| model | slower cases (inference, training) | of which < 0.9x | worst |", "|---|---|---|---|"]
    for model in MODELS:
        mine = [c for c in slow if c["model"] == model]
        if mine:
            w = mine[0]
            lines.append(f"| {model} | {len(mine)} ({sum(c['mode'] == 'inference' for c in mine)}, "
                         f"{sum(c['mode'] == 'training' for c in mine)}) | {sum(c['x'] < 0.9 for c in mine)} | "
                         f"{w['x']:.2f}x ({w['graph']}, {w['mode']}) |")
    lines += ["", "<details><summary>every slower case</summary>", "",
              "| model | graph | mode | E | F | baseline ms | ours ms | speedup |", "|---|---|---|---|---|---|---|---|"]
    for c in slow:
        lines.append(f"| {c['model']} | {c['graph']} | {c['mode']} | {c['E']} | {c['feat']} | {c['base']:.2f} | "
                     f"{c['ours']:.2f} | {c['x']:.2f}x |")
    lines += ["", "</details>"]
    bad = [c for c in cases if c["parity"] != "1"]
    lines += ["", f"Parity (float32, rtol {RTOL:g}): {len(cases) - len(bad)} of {len(cases)} cases pass."]
    for c in bad:
        lines.append(f"- {c['model']} {c['graph']} {c['mode']}: float32 maxdiff {c['maxdiff']}"
                     + (f"; float64 maxdiff {c['fp64']}" if c["fp64"] else ""))
    return "\n".join(lines)


def pyg_gap(rows) -> str:
    """On the shared datasets (real graphs, all small): how far PyG is ahead of dgl_ugraph, and how
    much of that gap DGL's own time explains. DGL's own time is what the same program still takes
    with every sparse call free (dgl_sparse_free); in a case where PyG is faster than us, the part
    of the gap (ours - PyG) that dgl_sparse_free - PyG covers is out of any kernel's reach."""
    ms = {(r["mode"], r["model"], r["graph"], r["impl"]): float(r["ms"]) for r in rows}
    lines = ["| mode | cases | PyG faster than dgl_ugraph | dgl_ugraph / PyG (geomean) | "
             "dgl_sparse_free / PyG (geomean) | DGL / PyG (geomean) | share of the gap that is DGL's own time "
             "(summed ms; median case) |", "|---|---|---|---|---|---|---|"]
    for mode in MODES:
        keys = sorted({k[:3] for k in ms if k[0] == mode and graph_set(k[2]) == "real"
                       and all((*k[:3], i) in ms for i in ("dgl", "ugraph", "pyg", SPARSE_FREE))})
        if not keys:
            continue
        ours, pyg, free, dgl = ([ms[(*k, i)] for k in keys] for i in ("ugraph", "pyg", SPARSE_FREE, "dgl"))
        behind = [i for i in range(len(keys)) if ours[i] > pyg[i]]
        shares = sorted(min(max(free[i] - pyg[i], 0.0), ours[i] - pyg[i]) / (ours[i] - pyg[i]) for i in behind)
        summed = sum(min(max(free[i] - pyg[i], 0.0), ours[i] - pyg[i]) for i in behind) / \
            max(sum(ours[i] - pyg[i] for i in behind), 1e-12)

        def gm(a, b):
            return math.exp(sum(math.log(x / y) for x, y in zip(a, b)) / len(a))
        median = f"{100 * shares[len(shares) // 2]:.0f}%" if shares else "-"
        lines.append(f"| {mode} | {len(keys)} | {len(behind)} | {gm(ours, pyg):.2f} | {gm(free, pyg):.2f} | "
                     f"{gm(dgl, pyg):.2f} | {100 * summed:.0f}%; {median} |" if behind else
                     f"| {mode} | {len(keys)} | 0 | {gm(ours, pyg):.2f} | {gm(free, pyg):.2f} | {gm(dgl, pyg):.2f} | - |")
    return "\n".join(lines)


def summarize_gpu(path) -> str:
    """The GPU run's tables (the non-CPU rows of one device): dgl_ugraph vs DGL-native, vs PyG
    2.8 and DGL-native vs PyG, the sparse-free bound, and the gap to PyG on the real graphs."""
    rows = read_rows(path, "cuda")
    if not rows:
        return f"{path}: no GPU rows"
    impls = {r["impl"] for r in rows}
    parts = [f"Device: {rows[0]['device']}; {len({(r['model'], r['graph']) for r in rows})} (model, graph) cases.",
             "", "### dgl_ugraph vs DGL-native (DGL ms / dgl_ugraph ms)", "", summarize(path, "ugraph", "dgl", "cuda")]
    if "pyg" in impls:
        parts += ["", "### dgl_ugraph vs PyG 2.8 (PyG ms / dgl_ugraph ms)", "",
                  summarize(path, "ugraph", "pyg", "cuda", details=False),
                  "", "### DGL-native vs PyG 2.8 (PyG ms / DGL ms)", "", summarize(path, "dgl", "pyg", "cuda", details=False)]
    if SPARSE_FREE in impls:
        parts += ["", f"### The bound: DGL with every gspmm/gsddmm answered by a copy of its result (DGL ms / "
                      f"{SPARSE_FREE} ms)", "", summarize(path, SPARSE_FREE, "dgl", "cuda", details=False)]
    if "pyg" in impls and SPARSE_FREE in impls:
        parts += ["", "### The gap to PyG on the shared datasets (real graphs, all under 1M edges)", "", pyg_gap(rows)]
    return "\n".join(parts)


def profile_ops(model_name, gname, mode="inference", reps=15):
    """Time spent per gspmm/gsddmm pattern (and per CPU edge-softmax kernel) in one inference or
    training step, plugin off and on, interleaved rep by rep after a warm-up of each:
    {impl: {pattern: median ms per step}}, plus the step's median total under "total" and the
    median of what the step spent outside those calls under "outside the sparse calls"."""
    import dgl_ugraph
    from dgl.backend.pytorch import sparse

    name, load = next(iter(graph_cases(True, DEFAULT_STANDINS, {gname})))
    src, dst, n, feat, labels = load()
    feat, labels, classes = features(n, feat, labels)
    torch.manual_seed(0)
    model, prepare = build_model(model_name, feat.shape[1], classes)
    g = make_dgl_graph(src, dst, n, prepare)
    fn = inference_fn(model, g, feat) if mode == "inference" else training_fn(model, labels, g, feat)
    keys = {
        "_gspmm": lambda gi, op, red, u, e: f"gspmm {op}-{red} F={tuple((u if u is not None else e).shape[1:])}",
        "_gsddmm": lambda gi, op, l, r, lt="u", rt="v": f"gsddmm {lt}_{op}_{rt} F={tuple((l if l is not None else r).shape[1:])}",
        "_edge_softmax_forward": lambda gi, e, op: f"edge_softmax forward F={tuple(e.shape[1:])}",
        "_edge_softmax_backward": lambda gi, out, sds: f"edge_softmax backward F={tuple(out.shape[1:])}",
    }
    samples = {"dgl": [], "ugraph": []}

    def one(impl):
        """One step of impl with every sparse call timed: ({pattern: ms}, total ms)."""
        (dgl_ugraph.disable if impl == "dgl" else dgl_ugraph.enable)()
        acc = {}
        saved = {attr: getattr(sparse, attr) for attr in keys if hasattr(sparse, attr)}

        def timed(attr, original):
            def wrapper(*a, **k):
                t0 = time.perf_counter()
                out = original(*a, **k)
                key = keys[attr](*a, **k)
                acc[key] = acc.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
                return out
            return wrapper

        for attr, original in saved.items():
            setattr(sparse, attr, timed(attr, original))
        try:
            t0 = time.perf_counter()
            fn()
            total = (time.perf_counter() - t0) * 1e3
        finally:
            for attr, original in saved.items():
                setattr(sparse, attr, original)
            dgl_ugraph.enable()
        return acc, total

    for impl in ("dgl", "ugraph"):
        one(impl)
    for r in range(reps):
        for impl in (("dgl", "ugraph") if r % 2 == 0 else ("ugraph", "dgl")):
            samples[impl].append(one(impl))
    result = {}
    for impl, runs in samples.items():
        patterns = sorted({k for acc, _ in runs for k in acc})
        result[impl] = {k: statistics.median(acc.get(k, 0.0) for acc, _ in runs) for k in patterns}
        result[impl]["outside the sparse calls"] = statistics.median(total - sum(acc.values()) for acc, total in runs)
        result[impl]["total"] = statistics.median(total for _, total in runs)
    return result


def print_profiles(specs):
    """specs: MODEL:GRAPH or MODEL:GRAPH:training."""
    for spec in specs:
        model_name, gname, *mode = spec.split(":")
        mode = mode[0] if mode else "inference"
        prof = profile_ops(model_name, gname, mode)
        print(f"\n{model_name} on {gname}, {mode}, median ms per step over 15 interleaved steps "
              "(plugin off = dgl, on = ugraph):")
        print("| call | dgl ms | ugraph ms |\n|---|---|---|")
        last = ("outside the sparse calls", "total")
        for key in sorted(set(prof["dgl"]) | set(prof["ugraph"]), key=lambda k: (k in last, last.index(k) if k in last else 0, k)):
            print(f"| {key} | {prof['dgl'].get(key, 0):.3f} | {prof['ugraph'].get(key, 0):.3f} |")


def merge(source, target):
    """Replaces target's rows of the devices that source has rows for with source's rows (a GPU
    run's CSV into benchmarks/results/models.csv, whose CPU rows stay)."""
    new = list(csv.DictReader(open(source, newline="")))
    devices = {r["device"] for r in new}
    old = [r for r in csv.DictReader(open(target, newline=""))] if pathlib.Path(target).exists() else []
    kept = [r for r in old if r["device"] not in devices]
    write_rows(target, kept + new, COLUMNS, append=False)
    print(f"{target}: {len(kept)} rows kept, {len(new)} rows of {sorted(devices)} from {source}")


# The models of the GPU run: those of the acceptance (SAGE-gcn has no PyG twin).
GPU_MODELS = ("GCN", "GAT", "GIN", "SAGE-mean", "SAGE-pool")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: the models under real DGL on the GPU")
    ap.add_argument("--gpu", action="store_true", help="replay the traces on the GPU against PyG and cuSPARSE (no DGL)")
    ap.add_argument("--record-traces", action="store_true", help="only record the op-sequence traces")
    ap.add_argument("--recheck-parity", action="store_true", help="re-check failed parity cases in float64")
    ap.add_argument("--summarize", action="store_true",
                    help="print the markdown summary of --out's rows of --device (cuda: every non-CPU row)")
    ap.add_argument("--merge", default="", help="CSV of a run: replace --out's rows of its devices with its rows")
    ap.add_argument("--profile", default="", help="MODEL:GRAPH[:training],...: time per gspmm/gsddmm pattern, plugin off/on")
    ap.add_argument("--impl", default=None, help="--summarize: the implementation (default ugraph)")
    ap.add_argument("--baseline", default=None,
                    help="--summarize: the baseline (default dgl; on cuda, either one gives that table alone)")
    ap.add_argument("--out", default=None,
                    help="CSV (default benchmarks/results/models.csv; --device cuda: benchmarks/results/models_gpu.csv; --gpu: "
                         "benchmarks/results/models_gpu_replay.csv)")
    ap.add_argument("--append", action="store_true", help="append to --out instead of rewriting it")
    ap.add_argument("--models", default=None, help=f"default: all on CPU, {','.join(GPU_MODELS)} on cuda")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--only", default="", help="comma-separated graph names (default: all)")
    ap.add_argument("--standins", default=None,
                    help="comma-separated graph_suite.PAPER_STANDINS names ('' for none; default all: scaled "
                         "to STANDIN_SCALE on CPU, full size on cuda)")
    ap.add_argument("--large", default=None,
                    help="comma-separated graph_suite.LARGE names and arxiv-like (default: none on CPU, all on cuda)")
    ap.add_argument("--no-datasets", action="store_true")
    ap.add_argument("--pyg", action=argparse.BooleanOptionalAction, default=None,
                    help="time PyG 2.8's models too (default: on cuda when torch_geometric imports)")
    ap.add_argument("--kernels-only", action="store_true",
                    help=f"also time the plugin with DGL's module forwards ({KERNELS_ONLY}: the module patterns off)")
    ap.add_argument("--sparse-free", action="store_true",
                    help=f"also time {SPARSE_FREE}: DGL with every gspmm/gsddmm answered by a copy of its "
                         "recorded result (the most any kernel replacement could gain)")
    ap.add_argument("--reps", type=int, default=None, help="default per device: TIMING")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--min-s", type=float, default=None, help="repeat each impl of a case until it ran this long")
    ap.add_argument("--max-reps", type=int, default=None)
    ap.add_argument("--case-max-s", type=float, default=None, help="stop repeating a case (after --reps) past this")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no new case after this; the rows so far are in --out (default per device: TIMING)")
    ap.add_argument("--traces", default=str(ROOT / "benchmarks" / "results" / "traces"))
    ap.add_argument("--gpu-reps", type=int, default=20)
    ap.add_argument("--gpu-device", default="cuda", help="--gpu: the device (cpu only to test the path)")
    ap.add_argument("--gpu-scaled", action="store_true", help="--gpu: the stand-ins at their CPU scale, not full size")
    args = ap.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    kind = "cuda" if torch.device(args.device).type == "cuda" else "cpu"
    for key, value in TIMING[kind].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.models = args.models or ",".join(GPU_MODELS if kind == "cuda" else MODELS)
    if args.gpu:
        args.out = args.out or str(ROOT / "benchmarks" / "results" / "models_gpu_replay.csv")
        return run_gpu(args)
    if args.record_traces:
        return record_all(args)
    if args.recheck_parity:
        return recheck_parity(args)
    if args.profile:
        return print_profiles(args.profile.split(","))
    if args.merge:
        return merge(args.merge, args.out or ROOT / "benchmarks" / "results" / "models.csv")
    if args.summarize:
        path = args.out or ROOT / "benchmarks" / "results" / "models.csv"
        if kind == "cuda" and args.impl is None and args.baseline is None:
            print(summarize_gpu(path))
        else:
            print(summarize(path, args.impl or "ugraph", args.baseline or "dgl", kind))
        return None
    args.out = args.out or str(ROOT / ("benchmarks/results/models_gpu.csv" if kind == "cuda" else "benchmarks/results/models.csv"))
    return run_dgl(args)


if __name__ == "__main__":
    main()
