"""Reproducible graphs for benchmarks and predictor training.

Every graph is a GraphSpec: a family, a size, an in-degree spread, a locality and a seed, so the
same spec always gives the same edges. Families:
- `degree`: in-degrees drawn to hit a mean (E/V) and a standard deviation, sources drawn by
  locality: `random` ids, `banded` (sources near the destination) or `clustered` (communities);
- `molecules`: a batch of small molecule-like graphs (block-diagonal, as PROTEINS/DD);
- stand-ins for the datasets of uGrapher's Table 3, matching their V and E (GNNAdvisor's
  statistics) and an in-degree std (estimated where the paper gives none: see `std_source`);
- the real graphs of ../shared/datasets, when that folder exists.
"""
from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass, replace
from typing import Iterator, List, Optional, Tuple

import numpy as np
import torch

from dgl_ugraph import settings


@dataclass(frozen=True)
class GraphSpec:
    name: str
    family: str  # degree | molecules | dataset
    num_nodes: int
    num_edges: int
    std: float = 1.0  # target in-degree standard deviation
    locality: str = "random"  # random | banded | clustered
    seed: int = 0
    std_source: str = "target"


# uGrapher Table 3 datasets (V, E from GNNAdvisor's Table 3); std: estimated from each graph's
# kind (real citation stats for the Planetoid three, from ../shared/datasets' MANIFEST).
PAPER_STANDINS: Tuple[GraphSpec, ...] = tuple(
    GraphSpec(name, "degree", v, e, std, loc, seed=i, std_source=src)
    for i, (name, v, e, std, loc, src) in enumerate([
        ("citeseer", 3_327, 9_464, 3.4, "random", "MANIFEST"),
        ("cora", 2_708, 10_858, 5.3, "random", "MANIFEST"),
        ("pubmed", 19_717, 88_676, 7.4, "random", "MANIFEST"),
        ("ppi", 56_944, 818_716, 20.0, "clustered", "estimate"),
        ("PROTEINS_full", 43_471, 162_088, 1.15, "banded", "MANIFEST"),
        ("OVCAR-8H", 1_890_931, 3_946_402, 0.6, "banded", "estimate"),
        ("Yeast", 1_714_644, 3_636_546, 0.6, "banded", "estimate"),
        ("DD", 334_925, 1_686_092, 1.5, "banded", "estimate"),
        ("TWITTER-Real-Graph-Partial", 580_768, 1_435_116, 5.0, "banded", "estimate"),
        ("SW-620H", 1_889_971, 3_944_206, 0.6, "banded", "estimate"),
        ("amazon0505", 410_236, 4_878_875, 10.0, "clustered", "estimate"),
        ("artist", 50_515, 1_638_396, 80.0, "random", "estimate"),
        ("com-amazon", 334_863, 1_851_744, 5.0, "clustered", "estimate"),
        ("soc-BlogCatalog", 88_784, 2_093_195, 120.0, "random", "estimate"),
        ("amazon0601", 403_394, 3_387_388, 5.0, "clustered", "estimate"),
    ]))

# Two large graphs of >= 20M edges, one skewed and one balanced, whose node features at F >= 64
# exceed an H100/H200 L2 cache (50-60 MB) more than ten times over.
LARGE: Tuple[GraphSpec, ...] = (
    GraphSpec("big-skewed", "degree", 2_000_000, 40_000_000, 200.0, "random", seed=101),
    GraphSpec("big-balanced", "degree", 4_000_000, 40_000_000, 2.0, "random", seed=102),
)


# A citation graph of ogbn-arxiv's size (169,343 papers, 1,166,243 citations; a skewed in-degree,
# clustered by topic), whose models take node features of 128 and 40 classes as arxiv's.
ARXIV_LIKE = GraphSpec("arxiv-like", "degree", 169_343, 1_166_243, 30.0, "clustered", seed=103)
ARXIV_FEATURES, ARXIV_CLASSES = 128, 40


def synthetic_grid(max_edges: int = 50_000_000, seed: int = 1000) -> List[GraphSpec]:
    """The predictor's training families: V from 1K to 2M, E from 10K to 50M, in-degree std from
    about 0.5 to about 1000, three localities, and molecule batches."""
    specs = []
    rng = np.random.default_rng(seed)
    i = 0
    for v in (1_000, 10_000, 100_000, 500_000, 2_000_000):
        for avg in (2, 5, 10, 25):
            e = v * avg
            if e < 10_000 or e > max_edges:
                continue
            for std in (0.5, 2.0, 10.0, 100.0, 1000.0):
                if std > 0.8 * math.sqrt(v * avg) * 4:  # a std no graph of this size can have
                    continue
                loc = ("random", "banded", "clustered")[int(rng.integers(3))]
                specs.append(GraphSpec(f"deg-v{v}-d{avg}-s{std:g}-{loc}", "degree", v, e, std, loc, seed=seed + i))
                i += 1
    for n_graphs in (200, 2_000, 20_000):
        specs.append(GraphSpec(f"molecules-{n_graphs}", "molecules", n_graphs * 30, n_graphs * 60, 1.0,
                               "banded", seed=seed + i))
        i += 1
    return specs


