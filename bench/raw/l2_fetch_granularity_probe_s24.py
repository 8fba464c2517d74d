"""Session 24 probe: the context's L2 fetch granularity (CU_LIMIT_MAX_L2_FETCH_GRANULARITY) and
the edge-id order under GAT and u_mul_e at F = 16, where each position reads one scattered
sector of the edge tensor: each case at the default granularity, 32 and 128 bytes, in rounds
that alternate, then with edge ids in CSC order (profile_kernel.load's order "dst").

    python3 bench/raw/l2_fetch_granularity_probe_s24.py bench/raw/l2_fetch_granularity_cases_s24.csv
(from the repository root, on the GPU machine; writes $OUT/l2probe.csv)."""
import csv, ctypes, os, sys
import torch
sys.path.insert(0, "scripts"); sys.path.insert(0, ".")
from profile_kernel import load
from bench_kernels import make_inputs, time_ms
from dgl_ugraph.core import ops
from dgl_ugraph.core.abstraction import ParallelInfo

torch.cuda.init(); torch.zeros(1, device="cuda")
cu = ctypes.CDLL("libcuda.so.1")
LIMIT = 5  # CU_LIMIT_MAX_L2_FETCH_GRANULARITY
def get():
    v = ctypes.c_size_t(); assert cu.cuCtxGetLimit(ctypes.byref(v), LIMIT) == 0; return v.value
def put(n):
    r = cu.cuCtxSetLimit(LIMIT, ctypes.c_size_t(n)); assert r == 0, r
default = get()
print("default L2 fetch granularity:", default, flush=True)
cases = list(csv.DictReader(open(sys.argv[1])))
out = open(os.path.join(os.environ.get("OUT", "/tmp"), "l2probe.csv"), "w", newline="")
w = csv.writer(out); w.writerow(["graph", "op", "F", "config", "variant", "round", "ms"])
graphs = {}
for c in cases:
    g = c["graph"]
    for order in ("given", "dst"):
        if (g, order) not in graphs:
            graphs[(g, order)] = load(g, order)
    runs = {}
    for order in ("given", "dst"):
        op = make_inputs(c["op"], graphs[(g, order)], int(c["F"]), torch.float32, torch.Generator(device="cuda").manual_seed(0))
        runs[order] = ops.prepare(graphs[(g, order)], op, ParallelInfo.parse(c["config"])).run
    for rnd in range(3):
        variants = [("default", default), ("32B", 32), ("128B", 128)]
        if rnd % 2: variants = variants[::-1]
        for name, gran in variants:
            put(gran)
            w.writerow([g, c["op"], c["F"], c["config"], name, rnd, f"{time_ms(runs['given'], 20):.5f}"])
        put(default)
        w.writerow([g, c["op"], c["F"], c["config"], "dst_order", rnd, f"{time_ms(runs['dst'], 20):.5f}"])
    out.flush()
    print(g, c["op"], c["F"], "done", flush=True)
print("limit after:", get())
