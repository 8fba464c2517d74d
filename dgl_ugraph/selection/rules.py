"""The hand-written selection rules: a pure function of the operator signature and the graph's
in-degree statistics, among the strategies the core can run (`core.capability`). They serve
where no learned model does (`policy` decides which).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from dgl_ugraph.core.abstraction import DTYPE_BYTES, ParallelInfo, Signature
from dgl_ugraph.core.graph import DegreeStats


def team_lanes(sig: Signature) -> int:
    """Lanes per team of the warp strategies for every op but dot (csrc/cuda/team.cuh): one
    16-byte vector per lane where the row holds whole vectors, up to 32 lanes."""
    vec = 16 // DTYPE_BYTES[sig.dtype]
    vectors = sig.out_len // vec if sig.out_len % vec == 0 else sig.out_len
    return min(32, 1 << max(0, vectors - 1).bit_length())


def heuristic(sig: Signature, stats: DegreeStats, allowed: List[str]) -> ParallelInfo:
    """The rule that serves when no learned model fits (a GPU outside the H100/H200 family, unless
    `python -m dgl_ugraph tune` trained one for it), read off the collection the model is trained
    on (data/predictor/: 4,922 cases of the team kernels on 108 graphs, H100 and H200); the first
    strategy of the preferred order that `allowed` holds wins. Against the grid search's best,
    geomean (10th percentile): 0.918 (0.77), H100 0.922 and H200 0.890, where the rule before this
    one read 0.761 (0.51), 0.759 and 0.777; `tests/selection/test_rules.py` holds it there.
    - Aggregation (every op but dot) runs on the warp strategies' teams (csrc/cuda/team.cuh):
      lanes sized to the row, 16-byte accesses, several edges in flight. warp_vertex (no atomics),
      one destination row a team: 0.89 of the best on rows of up to 64 bytes, where four rows a
      team (the rule before) gave 0.61, as a team per row spreads a small graph's loads over the
      GPU. Where the graph has ROWS_PER_TEAM rows or more for every resident team, 2 rows a team
      (4 on rows past 64 bytes), which keeps the graphs of over 1M edges at 0.93-0.94.
      Unless the longest row would outlast everything else: one team walks it alone while the
      rest of the graph is shared among all resident teams, so warp_edge (a fixed run of
      positions a team: 8 on rows of up to 64 bytes, up to 32 for max/min, whose split rows pay
      packed-key atomics; else 16, or 64 where a team's share passes 64 edges on rows past 64
      bytes) wins once the longest row exceeds `_SKEW` times a team's share of the edges (4 for
      sums; 10 for max/min, whose warp_edge also pays a decoding pass). On the H200's suite
      (fresh timings of 405 cases) this rule ran at 0.97 of the shipped model's speed, and 1.08x
      the rule before it.
    - Message creation (every op but dot): rows of up to NARROW_MESSAGE_BYTES (GAT's scores, a
      few heads a row) go one thread per position, two positions a thread and a thread per
      element up to 4 (thread_edge:2:min(4, row)): 0.94 of the best, where warp_edge's teams of a
      lane or two gave 0.80; wider rows warp_edge, 4 positions a team: 0.90, where 2 gave 0.81
      and 16 left small graphs kernel-bound (u_add_v on a cora-sized graph: 25 us against 8).
    - Tiles: one per slab of 32 lanes x 16 bytes, so a wide row spreads over as many teams.
    - A dot message, read off the H200 collection of the team dot kernels
      (data/predictor/h200-7da5efe, 233 cases): over 32 or more products, warp_edge teams of 8
      positions (0.90 of the best configuration, geomean over 129 cases; the rule before, 16
      positions, 0.86); over fewer, one thread per position and 4 tiles (0.84 over 104)."""
    row_bytes = sig.out_len * DTYPE_BYTES[sig.dtype]
    slabs = max(1, min(64, -(-row_bytes // (32 * 16))))
    if sig.edge_op == "dot":
        if sig.reduce_size >= 32:
            order, grouping, tiling = ["warp_edge", "thread_edge", "warp_vertex", "thread_vertex"], 8, 1
        else:
            order, grouping, tiling = ["thread_edge", "warp_edge", "thread_vertex", "warp_vertex"], 1, 4
        strategy = next(s for s in order if s in allowed)
        if strategy.startswith("warp"):
            tiling = min(tiling, max(1, -(-sig.out_len // 32)))
        return ParallelInfo(strategy, grouping, max(1, min(tiling, 64)))
    if sig.gather_op == "none":
        if row_bytes <= NARROW_MESSAGE_BYTES and "thread_edge" in allowed:
            return ParallelInfo("thread_edge", 2, max(1, min(4, sig.out_len)))
        order = ["warp_edge", "warp_vertex", "thread_edge", "thread_vertex"]
        return ParallelInfo(next(s for s in order if s in allowed), 4, slabs)
    lanes = team_lanes(sig)
    resident_teams = RESIDENT_WARPS * (32 // lanes) / slabs
    share = stats.edges / resident_teams
    # A graph smaller than one wave of teams is launch-bound: count its share as 32 edges.
    skewed = stats.max > _SKEW[sig.gather_op] * max(share, 32.0)
    order = ["warp_edge", "warp_vertex", "thread_edge", "thread_vertex"] if skewed else \
        ["warp_vertex", "warp_edge", "thread_vertex", "thread_edge"]
    strategy = next(s for s in order if s in allowed)
    if strategy == "warp_edge":
        narrow = row_bytes <= (32 if sig.gather_op in ("max", "min") else 64)
        grouping = 8 if narrow else 16 if share < 64 or row_bytes <= 64 else 64
    else:
        rows = stats.edges / stats.mean if stats.mean > 0 else 0.0
        grouping = (4 if row_bytes > 64 else 2) if rows >= ROWS_PER_TEAM * resident_teams else 1
    return ParallelInfo(strategy, grouping, slabs)


# Message rows of at most this many bytes go one thread per position (heuristic).
NARROW_MESSAGE_BYTES = 32
# Destination rows per resident team from which warp_vertex takes several rows a team
# (heuristic): the geomean over the collection moves by under 1% from 2 to 16.
ROWS_PER_TEAM = 4

# Warps an H100 keeps resident when the team kernels run at half occupancy (132 SMs x 32): with
# the lanes per team, how many teams share the edges at once.
RESIDENT_WARPS = 132 * 32
_SKEW = {"sum": 4.0, "mean": 4.0, "max": 10.0, "min": 10.0}

# thread_vertex walks each destination row in one thread and has no heavy-row path (the warp
# strategies' teams do: csrc/cuda/team.cuh), so a row far longer than a thread's share of the
# edges runs alone long after the rest of the graph. Read off a five-fold cross-validation of the
# model by graph over every collected case (docs/performance.md): of the 1,222 cases (43
# graphs) whose longest row passes STRAGGLER x max(edges / RESIDENT_THREADS, 32), thread_vertex
# was the fastest configuration in one (0.91x of it the next best there), and the model's four
# picks of it ran 0.19-0.39x the best (fp64 max on ds-squirrel and a banded 2M-row graph), each
# 0.99-1.0x with it struck; the same rule at 8x or 32x struck the same four.
STRAGGLER = 16.0
RESIDENT_THREADS = 132 * 2048


def straggler(strategy: str, stats: DegreeStats) -> Optional[str]:
    """Why `strategy` would leave one thread on a row far longer than the others' work, or None."""
    if strategy != "thread_vertex":
        return None
    share = max(stats.edges / RESIDENT_THREADS, 32.0)
    if stats.max > STRAGGLER * share:
        return (f"thread_vertex walks a row in one thread: the longest row ({stats.max} edges) is over "
                f"{STRAGGLER:g}x a thread's share ({share:.0f})")
    return None


