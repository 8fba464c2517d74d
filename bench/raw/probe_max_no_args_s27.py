"""What max/min's args cost where no backward reads them (session 27: the DGL layer now runs such a
call without them, interception._args_read). Two parts, one run:

kernel: copy_u-max on the kernel API with its args (args=True) and without (args=False), beside
  copy_u-sum, each on the selector's choice (policy.plan); int32 stand-ins of the suite (edge ids
  as generated) x F in 16, 64, 256, float32. CUDA events over 20 back-to-back plan runs (outputs
  allocated as in any call), the three alternating over 9 rounds; medians per call.
model: DGL's SAGEConv('pool') inference (eval, no_grad: its max has no operand that needs a
  gradient) under CUDA DGL with the plugin on, the args skipped (as shipped) against made (the
  GSpMM rule switched off, as before this change) and the plugin off (DGL's kernels), alternating
  over 9 rounds of 10 forwards; medians per forward, and the outputs compared.

    PYTHONPATH=. python bench/raw/probe_max_no_args_s27.py OUT_PREFIX"""
import statistics
import sys

import torch
from probe_gat_csc_s26 import per_call_ms  # this folder's: CUDA events around back-to-back calls

from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.selection import policy
from dgl_ugraph.tuning import graph_suite as gs
from dgl_ugraph.tuning.shards import write_rows

GRAPHS = ("cora", "pubmed", "ppi", "artist", "soc-BlogCatalog", "DD", "amazon0601", "amazon0505", "Yeast",
          "OVCAR-8H")
WIDTHS = (16, 64, 256)
ROUNDS = 9


def kernel_part(out):
    specs = {s.name: s for s in gs.PAPER_STANDINS}
    rows = []
    for name in GRAPHS:
        src, dst, n = gs.make(specs[name])
        g = UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)
        for f in WIDTHS:
            x = torch.randn(n, f, device="cuda")
            impls = {}
            for label, gather, args in (("max_args", "max", True), ("max_no_args", "max", False),
                                        ("sum", "sum", True)):
                op = OpInfo("copy_lhs", gather, x, "src", None, "null", "dst")
                plan = policy.plan(g, op, args=args)
                impls[label] = (lambda p: lambda: p.run(x, None))(plan)
            # The same values with and without args (the sum is the control).
            assert torch.equal(impls["max_args"]()[0], impls["max_no_args"]()[0])
            config = str(policy.choose(g, policy.ops.prepare(g, OpInfo("copy_lhs", "max", x, "src", None, "null",
                                                                         "dst")).signature))
            for fn in impls.values():
                per_call_ms(fn, 5)
            times = {k: [] for k in impls}
            for r in range(ROUNDS):
                for k in (list(impls) if r % 2 == 0 else list(reversed(impls))):
                    times[k].append(per_call_ms(impls[k]))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append(dict(graph=name, V=n, E=g.num_edges, F=f, config_max=config,
                             **{f"ms_{k}": round(v, 5) for k, v in med.items()}))
            print(f"{name:16} F={f:<3} {config:18} max {med['max_args']:.4f} -> {med['max_no_args']:.4f} ms "
                  f"({med['max_args'] / med['max_no_args']:.2f}x), sum {med['sum']:.4f}; "
                  f"max/sum {med['max_args'] / med['sum']:.2f} -> {med['max_no_args'] / med['sum']:.2f}", flush=True)
            write_rows(out + "_kernel.csv", rows, list(rows[0]))


def model_part(out):
    import dgl
    from dgl.nn import SAGEConv

    import dgl_ugraph
    from dgl_ugraph.dgl import interception

    specs = {s.name: s for s in gs.PAPER_STANDINS}
    rows = []
    never = compile("", "<no caller>", "exec")  # a code object no caller has: the GSpMM rule never matches
    for name in ("pubmed", "ppi", "artist", "amazon0601", "amazon0505", "OVCAR-8H"):
        src, dst, n = gs.make(specs[name])
        g = dgl.graph((src, dst), num_nodes=n).to("cuda")
        for f in (64, 256):
            torch.manual_seed(0)
            conv = SAGEConv(f, f, "pool").cuda().eval()
            feat = torch.randn(n, f, device="cuda")

            def forward():
                with torch.no_grad():
                    return conv(g, feat)

            def on_skipped():
                dgl_ugraph.enable()
                return forward()

            def on_made():
                dgl_ugraph.enable()
                saved = interception._args_callers["GSpMM"]
                interception._args_callers["GSpMM"] = never
                try:
                    return forward()
                finally:
                    interception._args_callers["GSpMM"] = saved

            def off():
                dgl_ugraph.disable()
                try:
                    return forward()
                finally:
                    dgl_ugraph.enable()

            impls = {"on_args_skipped": on_skipped, "on_args_made": on_made, "off": off}
            results = {k: fn() for k, fn in impls.items()}
            diff = max(float((results[k] - results["off"]).abs().max()) for k in impls)
            same = torch.equal(results["on_args_skipped"], results["on_args_made"])
            for fn in impls.values():
                per_call_ms(fn, 3)
            times = {k: [] for k in impls}
            for r in range(ROUNDS):
                for k in (list(impls) if r % 2 == 0 else list(reversed(impls))):
                    times[k].append(per_call_ms(impls[k], 10))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append(dict(graph=name, V=n, E=g.num_edges(), F=f, on_equal=same, max_abs_diff_vs_off=diff,
                             **{f"ms_{k}": round(v, 5) for k, v in med.items()}))
            print(f"SAGE-pool {name:12} F={f:<3} skipped {med['on_args_skipped']:.4f} made {med['on_args_made']:.4f} "
                  f"off {med['off']:.4f} ms; equal {same}, vs off {diff:.1e}", flush=True)
            write_rows(out + "_sage_pool.csv", rows, list(rows[0]))


if __name__ == "__main__":
    kernel_part(sys.argv[1])
    model_part(sys.argv[1])
