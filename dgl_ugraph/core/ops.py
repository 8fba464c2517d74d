"""The Python face of the operator: checks, allocation and dispatch to the compiled core.

`prepare(graph, op_info, parallel_info)` checks one call of uGrapher's unified operator and packs
it for the core; on CUDA it runs with the ParallelInfo it is given, which selection chose
(`dgl_ugraph.ugrapher` is the narrow API that chooses and runs). `Plan` is the DGL layer's
repeat-call path over the same packing.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional, Tuple

import torch

from dgl_ugraph import settings
from dgl_ugraph.core import _ext
from dgl_ugraph.core.abstraction import (DTYPE_CODES, EDGE_OP_CODE, EDGE_STRATEGIES, GATHER_OP_CODE, STRATEGY_CODE,
                                         TENSOR_TYPE_CODE, Broadcast, OpInfo, ParallelInfo, Signature, broadcast,
                                         uses_lhs, uses_rhs)
from dgl_ugraph.core.capability import why_not
from dgl_ugraph.core.graph import UGraph

# Debugging aid (DGL_UGRAPH_DEBUG_POISON=1, on in the tests): fill every output with NaN / -7 before the kernel
# runs, so an element the kernel forgets to write shows up instead of hiding behind allocator leftovers.
POISON_OUTPUTS = settings.debug_poison()

# A workspace of at most this many bytes is handed to the core zero-filled and kept for the next
# call (params.h's workspace_zeroed: the core leaves it zeroed): the CUDA edge strategies' max/min
# and half sums then skip the pass that clears it, a launch that on a small graph is a tenth of
# the call. A larger one is allocated per call as before: holding it would pin memory twice the
# size of the output, for a pass that is a few percent of such a call.
ZEROED_WORKSPACE_BYTES = 32 << 20
# Streams a plan keeps a zeroed workspace for, the oldest dropped first: a program that runs each
# step on a new stream keeps a few, not one per step. A dropped one goes back to the caching
# allocator's pool of the stream it was made on, where later work is ordered after its calls.
ZEROED_WORKSPACE_STREAMS = 4

# The CUDA softmax split in two launches (csrc/cuda/softmax.h's UgSoftmaxSplit): each row's
# statistics, then every edge's result in edge-id order. One launch reads and writes its tensors
# at the edge rows of each destination, scattered where edge ids are not in CSC order; past L2,
# each score then costs a 32-byte sector. Against one launch (H100, core 719e977d, 0.9-5.8M edges
# x 1-8 float32 heads; figures in docs/performance.md, "Edge softmax"): the backward gains
# 1.03-3.18x on every graph; the forward gains with 2 or more heads while its statistics fit in
# L2 and loses past it (0.62x at 8 heads on 1.9M rows), is even with 1 head (0.75-1.25x), and
# wins at every width where rows pass 1,024 in-edges, which one launch walks in each pass.
# So: the backward splits past SOFTMAX_SPLIT_ELEMENTS scores; the forward past it too where a row
# passes SOFTMAX_SPLIT_FORWARD_DEGREE in-edges, or where its rows are of at least
# SOFTMAX_SPLIT_FORWARD_ROW_BYTES and its statistics fit in SOFTMAX_SPLIT_FORWARD_STATS_BYTES
# (None: the device's L2 cache). Smaller softmaxes, in L2 or bound by the host, keep one launch.
SOFTMAX_SPLIT_ELEMENTS = 1 << 20
SOFTMAX_SPLIT_FORWARD_ROW_BYTES = 8
SOFTMAX_SPLIT_FORWARD_STATS_BYTES: Optional[int] = None
SOFTMAX_SPLIT_FORWARD_DEGREE = 1 << 10


@lru_cache(maxsize=16)
def _l2_bytes(index: int) -> int:
    """CUDA device index's L2 cache in bytes (0 where this torch does not say)."""
    return getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0)


