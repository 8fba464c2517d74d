"""Replays a trace (traces.py) on a graph of index tensors through our kernels or cuSPARSE/torch."""
from __future__ import annotations

import math
from typing import Dict

import torch

from .traces import TRACE_VERSION, TraceError, resolve_fn


class ReplayGraph:
    """The graph a trace runs on, as index tensors on one device: src/dst in edge-id order, the
    uGrapher graph (CSC with edge ids) and, lazily, the cuSPARSE CSR of the torch path."""

    def __init__(self, src, dst, n, prepare=None, device="cpu"):
        src, dst = src.long(), dst.long()
        if prepare == "self_loop":  # dgl.add_self_loop(dgl.remove_self_loop(g)): loops last
            keep = src != dst
            loops = torch.arange(n, dtype=torch.long)
            src = torch.cat([src[keep], loops])
            dst = torch.cat([dst[keep], loops])
        elif prepare not in (None, ""):
            raise TraceError(f"unknown graph preparation {prepare!r}")
        from dgl_ugraph.core.graph import UGraph

        self.device = torch.device(device)
        self.n = n
        self.src, self.dst = src.to(self.device), dst.to(self.device)
        self.e = self.src.numel()
        idtype = torch.int32 if max(n, self.e) < 2 ** 31 - 1 else torch.int64
        self.ugraph = UGraph.from_coo(self.src, self.dst, n, n, idtype)
        self._csr = {}

    def degrees(self, which):
        idx = self.dst if which == "in_degrees" else self.src
        return torch.bincount(idx, minlength=self.n)

    def csr(self, values=None):
        """torch sparse CSR (dst x src) in CSC-position order, with `values` per edge id."""
        g = self.ugraph
        eid = g.eid.long() if g.eid is not None else torch.arange(self.e, device=self.device)
        key = "ones" if values is None else None
        if key and key in self._csr:
            return self._csr[key]
        vals = torch.ones(self.e, device=self.device) if values is None else values[eid]
        m = torch.sparse_csr_tensor(g.indptr.long(), g.col.long(), vals, (self.n, self.n))
        if key:
            self._csr[key] = m
        return m


def _dgl_broadcast_pair(x, y):
    """Feature dims aligned from the right after the row dim, as DGL broadcasts them."""
    if x is None or y is None:
        return x, y
    nx, ny = x.dim() - 1, y.dim() - 1
    if nx < ny:
        x = x.reshape((x.shape[0],) + (1,) * (ny - nx) + tuple(x.shape[1:]))
    elif ny < nx:
        y = y.reshape((y.shape[0],) + (1,) * (nx - ny) + tuple(y.shape[1:]))
    return x, y


def _binary(op, x, y):
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "div":
        return x / y
    if op == "dot":
        return (x * y).sum(-1, keepdim=True)
    raise TraceError(f"unknown binary op {op!r}")


