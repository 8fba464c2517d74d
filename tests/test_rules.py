"""selection/rules.py's L2 slab rule: the tiling that keeps an aggregation's gathered rows in L2,
on the graphs it was measured on and at each of its limits."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from dgl_ugraph.core.abstraction import ParallelInfo, Signature
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.selection import policy, predictor
from dgl_ugraph.selection.rules import REUSE_MIN, SLAB_MIN_BYTES, l2_tiling

H100_L2 = 50 * 2**20


def sig(edge_op="copy_lhs", gather_op="sum", out_len=256, dtype=torch.float32, a="src", b="null"):
    return Signature(edge_op, gather_op, a, b, "dst" if gather_op != "none" else "edge", dtype, out_len, 1, False,
                     "cuda")


WARP_EDGE = ParallelInfo("warp_edge", 64, 1)


@pytest.mark.parametrize("num_src,num_edges,tiles", [
    (50_515, 1_638_396, 2),   # artist: 52 MB of rows, 32 edges per source
    (88_784, 2_093_195, 4),   # soc-BlogCatalog: 91 MB, 24 edges per source
])
def test_tiles_the_measured_graphs(num_src, num_edges, tiles):
    chosen = l2_tiling(WARP_EDGE, sig(), num_src, num_edges, H100_L2)
    assert chosen == ParallelInfo("warp_edge", 64, tiles)
    # what the kernel's walk then does (team.cuh's tile_major_fits): a slab's share fits half the L2
    gathered = num_src * 256 * 4
    assert 2 * gathered > H100_L2 and 2 * gathered <= tiles * H100_L2 and 256 * 4 >= SLAB_MIN_BYTES * tiles


@pytest.mark.parametrize("pinfo,s,num_src,num_edges", [
    (WARP_EDGE, sig(), 56_944, 818_716),                            # ppi: 14 edges per source
    (WARP_EDGE, sig(), 5_201, 217_073),                             # squirrel: its rows fit L2
    (ParallelInfo("thread_edge", 1, 8), sig(), 88_784, 2_093_195),  # not a team strategy
    (WARP_EDGE, sig(gather_op="none", b="dst", edge_op="add"), 88_784, 2_093_195),  # message creation
    (WARP_EDGE, sig(out_len=64, dtype=torch.float16), 500_000, 10_000_000),  # slabs would be 64 bytes
    (WARP_EDGE, sig(edge_op="copy_rhs", a="null", b="edge"), 88_784, 2_093_195),  # gathers no source rows
])
def test_keeps_the_choice_outside_the_regime(pinfo, s, num_src, num_edges):
    assert l2_tiling(pinfo, s, num_src, num_edges, H100_L2) == pinfo


def test_counts_every_gathered_source_operand():
    one = sig(edge_op="mul", a="src", b="edge")
    two = sig(edge_op="add", a="src", b="src")
    n = 30_000  # 31 MB of rows per operand
    assert l2_tiling(WARP_EDGE, one, n, REUSE_MIN * n, H100_L2).tiling == 2
    assert l2_tiling(WARP_EDGE, two, n, REUSE_MIN * n, H100_L2).tiling == 4
    assert l2_tiling(WARP_EDGE, one, n, REUSE_MIN * n - 1, H100_L2) == WARP_EDGE


def test_policy_applies_it_with_the_device_l2():
    n = 30_000  # 31 MB of rows, 16 edges per source
    src = torch.arange(REUSE_MIN * n) % n
    graph = UGraph.from_coo(src, torch.zeros_like(src), n, 1)
    dev = predictor.DeviceInfo("a GPU", 132, H100_L2, 9, 0)
    assert policy.with_l2_tiling(WARP_EDGE, graph, sig(), dev).tiling == 2
    assert policy.with_l2_tiling(WARP_EDGE, graph, sig(), dataclasses.replace(dev, l2_bytes=4 * H100_L2)) == WARP_EDGE
