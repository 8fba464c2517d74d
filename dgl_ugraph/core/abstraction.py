"""uGrapher's unified abstraction: an operator is (edge_op, gather_op) over typed tensors A, B, C.

The names follow DGL (`copy_lhs`, `u_mul_e`'s `mul`, ...). The integer codes mirror
csrc/include/ugraph/params.h, which is the single contract with the compiled core.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

EDGE_OPS = ("copy_lhs", "copy_rhs", "add", "sub", "mul", "div", "dot")
GATHER_OPS = ("none", "sum", "max", "min", "mean")
TENSOR_TYPES = ("null", "src", "dst", "edge")
STRATEGIES = ("thread_vertex", "thread_edge", "warp_vertex", "warp_edge")
# The strategies whose units are runs of edge positions rather than destination rows.
EDGE_STRATEGIES = ("thread_edge", "warp_edge")
GROUPINGS = (1, 2, 4, 8, 16, 32, 64)
TILINGS = tuple(range(1, 65))

DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
# The short names of the compiled core's capability table (and of the autotune cache's keys).
DTYPE_NAMES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16"}
DTYPE_BYTES = {torch.float32: 4, torch.float64: 8, torch.float16: 2, torch.bfloat16: 2}
# The (strategy, dtype name) keys of a full CUDA build, every strategy in every dtype.
EVERY_CUDA_KEY = frozenset((s, d) for s in STRATEGIES for d in DTYPE_NAMES.values())

EDGE_OP_CODE = {name: i for i, name in enumerate(EDGE_OPS)}
GATHER_OP_CODE = {name: i for i, name in enumerate(GATHER_OPS)}
TENSOR_TYPE_CODE = {name: i for i, name in enumerate(TENSOR_TYPES)}
STRATEGY_CODE = {name: i for i, name in enumerate(STRATEGIES)}


def uses_lhs(edge_op: str) -> bool:
    return edge_op != "copy_rhs"


def uses_rhs(edge_op: str) -> bool:
    return edge_op != "copy_lhs"


@dataclass(frozen=True)
class OpInfo:
    """The paper's op_info: (edge_op, gather_op, A, A_type, B, B_type, C_type).

    A and B are (rows, *feature_shape) tensors, or None where the type is "null". C_type is
    "dst" for aggregation (gather_op sum, max, min, or mean: the sum divided by the destination's
    in-degree, at least 1, as dgl.ops.gspmm's mean) and "edge" for message creation (none).
    """

    edge_op: str
    gather_op: str
    A: Optional[torch.Tensor]
    A_type: str
    B: Optional[torch.Tensor]
    B_type: str
    C_type: str

    def __post_init__(self):
        if self.edge_op not in EDGE_OPS:
            raise ValueError(f"edge_op must be one of {EDGE_OPS}, got {self.edge_op!r}")
        if self.gather_op not in GATHER_OPS:
            raise ValueError(f"gather_op must be one of {GATHER_OPS}, got {self.gather_op!r}")
        for name in ("A_type", "B_type"):
            if getattr(self, name) not in TENSOR_TYPES:
                raise ValueError(f"{name} must be one of {TENSOR_TYPES}, got {getattr(self, name)!r}")
        expected_c = "edge" if self.gather_op == "none" else "dst"
        if self.C_type != expected_c:
            raise ValueError(f"gather_op {self.gather_op!r} writes a {expected_c!r} tensor, not C_type={self.C_type!r}")
        for used, tensor, ttype, side in ((uses_lhs(self.edge_op), self.A, self.A_type, "A"),
                                          (uses_rhs(self.edge_op), self.B, self.B_type, "B")):
            if used and (tensor is None or ttype == "null"):
                raise ValueError(f"edge_op {self.edge_op!r} reads {side}, which is null")


@dataclass(frozen=True)
class ParallelInfo:
    """The paper's parallel info: a strategy, V/E grouping g and feature tiling t."""

    strategy: str
    grouping: int = 1
    tiling: int = 1

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.grouping not in GROUPINGS:
            raise ValueError(f"grouping must be one of {GROUPINGS}, got {self.grouping}")
        if self.tiling not in TILINGS:
            raise ValueError(f"tiling must be in 1..64, got {self.tiling}")

    @classmethod
    def parse(cls, text: str) -> "ParallelInfo":
        """'warp_edge:8:4' -> ParallelInfo('warp_edge', 8, 4); g and t default to 1."""
        parts = text.strip().split(":")
        if not 1 <= len(parts) <= 3:
            raise ValueError(f"expected strategy[:grouping[:tiling]], got {text!r}")
        nums = [int(x) for x in parts[1:]]
        return cls(parts[0], *nums)

    def __str__(self) -> str:
        return f"{self.strategy}:{self.grouping}:{self.tiling}"


@dataclass(frozen=True)
class Signature:
    """What a configuration may depend on, besides the graph: the operator, the dtype and the
    shape of its work per edge."""

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


@dataclass(frozen=True)
class Broadcast:
    """DGL's BcastOff: how each output element j addresses A and B within a row."""

    out_shape: Tuple[int, ...]  # per-row output feature shape (dot keeps a trailing 1)
    out_len: int
    a_len: int
    b_len: int
    reduce_size: int
    a_off: Optional[Tuple[int, ...]]  # None: identity
    b_off: Optional[Tuple[int, ...]]
    # params.h's b_off_block: b_off is constant on aligned blocks of this many elements; and the
    # same of a_off (for a call whose operands the CUDA core exchanges: ops.swaps_operands).
    b_off_block: int = 1
    a_off_block: int = 1


def broadcast(edge_op: str, a_shape: Optional[Tuple[int, ...]], b_shape: Optional[Tuple[int, ...]]) -> Broadcast:
    """Per-row feature shapes of A and B -> output shape and offsets, exactly as DGL's
    `infer_broadcast_shape` and `CalcBcastOff`. Raises DGL's error text for incompatible shapes."""
    if edge_op == "copy_lhs":
        shape = tuple(a_shape)
        n = math.prod(shape)
        return Broadcast(shape, n, n, 0, 1, None, None)
    if edge_op == "copy_rhs":
        shape = tuple(b_shape)
        n = math.prod(shape)
        return Broadcast(shape, n, 0, n, 1, None, None)
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if edge_op == "dot":
        if not a_shape or not b_shape or a_shape[-1] != b_shape[-1]:
            raise ValueError(f"The size of the last dimension of lhs and rhs should be the same for dot, got {a_shape} and {b_shape}")
        k = a_shape[-1]
        a_core, b_core = a_shape[:-1], b_shape[:-1]
    else:
        k = 1
        a_core, b_core = a_shape, b_shape
    nd = max(len(a_core), len(b_core))
    a_pad = (1,) * (nd - len(a_core)) + a_core
    b_pad = (1,) * (nd - len(b_core)) + b_core
    out_core = []
    for x, y in zip(a_pad, b_pad):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"Feature shapes {a_shape} and {b_shape} are not valid for broadcasting.")
        out_core.append(max(x, y))
    out_core = tuple(out_core)
    out_shape = out_core + ((1,) if edge_op == "dot" else ())
    out_len = math.prod(out_core)
    a_len, b_len = math.prod(a_pad), math.prod(b_pad)
    # A side shaped like the output reads element j at j: no table (params.h's NULL), so that the
    # CUDA core keeps its 16-byte loads on it when only the other side broadcasts (u_mul_e's
    # scalar edge weight, GAT's per-head attention; NNConv's node rows, once exchanged).
    a_off = None if a_pad == out_core else _offsets(a_pad, out_core)
    b_off = None if b_pad == out_core else _offsets(b_pad, out_core)
    return Broadcast(out_shape, out_len, a_len, b_len, k, a_off, b_off, _constant_block(b_off), _constant_block(a_off))


def _constant_block(offs: Optional[Tuple[int, ...]], most: int = 16) -> int:
    """The largest power of two up to `most` whose aligned blocks of offs each hold one value."""
    block = 1
    while offs is not None and block < most and all(
            offs[j] == offs[j - j % (2 * block)] for j in range(len(offs))):
        block *= 2
    return block


def _offsets(in_shape: Tuple[int, ...], out_shape: Tuple[int, ...]) -> Tuple[int, ...]:
    strides, s = [], 1
    for d in reversed(in_shape):
        strides.append(s)
        s *= d
    strides.reverse()
    offs = []
    for j in range(math.prod(out_shape)):
        rem, off = j, 0
        for dim in range(len(out_shape) - 1, -1, -1):
            idx = rem % out_shape[dim]
            rem //= out_shape[dim]
            if in_shape[dim] != 1:
                off += idx * strides[dim]
        offs.append(off)
    return tuple(offs)
