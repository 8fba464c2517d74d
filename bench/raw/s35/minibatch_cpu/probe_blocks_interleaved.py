"""CPU, session 35: each batch's three sampled blocks (pubmed stand-in, fanouts 15/10/5, 512 seeds),
one copy_u-sum update_all a block and its backward, plugin on against off; every block is new to
the side that runs it (as in mini-batch training), the sides interleaved batch by batch in
alternating order. Medians over 21 batches after 3 of warm-up, and the paired ratio dgl / ugraph.

    PYTHONPATH=. DGL_UGRAPH_TIER_UP=0 .venv/bin/python bench/raw/s35/minibatch_cpu/probe_blocks_interleaved.py [graph]
"""
import pathlib
import statistics
import sys
import time

import dgl
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "scripts"))
import bench_minibatch as bm  # noqa: E402
import dgl_ugraph  # noqa: E402
from dgl_ugraph.tuning import graph_suite as gs  # noqa: E402

F, BATCHES, WARMUP = 256, 24, 3


def block_calls(block, x):
    x = x.detach().requires_grad_()
    block.srcdata["h"] = x[: block.num_src_nodes()]
    block.update_all(dgl.function.copy_u("h", "m"), dgl.function.sum("m", "o"))
    block.dstdata["o"].sum().backward()


def main():
    torch.manual_seed(0)
    name = sys.argv[1] if len(sys.argv) > 1 else "pubmed"
    src, dst, n = gs.make(next(s for s in gs.PAPER_STANDINS if s.name == name))
    g = dgl.graph((src, dst), num_nodes=n)
    batches = {impl: bm.sample(g, torch.arange(n), BATCHES, 512, torch.device("cpu"), seed)
               for impl, seed in (("dgl", 1), ("ugraph", 2))}
    ms = {"dgl": [], "ugraph": []}
    for i in range(BATCHES):
        for impl in (("dgl", "ugraph") if i % 2 == 0 else ("ugraph", "dgl")):
            blocks = batches[impl][i][2]
            x = torch.randn(max(b.num_src_nodes() for b in blocks), F)
            t0 = time.perf_counter()
            if impl == "dgl":
                with dgl_ugraph.disabled():
                    for b in blocks:
                        block_calls(b, x)
            else:
                for b in blocks:
                    block_calls(b, x)
            ms[impl].append((time.perf_counter() - t0) * 1e3)
    for impl, ts in ms.items():
        print(f"{impl}: {statistics.median(ts[WARMUP:]):.3f} ms a batch (median)")
    paired = statistics.median(a / b for a, b in zip(ms["dgl"][WARMUP:], ms["ugraph"][WARMUP:]))
    print(f"paired dgl / ugraph: {paired:.3f}")
    print(dgl_ugraph.stats()["patterns"])


if __name__ == "__main__":
    main()