def _in_degrees(spec: GraphSpec, rng: np.random.Generator) -> np.ndarray:
    v, e = spec.num_nodes, spec.num_edges
    mean = e / v
    if spec.std <= math.sqrt(mean) or spec.std < 1.0:
        deg = rng.normal(mean, spec.std, v)
    else:  # a heavy tail: lognormal with the requested mean and std
        sigma2 = math.log1p((spec.std / mean) ** 2)
        deg = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), v)
    deg = np.clip(deg, 0, None)
    deg = np.rint(deg * (e / max(deg.sum(), 1e-12))).astype(np.int64)
    # Rounding leaves the total a little off E: move single edges on random rows until it is exact.
    while (diff := e - int(deg.sum())) != 0:
        rows = rng.integers(0, v, abs(diff))
        if diff > 0:
            np.add.at(deg, rows, 1)
        else:
            np.subtract.at(deg, rows, (deg[rows] > 0).astype(np.int64))
    return deg


def _sources(spec: GraphSpec, dst: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    v = spec.num_nodes
    if spec.locality == "random":
        return rng.integers(0, v, dst.size)
    if spec.locality == "banded":
        band = max(8, v // 1000)
        return (dst + rng.integers(-band, band + 1, dst.size)) % v
    community = max(64, v // 256)
    same = rng.random(dst.size) < 0.9
    local = (dst // community) * community + rng.integers(0, community, dst.size)
    return np.where(same, np.minimum(local, v - 1), rng.integers(0, v, dst.size))


def _molecules(spec: GraphSpec, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray, int]:
    n_graphs = max(1, spec.num_nodes // 30)
    sizes = rng.integers(10, 51, n_graphs)
    srcs, dsts, base = [], [], 0
    for n in sizes:  # a random tree plus a few ring bonds, both directions, as in molecules
        parent = np.array([rng.integers(0, k) for k in range(1, n)])
        child = np.arange(1, n)
        extra = rng.integers(0, n, (max(1, n // 8), 2))
        s = np.concatenate([parent, extra[:, 0]]) + base
        d = np.concatenate([child, extra[:, 1]]) + base
        srcs += [s, d]
        dsts += [d, s]
        base += int(n)
    return np.concatenate(srcs), np.concatenate(dsts), base


def make(spec: GraphSpec) -> Tuple[torch.Tensor, torch.Tensor, int]:
    """(src, dst, num_nodes): int64 CPU tensors in edge-id order, identical for equal specs."""
    rng = np.random.default_rng(spec.seed)
    if spec.family == "molecules":
        src, dst, n = _molecules(spec, rng)
    elif spec.family == "degree":
        deg = rng.permutation(_in_degrees(spec, rng))
        dst = np.repeat(np.arange(spec.num_nodes), deg)
        src = _sources(spec, dst, rng)
        order = rng.permutation(dst.size)  # edge ids in no particular order, as users build graphs
        src, dst, n = src[order], dst[order], spec.num_nodes
    else:
        raise ValueError(f"unknown family {spec.family!r}")
    return torch.from_numpy(np.ascontiguousarray(src)), torch.from_numpy(np.ascontiguousarray(dst)), int(n)


def datasets_dir() -> Optional[pathlib.Path]:
    env = settings.datasets()
    candidates = [pathlib.Path(env)] if env else []
    here = pathlib.Path(__file__).resolve().parents[2]  # the checkout
    candidates += [here.parent / "shared" / "datasets", here / "shared" / "datasets"]
    return next((c for c in candidates if c.is_dir()), None)


def _read_dataset(path: pathlib.Path) -> Tuple[torch.Tensor, torch.Tensor, int]:
    with np.load(path) as z:
        return (torch.from_numpy(z["src"].astype(np.int64)), torch.from_numpy(z["dst"].astype(np.int64)),
                int(z["num_nodes"]))


def shared_datasets() -> Iterator[Tuple[str, torch.Tensor, torch.Tensor, int]]:
    """(name, src, dst, num_nodes) for each graph in ../shared/datasets; nothing if it is absent."""
    root = datasets_dir()
    if root is None:
        return
    for path in sorted(root.glob("*.npz")):
        yield (path.stem, *_read_dataset(path))


def shared_dataset(name: str) -> Optional[Tuple[torch.Tensor, torch.Tensor, int]]:
    """(src, dst, num_nodes) of the graph `name` of ../shared/datasets; None where it is absent."""
    root = datasets_dir()
    path = root / f"{name}.npz" if root else None
    return _read_dataset(path) if path is not None and path.is_file() else None


def describe(src: torch.Tensor, dst: torch.Tensor, n: int) -> dict:
    deg = torch.bincount(dst, minlength=n).double()
    return {"V": n, "E": int(dst.numel()), "mean_deg": float(deg.mean()) if n else 0.0,
            "std_deg": float(deg.std(unbiased=False)) if n else 0.0, "max_deg": int(deg.max()) if n else 0}


def scaled(spec: GraphSpec, factor: float) -> GraphSpec:
    """The same family at a fraction of the size (for quick runs)."""
    return replace(spec, num_nodes=max(100, int(spec.num_nodes * factor)),
                   num_edges=max(1000, int(spec.num_edges * factor)))
