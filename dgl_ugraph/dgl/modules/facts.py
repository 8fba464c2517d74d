"""What the lean module paths need of a graph beyond its kernels: computed once per cached graph
(cache.GraphEntry), where DGL's modules compute them in every forward.

DGL's GraphConv asks `(graph.in_degrees() == 0).any()` in every forward, which waits for the
device, and rebuilds its degree norms from the degrees (a cast, a clamp, a power and a reshape a
side); SAGEConv's gcn aggregator rebuilds its divisor likewise. Here each is the same operation on
the same values, made once per graph, result dtype and rank, and kept on the entry (`divisors`,
keyed by name first): the results are DGL's to the bit.
"""
from __future__ import annotations

import torch


def has_zero_in_degree(entry) -> bool:
    """Whether a destination node has no in-edge: the degree statistics' empty rows, read from
    the device once per graph (they serve selection too)."""
    return entry.ugraph.stats.empty_rows > 0


def degree_norm(entry, out: bool, both: bool, like: torch.Tensor) -> torch.Tensor:
    """GraphConv's norm: the out- (`out`) or in-degrees, cast to `like`, clamped to 1, to the power
    -1/2 (`both`) or inverted, shaped to broadcast over `like`'s rows."""
    key = ("graph_conv_norm", out, both, like.dtype, like.dim())
    found = entry.divisors.get(key)
    if found is None:
        degs = entry.degrees(out).to(like).clamp(min=1)
        norm = torch.pow(degs, -0.5) if both else 1.0 / degs
        found = entry.divisors[key] = torch.reshape(norm, norm.shape + (1,) * (like.dim() - 1))
    return found


def self_loop_divisor(entry, like: torch.Tensor) -> torch.Tensor:
    """SAGEConv's gcn divisor: the in-degrees cast to `like`, plus one, as a column."""
    key = ("sage_gcn_divisor", like.dtype)
    found = entry.divisors.get(key)
    if found is None:
        found = entry.divisors[key] = entry.degrees(False).to(like).unsqueeze(-1) + 1
    return found
