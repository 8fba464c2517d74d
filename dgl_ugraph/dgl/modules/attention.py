"""The lean forwards of DGL's attention convolutions: GATConv, GATv2Conv and DotGatConv
(dgl.nn.pytorch.conv; the same code in DGL 1.1 to 2.4).

DGL's operations in DGL's order on the same operands: the scores on every edge (the `u_add_v` or
`u_dot_v` that `apply_edges` reaches, convs.message), the leaky ReLU, DGL's edge softmax (which
the plugin runs as its fused kernel on CUDA and its fused CPU kernel), the attention dropout, any
edge weight, and the weighted aggregation (`u_mul_e` sum), then the residual, bias and
activation. What goes is the graph's local scope and frames and the per-forward zero-in-degree
check, which the graph cache answers once per graph (`facts`).

GATConv's endpoint scores, el = sum_d feat_src * attn_l and er likewise, are two broadcast
products and two sums over the last dimension in DGL, each a pass over the (N, H, D) features;
on a graph of 1.9M nodes, 8 heads of 8, those passes and their backward took 4 of a training
step's 15 ms (H200). Where `SCORE_DEVICES` holds the device, they are one matmul of the features
by a block-diagonal (H*D, 2H) matrix of the attention vectors: the same sums in another order.
Measured on the H200 (CUDA events, forward / forward and backward): 0.29 / 1.59 ms against 2.22 /
4.70 at 1.9M x 8 x 8, 0.16 / 0.82 against 0.50 / 1.19 at 410K x 8 x 8; but the matmul and the
matrix's making cost more host time than the four small launches, 0.06 ms more forward and 0.42
ms with the backward, so a small layer keeps DGL's products, and one head too (a matrix-vector
product, where the matmul's (N, 2) output cost 0.80 ms against 0.41 at 1.9M x 1 x 4).
"""
from __future__ import annotations

import torch

from dgl_ugraph.dgl.modules import facts
from dgl_ugraph.dgl.modules.convs import ZERO_IN_DEGREE, aggregate, dgl_api, message, shares_frames


SCORE_DEVICES = ("cuda",)
# Float32 keeps DGL's products where matmuls may round their inputs (TF32, bfloat16 passes); half
# types keep them everywhere.
_SCORE_DTYPES = (torch.float32, torch.float64)
_eyes = {}  # (heads, device, dtype) -> the identity that spreads each head's vector to its column


def _block_diagonal(vectors):
    """(H*D, K*H) for K attention vectors of shape (1, H, D): column k*H + h holds vector k's head h
    in rows h*D to h*D + D - 1, zeros elsewhere."""
    a = vectors[0] if len(vectors) == 1 else torch.cat(vectors)
    k, heads, d = a.shape
    key = (heads, a.device, a.dtype)
    eye = _eyes.get(key)
    if eye is None:
        eye = _eyes[key] = torch.eye(heads, dtype=a.dtype, device=a.device).view(heads, 1, 1, heads)
    return (a.permute(1, 2, 0).unsqueeze(-1) * eye).reshape(heads * d, k * heads)


# The feature elements (N x H x D) from which the matmul's saving on the device outgrows its host
# cost: inference, and a step whose backward runs (H200: 16 and 26 ps an element saved).
MATMUL_MIN_ELEMENTS = 4 << 20
MATMUL_MIN_ELEMENTS_TRAINING = 16 << 20


def _scores_by_matmul(feat):
    if feat.device.type not in SCORE_DEVICES or feat.dtype not in _SCORE_DTYPES or feat.shape[-2] == 1:
        return False
    training = feat.requires_grad and torch.is_grad_enabled()
    if feat.numel() < (MATMUL_MIN_ELEMENTS_TRAINING if training else MATMUL_MIN_ELEMENTS):
        return False
    return feat.dtype != torch.float32 or torch.get_float32_matmul_precision() == "highest"


def endpoint_scores(feat_src, feat_dst, attn_l, attn_r, dst_rows=None):
    """GATConv's el = (feat_src * attn_l).sum(-1) and er = (feat_dst * attn_r).sum(-1), each
    unsqueezed to (..., H, 1). dst_rows: feat_dst is feat_src's first dst_rows rows (a block), or
    feat_src itself (None, feat_dst feat_src); then one matmul gives both."""
    if not _scores_by_matmul(feat_src):
        return (feat_src * attn_l).sum(dim=-1).unsqueeze(-1), (feat_dst * attn_r).sum(dim=-1).unsqueeze(-1)
    heads = feat_src.shape[-2]
    if feat_dst is feat_src or dst_rows is not None:
        s = torch.matmul(feat_src.flatten(-2), _block_diagonal((attn_l, attn_r)))
        el, er = s[..., :heads], s[..., heads:]
        if dst_rows is not None:
            er = er[:dst_rows]
        return el.unsqueeze(-1), er.unsqueeze(-1)
    return (torch.matmul(feat_src.flatten(-2), _block_diagonal((attn_l,))).unsqueeze(-1),
            torch.matmul(feat_dst.flatten(-2), _block_diagonal((attn_r,))).unsqueeze(-1))


def _check_zero_in_degree(self, entry, api):
    if not self._allow_zero_in_degree and facts.has_zero_in_degree(entry):
        raise api["DGLError"](ZERO_IN_DEGREE)


