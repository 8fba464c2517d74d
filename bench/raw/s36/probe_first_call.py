"""Session 36: a sampled block's first call on the GPU, phase by phase, after session 35's change
to the DGL layer's first call (interception._planned prepares once, builds the Plan from that
call, and runs it). Session 32's probe (bench/raw/probe_new_graph_s32.py) timed `Plan(...)`, which
prepared again inside; this one times the composition the layer now runs. Sampled blocks of ppi
(fanouts 15/10/5, 1,024 seeds), each used once; copy_u-sum at F=256 on each block.

Per fresh block, the device synchronized around each phase (wall microseconds, medians):
  dgl       - DGL's _gspmm, the plugin off: its CSC creation and cuSPARSE call;
  dgl_csc   - DGL's CSC creation alone (cache._adjacency), then
  dgl_call  - DGL's _gspmm on the block whose CSC now exists;
  ours      - the plugin's _gspmm from a graph's first call (DGL_UGRAPH_TIER_UP=0), whole;
  and on other fresh blocks, ours by phase: csc (DGL's CSC, as dgl_csc), ugraph (our UGraph from
  it: cache._build), stats (the degree statistics: a wait for the device), choose (selection),
  prepare (ops.prepare), plan (Plan(first=...)), run (the prepared call's launch).
Then the device synchronizations in one first call (torch's sync debug mode, warnings counted),
and with --profile, cProfile over the plugin's first calls on 24 more fresh blocks.

    python bench/raw/s36/probe_first_call.py       (CUDA DGL on PYTHONPATH)
"""
from __future__ import annotations

import cProfile
import os
import pathlib
import pstats
import statistics
import sys
import warnings

os.environ["DGL_UGRAPH_TIER_UP"] = "0"

import torch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "bench" / "raw")]

import dgl  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.core import ops  # noqa: E402
from dgl_ugraph.dgl import cache  # noqa: E402
from probe_new_graph_s32 import ppi_on_gpu, sampled_blocks, stats_and_choice, timed  # noqa: E402

F = 256
PHASES = ("dgl", "dgl_csc", "dgl_call", "ours", "csc", "ugraph", "stats", "choose", "prepare", "plan", "run")


def main():
    g, seeds = ppi_on_gpu()
    blocks = sampled_blocks(g, seeds, 36, 1)
    dgl_ugraph.enable()
    t = {k: [] for k in PHASES}
    syncs = []
    for k, b in enumerate(blocks):
        x = torch.randn(b.num_src_nodes(), F, device="cuda")
        gidx = b._graph
        arm = k % 4
        if arm == 0:
            with dgl_ugraph.disabled():
                t["dgl"].append(timed(lambda: sparse._gspmm(gidx, "copy_lhs", "sum", x, None))[0])
        elif arm == 1:
            with dgl_ugraph.disabled():
                t["dgl_csc"].append(timed(lambda: cache._adjacency(gidx, True))[0])
                t["dgl_call"].append(timed(lambda: sparse._gspmm(gidx, "copy_lhs", "sum", x, None))[0])
        elif arm == 2:
            t["ours"].append(timed(lambda: sparse._gspmm(gidx, "copy_lhs", "sum", x, None))[0])
        else:
            us, arrays = timed(lambda: cache._adjacency(gidx, True))
            t["csc"].append(us)
            srctype, dsttype = gidx.metagraph.find_edge(0)
            num_src = gidx.num_nodes(srctype)
            key = cache._graph_key(arrays, num_src, gidx.num_nodes(dsttype))
            us, entry = timed(lambda: cache._build(arrays, num_src, key))
            t["ugraph"].append(us)
            ug = entry.ugraph
            op, choice = stats_and_choice(t, ug, x)
            us, prep = timed(lambda: ops.prepare(ug, op, choice.parallel_info))
            t["prepare"].append(us)
            t["plan"].append(timed(lambda: ops.Plan(ug, op, first=prep))[0])
            t["run"].append(timed(prep.run)[0])
    # The synchronizations of one first call, on fresh blocks of another sample.
    more = sampled_blocks(g, seeds, 4, 2)
    for b in more:
        x = torch.randn(b.num_src_nodes(), F, device="cuda")
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            sparse._gspmm(b._graph, "copy_lhs", "sum", x, None)
            torch.cuda.set_sync_debug_mode(0)
        syncs.append([str(w.message).splitlines()[0][:90] for w in caught if "synchroniz" in str(w.message)])
    print(f"{len(blocks)} blocks, about {len(blocks) // 4} per arm; edges per block median "
          f"{statistics.median(b.num_edges() for b in blocks):.0f}; DGL {dgl.__version__}")
    for k, v in t.items():
        if len(v) >= 2:
            q = statistics.quantiles(v, n=4)
            print(f"{k:9} median {statistics.median(v):8.1f} us  p25 {q[0]:8.1f}  p75 {q[2]:8.1f}  (n={len(v)})")
    counts = [len(s) for s in syncs]
    print(f"device synchronizations torch saw in one first call: {counts}")
    for s in syncs[:2]:
        for line in s:
            print("  ", line)
    if "--profile" in sys.argv:
        fresh = sampled_blocks(g, seeds, 8, 3)
        feats = [torch.randn(b.num_src_nodes(), F, device="cuda") for b in fresh]
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for b, x in zip(fresh, feats):
            sparse._gspmm(b._graph, "copy_lhs", "sum", x, None)
        torch.cuda.synchronize()
        prof.disable()
        print(f"cProfile over {len(fresh)} first calls:")
        stats = pstats.Stats(prof).strip_dirs()
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
