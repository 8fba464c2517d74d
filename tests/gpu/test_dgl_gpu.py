"""The DGL-facing suite on the GPU, under a CUDA build of real DGL: the example models' parity
with dgl_ugraph on and off (outputs and every gradient) and their full interception; a seeded
fuzz of >= 2,000 builtin calls against DGL's own CUDA kernels (the cases of
tests/dgl/dgl_fuzz_cases.py, drawn from seeds, in float32/float64/float16/bfloat16, int32/int64 graphs,
with broadcasting); DGL's graph convolutions (tests/dgl/test_dgl_convs.py's table) on a graph with a
hub row; the toggle and the fallback on CUDA tensors; the graph cache across forward
and backward. Skipped unless DGL imports, has CUDA, and a GPU and dgl_ugraph's CUDA core exist.

    python -m pytest tests/gpu/test_dgl_gpu.py -q -rs                          # ~2 minutes
    DGL_UGRAPH_DGL_FUZZ_SEED=gspmm:9000123 python -m pytest tests/gpu/test_dgl_gpu.py -k replay -s

Every fuzz failure names its kind and seed; the replay test reruns exactly that case with its
traceback. scripts/gpu_check.sh (stage `dgl`) loads the CUDA DGL build and runs this module.
"""
from __future__ import annotations

import copy
import os
import pathlib
import sys
import warnings

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]), str(_HERE.parent), str(_HERE.parent / "dgl"), str(_HERE)) if p not in sys.path]

from dgl_ugraph.core import _ext  # noqa: E402


def _why_skip():
    try:
        import dgl
    except Exception as exc:  # absent, or a DGL build that does not load with this torch
        return f"DGL does not import ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    if not torch.cuda.is_available():
        return "no GPU"
    if not dgl.ndarray.gpu(0).exist:
        return f"DGL {dgl.__version__} is built without CUDA"
    if not _ext.has_cuda():
        return "dgl_ugraph is built without its CUDA core"
    return None


_SKIP = _why_skip()
if _SKIP:
    pytest.skip(_SKIP, allow_module_level=True)

import dgl  # noqa: E402
import dgl.function as fn  # noqa: E402
import dgl_fuzz_cases as cases  # noqa: E402
import test_dgl_convs as tc  # noqa: E402
import test_dgl_models as tm  # noqa: E402
from dgl.backend.pytorch import sparse  # noqa: E402
from dgl_errors import same_error  # noqa: E402
from test_dgl_cache import builds, random_graph, step  # noqa: E402,F401  (builds: a fixture)

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import cache, interception, recognition, routing  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")
DEVICE = "cuda"


def cuda_graph(seed=0, nodes=40, edges=200):
    return random_graph(seed, nodes, edges).to(DEVICE)


def pattern(key):
    return dgl_ugraph.stats()["patterns"].get(key, {"intercepted": 0, "fallback": 0, "reasons": {}})


def signatures(key):
    return [r for r in dgl_ugraph.stats()["signatures"] if r["pattern"] == key]


# ---- the example models ---------------------------------------------------------------------------

# A small graph as the CPU suite's, and a skewed one whose hub rows (about 5K in-edges) and size
# take the CUDA strategies that small graphs never reach.
MODEL_GRAPHS = {"small": (1500, 12000), "skewed": (10000, 150000)}
# Train-mode BatchNorm divides by the batch's standard deviation, which turns float32 summation
# order into differences up to 2e-2 of scale (GIN in benchmarks/results/models.md; float64 agrees to 3e-11).
# Those models are compared in eval mode in float32, and in train mode in float64.
BATCHNORM = {name for name in tm.MODELS if name.startswith("GIN")}
# float32: our sums add in another order than cuSPARSE's and DGL's kernels; through GIN's five
# layers and GAT's softmax that moves results by up to ~1e-5 of their scale (measured on an H100:
# 1.0e-5 for a GIN weight gradient, 1.0e-5 for a GAT output). float64 is the firm check.
RTOL = {torch.float32: 1e-4, torch.float64: 1e-9}


