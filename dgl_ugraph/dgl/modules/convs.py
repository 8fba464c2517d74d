"""The lean forwards of DGL's GraphConv, SAGEConv and GINConv (dgl.nn.pytorch.conv; the same code
in DGL 1.1 to 2.4).

Each makes DGL's module's operations in DGL's order, on the same operands, with the same
autograd: an aggregation or a message is the call DGL's `update_all` or `apply_edges` reaches
(dgl.ops' gspmm/gsddmm on a graph of one edge type: the operands' ranks padded alike, then DGL's
backend entry on the graph index, which the plugin replaces: its kernels, and DGL's autograd
function wherever autograd records the call; a mean through dgl.ops' gspmm, which the plugin's
mean replaces), and max/min's isolated nodes get DGL's zeros. What goes is the host work around it: the graph's local scope, its node frames, the
message and reduce functions' lookups, and the per-forward degree work, which the graph cache
holds once per graph (`facts`). Each forward takes the graph's cache entry, which `modules`
resolves and checks (one edge type, rows, device, dtype) before it runs one of these.

Errors are DGL's: the zero-in-degree DGLError exactly where DGL raises it, the same assertion on
an edge weight's length, the same DGLError for an external weight beside the module's own.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from dgl_ugraph.dgl.modules import facts, fused
from dgl_ugraph.dgl.modules.api import dgl_api

# DGL's messages, word for word (dgl/nn/pytorch/conv/graphconv.py).
ZERO_IN_DEGREE = (
    "There are 0-in-degree nodes in the graph, output for those nodes will be invalid. This is harmful for some "
    "applications, causing silent performance regression. Adding self-loop on the input graph by calling "
    "`g = dgl.add_self_loop(g)` will resolve the issue. Setting ``allow_zero_in_degree`` to be `True` when "
    "constructing this module will suppress the check and let the code run.")
EXTERNAL_WEIGHT = ("External weight is provided while at the same time the module has defined its own weight "
                   "parameter. Please create the module with flag weight=False.")

MULTI_DIMENSIONAL_WEIGHT = ("Currently the normalization is only defined on scalar edge weight. Please customize the "
                            "normalization for your high-dimensional weights.")
NON_POSITIVE_WEIGHT = ('Non-positive edge weight detected with `norm="both"`. This leads to square root of zero or '
                       "negative values.")


def aggregate(graph, reduce_op: str, x, edge_weight):
    """What `graph.update_all(fn.copy_u / fn.u_mul_e, reduce)` leaves in dstdata, isolated nodes 0
    under max and min. A mean goes through dgl.ops.gspmm, looked up per call (the plugin's mean
    replaces it); the other reducers straight to the backend entry, as dgl.ops.gspmm calls it."""
    api = dgl_api()
    op = "copy_lhs" if edge_weight is None else "mul"
    if reduce_op == "mean":
        return api["spmm"].gspmm(graph, op, reduce_op, x, edge_weight)
    if edge_weight is not None:
        x, edge_weight = api["reshape_lhs_rhs"](x, edge_weight)
    out = api["sparse"].gspmm(graph._graph, op, reduce_op, x, edge_weight)
    if reduce_op in ("max", "min"):
        out = api["replace_inf_with_zero"](out)
    return out


def message(graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str):
    """What `graph.apply_edges` of a builtin binary message leaves in edata: dgl.ops.gsddmm's call
    of the backend entry on a graph of one edge type."""
    api = dgl_api()
    lhs, rhs = api["reshape_lhs_rhs"](lhs, rhs)
    return api["sparse"].gsddmm(graph._graph, op, lhs, rhs, lhs_target, rhs_target)


def shares_frames(graph) -> bool:
    """Whether the graph's srcdata and dstdata are one frame (one node type, not a block): a
    destination field DGL's forward sets then replaces the source field of the same name."""
    return not graph.is_block and len(graph.ntypes) == 1


def _edge_weight_checked(entry, edge_weight):
    if edge_weight is not None:
        assert edge_weight.shape[0] == entry.ugraph.num_edges
    return edge_weight


def graph_conv(self, graph, entry, feat, weight=None, edge_weight=None):
    """GraphConv.forward."""
    api = dgl_api()
    if not self._allow_zero_in_degree and facts.has_zero_in_degree(entry):
        raise api["DGLError"](ZERO_IN_DEGREE)
    edge_weight = _edge_weight_checked(entry, edge_weight)
    feat_src, feat_dst = api["expand_as_pair"](feat, graph)
    if weight is not None:
        if self.weight is not None:
            raise api["DGLError"](EXTERNAL_WEIGHT)
    else:
        weight = self.weight
    rst = _graph_conv_fused(self, graph, entry, feat_src, feat_dst, weight, edge_weight)
    if rst is None:
        rst = _graph_conv_dgl_order(self, graph, entry, feat_src, feat_dst, weight, edge_weight)
    if self._activation is not None:
        rst = self._activation(rst)
    return rst


def _graph_conv_fused(self, graph, entry, feat_src, feat_dst, weight, edge_weight):
    """The norms 'both' and 'left' without edge weights folded into one aggregation
    (fused.norm_sum), the matmul on the narrower side as DGL, then the bias (with a matmul that
    comes last, one addmm); None where the fused call does not run."""
    if self._norm not in ("both", "left") or edge_weight is not None:
        return None
    matmul_first = self._in_feats > self._out_feats and weight is not None
    width = math.prod(feat_src.shape[1:-1]) * (weight.shape[-1] if matmul_first else feat_src.shape[-1])
    if not fused.runs(feat_src.device, width, entry.ugraph):
        return None
    both = self._norm == "both"
    src_norm = facts.degree_norm(entry, True, both, feat_src)
    dst_norm = facts.degree_norm(entry, False, True, feat_dst) if both else None
    if matmul_first:
        rst = fused.norm_sum(graph._graph, torch.matmul(feat_src, weight), src_norm, dst_norm)
    else:
        rst = fused.norm_sum(graph._graph, feat_src, src_norm, dst_norm)
        if weight is not None:
            if self.bias is not None and rst.dim() == 2:
                return torch.addmm(self.bias, rst, weight)
            rst = torch.matmul(rst, weight)
    return rst if self.bias is None else rst + self.bias


