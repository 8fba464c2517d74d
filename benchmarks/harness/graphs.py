"""The benchmark graphs: the shared datasets, graph_suite.LARGE and the arxiv-like graph, and
uGrapher's Table 3 stand-ins (scaled on CPU, full size on GPU); features and labels."""
from __future__ import annotations

from typing import Iterator, Optional, Tuple

import numpy as np
import torch

from . import ROOT  # noqa: F401  (puts the repository on sys.path)
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

DEFAULT_FEAT = 64
DEFAULT_CLASSES = 4
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


def prepare_inputs(loaded, device="cpu"):
    """(src, dst, n, feat, labels, classes) of a loaded graph, tensors on `device`; once per graph,
    for every model and implementation."""
    src, dst, n, feat, labels = loaded
    feat, labels, classes = features(n, feat, labels)
    return src.to(device), dst.to(device), n, feat.to(device), labels.to(device), classes


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


def graph_set(name: str) -> str:
    """real (the shared datasets), standin (uGrapher's Table 3 and the arxiv-like graph) or large
    (graph_suite.LARGE)."""
    if name.startswith("sim-") or name == gs.ARXIV_LIKE.name:
        return "standin"
    return "large" if name in {spec.name for spec in gs.LARGE} else "real"