def softmax_splits(graph: UGraph, x: torch.Tensor, backward: bool) -> bool:
    """Whether the CUDA edge softmax of x on graph runs split (SOFTMAX_SPLIT_* above). The first
    such call of a graph builds its edge-id order (UGraph.edge_order), kept with the graph."""
    if x.numel() <= SOFTMAX_SPLIT_ELEMENTS or graph.num_edges == 0:
        return False
    if not backward and graph.stats.max <= SOFTMAX_SPLIT_FORWARD_DEGREE:
        row = x.numel() // graph.num_edges
        if row * x.element_size() < SOFTMAX_SPLIT_FORWARD_ROW_BYTES:
            return False
        budget = SOFTMAX_SPLIT_FORWARD_STATS_BYTES
        if budget is None:
            budget = _l2_bytes(cuda_index(x.device)) if x.is_cuda else 0
        if 2 * graph.num_dst * row * (8 if x.dtype == torch.float64 else 4) > budget:
            return False
    return graph.edge_order() is not None


def workspace_zeroed(nbytes: int) -> int:
    """The params' workspace_zeroed for a CUDA workspace of nbytes: 1 (zero-filled and kept) up to
    ZEROED_WORKSPACE_BYTES, else 0."""
    return int(nbytes <= ZEROED_WORKSPACE_BYTES)


def new_workspace(nbytes: int, device: torch.device) -> Tuple[torch.Tensor, int]:
    """A workspace of nbytes for a CUDA call and its params' workspace_zeroed (workspace_zeroed):
    zero-filled where that is 1, else uninitialized."""
    zeroed = workspace_zeroed(nbytes)
    return (torch.zeros if zeroed else torch.empty)(nbytes, dtype=torch.uint8, device=device), zeroed


@lru_cache(maxsize=4096)
def _broadcast(edge_op, a_shape, b_shape) -> Broadcast:
    return broadcast(edge_op, a_shape, b_shape)


@lru_cache(maxsize=1024)
def _offsets(offs: Optional[Tuple[int, ...]], device: torch.device) -> Optional[torch.Tensor]:
    """The broadcast offsets as a tensor on `device`, made once per (offsets, device); bounded,
    as every distinct broadcast shape of a program adds one."""
    if offs is None:
        return None
    return torch.tensor(offs, dtype=torch.int64, device=device)


def _operand(t: torch.Tensor, ttype: str, graph: UGraph, side: str, dtype: torch.dtype) -> torch.Tensor:
    """Checks one operand; returns it with contiguous features (rows may keep any stride)."""
    if t.device != graph.device:
        raise ValueError(f"{side} is on {t.device} but the graph is on {graph.device}")
    if t.dtype != dtype:
        raise TypeError(f"A and B must share one dtype, got {dtype} and {t.dtype}")
    if t.dim() < 1 or t.shape[0] != graph.rows(ttype):
        raise ValueError(f"{side} is typed {ttype} and needs {graph.rows(ttype)} rows, got shape {tuple(t.shape)}")
    return _features_contiguous(t)


def signature(graph: UGraph, op: OpInfo) -> Tuple[Signature, Broadcast]:
    a, b = op.A if uses_lhs(op.edge_op) else None, op.B if uses_rhs(op.edge_op) else None
    dtype = (a if a is not None else b).dtype
    a_shape = tuple(a.shape[1:]) or (1,) if a is not None else None
    b_shape = tuple(b.shape[1:]) or (1,) if b is not None else None
    bc = _broadcast(op.edge_op, a_shape, b_shape)
    sig = Signature(op.edge_op, op.gather_op, op.A_type if a is not None else "null",
                    op.B_type if b is not None else "null", op.C_type, dtype, bc.out_len, bc.reduce_size,
                    bc.a_off is not None or bc.b_off is not None, graph.device.type)
    return sig, bc


