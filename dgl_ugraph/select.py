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

from .abstraction import GROUPINGS, STRATEGIES, ParallelInfo
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
    """A rule of thumb for when no predictor fits, from uGrapher's findings: warps when a message
    fills a warp's lanes, vertex-parallel (no atomics) unless in-degrees are skewed, and enough
    feature tiles to keep the machine busy on narrow rows."""
    wide = sig.width >= 32
    skewed = stats.max > 8 * max(stats.mean, 1.0) and stats.max > 64
    if sig.gather_op == "none":
        order = ["warp_edge", "thread_edge"] if wide else ["thread_edge", "warp_edge"]
        order += ["warp_vertex", "thread_vertex"]
    elif skewed:
        order = (["warp_edge", "thread_edge"] if wide else ["thread_edge", "warp_edge"]) + ["warp_vertex", "thread_vertex"]
    else:
        order = (["warp_vertex", "thread_vertex"] if wide else ["thread_vertex", "warp_vertex"]) + ["thread_edge", "warp_edge"]
    strategy = next(s for s in order if s in allowed)
    if strategy.startswith("thread"):
        tiling = min(sig.out_len, 32)
        grouping = 1
    else:
        tiling = 1
        grouping = 1 if strategy == "warp_vertex" else 4
    if strategy == "thread_edge":
        grouping = min(GROUPINGS, key=lambda g: abs(g - max(stats.mean, 1.0)))
    return ParallelInfo(strategy, grouping, max(1, tiling))
