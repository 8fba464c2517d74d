"""GraphConv's normalized aggregation as one autograd function: the degree norms folded into the
aggregation, out[v] = n_v * sum over in-edges (u, v) of n_u * x_u (the switching table's fused
row gspmm_norm_sum).

DGL's GraphConv makes it three operations forward, each a launch and an autograd node: the
features times the source norms (a pass over the rows, before the matmul where the input is the
wider side), the copy_u sum, and the result times the destination norms. Here the forward is one
aggregation whose messages are scaled by their source's norm as they are read (edge_op mul, A the
features, B the norms, both typed src) and the destination norms applied in place; the backward is
the same call on the reverse graph (A the gradient, B the destination norms), then the source
norms in place. A call that recognition refuses (or whose kernel raised) runs as DGL's product and
copy sum; where autograd records the backward (create_graph), the backward is DGL's
differentiable reverse sum between the two products.

It runs where a message scaled as it is read wins (`mean.scaled_messages_win`): on CUDA, not for
narrow rows of large, dense graphs. The CPU core keeps DGL's order, as for the mean's backward.
"""
from __future__ import annotations

import torch

from dgl_ugraph.dgl import mean, routing
from dgl_ugraph.dgl.modules.api import dgl_api
from dgl_ugraph.dgl.recognition import meta

FUSED_DEVICES = mean.FUSED_DEVICES


def runs(device: torch.device, width: int, graph) -> bool:
    """Whether the normalized aggregation of `width` features a row runs fused on `graph`."""
    return device.type in FUSED_DEVICES and mean.scaled_messages_win(width, graph)


def _scaled_sum(gidx, x, scale):
    """For each destination, the sum over its in-edges of x_u * scale_u: the fused row's one
    kernel call, or the product and the copy sum where recognition refuses it."""
    return routing.route(gidx, ("norm_sum", meta(x), meta(scale)), "mul", x, scale, routing.run_spmm_only,
                         lambda: dgl_api()["sparse"]._gspmm(gidx, "copy_lhs", "sum", x * scale, None)[0])


class _NormSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, src_norm, dst_norm, gidx):
        ctx.gidx, ctx.src_norm, ctx.dst_norm = gidx, src_norm, dst_norm
        return _scale(_scaled_sum(gidx, x, src_norm), dst_norm)

    @staticmethod
    def backward(ctx, grad):
        rev = ctx.gidx.reverse()  # answered once per graph index (`indexes`)
        if ctx.dst_norm is not None and not torch.is_grad_enabled():
            return _scaled_sum(rev, grad, ctx.dst_norm).mul_(ctx.src_norm), None, None, None
        # Norm 'left' (no destination norm to fold), or create_graph: DGL's reverse sum, which
        # autograd records where it must.
        if ctx.dst_norm is not None:
            grad = grad * ctx.dst_norm
        return dgl_api()["sparse"].gspmm(rev, "copy_lhs", "sum", grad, None) * ctx.src_norm, None, None, None


def _scale(out, norm):
    # In place: the aggregation's result is a new tensor that nothing else holds.
    return out if norm is None else out.mul_(norm)


def norm_sum(gidx, x, src_norm, dst_norm):
    """n_v * sum over in-edges of n_u * x_u (dst_norm None: norm 'left', no destination norm).
    Autograd records one node where x needs its gradient."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _NormSum.apply(x, src_norm, dst_norm, gidx)
    return _scale(_scaled_sum(gidx, x, src_norm), dst_norm)