class Prepared:
    """One operator call with everything checked, allocated and packed into the params struct:
    `run()` launches it again on the same tensors with no Python work beyond the call itself
    (for timing, autotuning and repeated use). A CUDA call is `pending` until `configure` gives
    it a ParallelInfo."""

    __slots__ = ("params", "outputs", "signature", "pending", "swapped", "_keep", "_device", "_core", "_num_edges",
                 "_topologies")

    def __init__(self, params, outputs, keep, device, core, sig=None, num_edges=0, pending=False, topologies=None,
                 swapped=False):
        self.params, self.outputs, self._keep, self._device, self._core = params, outputs, keep, device, core
        self.signature, self._num_edges, self.pending = sig, num_edges, pending
        # Whether the params hold the call's A as the core's B and its B as A (swaps_operands).
        self.swapped = swapped
        # (CSC order, edge-id order) as (col, row, eid) addresses where message creation has both.
        self._topologies = topologies

    def params_for(self, pinfo: ParallelInfo):
        """A copy of the params with pinfo's configuration, unchecked: the edge strategies create
        messages in edge-id order where the graph has it (UGraph.edge_order)."""
        fields = dict(strategy=STRATEGY_CODE[pinfo.strategy], grouping=pinfo.grouping, tiling=pinfo.tiling)
        if self._topologies is not None:
            col, row, eid = self._topologies[pinfo.strategy in EDGE_STRATEGIES]
            fields.update(col=col, row=row, eid=eid)
        return self.params.replace(**fields)

    def configure(self, pinfo: ParallelInfo) -> None:
        """Sets the CUDA configuration, refused (TypeError) where the core cannot run it."""
        reason = why_not(pinfo.strategy, self.signature, self._num_edges, _ext.compiled_cuda_keys())
        if reason:
            raise TypeError(f"{pinfo} cannot run this case: {reason}")
        p = self.params = self.params_for(pinfo)
        nbytes = self._core.cuda_workspace_bytes(p)
        if nbytes:
            workspace, zeroed = new_workspace(nbytes, self._device)
            p.workspace, p.workspace_bytes, p.workspace_zeroed = workspace.data_ptr(), nbytes, zeroed
            self._keep.append(workspace)
        self.pending = False

    def run(self):
        if self.params is None:  # an empty output: nothing to compute
            return self.outputs
        if self.pending:
            raise ValueError("a CUDA call runs with a chosen ParallelInfo: pass one, or call dgl_ugraph.ugrapher, "
                             "which chooses it")
        _launch(self._core, self.params, self.outputs, cuda_index(self._device))
        return self.outputs


# torch._C's current device and raw stream (a CPU-only torch has neither: no CUDA call reaches them).
_empty_like = torch.empty_like
_cuda_get_device = getattr(torch._C, "_cuda_getDevice", None)
_cuda_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def cuda_index(device: torch.device) -> Optional[int]:
    """The CUDA device index that `_launch` takes: None on CPU."""
    if device.type != "cuda":
        return None
    return device.index if device.index is not None else torch.cuda.current_device()


def _launch(core, params, outputs, index: Optional[int], data: Optional[tuple] = None) -> None:
    """Runs packed params on the CPU (index None), or on the current stream of CUDA device
    `index` (which CUDA graph capture sees). `data`: this call's with_data arguments, for
    params that are a Plan's template."""
    if POISON_OUTPUTS:
        outputs[0].fill_(float("nan"))
        for t in outputs[1:]:
            if t is not None:
                t.fill_(-7)
    if index is None:
        core.run_cpu(params if data is None else params.with_data(*data))
        return
    # The raw stream handle, without building a torch.cuda.Stream per call; the device guard
    # only where the call's device is not the current one; the current device from torch._C,
    # as the caller's outputs on that device initialized CUDA already (torch.cuda.current_device
    # re-checks that in Python). Each costs microseconds, which on a small graph is as much as
    # the kernel; so does a params object per call, which run_cuda_with spares a Plan.
    run, data = (core.run_cuda, ()) if data is None else (core.run_cuda_with, data)
    if _cuda_get_device() == index:
        run(params, _cuda_raw_stream(index), *data)
    else:
        with torch.cuda.device(index):
            run(params, _cuda_raw_stream(index), *data)


def _walks_edge_order(op: OpInfo, sig: Signature, device: torch.device) -> bool:
    """Message creation that reads an edge operand walks the edges in edge-id order on CUDA's edge
    strategies (Prepared.params_for): its edge reads and writes become sequential instead of
    scattered by eid, for one more scattered read of a node operand. Where both operands are node
    rows, CSC order, which reads each destination row once for a run of edges, measured faster
    (H100: u_add_v/u_dot_v 1.1-2x on the real graphs)."""
    return device.type == "cuda" and op.gather_op == "none" and "edge" in (sig.a_type, sig.b_type)


_NO_ROWS = torch.empty(0, dtype=torch.int64)


