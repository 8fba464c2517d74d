"""The lean forwards of DGL's attention convolutions: GATConv, GATv2Conv and DotGatConv
(dgl.nn.pytorch.conv; the same code in DGL 1.1 to 2.4).

DGL's operations in DGL's order on the same operands: the scores on every edge (the `u_add_v` or
`u_dot_v` that `apply_edges` reaches, convs.message), the leaky ReLU, DGL's edge softmax (which
the plugin runs as its fused kernel on CUDA and its fused CPU kernel), the attention dropout, any
edge weight, and the weighted aggregation (`u_mul_e` sum), then the residual, bias and
activation. What goes is the graph's local scope and frames and the per-forward zero-in-degree
check, which the graph cache answers once per graph (`facts`).
"""
from __future__ import annotations

from dgl_ugraph.dgl.modules import facts
from dgl_ugraph.dgl.modules.convs import ZERO_IN_DEGREE, aggregate, dgl_api, message, shares_frames


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
            num_dst = entry.ugraph.num_dst
            feat_dst = feat_src[:num_dst]
            h_dst = h_dst[:num_dst]
            dst_prefix_shape = (num_dst,) + dst_prefix_shape[1:]
    el = (feat_src * self.attn_l).sum(dim=-1).unsqueeze(-1)
    er = (feat_dst * self.attn_r).sum(dim=-1).unsqueeze(-1)
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