@pytest.fixture(scope="module", params=list(MODEL_GRAPHS))
def model_graph(request):
    nodes, edges = MODEL_GRAPHS[request.param]
    g, feat, labels = tm.data.synthetic_graph(nodes, edges, tm.CLASSES, tm.FEAT, seed=3)
    train_mask = tm.data.masks(nodes, seed=3)[0]
    return g.to(DEVICE), feat.to(DEVICE), labels.to(DEVICE), train_mask.to(DEVICE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(tm.MODELS))
def test_model_parity_and_full_interception(name, dtype, model_graph):
    make, prepare = tm.MODELS[name]
    g, feat, labels, train_mask = model_graph
    if prepare is not None:
        g = prepare(g)
    feat = feat.to(dtype)
    torch.manual_seed(0)
    model = make().to(DEVICE, dtype)
    state = copy.deepcopy(model.state_dict())
    train = dtype == torch.float64 or name not in BATCHNORM
    dgl_ugraph.reset_stats()
    out, grads = tm.training_step(model, state, g, feat, labels, train_mask, train)
    stats = dgl_ugraph.stats()
    with dgl_ugraph.disabled():
        ref, ref_grads = tm.training_step(model, state, g, feat, labels, train_mask, train)
    rtol = RTOL[dtype]
    tm.assert_equal_up_to_order(out, ref, f"{name} output", rtol=rtol)
    assert grads.keys() == ref_grads.keys()
    # A bias feeding BatchNorm has an exact gradient of 0: its reference is rounding noise, held
    # to 1e-6 (float32) or 1e-12 (float64) of the model's largest gradient.
    floor = max(r.abs().max().item() for r in ref_grads.values()) * (1e-6 if dtype == torch.float32 else 1e-12)
    for pname in grads:
        tm.assert_equal_up_to_order(grads[pname], ref_grads[pname], f"{name} gradient of {pname}", floor, rtol)
    assert stats["calls"] > 0 and stats["fallback"] == 0, stats["patterns"]
    assert stats["intercepted"] == stats["calls"]
    assert all(r["device"].startswith("cuda") and r["runs_on"] == "dgl_ugraph" for r in stats["signatures"])