def swaps_operands(edge_op: str, bc: Broadcast, device: torch.device) -> bool:
    """Whether the CUDA core runs the call as B op A. Its team kernels read A as 16-byte vectors
    only where A is not broadcast, while B may repeat one value over each vector (b_off_block):
    so a commutative op whose A repeats over aligned blocks and whose B does not runs exchanged,
    with the same values bit for bit (IEEE addition and multiplication commute) and the same max/min
    winners (arg_a and arg_b exchanged with them). That is NNConv's aggregation, u_mul_e of x
    (N, k, 1) by w (E, k, k), and its backward's u_mul_v; unexchanged, its lanes read one element
    each (H200, sim-amazon0505, k = 16)."""
    return device.type == "cuda" and edge_op in ("add", "mul") and bc.b_off is None and bc.a_off_block > 1


def _uses_long_rows(op: OpInfo, device: torch.device) -> bool:
    """Whether the call's params carry the graph's long rows: aggregations on CUDA (team.cuh's
    heavy rows), where the list costs a sync once per graph."""
    return device.type == "cuda" and op.gather_op != "none"


def prepare(graph: UGraph, op_info: OpInfo, parallel_info: Optional[ParallelInfo] = None,
            args: bool = True, arg_dtype: Optional[torch.dtype] = None) -> Prepared:
    """Checks the call, allocates C (and argA/argB for max/min, unless `args` is False: a call
    that no backward pass reads them for, which then writes C alone) and fills the params. On
    CUDA, `parallel_info` configures it; without one it stays pending (see Prepared). On CPU it is
    ignored. The args are of the graph's index type, or of `arg_dtype`: int64 on an int32 graph
    (params.h's arg_bits), as DGL reads the args of a graph of int64 ids run on 32-bit indices."""
    op = op_info
    a = op.A if uses_lhs(op.edge_op) else None
    b = op.B if uses_rhs(op.edge_op) else None
    dtype = (a if a is not None else b).dtype
    if dtype not in DTYPE_CODES:
        raise TypeError(f"features must be float32, float64, float16 or bfloat16, got {dtype}")
    if a is not None:
        a = _operand(a, op.A_type, graph, "A", dtype)
    if b is not None:
        b = _operand(b, op.B_type, graph, "B", dtype)
    sig, bc = signature(graph, op)
    c_rows = graph.num_dst if op.C_type == "dst" else graph.num_edges
    device = graph.device
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"dgl_ugraph runs on CPU and CUDA devices, not {device}")
    c = torch.empty((c_rows,) + bc.out_shape, dtype=dtype, device=device)
    arg_dtype = arg_dtype or graph.idtype
    if arg_dtype not in (graph.idtype, torch.int64):
        raise TypeError(f"args are of the graph's index type ({graph.idtype}) or int64, not {arg_dtype}")
    arg_a = arg_b = None
    if args and op.gather_op in ("max", "min"):
        if a is not None:
            arg_a = torch.empty(c.shape, dtype=arg_dtype, device=device)
        if b is not None:
            arg_b = torch.empty(c.shape, dtype=arg_dtype, device=device)
    outputs = (c, arg_a, arg_b)
    core = _ext.core()
    if c.numel() == 0:
        return Prepared(None, outputs, (), device, core)

    a_off, b_off = _offsets(bc.a_off, device), _offsets(bc.b_off, device)
    # For the CUDA vertex strategies' long rows (params.h); the CPU core reads none of them.
    long_rows = graph.long_rows() if _uses_long_rows(op, device) else _NO_ROWS
    # The core's A and B, each as (tensor, type, length, offsets, arg): the call's, or exchanged.
    sides = [(a, sig.a_type, bc.a_len, a_off, arg_a), (b, sig.b_type, bc.b_len, b_off, arg_b)]
    swapped = swaps_operands(op.edge_op, bc, device)
    (ka, ka_type, ka_len, ka_off, k_arg_a), (kb, kb_type, kb_len, kb_off, k_arg_b) = sides[::-1] if swapped else sides
    p = core.Params(
        num_src=graph.num_src, num_dst=graph.num_dst, num_edges=graph.num_edges,
        index_bits=32 if graph.idtype == torch.int32 else 64,
        max_degree=graph.stats.max if long_rows.numel() else 0,
        long_rows=long_rows.data_ptr() if long_rows.numel() else 0, num_long_rows=long_rows.numel(),
        indptr=graph.indptr.data_ptr(), col=graph.col.data_ptr(), row=graph.row.data_ptr(),
        eid=graph.eid.data_ptr() if graph.eid is not None else 0,
        edge_op=EDGE_OP_CODE[op.edge_op], gather_op=GATHER_OP_CODE[op.gather_op],
        a_type=TENSOR_TYPE_CODE[ka_type], b_type=TENSOR_TYPE_CODE[kb_type], c_type=TENSOR_TYPE_CODE[op.C_type],
        dtype=DTYPE_CODES[dtype],
        a=ka.data_ptr() if ka is not None else 0, a_row_stride=ka.stride(0) if ka is not None else 0,
        b=kb.data_ptr() if kb is not None else 0, b_row_stride=kb.stride(0) if kb is not None else 0,
        c=c.data_ptr(), arg_a=k_arg_a.data_ptr() if k_arg_a is not None else 0,
        arg_b=k_arg_b.data_ptr() if k_arg_b is not None else 0, arg_bits=64 if arg_dtype == torch.int64 else 32,
        out_len=bc.out_len, a_len=ka_len, b_len=kb_len, reduce_size=bc.reduce_size,
        a_off=ka_off.data_ptr() if ka_off is not None else 0, b_off=kb_off.data_ptr() if kb_off is not None else 0,
        b_off_block=bc.a_off_block if swapped else bc.b_off_block)
    order = graph.edge_order() if _walks_edge_order(op, sig, device) else None
    topologies = None if order is None else (
        (p.col, p.row, p.eid), (order[0].data_ptr(), order[1].data_ptr(), 0))
    # What the params point to: first what every call of this signature shares (a Plan keeps
    # those, not the graph object, so that a cache of plans does not keep graphs alive), then
    # this call's operands.
    keep = [graph.indptr, graph.col, graph.row, graph.eid, a_off, b_off, order, long_rows, a, b]
    prepared = Prepared(p, outputs, keep, device, core, sig, graph.num_edges, pending=device.type == "cuda",
                        topologies=topologies, swapped=swapped)
    if parallel_info is not None and prepared.pending:
        prepared.configure(parallel_info)
    return prepared