def _aggregate_and_finish(self, graph, feat_src, a, h_dst, dst_prefix_shape, bias, get_attention):
    """GATConv's and GATv2Conv's common tail: the attention-weighted sum of the source features
    (`u_mul_e` sum), then the residual (res_fc of h_dst), the bias where one is added here, the
    activation, and the attention too where get_attention asks for it."""
    rst = aggregate(graph, "sum", feat_src, a)
    if self.res_fc is not None:
        rst = rst + self.res_fc(h_dst).view(*dst_prefix_shape, -1, self._out_feats)
    if bias is not None:
        rst = rst + bias.view(*((1,) * len(dst_prefix_shape)), self._num_heads, self._out_feats)
    if self.activation:
        rst = self.activation(rst)
    return (rst, a) if get_attention else rst


def gat_conv(self, graph, entry, feat, edge_weight=None, get_attention=False):
    """GATConv.forward."""
    api = dgl_api()
    _check_zero_in_degree(self, entry, api)
    heads, out_feats = self._num_heads, self._out_feats
    dst_rows = None  # a block's destination features: the source features' first rows
    if isinstance(feat, tuple):
        src_prefix_shape = feat[0].shape[:-1]
        dst_prefix_shape = feat[1].shape[:-1]
        h_src = self.feat_drop(feat[0])
        h_dst = self.feat_drop(feat[1])
        fc_src, fc_dst = (self.fc, self.fc) if not hasattr(self, "fc_src") else (self.fc_src, self.fc_dst)
        feat_src = fc_src(h_src).view(*src_prefix_shape, heads, out_feats)
        feat_dst = fc_dst(h_dst).view(*dst_prefix_shape, heads, out_feats)
    else:
        src_prefix_shape = dst_prefix_shape = feat.shape[:-1]
        h_src = h_dst = self.feat_drop(feat)
        feat_src = feat_dst = self.fc(h_src).view(*src_prefix_shape, heads, out_feats)
        if graph.is_block:
            num_dst = dst_rows = entry.ugraph.num_dst
            feat_dst = feat_src[:num_dst]
            h_dst = h_dst[:num_dst]
            dst_prefix_shape = (num_dst,) + dst_prefix_shape[1:]
    el, er = endpoint_scores(feat_src, feat_dst, self.attn_l, self.attn_r, dst_rows)
    e = self.leaky_relu(message(graph, "add", el, er, "u", "v"))
    a = self.attn_drop(api["edge_softmax"](graph, e))
    if edge_weight is not None:
        a = a * edge_weight.tile(1, heads, 1).transpose(0, 2)
    bias = self.bias if self.has_explicit_bias else None
    return _aggregate_and_finish(self, graph, feat_src, a, h_dst, dst_prefix_shape, bias, get_attention)


def gatv2_conv(self, graph, entry, feat, get_attention=False):
    """GATv2Conv.forward."""
    api = dgl_api()
    _check_zero_in_degree(self, entry, api)
    heads, out_feats = self._num_heads, self._out_feats
    if isinstance(feat, tuple):
        h_src = self.feat_drop(feat[0])
        h_dst = self.feat_drop(feat[1])
        feat_src = self.fc_src(h_src).view(-1, heads, out_feats)
        feat_dst = self.fc_dst(h_dst).view(-1, heads, out_feats)
    else:
        h_src = h_dst = self.feat_drop(feat)
        feat_src = self.fc_src(h_src).view(-1, heads, out_feats)
        feat_dst = feat_src if self.share_weights else self.fc_dst(h_dst).view(-1, heads, out_feats)
        if graph.is_block:
            num_dst = entry.ugraph.num_dst
            feat_dst = feat_dst[:num_dst]
            h_dst = h_dst[:num_dst]
    e = self.leaky_relu(message(graph, "add", feat_src, feat_dst, "u", "v"))
    e = (e * self.attn).sum(dim=-1).unsqueeze(dim=2)
    a = self.attn_drop(api["edge_softmax"](graph, e))
    return _aggregate_and_finish(self, graph, feat_src, a, h_dst, (h_dst.shape[0],), None, get_attention)


def dot_gat_conv(self, graph, entry, feat, get_attention=False):
    """DotGatConv.forward."""
    api = dgl_api()
    _check_zero_in_degree(self, entry, api)
    heads, out_feats = self._num_heads, self._out_feats
    if isinstance(feat, tuple):
        feat_src = self.fc_src(feat[0]).view(-1, heads, out_feats)
        feat_dst = self.fc_dst(feat[1]).view(-1, heads, out_feats)
        if shares_frames(graph):
            feat_src = feat_dst  # DGL's dstdata["ft"] replaces srcdata["ft"]: one frame
    else:
        feat_src = feat_dst = self.fc(feat).view(-1, heads, out_feats)
        if graph.is_block:
            feat_dst = feat_src[:entry.ugraph.num_dst]
    a = message(graph, "dot", feat_src, feat_dst, "u", "v")
    sa = api["edge_softmax"](graph, a / self._out_feats ** 0.5)
    rst = aggregate(graph, "sum", feat_src, sa)
    if get_attention:
        return rst, sa
    return rst
