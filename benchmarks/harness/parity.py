"""Parity: outputs (and, in training, every gradient) with the plugin on against DGL's own."""
from __future__ import annotations

import math
from typing import List, Tuple

import torch
import torch.nn.functional as F

from .models import inference_fn, training_fn

RTOL = 1e-4


def training_result(model, g, feat, labels, state):
    """Training-mode output and every gradient, from a fixed state and dropout seed."""
    model.load_state_dict(state)
    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    out = model(g, feat)
    F.cross_entropy(out, labels).backward()
    return [out.detach()] + [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def parity(ours: List[torch.Tensor], theirs: List[torch.Tensor], rtol: float = RTOL) -> Tuple[float, bool]:
    """(worst |diff| relative to scale, all within rtol). Each tensor is compared elementwise
    with rtol, plus rtol of its scale for entries that cancel to nearly 0. A tensor's scale is its
    largest magnitude, floored at 1e-4 of the largest magnitude among the tensors of its kind
    (outputs, gradients): a gradient that is mathematically zero (a bias right before a
    BatchNorm) is pure rounding noise in both runs and is judged against that floor."""
    if len(ours) != len(theirs):
        return math.inf, False
    worst, ok = 0.0, True
    grad_peak = max([b.abs().max().item() for b in theirs[1:] if b.numel()] or [0.0])
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            return math.inf, False
        if not b.numel():
            continue
        if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
            return math.inf, False
        fin = torch.isfinite(b)
        a, b = a.double()[fin], b.double()[fin]
        if not b.numel():
            continue
        scale = max(b.abs().max().item(), 1e-4 * grad_peak if i else 0.0, 1e-30)
        diff = (a - b).abs()
        worst = max(worst, diff.max().item() / scale)
        if (diff - rtol * b.abs()).max().item() > rtol * scale:
            ok = False
    return worst, ok


def results_on_and_off(model, g, feat, labels, state, mode):
    """(the function to time, its results with the plugin on, the same with it off) for one mode;
    training results are the output and every gradient from `state` (the model is left there)."""
    import dgl_ugraph

    if mode == "inference":
        fn = inference_fn(model, g, feat)
        with dgl_ugraph.disabled():
            ref = [fn()]
        dgl_ugraph.enable()
        return fn, [fn()], ref
    with dgl_ugraph.disabled():
        ref = training_result(model, g, feat, labels, state)
    dgl_ugraph.enable()
    ours = training_result(model, g, feat, labels, state)
    model.load_state_dict(state)
    return training_fn(model, labels, g, feat), ours, ref