class TorchSparse:
    """gspmm/gsddmm on torch alone: cuSPARSE (torch.sparse.mm on CSR) for sums it can express
    (copy_u, and u_mul_e with one scalar weight per edge), index_add_/scatter_reduce and
    gathers for the rest: the path a PyTorch user without our kernels has."""

    name = "torch"

    def __init__(self, graph: ReplayGraph):
        self.g = graph

    def _gather(self, t, target):
        g = self.g
        if t is None:
            return None
        if target == "u":
            return t.index_select(0, g.src)
        if target == "v":
            return t.index_select(0, g.dst)
        return t

    @staticmethod
    def _operands(op, lhs, rhs):
        """The operands the op reads, 1-D ones as columns, and whether the result is 1-D."""
        lhs = lhs if op != "copy_rhs" else None
        rhs = rhs if op != "copy_lhs" else None
        squeeze = (lhs is None or lhs.dim() == 1) and (rhs is None or rhs.dim() == 1)

        def column(t):
            return t.unsqueeze(-1) if t is not None and t.dim() == 1 else t
        return column(lhs), column(rhs), squeeze

    def gspmm(self, op, reduce_op, u, e):
        g = self.g
        lhs, rhs, squeeze = self._operands(op, u, e)
        if reduce_op == "sum" and lhs is not None and lhs.dim() == 2 and lhs.dtype in (torch.float32, torch.float64):
            if op == "copy_lhs":
                out = torch.sparse.mm(g.csr(), lhs)
                return (out.squeeze(-1) if squeeze else out), (None, None)
            if op == "mul" and rhs.dim() == 2 and rhs.shape[1] == 1:
                out = torch.sparse.mm(g.csr(rhs[:, 0].contiguous()), lhs)
                return (out.squeeze(-1) if squeeze else out), (None, None)
        x = self._gather(lhs, "u")
        y = rhs
        if op in ("copy_lhs",):
            msg = x
        elif op == "copy_rhs":
            msg = y
        else:
            x, y = _dgl_broadcast_pair(x, y)
            msg = _binary(op, x, y)
        shape = (g.n,) + tuple(msg.shape[1:])
        idx = g.dst
        if reduce_op == "sum":
            out = torch.zeros(shape, dtype=msg.dtype, device=msg.device).index_add_(0, idx, msg)
            arg_u = arg_e = None
        else:
            fill = float("-inf") if reduce_op == "max" else float("inf")
            full = idx.view((-1,) + (1,) * (msg.dim() - 1)).expand_as(msg)
            out = torch.full(shape, fill, dtype=msg.dtype, device=msg.device).scatter_reduce_(
                0, full, msg, "amax" if reduce_op == "max" else "amin", include_self=True)
            empty = torch.bincount(idx, minlength=g.n) == 0
            out[empty] = 0  # DGL gives 0 where a row has no edges
            arg_u = arg_e = None  # arguments are needed by backward passes only
        return (out.squeeze(-1) if squeeze else out), (arg_u, arg_e)

    def gsddmm(self, op, lhs, rhs, lhs_target, rhs_target):
        lhs, rhs, squeeze = self._operands(op, lhs, rhs)
        x, y = self._gather(lhs, lhs_target), self._gather(rhs, rhs_target)
        if op == "copy_lhs":
            out = x
        elif op == "copy_rhs":
            out = y
        else:
            out = _binary(op, *_dgl_broadcast_pair(x, y))
        return out.squeeze(-1) if squeeze else out

    def edge_softmax(self, logits, norm_by):
        return _edge_softmax(self, logits, norm_by)


def _edge_softmax(sp, score, norm_by):
    """DGL's CUDA EdgeSoftmax forward: max, sub, exp, sum, div (dgl/backend/pytorch/sparse.py)."""
    if norm_by != "dst":
        raise TraceError("edge_softmax by src is not replayed")
    score_max = sp.gspmm("copy_rhs", "max", None, score)[0]
    score = torch.exp(sp.gsddmm("sub", score, score_max, "e", "v"))
    score_sum = sp.gspmm("copy_rhs", "sum", None, score)[0]
    return sp.gsddmm("div", score, score_sum, "e", "v")


class UGraphSparse(TorchSparse):
    """gspmm/gsddmm through our kernels (`dgl_ugraph.ugrapher`), mapped by the switching
    table exactly as the DGL integration maps them."""

    name = "ugraph"

    def _pattern(self, key):
        from dgl_ugraph.dgl import patterns

        found = patterns.lookup(key)
        if isinstance(found, str):
            raise TraceError(f"{key}: {found}")
        return found

    def _run(self, pattern, lhs, rhs):
        from dgl_ugraph import ugrapher
        from dgl_ugraph.dgl.recognition import make_op_info

        # DGL's 1-D operands and output, as recognition's _shapes reads them (no DGL graph here:
        # the replay runs on a UGraph, so the DGL layer's routing itself cannot serve).
        use_l, use_r = pattern.A_type != "null", pattern.B_type != "null"
        squeeze = (not use_l or lhs.dim() == 1) and (not use_r or rhs.dim() == 1)
        if use_l and lhs.dim() == 1:
            lhs = lhs.unsqueeze(-1)
        if use_r and rhs.dim() == 1:
            rhs = rhs.unsqueeze(-1)
        out, arg_a, arg_b = ugrapher(self.g.ugraph, make_op_info(pattern, lhs, rhs))
        return (out.squeeze(-1) if squeeze else out), arg_a, arg_b

    def gspmm(self, op, reduce_op, u, e):
        from dgl_ugraph.dgl import patterns

        out, arg_a, arg_b = self._run(self._pattern(patterns.spmm_key(op, reduce_op)), u, e)
        return out, (arg_a, arg_b)

    def gsddmm(self, op, lhs, rhs, lhs_target, rhs_target):
        from dgl_ugraph.dgl import patterns

        return self._run(self._pattern(patterns.sddmm_key(op, lhs_target, rhs_target)), lhs, rhs)[0]


def _dtype(name):
    return getattr(torch, name)


