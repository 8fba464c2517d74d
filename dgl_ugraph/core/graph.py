"""The graph tensors every operator reads, built once per graph and reused."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional, Tuple

import torch


@dataclass(frozen=True)
class DegreeStats:
    """In-degree statistics of the CSC: the predictor's graph features (uGrapher §5)."""

    mean: float
    std: float
    max: int
    empty_rows: int
    edges: int


# params.h's UG_LONG_ROW: the in-degree past which a row is long (UGraph.long_rows).
LONG_ROW = 32


@dataclass
class UGraph:
    """CSC by destination with edge ids, and the same edges as COO sorted by destination.

    Positions p enumerate edges in CSC order: col[p] is the source, row[p] the destination,
    eid[p] the edge id that addresses edge features (None means the identity). All index
    tensors share one dtype (int32 or int64) and one device.
    """

    num_src: int
    num_dst: int
    indptr: torch.Tensor
    col: torch.Tensor
    row: torch.Tensor
    eid: Optional[torch.Tensor]
    _stats: Optional[DegreeStats] = field(default=None, repr=False)
    _edge_order: object = field(default=None, repr=False)  # None: not built; False: eid is no permutation
    _long_rows: Optional[torch.Tensor] = field(default=None, repr=False)
    # What a caller keeps per graph object (selection's plans of repeat calls, oldest first): it
    # lives and dies with this object, so a graph born at a dead one's address starts empty.
    plans: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False, compare=False)

    def __post_init__(self):
        idx = (self.indptr, self.col, self.row) + ((self.eid,) if self.eid is not None else ())
        dtypes = {t.dtype for t in idx}
        devices = {t.device for t in idx}
        if len(dtypes) != 1 or next(iter(dtypes)) not in (torch.int32, torch.int64):
            raise TypeError(f"graph index tensors must share one dtype, int32 or int64; got {dtypes}")
        if len(devices) != 1:
            raise ValueError(f"graph index tensors must share one device; got {devices}")
        if self.indptr.numel() != self.num_dst + 1:
            raise ValueError(f"indptr has {self.indptr.numel()} entries for {self.num_dst} destinations")
        if not (self.col.numel() == self.row.numel() and (self.eid is None or self.eid.numel() == self.col.numel())):
            raise ValueError("col, row and eid must have one entry per edge")
        if not all(t.is_contiguous() for t in idx):
            raise ValueError("graph index tensors must be contiguous")

    @property
    def num_edges(self) -> int:
        return self.col.numel()

    @property
    def idtype(self) -> torch.dtype:
        return self.col.dtype

    @property
    def device(self) -> torch.device:
        return self.col.device

    def rows(self, ttype: str) -> int:
        """How many rows a tensor of type src, dst or edge has on this graph."""
        return {"src": self.num_src, "dst": self.num_dst, "edge": self.num_edges}[ttype]

    @property
    def stats(self) -> DegreeStats:
        """Computed once, in one transfer from the device: on a CUDA graph every read of a value
        waits for the device, and a graph that lives for one call (a sampled block) pays it per
        call."""
        if self._stats is None:
            deg = (self.indptr[1:] - self.indptr[:-1]).to(torch.float64)
            if deg.numel() == 0:
                self._stats = DegreeStats(0.0, 0.0, 0, 0, self.num_edges)
            else:
                mean, std, top, empty = torch.stack(
                    (deg.mean(), deg.std(unbiased=False), deg.max(), (deg == 0).sum().to(torch.float64))).tolist()
                self._stats = DegreeStats(mean, std, int(top), int(empty), self.num_edges)
        return self._stats

    def long_rows(self) -> torch.Tensor:
        """Every destination row of more than LONG_ROW edges, longest first (the graph's dtype and
        device): params.h's long_rows, which the CUDA vertex strategies give a block each where
        such a row would hold up its team's warp. Built once and kept; the degree statistics say
        when there is none, without a second wait for the device (a sampled block's fanout is
        usually under LONG_ROW)."""
        if self._long_rows is None and self.stats.max <= LONG_ROW:
            self._long_rows = torch.empty(0, dtype=self.idtype, device=self.device)
        if self._long_rows is None:
            deg = self.indptr[1:] - self.indptr[:-1]
            rows = (deg > LONG_ROW).nonzero().flatten()
            order = deg[rows].argsort(descending=True, stable=True)
            self._long_rows = rows[order].to(self.idtype).contiguous()
        return self._long_rows

    def edge_order(self) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        """(src, dst) of every edge in edge-id order, or None where CSC order is edge-id order
        already (eid None) or eid is not a permutation of the edge ids. Message creation from an
        edge operand on the GPU's edge strategies walks this COO (core.ops.prepare): in CSC order,
        a permuted eid scatters every edge row it reads and writes. Built once (two scatters and
        two checks) and kept with the graph, whose structure never changes."""
        if self._edge_order is None:
            if self.eid is None:
                self._edge_order = False
            elif self.num_edges == 0:
                self._edge_order = (self.col, self.row)
            else:
                e = self.eid.long()
                lo, hi = (int(x) for x in torch.aminmax(e))
                if lo < 0 or hi >= self.num_edges:
                    self._edge_order = False
                else:
                    src = torch.full_like(self.col, -1)
                    src[e] = self.col
                    dst = torch.empty_like(self.row)
                    dst[e] = self.row
                    # E ids in [0, E): a permutation unless some id is missing.
                    self._edge_order = (src, dst) if int(src.min()) >= 0 else False
        return self._edge_order or None

    @classmethod
    def from_csc(cls, indptr, indices, eids, num_src: int, idtype=None) -> "UGraph":
        """From DGL's CSC (rows are destinations). `eids` may be None or empty (identity)."""
        idtype = idtype or indices.dtype
        indptr = indptr.to(idtype).contiguous()
        col = indices.to(idtype).contiguous()
        num_dst = indptr.numel() - 1
        deg = indptr[1:] - indptr[:-1]
        row = torch.repeat_interleave(torch.arange(num_dst, dtype=idtype, device=col.device), deg.long(),
                                      output_size=col.numel())
        eid = None if eids is None or eids.numel() == 0 else eids.to(idtype).contiguous()
        return cls(num_src, num_dst, indptr, col, row.to(idtype), eid)

    @classmethod
    def from_coo(cls, src, dst, num_src: int, num_dst: int, idtype=None) -> "UGraph":
        """From an edge list in edge-id order; edges are stably sorted by destination."""
        idtype = idtype or src.dtype
        dst64 = dst.long()
        order = torch.sort(dst64, stable=True).indices
        counts = torch.bincount(dst64, minlength=num_dst) if dst64.numel() else torch.zeros(num_dst, dtype=torch.long, device=dst.device)
        indptr = torch.zeros(num_dst + 1, dtype=torch.long, device=dst.device)
        indptr[1:] = torch.cumsum(counts, 0)
        return cls(num_src, num_dst, indptr.to(idtype), src.long()[order].to(idtype).contiguous(),
                   dst64[order].to(idtype).contiguous(), order.to(idtype).contiguous())

    def to(self, device=None, idtype=None) -> "UGraph":
        def conv(t):
            return None if t is None else t.to(device=device or t.device, dtype=idtype or t.dtype).contiguous()
        return UGraph(self.num_src, self.num_dst, conv(self.indptr), conv(self.col), conv(self.row),
                      conv(self.eid), self._stats)

    def reverse(self) -> "UGraph":
        """The reverse graph (sources become destinations), as every backward pass needs."""
        eid = self.eid if self.eid is not None else torch.arange(self.num_edges, dtype=self.idtype, device=self.device)
        rev = UGraph.from_coo(self.row, self.col, self.num_dst, self.num_src, self.idtype)
        # from_coo numbered edges by CSC position; map those positions back to the original ids.
        return UGraph(rev.num_src, rev.num_dst, rev.indptr, rev.col, rev.row,
                      eid[rev.eid.long()].contiguous())