# ---- DGL's graph convolutions ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def conv_graph():
    """A hub row of about 8K in-edges (the heavy-row strategies), nodes without in-edges."""
    g = tc.conv_graph(3000, 60000).to(DEVICE)
    assert (g.in_degrees() == 0).any() and g.in_degrees().max() > 5000
    return g


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(tc.CONVS))
def test_conv_parity_and_full_interception(name, dtype, conv_graph):
    stats = tc.check_conv(name, conv_graph, dtype, RTOL[dtype])
    assert all(r["device"].startswith("cuda") and r["runs_on"] == "dgl_ugraph" for r in stats["signatures"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("aggregate", ["sum", "max", "stack"])
def test_hetero_graph_conv_parity_and_full_interception(aggregate, dtype):
    stats = tc.check_hetero(aggregate, tc.hetero_graph(DEVICE), dtype, RTOL[dtype])
    assert all(r["device"].startswith("cuda") and r["runs_on"] == "dgl_ugraph" for r in stats["signatures"])


# ---- the fuzz -------------------------------------------------------------------------------------

FUZZ_CASES = {"gspmm": 600, "gsddmm": 600, "update_all": 400, "apply_edges": 200, "edge_softmax": 200}  # 2,000
CHUNK = 100
BASE_SEED = int(os.environ.get("DGL_UGRAPH_DGL_FUZZ_BASE", "9000000"))
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# The CPU fuzz's small graphs, and graphs with hundreds of nodes and a hub row of 1,000 edges.
GPU_EDGES = cases.SMALL_EDGES + (300, 2000)
SOFTMAX_SHAPES = ((), (1,), (3,), (2, 1), (2, 3), (8, 1))
ran = {kind: 0 for kind in FUZZ_CASES}


def draw_case(kind: str, seed: int):
    """(description, check) of one case, everything from (kind, seed)."""
    ch = cases.SeededChooser(seed)
    graphs = cases.draw_graphs(ch, DEVICE, max_nodes=300, edge_counts=GPU_EDGES)
    dtype = ch.pick(DTYPES)
    g = graphs[0]
    desc = (f"{kind} seed={seed}: {'block ' if g.is_block else ''}{g.num_src_nodes()}x{g.num_dst_nodes()} "
            f"E={g.num_edges()} {g.idtype} {dtype}")
    if kind == "gspmm":
        op, red = ch.pick(cases.GSPMM_OPS), ch.pick(cases.REDUCERS)
        return f"{desc} {op}/{red}", lambda: cases.check_gspmm(graphs, op, red, dtype, ch, wide=True)
    if kind == "gsddmm":
        op, targets, direct = ch.pick(cases.GSDDMM_OPS), ch.pick(cases.TARGETS), ch.boolean()
        return (f"{desc} {op} {''.join(targets)}{' direct' if direct else ''}",
                lambda: cases.check_gsddmm(graphs, op, targets, dtype, direct, ch, wide=True))
    if kind in ("update_all", "apply_edges"):
        msg, red = ch.pick(cases.MESSAGES), ch.pick(cases.REDUCERS)
        # a long dot in a half type: see cases.draw_feature_shapes
        width = ch.integer(1, 4) if "dot" in msg and dtype in cases.HALF else ch.pick((1, 2, 3, 4, 16, 33, 64))
        seed2 = ch.integer(0, 2 ** 30)
        if kind == "apply_edges":
            return (f"{desc} {msg} width {width}",
                    lambda: cases.check_apply_edges(graphs, msg, dtype, width, seed2))
        return (f"{desc} {msg}/{red} width {width}",
                lambda: cases.check_update_all(graphs, msg, red, dtype, width, seed2))
    shape, norm_by, seed2 = ch.pick(SOFTMAX_SHAPES), ch.pick(("dst", "src")), ch.integer(0, 2 ** 30)
    return (f"{desc} edge_softmax {shape} by {norm_by}",
            lambda: cases.check_edge_softmax(graphs, shape, norm_by, dtype, seed2))


def run_seed(kind: str, seed: int) -> str:
    """'' when the case passes (or DGL and dgl_ugraph raise alike), else what failed."""
    desc = kind
    try:
        desc, check = draw_case(kind, seed)
        check()
    except cases.Raised:
        pass
    except Exception as exc:
        return f"{desc}: {type(exc).__name__}: {' | '.join(str(exc).strip().splitlines()[:3])[:400]}"
    finally:
        ran[kind] += 1
    return ""


@pytest.mark.parametrize("kind,chunk", [(k, c) for k, n in FUZZ_CASES.items() for c in range(-(-n // CHUNK))])
def test_fuzz_against_dgl_native(kind, chunk):
    base = BASE_SEED + 1_000_000 * list(FUZZ_CASES).index(kind)
    failures = [p for i in range(chunk * CHUNK, min(FUZZ_CASES[kind], (chunk + 1) * CHUNK))
                if (p := run_seed(kind, base + i))]
    assert not failures, (f"{len(failures)} failures; replay one with DGL_UGRAPH_DGL_FUZZ_SEED=<kind>:<seed> -k replay:\n"
                          + "\n".join(failures[:20]))


def test_fuzz_volume():
    if not all(ran.values()):
        pytest.skip("the fuzz chunks did not all run in this session")
    print(f"\nDGL fuzz on the GPU: {ran} = {sum(ran.values())} cases")
    assert sum(ran.values()) >= 2000


@pytest.mark.skipif("DGL_UGRAPH_DGL_FUZZ_SEED" not in os.environ, reason="set DGL_UGRAPH_DGL_FUZZ_SEED=kind:seed to replay")
def test_replay():
    kind, seed = os.environ["DGL_UGRAPH_DGL_FUZZ_SEED"].split(":")
    desc, check = draw_case(kind, int(seed))
    print(desc)
    try:
        check()
    except cases.Raised:
        pass


def test_seeds_reproduce():
    assert draw_case("gsddmm", BASE_SEED + 5)[0] == draw_case("gsddmm", BASE_SEED + 5)[0]


# ---- toggle and fallback on CUDA tensors ------------------------------------------------------------

def test_toggle_on_cuda_tensors():
    g, x = cuda_graph(), torch.rand(40, 8, device=DEVICE)
    ours = dgl.ops.copy_u_max(g, x)
    (row,) = signatures("gspmm:copy_lhs:max:u:*")
    assert row["runs_on"] == "dgl_ugraph" and row["device"].startswith("cuda") and row["calls"] == 1
    assert row["config"] != "cpu"  # a CUDA strategy was chosen
    dgl_ugraph.disable()
    assert sparse._gspmm is dgl._sparse_ops._gspmm
    theirs = dgl.ops.copy_u_max(g, x)
    assert torch.equal(ours, theirs)
    dgl_ugraph.enable()
    assert sparse._gspmm is interception._gspmm
    with dgl_ugraph.disabled():
        assert torch.equal(dgl.ops.copy_u_max(g, x), theirs)
    assert dgl_ugraph.stats()["calls"] == 1  # DGL's own runs are not ours to count
    assert torch.equal(dgl.ops.copy_u_max(g, x), theirs)
    assert dgl_ugraph.stats()["calls"] == 2


def test_heterograph_on_cuda_runs_on_dgl_and_one_relation_on_dgl_ugraph():
    g = dgl.heterograph({("user", "follows", "user"): ([0, 1, 2], [1, 2, 0]),
                         ("user", "plays", "game"): ([0, 1, 2, 2], [0, 0, 1, 1]),
                         ("game", "liked-by", "user"): ([0, 1], [2, 2])}).to(DEVICE)
    g.nodes["user"].data["h"] = torch.rand(3, 4, device=DEVICE)
    g.nodes["game"].data["h"] = torch.rand(2, 4, device=DEVICE)

    def run(etype=None):
        with g.local_scope():
            g.update_all(fn.copy_u("h", "m"), fn.sum("m", "out"), etype=etype)
            return [g.nodes[t].data["out"] for t in (("user", "game") if etype is None else ("game",))]

    ours = run()
    with dgl_ugraph.disabled():
        theirs = run()
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    hetero = pattern("gspmm_hetero:copy_lhs:sum:*:*")
    assert hetero["fallback"] >= 1 and hetero["intercepted"] == 0
    assert any("several edge types" in r and "(3 edge types)" in r for r in hetero["reasons"])
    dgl_ugraph.reset_stats()
    out = run("plays")[0]
    with dgl_ugraph.disabled():
        torch.testing.assert_close(out, run("plays")[0])
    assert pattern("gspmm:copy_lhs:sum:u:*")["intercepted"] == 1


def test_graph_restricted_to_coo_on_cuda_runs_on_dgl():
    g = cuda_graph(1).formats("coo")
    x = torch.rand(40, 4, device=DEVICE)
    ours = dgl.ops.copy_u_sum(g, x)
    with dgl_ugraph.disabled():
        theirs = dgl.ops.copy_u_sum(g, x)
    torch.testing.assert_close(ours, theirs)  # DGL's COO kernel adds with atomics
    assert pattern("gspmm:copy_lhs:sum:u:*")["intercepted"] == 0
    assert any("cannot have a CSC" in r for r in pattern("gspmm:copy_lhs:sum:u:*")["reasons"])


def same_outcome(call):
    """call() with dgl_ugraph on returns what DGL alone returns, or raises what DGL raises."""
    with dgl_ugraph.disabled():
        try:
            theirs = call()
        except Exception:
            theirs = None
    if theirs is None:
        same_error(call)
    else:
        assert torch.equal(call(), theirs)


@pytest.mark.parametrize("case", ["integer features", "dtype mismatch"])
def test_unsupported_calls_on_cuda_go_to_dgl_with_a_reason(case):
    g = cuda_graph(2)
    if case == "integer features":
        key, reason = "gspmm:copy_lhs:sum:u:*", "floating point only"
        same_outcome(lambda: dgl.ops.copy_u_sum(g, torch.ones(40, 4, dtype=torch.int64, device=DEVICE)))
    else:
        key, reason = "gspmm:mul:sum:u:e", "dtype-mismatch"
        x = torch.rand(40, 4, device=DEVICE, dtype=torch.float16)
        same_outcome(lambda: sparse._gspmm(g._graph, "mul", "sum", x, torch.rand(200, 1, device=DEVICE)))
    assert pattern(key)["intercepted"] == 0
    assert any(reason in r for r in pattern(key)["reasons"]), pattern(key)["reasons"]


def test_a_failing_cuda_kernel_costs_one_warning_and_gives_dgls_results(monkeypatch):
    monkeypatch.setattr(recognition, "_failed", {})
    monkeypatch.setattr(recognition, "_warned", set())

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    g, x = cuda_graph(3), torch.rand(40, 8, device=DEVICE)
    weight = torch.rand(8, 8, device=DEVICE, requires_grad=True)
    with dgl_ugraph.disabled():
        ref = step(g, x, weight)
        ref_grad, weight.grad = weight.grad, None
    monkeypatch.setattr(routing, "Plan", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(step(g, x, weight), ref)  # DGL's own sums: cuSPARSE's order
            torch.testing.assert_close(weight.grad, ref_grad)
            weight.grad = None
    ours = [w for w in caught if issubclass(w.category, dgl_ugraph.UGraphFallbackWarning)]
    assert len(ours) == 1 and "injected failure" in str(ours[0].message)
    assert any("RuntimeError: injected failure" in r for r in pattern("gspmm:copy_lhs:sum:u:*")["reasons"])
    assert pattern("gspmm:copy_lhs:sum:u:*")["intercepted"] == 0
    cache.clear()


# ---- the mean's fused backward ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(24,), (4, 10), ()], ids=["F24", "H4xD10", "1-D"])
def test_a_copy_u_means_fused_backward_on_cuda_is_dgls(dtype, shape):
    """One reverse call (gspmm_mean_backward) against DGL's division and cuSPARSE sum; twice,
    on fresh inputs each time, with isolated nodes and a hub row."""
    g = cuda_graph(5, nodes=300, edges=3000)
    g = dgl.add_edges(g, torch.full((400,), 7, device=DEVICE), torch.arange(400, device=DEVICE) % 300)
    g = dgl.add_nodes(g, 4)
    n = g.num_nodes()
    for seed in range(2):
        gen = torch.Generator(device=DEVICE).manual_seed(seed)
        x = (torch.rand((n,) + shape, generator=gen, device=DEVICE) - 0.5).to(dtype).requires_grad_()
        w = torch.rand((n,) + shape, generator=gen, device=DEVICE).to(dtype)
        dgl_ugraph.reset_stats()
        out = dgl.ops.copy_u_mean(g, x)
        assert out.grad_fn.__class__.__name__ == "_FusedMeanBackward"
        (grad,) = torch.autograd.grad((out * w).sum(), x)
        assert pattern("gspmm_mean_backward")["intercepted"] == 1 and pattern("gspmm_mean_backward")["fallback"] == 0
        with dgl_ugraph.disabled():
            ref = dgl.ops.copy_u_mean(g, x)
            (ref_grad,) = torch.autograd.grad((ref * w).sum(), x)
        cases.assert_close(out, ref, dtype, "mean")
        cases.assert_close(grad, ref_grad, dtype, "its source gradient")
    with torch.autocast("cuda", dtype=torch.float16):  # DGL's GSpMM casts the operands: its backward
        assert dgl.ops.copy_u_mean(g, x.float().detach().requires_grad_()).grad_fn.__class__.__name__ != \
            "_FusedMeanBackward"


# ---- tier-up ----------------------------------------------------------------------------------------

def test_a_cuda_graphs_first_calls_run_on_dgl_until_its_tier_up(monkeypatch):
    """With DGL_UGRAPH_TIER_UP=3, a graph's first three calls run on DGL's kernels (counted, with the
    reason) and build no cache entry, its degrees and means included; its fourth call on, ours.
    DGL's results throughout."""
    monkeypatch.setenv("DGL_UGRAPH_TIER_UP", "3")
    cache.clear()
    g, x = cuda_graph(6), torch.rand(40, 8, device=DEVICE)
    with dgl_ugraph.disabled():
        ref, ref_mean, ref_deg = dgl.ops.copy_u_sum(g, x), dgl.ops.copy_u_mean(g, x), g.in_degrees()
    dgl_ugraph.reset_stats()
    torch.testing.assert_close(dgl.ops.copy_u_mean(g, x), ref_mean)  # DGL's mean: one sum call, counted
    assert torch.equal(g.in_degrees(), ref_deg) and cache.seen(g._graph) is None
    for k in range(1, 5):
        torch.testing.assert_close(dgl.ops.copy_u_sum(g, x), ref)
        p = pattern("gspmm:copy_lhs:sum:u:*")
        assert (p["fallback"], p["intercepted"]) == (min(k + 1, 3), max(0, k - 2)), (k, p)
    assert any(r.startswith("warm-up") for r in p["reasons"])
    assert cache.seen(g._graph) is not None
    torch.testing.assert_close(dgl.ops.copy_u_mean(g, x), ref_mean)
    assert pattern("gspmm:copy_lhs:mean:u:*")["intercepted"] == 1
    assert torch.equal(g.in_degrees(), ref_deg)
    cpu = random_graph(6)  # CPU graphs have no warm-up
    dgl.ops.copy_u_sum(cpu, x.cpu())
    assert cache.seen(cpu._graph) is not None
    cache.clear()


# ---- the graph cache --------------------------------------------------------------------------------

def test_graph_cache_across_forward_and_backward_on_cuda(builds):
    """One entry for the graph and one for its reverse, on the device, over five training steps
    (each update_all makes a new gidx wrapper, each backward a new reverse gidx)."""
    cache.clear()
    g, x = cuda_graph(4), torch.rand(40, 8, device=DEVICE)
    weight = torch.rand(8, 8, device=DEVICE, requires_grad=True)
    with dgl_ugraph.disabled():
        ref = step(g, x, weight)
        ref_grad, weight.grad = weight.grad, None
    for _ in range(5):
        out = step(g, x, weight)
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(weight.grad, ref_grad)
        weight.grad = None
    assert len(builds) == 2
    forward = cache.entry_for(g._graph)
    assert forward.reverse is not None and forward.reverse in builds
    for entry in (forward, forward.reverse):
        assert entry.ugraph.indptr.device.type == "cuda" and entry.ugraph.col.device.type == "cuda"
    _, _, indptr, indices, _ = g._graph.reverse().adjacency_matrix_tensors(0, True, "csr")
    assert torch.equal(forward.reverse.ugraph.indptr, indptr) and torch.equal(forward.reverse.ugraph.col, indices)
    assert pattern("gspmm:copy_lhs:sum:u:*")["fallback"] == 0
    cache.clear()


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_degrees_on_cuda_equal_dgls(idtype):
    """DGLGraph's all-node degrees served from the cache on a CUDA graph: DGL's values, dtype and
    device, a new tensor per call."""
    gen = torch.Generator().manual_seed(11)
    src, dst = torch.randint(0, 500, (4000,), generator=gen), torch.randint(0, 480, (4000,), generator=gen)
    g = dgl.add_nodes(dgl.graph((src, dst), num_nodes=500, idtype=idtype), 20).to("cuda")
    for name in ("in_degrees", "out_degrees"):
        ours = getattr(g, name)()
        with dgl_ugraph.disabled():
            theirs = getattr(g, name)()
        assert ours.device == theirs.device and ours.dtype == theirs.dtype == idtype
        assert torch.equal(ours, theirs)
        ours.zero_()
        assert torch.equal(getattr(g, name)(), theirs)
