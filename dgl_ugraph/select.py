"""Selection of a parallel strategy: a pure function of the operator signature and the graph.

Each strategy states why it cannot run a case (`why_not`); the choice is the override
(DGL_UGRAPH_STRATEGY), else the predictor's, else the heuristic's, always among the strategies
that can run the case.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional

import torch

from .abstraction import STRATEGIES, ParallelInfo
from .graph import DegreeStats

DTYPE_NAMES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16"}
ATOMIC_STRATEGIES = ("thread_edge", "warp_edge")


@dataclass(frozen=True)
class Signature:
    """What selection may depend on, besides the graph."""

    edge_op: str
    gather_op: str
    a_type: str
    b_type: str
    c_type: str
    dtype: torch.dtype
    out_len: int
    reduce_size: int
    broadcast: bool
    device_type: str

    @property
    def width(self) -> int:
        """Scalar products per message: the work per edge."""
        return self.out_len * self.reduce_size


def deterministic() -> bool:
    return os.environ.get("DGL_UGRAPH_DETERMINISTIC", "0") == "1" or torch.are_deterministic_algorithms_enabled()


def why_not(strategy: str, sig: Signature, num_edges: int, compiled: frozenset) -> Optional[str]:
    """None if `strategy` can run the case, else the reason it cannot."""
    if (strategy, DTYPE_NAMES[sig.dtype]) not in compiled:
        return f"{strategy} for {DTYPE_NAMES[sig.dtype]} is not compiled into this build"
    aggregating = sig.gather_op != "none"
    if strategy in ATOMIC_STRATEGIES and aggregating:
        # max/min combine packed (value, position) keys, whose result does not depend on the
        # order of the atomics; only sums do.
        if sig.gather_op == "sum" and deterministic():
            return f"{strategy} adds with atomics in no fixed order, and deterministic mode is on"
        if sig.gather_op in ("max", "min"):
            if sig.dtype == torch.float64:
                return f"{strategy} packs a max/min value and its position into one 64-bit atomic; float64 does not fit"
            if num_edges >= 2 ** 32:
                return f"{strategy} packs edge positions into 32 bits; this graph has {num_edges} edges"
    return None


def candidates(sig: Signature, num_edges: int, compiled: frozenset) -> List[str]:
    return [s for s in STRATEGIES if why_not(s, sig, num_edges, compiled) is None]


def heuristic(sig: Signature, stats: DegreeStats, allowed: List[str]) -> ParallelInfo:
    """The rule that serves when no learned model fits, read off the H100 grid searches in
    bench/kernels*_search*.csv.gz (there it lands within 0.89-0.99x of the best configuration,
    geomean; in-sample, and without heavily skewed graphs):
    - message creation: one thread per 4 edges and 8-32 feature tiles; a dot over 32 or more
      products takes a warp per edge, its lanes splitting the products;
    - aggregation: one thread per 4 destination rows and about width/2 tiles, so each thread
      keeps two accumulators and no atomics are needed; rows with thousands of in-edges would
      serialise a vertex-parallel worker, so strongly skewed graphs go edge-parallel.
    The first strategy of the preferred order that `allowed` holds wins."""
    if sig.gather_op == "none":
        if sig.edge_op == "dot" and sig.reduce_size >= 32:
            order, grouping, tiling = ["warp_edge", "thread_edge", "warp_vertex", "thread_vertex"], 16, 2
        else:
            order, grouping = ["thread_edge", "warp_edge", "thread_vertex", "warp_vertex"], 4
            tiling = min(32, max(8, sig.out_len // 8))
    else:
        skewed = stats.max > max(1024.0, 64.0 * stats.mean)
        order = ["thread_edge", "thread_vertex", "warp_edge", "warp_vertex"] if skewed else \
            ["thread_vertex", "thread_edge", "warp_vertex", "warp_edge"]
        grouping, tiling = 4, min(64, max(1, sig.out_len // 2))
    strategy = next(s for s in order if s in allowed)
    if strategy.startswith("warp"):
        tiling = min(tiling, max(1, -(-sig.out_len // 32)))
    return ParallelInfo(strategy, grouping, max(1, min(tiling, 64)))
