"""Session 34: DGL graphs are int64 unless the user asks otherwise, and dgl_ugraph runs them on
the int64 kernels; the kernel benchmark and most training data are int32. What does int64 cost?
On the uGrapher stand-ins, per operator: the int32 graph's selector choice timed on the int32
and the int64 copy of the graph (the core's timing loop, bench_kernels' final policy, in one
runner batch per idtype), and the int64 graph's own choice. Rows to $OUT/idtype.csv."""
import csv
import os
import sys
import pathlib
import time
import types

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import bench_kernels as bk  # noqa: E402
from dgl_ugraph.core import ops, timing  # noqa: E402
from dgl_ugraph.selection import policy  # noqa: E402

CASES = [("copy_u-sum", 64), ("copy_u-sum", 16), ("copy_u-max", 64), ("u_mul_e-sum", 64), ("copy_u-mean", 64),
         ("gat_u_mul_e-sum", 64), ("u_add_v", 64), ("u_dot_v", 64), ("nnconv_u_mul_e-max", 256)]
args = types.SimpleNamespace(no_standins=False, no_large=True, no_datasets=True, scale=1.0, only=None, skip=None)
out = pathlib.Path(os.environ.get("OUT", "/tmp")) / "idtype.csv"
rows, t0 = [], time.time()
for gname, src, dst, n in bk.graphs(args):
    if time.time() - t0 > float(os.environ.get("BUDGET_S", "200")):
        print("budget reached", flush=True)
        break
    g32 = bk.UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)
    g64 = g32.to(idtype=torch.int64)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, f in CASES:
        op32 = bk.make_inputs(name, g32, f, torch.float32, gen)
        op64 = op32
        chosen32 = policy.choose(g32, ops.signature(g32, op32)[0])
        chosen64 = policy.choose(g64, ops.signature(g64, op64)[0])
        t = {}
        for label, graph, configs in (("i32", g32, [chosen32]), ("i64", g64, list(dict.fromkeys([chosen32, chosen64])))):
            runner = timing.CudaRunner(graph, op32, configs[0])
            for tm in timing.time_configs(runner, configs, bk.FINAL_POLICY):
                if tm.status == "ok":
                    t[(label, tm.config)] = tm.ms
            del runner
        a, b, c = t.get(("i32", chosen32)), t.get(("i64", chosen32)), t.get(("i64", chosen64))
        row = dict(graph=gname, E=g32.num_edges, op=name, F=f, config32=str(chosen32), config64=str(chosen64),
                   ms_i32=a, ms_i64_same=b, ms_i64_own=c)
        rows.append(row)
        print(f"{gname:26} {name:18} F={f:<4} i32 {a:.4f} ({chosen32})  i64 same {b:.4f} x{b / a:.2f}  "
              f"i64 own {c:.4f} ({chosen64}) x{c / a:.2f}", flush=True)
    del g32, g64
    torch.cuda.empty_cache()
with open(out, "w", newline="") as fh:
    w = csv.DictWriter(fh, list(rows[0]))
    w.writeheader()
    w.writerows(rows)
print(f"wrote {len(rows)} rows to {out}")