_SHARED = 8  # prepare's keep: the graph's index tensors, the offsets, the edge-order COO and the long rows


class Plan:
    """One operator signature on one graph, checked once by `prepare` (every check, the
    broadcast, the parallel info, the packed params); each call with operands of the same
    shapes, dtype and device (any row stride) then allocates its outputs, copies the packed
    params with its own data pointers and runs, with no other Python work."""

    __slots__ = ("_template", "_keep", "_c_like", "_arg_like", "_arg_a", "_arg_b", "_lhs", "_rhs",
                 "_a_row", "_b_row", "_swapped", "_workspace", "_workspace_like", "_zeroed", "_cuda_index",
                 "_core", "_run_cpu_with", "_run_cuda_with")

    def __init__(self, graph: UGraph, op_info: OpInfo, parallel_info: Optional[ParallelInfo] = None,
                 first: Optional[Prepared] = None, args: bool = True, arg_dtype: Optional[torch.dtype] = None):
        """`first`: the call already prepared and configured (selection's policy.plan hands it);
        else it is prepared here with `parallel_info`, `args` and `arg_dtype` (prepare's)."""
        first = first or prepare(graph, op_info, parallel_info, args, arg_dtype)
        if first.pending:
            raise ValueError("a CUDA plan needs the ParallelInfo that selection chose")
        c, arg_a, arg_b = first.outputs
        self._template, self._keep = first.params, first._keep[:_SHARED]
        # Outputs (and the workspace) come from torch.empty_like of a template of their shape,
        # dtype and device: one element expanded (stride 0), which empty_like, finding it not
        # dense, lays out contiguously. It parses no shape, dtype or device: on the H200's host a
        # CUDA output and its release cost 1.7-2.0 us against new_empty's 2.6-2.7 and
        # torch.empty's 3.3.
        arg = arg_a if arg_a is not None else arg_b if arg_b is not None else c
        self._c_like = c.new_empty(()).expand(c.shape)
        self._arg_like = arg.new_empty(()).expand(c.shape)
        self._arg_a, self._arg_b = arg_a is not None, arg_b is not None
        self._lhs = op_info.A is not None and uses_lhs(op_info.edge_op)
        self._rhs = op_info.B is not None and uses_rhs(op_info.edge_op)
        # A contiguous operand's row stride: its row's size (1 for a 1-D operand).
        self._a_row = math.prod(op_info.A.shape[1:]) if self._lhs else 0
        self._b_row = math.prod(op_info.B.shape[1:]) if self._rhs else 0
        self._swapped = first.swapped
        self._workspace = first.params.workspace_bytes if first.params is not None else 0
        self._workspace_like = (torch.empty((), dtype=torch.uint8, device=c.device).expand(self._workspace)
                                if self._workspace else None)
        # A zeroed workspace (new_workspace) per CUDA stream, kept across calls, which leave it
        # zeroed: two streams never share one. None where the workspace is allocated per call.
        self._zeroed = {} if self._workspace and first.params.workspace_zeroed else None
        self._cuda_index = cuda_index(c.device)
        self._core = _ext.core()
        self._run_cpu_with = self._core.run_cpu_with
        self._run_cuda_with = getattr(self._core, "run_cuda_with", None)

    def run(self, a: Optional[torch.Tensor], b: Optional[torch.Tensor]):
        """(C, argA, argB) for operands of the planned shapes, dtype and device."""
        c = _empty_like(self._c_like)
        arg_a = _empty_like(self._arg_like) if self._arg_a else None
        arg_b = _empty_like(self._arg_like) if self._arg_b else None
        outputs = (c, arg_a, arg_b)
        if self._template is None:  # an empty output: nothing to compute
            return outputs
        a_ptr = a_stride = b_ptr = b_stride = workspace_ptr = 0
        # A contiguous operand (the common case) needs no row view: its rows are its row size
        # apart. Any other keeps its row stride, or is copied where a row's features are not
        # contiguous (held by this frame until the launch returns).
        if self._lhs:
            if a.is_contiguous():
                a_ptr, a_stride = a.data_ptr(), self._a_row
            else:
                a_ptr, a_stride = (a := _features_contiguous(a)).data_ptr(), a.stride(0)
        if self._rhs:
            if b.is_contiguous():
                b_ptr, b_stride = b.data_ptr(), self._b_row
            else:
                b_ptr, b_stride = (b := _features_contiguous(b)).data_ptr(), b.stride(0)
        index = self._cuda_index
        stream = None
        if self._zeroed is not None:
            stream = _cuda_raw_stream(index)
            workspace = self._zeroed.get(stream)
            if workspace is None:
                if len(self._zeroed) >= ZEROED_WORKSPACE_STREAMS:
                    del self._zeroed[next(iter(self._zeroed))]
                workspace = self._zeroed[stream] = torch.zeros_like(self._workspace_like)
            workspace_ptr = workspace.data_ptr()
        elif self._workspace:
            # Held by this frame until the launch returns; the stream orders its later reuse.
            workspace = _empty_like(self._workspace_like)
            workspace_ptr = workspace.data_ptr()
        c_ptr = c.data_ptr()
        arg_a_ptr = arg_a.data_ptr() if arg_a is not None else 0
        arg_b_ptr = arg_b.data_ptr() if arg_b is not None else 0
        if self._swapped:
            a_ptr, a_stride, b_ptr, b_stride = b_ptr, b_stride, a_ptr, a_stride
            arg_a_ptr, arg_b_ptr = arg_b_ptr, arg_a_ptr
        # The common calls launched here, without _launch's frame, a tuple of the data or a params
        # object: on a small graph each microsecond of Python is a tenth of the call.
        if POISON_OUTPUTS:
            _launch(self._core, self._template, outputs, index,
                    (a_ptr, a_stride, b_ptr, b_stride, c_ptr, arg_a_ptr, arg_b_ptr, workspace_ptr))
        elif index is None:
            self._run_cpu_with(self._template, a_ptr, a_stride, b_ptr, b_stride, c_ptr, arg_a_ptr, arg_b_ptr,
                               workspace_ptr)
        elif _cuda_get_device() == index:
            if stream is None:
                stream = _cuda_raw_stream(index)
            self._run_cuda_with(self._template, stream, a_ptr, a_stride, b_ptr, b_stride, c_ptr,
                                arg_a_ptr, arg_b_ptr, workspace_ptr)
        else:
            _launch(self._core, self._template, outputs, index,
                    (a_ptr, a_stride, b_ptr, b_stride, c_ptr, arg_a_ptr, arg_b_ptr, workspace_ptr))
        return outputs


