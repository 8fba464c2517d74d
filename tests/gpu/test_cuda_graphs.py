"""CUDA graph capture of whole training steps built on the kernel API.

A GCN step (copy_u-sum) and a GAT step (u_add_v, edge softmax as copy_e-max, e_sub_v, copy_e-sum
and e_div_v, u_mul_e-sum, and their backward passes: copy_e-sum, u_dot_v, e_mul_v and the sums
on the reverse graph) run every sparse operation through `policy.plan` (an `ops.Plan`). Each step
is captured with torch.cuda.graph, forward, backward and optimizer together, and replayed; its losses and
parameters must equal those of the same steps run eagerly from the same start.
"""
from __future__ import annotations

import pathlib
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]),) if p not in sys.path]

from dgl_ugraph.core import _ext  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _ext.has_cuda()),
                                reason="needs a GPU and the CUDA core")

STEPS = 5


class Kernels:
    """The plans of one graph and its reverse, each made on first use. Capture only replays
    them: a plan's first call uploads its broadcast offsets, which a capture may not do."""

    def __init__(self, graph: UGraph):
        self.graph, self.rev = graph, graph.reverse()
        self.plans = {}

    def __call__(self, name, reverse, edge_op, gather, a, a_type, b=None, b_type="null"):
        plan = self.plans.get(name)
        if plan is None:
            op = OpInfo(edge_op, gather, a, a_type, b, b_type, "edge" if gather == "none" else "dst")
            plan = self.plans[name] = policy.plan(self.rev if reverse else self.graph, op)
        return plan.run(a, b)[0]


def functions(k: Kernels):
    """Autograd functions whose forward and backward passes are all kernel-API calls."""

    class CopySum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return k("copy_sum", False, "copy_lhs", "sum", x, "src")

        @staticmethod
        def backward(ctx, grad):
            return k("copy_sum_bwd", True, "copy_lhs", "sum", grad.contiguous(), "src")

    class UMulESum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, a):
            ctx.save_for_backward(x, a)
            return k("u_mul_e_sum", False, "mul", "sum", x, "src", a, "edge")

        @staticmethod
        def backward(ctx, grad):
            x, a = ctx.saved_tensors
            grad = grad.contiguous()
            grad_x = k("u_mul_e_sum_bwd_x", True, "mul", "sum", grad, "src", a, "edge")
            grad_a = k("u_mul_e_sum_bwd_a", False, "dot", "none", x, "src", grad, "dst")
            return grad_x, grad_a

    class UAddV(torch.autograd.Function):
        @staticmethod
        def forward(ctx, el, er):
            return k("u_add_v", False, "add", "none", el, "src", er, "dst")

        @staticmethod
        def backward(ctx, grad):
            grad = grad.contiguous()
            return (k("u_add_v_bwd_u", True, "copy_rhs", "sum", None, "null", grad, "edge"),
                    k("u_add_v_bwd_v", False, "copy_rhs", "sum", None, "null", grad, "edge"))

    class EdgeSoftmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, s):
            top = k("softmax_max", False, "copy_rhs", "max", None, "null", s, "edge")
            z = torch.exp(k("softmax_sub", False, "sub", "none", s, "edge", top, "dst"))
            den = k("softmax_sum", False, "copy_rhs", "sum", None, "null", z, "edge")
            out = k("softmax_div", False, "div", "none", z, "edge", den, "dst")
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, grad):
            (out,) = ctx.saved_tensors
            weighted = (grad * out).contiguous()
            sums = k("softmax_bwd_sum", False, "copy_rhs", "sum", None, "null", weighted, "edge")
            return weighted - k("softmax_bwd_mul", False, "mul", "none", out, "edge", sums, "dst")

    return CopySum.apply, UMulESum.apply, UAddV.apply, EdgeSoftmax.apply


def gcn(k: Kernels, n_in: int, n_out: int, gen):
    copy_sum, _, _, _ = functions(k)
    weight = torch.nn.Parameter(torch.randn(n_in, n_out, device="cuda", generator=gen) / n_in ** 0.5)
    return [weight], lambda x: torch.relu(copy_sum(x @ weight))


def gat(k: Kernels, n_in: int, heads: int, width: int, gen):
    _, u_mul_e_sum, u_add_v, edge_softmax = functions(k)
    weight = torch.nn.Parameter(torch.randn(n_in, heads * width, device="cuda", generator=gen) / n_in ** 0.5)
    att_l = torch.nn.Parameter(torch.randn(1, heads, width, device="cuda", generator=gen))
    att_r = torch.nn.Parameter(torch.randn(1, heads, width, device="cuda", generator=gen))

    def forward(x):
        h = (x @ weight).view(-1, heads, width)
        el, er = (h * att_l).sum(-1, keepdim=True), (h * att_r).sum(-1, keepdim=True)
        a = edge_softmax(torch.nn.functional.leaky_relu(u_add_v(el, er), 0.2))
        return u_mul_e_sum(h, a).flatten(1)
    return [weight, att_l, att_r], forward


def random_graph(n: int, e: int, gen) -> UGraph:
    src = torch.randint(0, n, (e,), device="cuda", generator=gen)
    dst = torch.randint(0, n, (e,), device="cuda", generator=gen)
    loops = torch.arange(n, device="cuda")  # every node has an in-edge, as GAT's self-loops give
    return UGraph.from_coo(torch.cat([src, loops]), torch.cat([dst, loops]), n, n, torch.int32)


@pytest.mark.parametrize("model", ["gat", "gcn"])
def test_a_training_step_captures_and_replays_as_it_runs(model):
    gen = torch.Generator(device="cuda").manual_seed(7)
    graph = random_graph(3000, 30000, gen)
    kernels = Kernels(graph)
    params, forward = gcn(kernels, 32, 16, gen) if model == "gcn" else gat(kernels, 32, 4, 8, gen)
    x = torch.randn(graph.num_src, 32, device="cuda", generator=gen)
    target = torch.randn(graph.num_dst, 32 if model == "gat" else 16, device="cuda", generator=gen)
    opt = torch.optim.SGD(params, lr=0.05)
    start = [p.detach().clone() for p in params]

    def step():
        loss = ((forward(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    def restart():
        with torch.no_grad():
            for p, p0 in zip(params, start):
                p.copy_(p0)

    eager = []
    for _ in range(STEPS):  # also makes every plan, before any capture
        opt.zero_grad(set_to_none=True)
        eager.append(step().detach().clone())
    eager_params = [p.detach().clone() for p in params]
    assert set(kernels.plans) >= ({"copy_sum", "copy_sum_bwd"} if model == "gcn" else
                                  {"u_mul_e_sum_bwd_a", "softmax_bwd_mul", "u_add_v_bwd_u"})

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph asks
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    restart()
    graph_step = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph_step):
        static_loss = step()
    restart()
    replayed = []
    for _ in range(STEPS):
        graph_step.replay()
        replayed.append(static_loss.detach().clone())
    torch.cuda.synchronize()
    for i, (ours, ref) in enumerate(zip(replayed, eager)):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6, msg=f"loss of step {i}")
    for p, ref in zip(params, eager_params):
        torch.testing.assert_close(p.detach(), ref, rtol=1e-5, atol=1e-6)
    assert replayed[-1] < replayed[0]  # the replayed steps train
