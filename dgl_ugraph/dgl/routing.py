"""Running a recognized call: the decision's kernel (its `core.ops.Plan`, made by the first call),
or DGL's own function where recognition refused the call or the kernel raised, counted where it
ran. The operator replacements (`interception`) and the module patterns' fused aggregations
(`modules.fused`) route their calls through `route`.
"""
from __future__ import annotations

import torch

from dgl_ugraph.core import ops
from dgl_ugraph.core.ops import Plan
from dgl_ugraph.dgl.recognition import Decision, after_failure, decision_for, make_op_info


def planned(d: Decision, entry, lhs, rhs, args=True):
    """The decision's kernel call: planned by its first call, each later one reusing the plan.
    Max/min's args come in DGL's index type (cache.GraphEntry.idtype)."""
    if d.plan is None:
        op_info = make_op_info(d.pattern, lhs, rhs)
        first = ops.prepare(entry.ugraph, op_info, d.choice.parallel_info if d.choice else None, args=args,
                            arg_dtype=entry.idtype)
        d.plan = Plan(entry.ugraph, op_info, first=first)
        # The first call runs what it prepared: its outputs, and its copy of an operand whose
        # features are not contiguous (a gradient expanded from a sum), made once, not again by
        # the plan. Every call of a graph seen once (a sampled block) is such a first call.
        return first.run()
    return d.plan.run(lhs, rhs)  # the plan reads only the operands its pattern uses


def run_spmm(d: Decision, entry, lhs, rhs, args=True):
    """(out, (argX, argY)) as DGL's _gspmm; without `args`, max/min's args are None (their
    decision is keyed apart: interception._spmm)."""
    plan = d.plan  # made by the first call on a graph with edges
    if plan is not None and d.plain:
        out, arg_a, arg_b = plan.run(lhs, rhs)
        return out, (arg_a, arg_b)
    if d.expand_lhs:
        lhs = lhs.unsqueeze(-1)
    if d.expand_rhs:
        rhs = rhs.unsqueeze(-1)
    graph = entry.ugraph
    p = d.pattern
    if graph.num_edges == 0:
        # DGL skips its kernel on a graph without edges and returns the zeros it allocated.
        x = lhs if p.A_type != "null" else rhs
        out = torch.zeros((graph.num_dst,) + d.out_shape, dtype=x.dtype, device=x.device)
        cmp = args and p.gather_op in ("max", "min")
        arg_a = torch.zeros(out.shape, dtype=entry.idtype, device=x.device) if cmp and p.A_type != "null" else None
        arg_b = torch.zeros(out.shape, dtype=entry.idtype, device=x.device) if cmp and p.B_type != "null" else None
    else:
        out, arg_a, arg_b = planned(d, entry, lhs, rhs, args)
    if d.squeeze_out:
        out = out.squeeze(-1)
    if d.expand_lhs and arg_a is not None:
        arg_a = arg_a.squeeze(-1)
    if d.expand_rhs and arg_b is not None:
        arg_b = arg_b.squeeze(-1)
    return out, (arg_a, arg_b)


def run_sddmm(d: Decision, entry, lhs, rhs):
    plan = d.plan
    if plan is not None and d.plain:
        return plan.run(lhs, rhs)[0]
    if d.expand_lhs:
        lhs = lhs.unsqueeze(-1)
    if d.expand_rhs:
        rhs = rhs.unsqueeze(-1)
    out = planned(d, entry, lhs, rhs)[0]
    return out.squeeze(-1) if d.squeeze_out else out


def route(gidx, sig_key, op, lhs, rhs, run, native):
    """Runs a recognized call on dgl_ugraph with `run`, anything else (and a call whose kernel
    raised) on DGL with `native`, counting it where it ran."""
    entry, d = decision_for(gidx, sig_key, op, lhs, rhs)
    if d is not None and d.pattern is not None:
        try:
            result = run(d, entry, lhs, rhs)
        except Exception as exc:  # never the reason a run breaks: DGL computes it instead
            d = after_failure(entry, sig_key, d, exc)
        else:
            d.record.calls += 1
            return result
    if d is not None:
        d.record.calls += 1
        if d.error is not None:
            from dgl import DGLError
            raise DGLError(d.error)
    return native()


def run_spmm_out(d: Decision, entry, lhs, rhs):
    return run_spmm(d, entry, lhs, rhs, args=False)


def run_spmm_only(d: Decision, entry, lhs, rhs):
    return run_spmm(d, entry, lhs, rhs)[0]
