"""Session 24 probe: what the edge softmax costs inside GAT on CUDA with the plugin: the GATConv
layer (8 heads x 8) forward and forward+backward against dgl.ops.edge_softmax alone on its
(E, 8, 1) scores, and one elementwise pass over those scores (torch.exp, the floor of a fused
softmax's traffic is about two such passes). Writes $OUT/softmax_share.csv."""
import csv, os, statistics, sys, time
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
import torch, dgl
import dgl_ugraph
from dgl.nn import GATConv
from dgl_ugraph.tuning import graph_suite as gs

dgl_ugraph.enable()
by_name = {s.name: s for s in gs.PAPER_STANDINS}
out = open(os.path.join(os.environ.get("OUT", "/tmp"), "softmax_share.csv"), "w", newline="")
w = csv.writer(out); w.writerow(["graph", "E", "what", "ms"])
def ms(fn, reps=20):
    for _ in range(3): fn()
    torch.cuda.synchronize(); t = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)
for name in sys.argv[1].split(","):
    src, dst, n = gs.make(by_name[name])
    g = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=n))).to("cuda")
    g = g.formats(["csc", "coo", "csr"])
    E = g.num_edges()
    x = torch.randn(n, 64, device="cuda")
    conv = GATConv(64, 8, 8).cuda()
    s = torch.randn(E, 8, 1, device="cuda", requires_grad=True)
    go = torch.randn(E, 8, 1, device="cuda")
    def layer_fwd():
        with torch.no_grad(): conv(g, x)
    def layer_fb():
        conv(g, x).sum().backward()
    def sm_fwd():
        with torch.no_grad(): dgl.ops.edge_softmax(g, s)
    def sm_fb():
        dgl.ops.edge_softmax(g, s).backward(go)
    def exp_pass():
        torch.exp(s.detach())
    for what, fn in [("gatconv_fwd", layer_fwd), ("gatconv_fwd_bwd", layer_fb), ("edge_softmax_fwd", sm_fwd),
                     ("edge_softmax_fwd_bwd", sm_fb), ("exp_pass", exp_pass)]:
        t = ms(fn); w.writerow([name, E, what, f"{t:.4f}"]); print(name, what, round(t, 3), flush=True)
    out.flush()
