"""Session 34: after NNConv's aggregation began to run exchanged (ops.swaps_operands),
probe_nnconv_s33.py flagged u_mul_e_sum on warp_edge:32:4 against DGL's float32 with
allclose(rtol=1e-5, atol=1e-5). Rounding or a fault? Per configuration, exchanged and not
(swaps_operands patched off), three runs each: the largest error against an fp64 reference,
in units of the row's sum of |products| (the bound that rounding scales with), beside DGL's own
float32 error in the same units."""
import sys
import pathlib
from unittest import mock

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import dgl  # noqa: E402
import dgl_ugraph  # noqa: E402
from bench_models import graph_cases, tier_up_now  # noqa: E402
from dgl_ugraph.core import ops  # noqa: E402

K = 16
src, dst, n = dict(graph_cases(only={"sim-amazon0505"}, standins=["amazon0505"], scale={}))["sim-amazon0505"]()[:3]
g = dgl.graph((src, dst), num_nodes=n).to("cuda")
gen = torch.Generator().manual_seed(0)
x = torch.randn(n, K, 1, generator=gen).cuda()
w = torch.randn(g.num_edges(), K, K, generator=gen).cuda()
with dgl_ugraph.disabled():
    ref = dgl.ops.u_mul_e_sum(g, x.double(), w.double())
    bound = dgl.ops.u_mul_e_sum(g, x.double().abs(), w.double().abs()).clamp(min=1e-30)
    dgl32 = dgl.ops.u_mul_e_sum(g, x, w)


def units(out):
    err = (out.double() - ref).abs() / bound
    return err.max().item()


eps = torch.finfo(torch.float32).eps
print(f"max in-degree {int(g.in_degrees().max())}; float32 eps {eps:.2e}")
print(f"DGL float32: max |err| / sum|products| = {units(dgl32) / eps:.1f} eps; allclose(1e-5) with ours below")
dgl_ugraph.enable()
# A graph object per packing: the plans a graph keeps do not depend on the patch.
graphs = {True: g, False: dgl.graph((src, dst), num_nodes=n).to("cuda")}
for cfg in ("warp_edge:32:4", "warp_edge:32:1", "warp_edge:64:8", "warp_vertex:4:4", "thread_edge:8:64"):
    for exchanged in (True, False):
        with tier_up_now(), mock.patch.dict("os.environ", {"DGL_UGRAPH_STRATEGY": cfg}), \
                mock.patch.object(ops, "swaps_operands", ops.swaps_operands if exchanged else (lambda *a: False)):
            outs = [dgl.ops.u_mul_e_sum(graphs[exchanged], x, w) for _ in range(3)]
        torch.cuda.synchronize()
        errs = [units(o) / eps for o in outs]
        close = [torch.allclose(o, dgl32, rtol=1e-5, atol=1e-5) for o in outs]
        nan = sum(int(torch.isnan(o).sum()) for o in outs)
        print(f"{cfg:18} exchanged={exchanged!s:5}  err {', '.join(f'{e:.1f}' for e in errs)} eps  "
              f"allclose-to-DGL {close}  nan {nan}", flush=True)