def _graph_conv_dgl_order(self, graph, entry, feat_src, feat_dst, weight, edge_weight):
    """GraphConv's aggregation, norms and bias in DGL's order: DGL's results to the bit."""
    if self._norm in ("left", "both"):
        feat_src = feat_src * facts.degree_norm(entry, True, self._norm == "both", feat_src)
    if self._in_feats > self._out_feats:
        if weight is not None:
            feat_src = torch.matmul(feat_src, weight)
        rst = aggregate(graph, "sum", feat_src, edge_weight)
    else:
        rst = aggregate(graph, "sum", feat_src, edge_weight)
        if weight is not None:
            rst = torch.matmul(rst, weight)
    if self._norm in ("right", "both"):
        rst = rst * facts.degree_norm(entry, False, self._norm == "both", feat_dst)
    return rst if self.bias is None else rst + self.bias


def sage_conv(self, graph, entry, feat, edge_weight=None):
    """SAGEConv.forward for the mean, gcn and pool aggregators."""
    if isinstance(feat, tuple):
        feat_src = self.feat_drop(feat[0])
        feat_dst = self.feat_drop(feat[1])
    else:
        feat_src = feat_dst = self.feat_drop(feat)
        if graph.is_block:
            feat_dst = feat_src[:entry.ugraph.num_dst]
    edge_weight = _edge_weight_checked(entry, edge_weight)
    h_self = feat_dst
    lin_before_mp = self._in_src_feats > self._out_feats
    aggre = self._aggre_type
    if aggre == "mean":
        h = self.fc_neigh(feat_src) if lin_before_mp else feat_src
        h_neigh = aggregate(graph, "mean", h, edge_weight)
        if not lin_before_mp:
            h_neigh = self.fc_neigh(h_neigh)
    elif aggre == "gcn":
        dgl_api()["check_eq_shape"](feat)
        h = self.fc_neigh(feat_src) if lin_before_mp else feat_src
        if isinstance(feat, tuple):
            h_dst = self.fc_neigh(feat_dst) if lin_before_mp else feat_dst
        elif graph.is_block:
            h_dst = h[:entry.ugraph.num_dst]
        else:
            h_dst = h
        if isinstance(feat, tuple) and shares_frames(graph):
            h = h_dst  # DGL's dstdata["h"] overwrites srcdata["h"]: one frame on a homogeneous graph
        neigh = aggregate(graph, "sum", h, edge_weight)
        h_neigh = (neigh + h_dst) / facts.self_loop_divisor(entry, feat_dst)
        if not lin_before_mp:
            h_neigh = self.fc_neigh(h_neigh)
    else:  # pool (modules.SAGE_AGGREGATORS)
        h = F.relu(self.fc_pool(feat_src))
        h_neigh = self.fc_neigh(aggregate(graph, "max", h, edge_weight))
    if aggre == "gcn":
        rst = h_neigh
        if self.bias is not None:
            rst = rst + self.bias
    else:
        rst = self.fc_self(h_self) + h_neigh
    if self.activation is not None:
        rst = self.activation(rst)
    if self.norm is not None:
        rst = self.norm(rst)
    return rst


def gin_conv(self, graph, entry, feat, edge_weight=None):
    """GINConv.forward."""
    edge_weight = _edge_weight_checked(entry, edge_weight)
    feat_src, feat_dst = dgl_api()["expand_as_pair"](feat, graph)
    neigh = aggregate(graph, self._aggregator_type, feat_src, edge_weight)
    rst = (1 + self.eps) * feat_dst + neigh
    if self.apply_func is not None:
        rst = self.apply_func(rst)
    if self.activation is not None:
        rst = self.activation(rst)
    return rst


def edge_weight_norm(self, graph, entry, edge_weight):
    """EdgeWeightNorm.forward: each node's weighted out- (norm 'both') and in-degree as DGL's
    update_all(copy_e, sum) on the reverse graph and the graph, then the edge weights scaled by
    both ends' norms in DGL's order, (src * dst) * weight, through u_mul_v where DGL runs a Python
    edge function."""
    api = dgl_api()
    if len(edge_weight.shape) > 1:
        raise api["DGLError"](MULTI_DIMENSIONAL_WEIGHT)
    if self._norm == "both" and torch.any(edge_weight <= 0).item():
        raise api["DGLError"](NON_POSITIVE_WEIGHT)
    ug = entry.ugraph
    src_w = torch.ones(ug.num_src, dtype=edge_weight.dtype, device=edge_weight.device)
    dst_w = torch.ones(ug.num_dst, dtype=edge_weight.dtype, device=edge_weight.device)
    gspmm = api["sparse"].gspmm
    if self._norm == "both":
        src_w = torch.pow(gspmm(graph._graph.reverse(), "copy_rhs", "sum", None, edge_weight) + self._eps, -0.5)
    if self._norm != "none":
        degs = gspmm(graph._graph, "copy_rhs", "sum", None, edge_weight) + self._eps
        dst_w = torch.pow(degs, -0.5) if self._norm == "both" else 1.0 / degs
    return message(graph, "mul", src_w, dst_w, "u", "v") * edge_weight