def _features_contiguous(t: torch.Tensor) -> torch.Tensor:
    """t with each row's features contiguous, as params.h wants (rows may keep any stride)."""
    t = t.unsqueeze(-1) if t.dim() == 1 else t
    if t.is_contiguous() or t.shape[0] == 0:  # the common case, without building a row view
        return t
    return t if t[0].is_contiguous() else t.contiguous()


def edge_softmax(graph: UGraph, x: torch.Tensor, y: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The fused edge softmax over each destination's in-edges: csrc/cpu/softmax.h on CPU,
    csrc/cuda/softmax.h on CUDA (queued on the current stream of the graph's device; the graph's
    degree statistics and long rows are made on its first call, a synchronization each).

    Forward (y None): x holds the scores, one row per edge id, any feature shape. Backward: x is
    the forward's output and y = x * (output gradient); returns y - sum(y) * x, the sum over
    each destination's in-edges. On CPU, float32 and float64 give the values of DGL's CPU
    kernels; on CUDA, DGL's CUDA operations computed in float (float64 for float64) and rounded
    once. On CUDA it runs split where softmax_splits says so (the same values)."""
    if graph.device.type not in ("cpu", "cuda"):
        raise ValueError(f"the fused edge softmax runs on CPU and CUDA, the graph is on {graph.device}")
    if x.dtype not in DTYPE_CODES:
        raise TypeError(f"features must be float32, float64, float16 or bfloat16, got {x.dtype}")
    for name, t in (("x", x), ("y", y)):
        if t is None:
            continue
        if t.device != graph.device or t.dtype != x.dtype or t.shape != x.shape:
            raise ValueError(f"{name} must be a {x.dtype} tensor of x's shape on {graph.device}, got "
                             f"{t.dtype} {tuple(t.shape)} on {t.device}")
        if t.dim() < 1 or t.shape[0] != graph.num_edges:
            raise ValueError(f"{name} needs {graph.num_edges} edge rows, got shape {tuple(t.shape)}")
    core = _ext.core()
    index = cuda_index(graph.device)
    if index is not None and not hasattr(core, "edge_softmax_cuda"):
        raise RuntimeError("this build of dgl_ugraph has no CUDA core (built with UGRAPH_CUDA=OFF)")
    x = x.contiguous()
    y = y.contiguous() if y is not None else None
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if out.numel() == 0:
        return out
    if POISON_OUTPUTS:
        out.fill_(float("nan"))
    args = (y is not None, graph.num_dst, graph.num_edges, 32 if graph.idtype == torch.int32 else 64,
            graph.indptr.data_ptr(), graph.eid.data_ptr() if graph.eid is not None else 0, DTYPE_CODES[x.dtype],
            out.numel() // graph.num_edges, x.data_ptr(), y.data_ptr() if y is not None else 0, out.data_ptr())
    if index is None:
        core.edge_softmax_cpu(*args)
        return out
    # The long rows, a warp or a block each where too long for a team (kept with the graph).
    long_rows = graph.long_rows()
    args += (graph.stats.max, long_rows.data_ptr() if long_rows.numel() else 0, long_rows.numel())
    # A split's destination of each edge id and its workspace of row statistics (sums, and the
    # forward's maxima), alive here until queued: the caching allocator orders their reuse after
    # this stream's launches.
    if not softmax_splits(graph, x, y is not None):
        args += (0, 0)
    else:
        order = graph.edge_order()
        stats = torch.empty((1 if y is not None else 2, graph.num_dst, out.numel() // graph.num_edges),
                            device=x.device, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)
        if POISON_OUTPUTS:
            stats.fill_(float("nan"))
        args += (order[1].data_ptr(), stats.data_ptr())
    if _cuda_get_device() == index:
        core.edge_softmax_cuda(*args, _cuda_raw_stream(index))
    else:
        with torch.cuda.device(index):
            core.edge_softmax_cuda(*args, _cuda_raw_stream(index))
    return out