def init_params(trace, n, e, device, seed=0) -> Dict[str, torch.Tensor]:
    """Seeded parameters of the traced shapes (the GPU run needs no trained weights): BatchNorm
    running_var 1, running_mean 0, other tensors uniform in +-1/sqrt(fan_in)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, spec in trace["params"].items():
        shape = [_sym(s, n, e) for s in spec["shape"]]
        dtype = _dtype(spec["dtype"])
        if name.endswith("running_var"):
            t = torch.ones(shape, dtype=dtype)
        elif name.endswith("running_mean") or name.endswith("num_batches_tracked") or not dtype.is_floating_point:
            t = torch.zeros(shape, dtype=dtype)
        else:
            fan_in = shape[-1] if len(shape) > 1 else max(shape[0] if shape else 1, 1)
            t = (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype) / math.sqrt(fan_in)
        out[name] = t.to(device)
    return out


def _sym(x, n, e):
    if isinstance(x, dict) and "sym" in x:
        return n if x["sym"] == "N" else e
    return x


class Replayer:
    """Runs a trace on a ReplayGraph with a sparse backend (UGraphSparse or TorchSparse)."""

    def __init__(self, trace, graph: ReplayGraph, sparse, params: Dict[str, torch.Tensor], feat: torch.Tensor):
        if trace.get("version") != TRACE_VERSION:
            raise TraceError(f"trace version {trace.get('version')} (this script reads {TRACE_VERSION})")
        self.trace, self.g, self.sp = trace, graph, sparse
        self.params, self.feat = params, feat
        self.device = graph.device
        self.fns = {}
        for op in trace["ops"]:
            if op["op"] == "torch" and op["fn"] not in self.fns:
                self.fns[op["fn"]] = resolve_fn(op["fn"])
        self.degrees = {}

    def dec(self, x, vals):
        if isinstance(x, dict):
            if "v" in x:
                return vals[x["v"]]
            if "param" in x:
                return self.params[x["param"]]
            if "input" in x:
                return self.feat
            if "graph" in x:
                if x["graph"] not in self.degrees:
                    self.degrees[x["graph"]] = self.g.degrees(x["graph"])
                return self.degrees[x["graph"]]
            if "const" in x:
                return torch.tensor(x["const"], dtype=_dtype(x["dtype"]), device=self.device).reshape(x["shape"])
            if "opaque" in x:
                return torch.ones([self.dec(i, vals) for i in x["opaque"]], dtype=_dtype(x["dtype"]),
                                  device=self.device)
            if "sym" in x:
                return self.g.n if x["sym"] == "N" else self.g.e
            if "size" in x:
                return torch.Size([self.dec(i, vals) for i in x["size"]])
            if "tuple" in x:
                return tuple(self.dec(i, vals) for i in x["tuple"])
            if "list" in x:
                return [self.dec(i, vals) for i in x["list"]]
            if "dict" in x:
                return {k: self.dec(v, vals) for k, v in x["dict"].items()}
            if "dtype" in x:
                return _dtype(x["dtype"])
            if "device" in x:
                return self.device
            if "slice" in x:
                return slice(*(self.dec(i, vals) for i in x["slice"]))
            if "ellipsis" in x:
                return Ellipsis
            if "float" in x:
                return float(x["float"])
            raise TraceError(f"cannot decode {x!r}")
        return x

    def run(self):
        vals = {}
        dec = self.dec
        for op in self.trace["ops"]:
            kind, out = op["op"], op["out"]
            if kind == "torch":
                result = self.fns[op["fn"]](*[dec(a, vals) for a in op["args"]],
                                            **{k: dec(v, vals) for k, v in op["kwargs"].items()})
            elif kind == "gspmm":
                a = op["args"]
                res, (arg_u, arg_e) = self.sp.gspmm(a["op"], a["reduce_op"], dec(a["u"], vals), dec(a["e"], vals))
                result = [res, arg_u, arg_e]
            elif kind == "gsddmm":
                a = op["args"]
                result = self.sp.gsddmm(a["op"], dec(a["lhs"], vals), dec(a["rhs"], vals), a["lhs_target"],
                                        a["rhs_target"])
            elif kind == "edge_softmax":
                a = op["args"]
                result = self.sp.edge_softmax(dec(a["logits"], vals), a["norm_by"])
            else:
                raise TraceError(f"unknown op kind {kind!r}")
            if out is None:
                continue
            if isinstance(out, int):
                vals[out] = result
            else:
                for vid, r in zip(out, result):
                    if vid is not None:
                        vals[vid] = r
        return vals[self.trace["output"]]