def steady(allowed: Sequence[str], stats: DegreeStats) -> List[str]:
    """`allowed` without the strategies that would straggle on this graph (`straggler`), unless
    none would be left."""
    kept = [s for s in allowed if straggler(s, stats) is None]
    return kept or list(allowed)


# The L2 slab rule's thresholds (csrc/cuda/team.cuh's tile_major_fits walks tile-major only on
# slabs of at least SLAB_MIN_BYTES).
SLAB_MIN_BYTES = 256
REUSE_MIN = 16


def l2_tiling(pinfo: ParallelInfo, sig: Signature, num_src: int, num_edges: int, l2_bytes: int) -> ParallelInfo:
    """The tiling that keeps an aggregation's gathered rows in L2, applied to a chosen team
    configuration. Where the source rows an aggregation gathers outgrow half the L2 and each is
    read by at least REUSE_MIN edges on average, rows fetched whole keep evicting each other; cut
    into t slabs (t the smallest power of two whose slab share fits half the L2, each slab still
    SLAB_MIN_BYTES or more), the team kernels walk one slab of every row at a time. Measured on an
    H100 at F = 256 in float32 (core 0a2c6e47): artist (52 MB of rows, 32 edges per
    source) 297 -> 242 us at t = 2, soc-BlogCatalog (91 MB, 24 edges per source) 552 -> 339 us at
    t = 4, against cuSPARSE's 293 and 512 us; ppi (58 MB, 14 edges per source) loses 109 -> 125 us
    at t = 4, where the rows are read too few times to pay for the slabs' repeated index loads.
    The learned model has not seen enough of this regime to find it (its collection walks the
    whole grid on small and huge graphs alike), and the rule is a function of the same inputs."""
    if not pinfo.strategy.startswith("warp") or sig.gather_op == "none" or sig.edge_op == "dot":
        return pinfo
    used = ((sig.a_type, sig.edge_op != "copy_rhs"), (sig.b_type, sig.edge_op != "copy_lhs"))
    row = sig.out_len * DTYPE_BYTES[sig.dtype]
    gathered = num_src * row * sum(t == "src" and use for t, use in used)
    if l2_bytes <= 0 or 2 * gathered <= l2_bytes or num_edges < REUSE_MIN * num_src:
        return pinfo
    tiles = 1
    while 2 * gathered > tiles * l2_bytes:
        tiles *= 2
    if row // tiles < SLAB_MIN_BYTES:
        return pinfo
    return ParallelInfo(pinfo.strategy, pinfo.grouping, tiles)
