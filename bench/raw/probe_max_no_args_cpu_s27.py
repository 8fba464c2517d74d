"""copy_u-max on the CPU core with its args (args=True) and without (args=False, what the DGL layer
now runs where no backward reads them), beside copy_u-sum: int64 stand-ins of the suite (as DGL
graphs are by default), float32, the machine's threads; 7 alternating rounds of 5 calls, medians.
    PYTHONPATH=. python bench/raw/probe_max_no_args_cpu_s27.py OUT.csv"""
import platform
import statistics
import sys
import time

import torch

from dgl_ugraph import ugrapher
from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.tuning import graph_suite as gs
from dgl_ugraph.tuning.shards import write_rows


def per_call_ms(fn, calls=5):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e3


def main(out):
    specs = {s.name: s for s in gs.PAPER_STANDINS}
    rows = []
    for name in ("pubmed", "ppi", "artist", "amazon0601", "OVCAR-8H"):
        src, dst, n = gs.make(specs[name])
        g = UGraph.from_coo(src, dst, n, n)
        for f in (16, 64, 256):
            x = torch.randn(n, f)
            impls = {label: (lambda gather, args: lambda: ugrapher(
                g, OpInfo("copy_lhs", gather, x, "src", None, "null", "dst"), args=args))(gather, args)
                for label, gather, args in (("max_args", "max", True), ("max_no_args", "max", False),
                                            ("sum", "sum", True))}
            assert torch.equal(impls["max_args"]()[0], impls["max_no_args"]()[0])
            times = {k: [] for k in impls}
            for r in range(7):
                for k in (list(impls) if r % 2 == 0 else list(reversed(impls))):
                    times[k].append(per_call_ms(impls[k]))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append(dict(machine=platform.processor() or platform.machine(), threads=torch.get_num_threads(),
                             graph=name, V=n, E=g.num_edges, F=f, **{f"ms_{k}": round(v, 4) for k, v in med.items()}))
            print(f"{name:12} F={f:<3} max {med['max_args']:.3f} -> {med['max_no_args']:.3f} ms "
                  f"({med['max_args'] / med['max_no_args']:.2f}x), sum {med['sum']:.3f}", flush=True)
            write_rows(out, rows)


if __name__ == "__main__":
    main(sys.argv[1])
