"""Session 31 probe: the example models on cuda:1 (test_multi_gpu's models test) as a sequence in
one process, each step followed by a synchronization of both GPUs, logging every change of the
CUDA runtime's current device across dgl_ugraph's entry points and DGL's C API calls.

    PYTHONPATH=.:tests:tests/gpu python3 bench/raw/probe_multi_gpu_s31.py [--models GIN-max,SAGE-pool]
        [--device cuda:1] [--currents 0,1] [--repeat 2] [--ours-only] [--no-poison]
Run it under CUDA_LAUNCH_BLOCKING=1 or compute-sanitizer to place a fault.
"""
from __future__ import annotations

import argparse
import copy
import functools
import sys
import traceback

import torch

import dgl
import dgl.backend.pytorch.tensor
import dgl._sparse_ops

import dgl_ugraph
import test_dgl_models as tm
from dgl_ugraph.core import ops
from dgl_ugraph.dgl import cache, interception

_get = torch._C._cuda_getDevice
log = []


def tracked(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        before = _get()
        try:
            return fn(*args, **kwargs)
        finally:
            after = _get()
            if after != before:
                log.append(f"{name}: current device {before} -> {after}")
    return wrapper


def install():
    ops._launch = tracked("ops._launch", ops._launch)
    ops.Plan.run = tracked("Plan.run", ops.Plan.run)
    for name in ("_spmm", "_sddmm"):
        setattr(interception, name, tracked(f"interception.{name}", getattr(interception, name)))
    cache._resolve = tracked("cache._resolve", cache._resolve)
    # DGL's C API functions, looked up as module globals by their Python callers.
    for module in (dgl.heterograph_index, dgl._sparse_ops, dgl.ndarray, dgl.backend.pytorch.tensor):
        for attr in dir(module):
            if attr.startswith("_CAPI_"):
                setattr(module, attr, tracked(f"DGL {attr}", getattr(module, attr)))


def step(name, current, plugin, device):
    make, prepare = tm.MODELS[name]
    g, feat, labels = tm.data.synthetic_graph(3000, 30000, tm.CLASSES, tm.FEAT, seed=3)
    train_mask = tm.data.masks(g.num_nodes(), seed=3)[0].to(device)
    torch.cuda.set_device(current)
    g, feat, labels = g.to(device), feat.to(device, torch.float64), labels.to(device)
    log.append(f"  graph on {device} made; current device {_get()}")
    if prepare is not None:
        g = prepare(g)
    torch.manual_seed(0)
    model = make().to(device, torch.float64)
    state = copy.deepcopy(model.state_dict())
    torch.cuda.set_device(current)
    (dgl_ugraph.enable if plugin else dgl_ugraph.disable)()
    out, grads = tm.training_step(model, state, g, feat, labels, train_mask)
    after = _get()
    for d in range(torch.cuda.device_count()):
        torch.cuda.synchronize(d)
    return out, grads, after


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="GCN,GIN-max,SAGE-pool")
    ap.add_argument("--device", default="cuda:1", help="the graph's (cuda:0 checks the probe on one GPU)")
    ap.add_argument("--currents", default="0,1")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--ours-only", action="store_true")
    ap.add_argument("--no-poison", action="store_true", help="Plan.run's direct launch (the tests poison outputs)")
    args = ap.parse_args()
    ops.POISON_OUTPUTS = not args.no_poison
    install()
    for r in range(args.repeat):
        for name in args.models.split(","):
            for current in (int(c) for c in args.currents.split(",")):
                log.append(f"== round {r} {name} current {current}")
                try:
                    out, grads, ours_after = step(name, current, True, args.device)
                    line = f"ours leaves current device {ours_after}"
                    if not args.ours_only:
                        ref, ref_grads, dgl_after = step(name, current, False, args.device)
                        worst = max([(out - ref).abs().max().item()]
                                    + [(grads[k] - ref_grads[k]).abs().max().item() for k in grads])
                        line += f", DGL's leaves {dgl_after}; max |ours - DGL| {worst:.3g}"
                    log.append("  " + line)
                except Exception:
                    log.append(traceback.format_exc())
                    print("\n".join(log), flush=True)
                    sys.exit(1)
                print("\n".join(log), flush=True)
                log.clear()
    print("probe done", flush=True)


if __name__ == "__main__":
    main()
