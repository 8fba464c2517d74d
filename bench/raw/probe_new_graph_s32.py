"""Session 32: what a graph's first call costs on the GPU machine, phase by phase, against DGL's own
call on a graph it never saw either. Sampled blocks of ppi (fanouts 15/10/5, 1,024 seeds), each
used once; copy_u-sum at F=256 on each block's layer-1..3 graphs.

Per fresh block, with the device synchronized around each phase (wall microseconds, medians):
  dgl      - DGL's _gspmm (plugin off): its format creation and cuSPARSE call;
  dgl_rev  - the same on the block's reverse graph (a backward pass's call);
  ours, ours_rev - the plugin's _gspmm, whole;
  and, on other fresh blocks, ours by phase: resolve (cache.entry_for: DGL's CSC, our UGraph),
  stats (the degree statistics), choose (selection), plan (ops.Plan), run (the plan's launch).

    python bench/raw/probe_new_graph_s32.py       (CUDA DGL on PYTHONPATH)
"""
from __future__ import annotations

import pathlib
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import dgl  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402

import bench_minibatch as bm  # noqa: E402
import dgl_ugraph  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo  # noqa: E402
from dgl_ugraph.core.ops import Plan  # noqa: E402
from dgl_ugraph.dgl import cache  # noqa: E402
from dgl_ugraph.selection.policy import choose_for  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

F = 256


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6, out


def ppi_on_gpu():
    """(the ppi stand-in as a DGL graph on the GPU, 40,000 seed nodes)."""
    spec = {s.name: s for s in gs.PAPER_STANDINS}["ppi"]
    src, dst, n = gs.make(spec)
    return dgl.graph((src, dst), num_nodes=n).to("cuda"), torch.randperm(n)[:40000].cuda()


def sampled_blocks(g, seeds, batches: int, seed: int) -> list:
    """Every block of `batches` batches of 1,024 seeds, 15/10/5 neighbors sampled on the GPU."""
    return [b for _, _, bl in bm.sample(g, seeds, batches, 1024, torch.device("cuda"), seed) for b in bl]


def stats_and_choice(t: dict, ug, x):
    """Times a new graph's degree statistics and the selection of copy_u-sum over x into t's
    "stats" and "choose"; (the call's OpInfo, the choice)."""
    t["stats"].append(timed(lambda: ug.stats)[0])
    op = OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")
    us, choice = timed(lambda: choose_for(ug, op))
    t["choose"].append(us)
    return op, choice


def main():
    g, seeds = ppi_on_gpu()
    blocks = sampled_blocks(g, seeds, 36, 1)
    third = len(blocks) // 3
    dgl_ugraph.enable()
    t = {k: [] for k in ("dgl", "dgl_rev", "ours", "ours_rev", "resolve", "stats", "choose", "plan", "run")}
    for k, b in enumerate(blocks):
        x = torch.randn(b.num_src_nodes(), F, device="cuda")
        y = torch.randn(b.num_dst_nodes(), F, device="cuda")
        gidx = b._graph
        if k < third:
            with dgl_ugraph.disabled():
                t["dgl"].append(timed(lambda: sparse._gspmm(gidx, "copy_lhs", "sum", x, None))[0])
                t["dgl_rev"].append(timed(lambda: sparse._gspmm(gidx.reverse(), "copy_lhs", "sum", y, None))[0])
        elif k < 2 * third:
            t["ours"].append(timed(lambda: sparse._gspmm(gidx, "copy_lhs", "sum", x, None))[0])
            t["ours_rev"].append(timed(lambda: sparse._gspmm(gidx.reverse(), "copy_lhs", "sum", y, None))[0])
        else:
            us, entry = timed(lambda: cache.entry_for(gidx))
            t["resolve"].append(us)
            op, choice = stats_and_choice(t, entry.ugraph, x)
            ug = entry.ugraph
            us, plan = timed(lambda: Plan(ug, op, choice.parallel_info))
            t["plan"].append(us)
            t["run"].append(timed(lambda: plan.run(x, None))[0])
    print(f"{len(blocks)} blocks, {third} per arm; edges per block median "
          f"{statistics.median(b.num_edges() for b in blocks):.0f}")
    for k, v in t.items():
        print(f"{k:8} median {statistics.median(v):8.1f} us  p25 {statistics.quantiles(v, n=4)[0]:8.1f}  "
              f"p75 {statistics.quantiles(v, n=4)[2]:8.1f}")


if __name__ == "__main__":
    main()
