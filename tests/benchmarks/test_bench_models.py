"""Smoke tests of benchmarks/bench_models.py's pieces on CPU: parity, timing rows, and the
op-sequence traces that the GPU mode replays (recorded from DGL, replayed through our kernels
and through the torch/cuSPARSE path, on the recording graph and on another graph)."""
import json
import os
import sys
from types import SimpleNamespace

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import bench_models as bm  # noqa: E402

dgl = pytest.importorskip("dgl")
import dgl_ugraph  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")


def small_graph(n, e, seed):
    gen = torch.Generator().manual_seed(seed)
    # skewed destinations, self-loops and multi-edges included, and nodes without in-edges
    dst = torch.multinomial(1.0 / torch.arange(1, n + 1).double(), e, replacement=True, generator=gen)
    src = torch.randint(0, n, (e,), generator=gen)
    return src, dst, n


def test_parity_floor_for_zero_gradients():
    out = torch.tensor([1.0, 2.0])
    big = torch.tensor([10.0, -10.0])
    noise_ref, noise_ours = torch.tensor([1e-9, -2e-9]), torch.tensor([3e-9, 1e-9])
    assert bm.parity([out, big, noise_ours], [out, big, noise_ref])[1]
    assert not bm.parity([out * (1 + 1e-3), big], [out, big])[1]
    assert bm.parity([out * (1 + 1e-6), big], [out, big])[1]
    assert not bm.parity([torch.tensor([float("nan"), 1.0])], [torch.tensor([0.0, 1.0])])[1]
    assert bm.parity([torch.tensor([float("-inf"), 1.0])], [torch.tensor([float("-inf"), 1.0])])[1]


def test_standin_names_and_scales():
    names = [name for name, _ in bm.graph_cases(datasets=False, standins=("cora", "artist"))]
    assert names == ["sim-cora", f"sim-artist@{bm.STANDIN_SCALE['artist']:g}"]
    assert set(bm.STANDIN_SCALE) == {s.name for s in bm.gs.PAPER_STANDINS}


def test_gpu_graph_list_is_full_size_with_the_large_graphs():
    cases = bm.graph_cases(datasets=False, standins=("cora", "artist"), scale={}, large=("big-skewed",))
    assert [name for name, _ in cases] == ["big-skewed", "sim-cora", "sim-artist"]  # loaders not run


@pytest.mark.parametrize("name", bm.MODELS)
def test_models_have_paper_sizes(name):
    model, prepare = bm.build_model(name, 20, 3)
    convs = [m for m in model.modules() if type(m).__name__.endswith("Conv")]
    assert len(convs) == (5 if name == "GIN" else 2)
    if name == "GAT":
        assert (convs[0]._num_heads, convs[0]._out_feats) == (8, 8)
    elif name == "GIN":
        assert model.classify.in_features == 64
    else:
        assert model.layers[0](bm.make_dgl_graph(*small_graph(30, 90, 0), prepare),
                               torch.randn(30, 20)).shape[-1] == 16


@pytest.mark.parametrize("sparse_free,kernels_only", [(False, False), (True, False), (False, True)])
def test_bench_case_rows(sparse_free, kernels_only):
    src, dst, n = small_graph(60, 300, 1)
    args = SimpleNamespace(modes=["inference", "training"], reps=2, warmup=1, min_s=0.0, max_reps=2, case_max_s=5.0,
                           sparse_free=sparse_free, kernels_only=kernels_only)
    rows = bm.bench_case("SAGE-mean", "tiny", bm.prepare_inputs((src, dst, n, None, None)), args, "cpu")
    impls = ("dgl", "ugraph") + ((bm.SPARSE_FREE,) if sparse_free else ()) + ((bm.KERNELS_ONLY,) if kernels_only else ())
    assert len(rows) == 2 * len(impls)
    assert {(r["mode"], r["impl"]) for r in rows} == {(m, i) for m in ("inference", "training") for i in impls}
    for r in rows:
        assert set(bm.COLUMNS) - {"parity_fp64_maxdiff"} <= set(r) and r["ms"] > 0 and r["parity_ok"] == 1 and r["reps"] == 2
    assert all(r["ugraph_share"] == 1.0 for r in rows if r["impl"] == "ugraph")


def test_sparse_free_answers_with_recorded_results():
    """The bound's replay returns what DGL computed, by value and in call order, and computes nothing."""
    import dgl
    import dgl_ugraph
    from dgl.backend.pytorch import sparse

    src, dst, n = small_graph(40, 200, 3)
    g = dgl.graph((src, dst), num_nodes=n)
    x = torch.randn(n, 6)
    fn = lambda: (dgl.ops.copy_u_sum(g, x), dgl.ops.u_dot_v(g, x, x))  # noqa: E731
    with dgl_ugraph.disabled():
        want = fn()
        dgl_own = (sparse._gspmm, sparse._gsddmm)
    free = bm.SparseFree(fn)
    free.record()
    assert len(free.results) == 2
    with dgl_ugraph.disabled(), free.replaying():
        x.add_(1.0)  # replayed calls ignore their inputs
        got = fn()
        assert all(r is not w for r, w in zip(got, want))  # copies, not the recorded tensors
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    with dgl_ugraph.disabled():
        assert (sparse._gspmm, sparse._gsddmm) == dgl_own  # DGL's own again


def _record(name, src, dst, n, feat, classes=5):
    torch.manual_seed(0)
    model, prepare = bm.build_model(name, feat.shape[1], classes)
    prep = "self_loop" if prepare is not None else None
    g = bm.make_dgl_graph(src, dst, n, prepare)
    trace, out = bm.record_trace(model, g, feat, name, "tiny", prep)
    return model, prepare, prep, trace, out


@pytest.mark.parametrize("name", bm.MODELS)
def test_trace_replays_dgl_exactly(name):
    src, dst, n = small_graph(97, 613, 2)
    feat = torch.randn(n, 23)
    model, prepare, prep, trace, ref = _record(name, src, dst, n, feat)
    # JSON only (no pickle): the trace survives a round trip unchanged
    trace = json.loads(json.dumps(trace))
    assert trace["N"] == n and trace["counts"]
    sparse_ops = [op for op in trace["ops"] if op["op"] in ("gspmm", "gsddmm", "edge_softmax")]
    assert len(sparse_ops) == {"GIN": 5}.get(name, 2 if name != "GAT" else 6)
    graph = bm.ReplayGraph(src, dst, n, prep)
    params = dict(model.state_dict())
    for backend in (bm.UGraphSparse, bm.TorchSparse):
        out = bm.Replayer(trace, graph, backend(graph), params, feat).run()
        maxdiff, ok = bm.parity([out], [ref])
        assert ok, f"{name} {backend.name}: {maxdiff}"


@pytest.mark.parametrize("name", ["GCN", "GAT", "SAGE-mean"])
def test_trace_is_symbolic_in_graph_size(name):
    """A trace recorded on one graph replays on a bigger one (N and E are symbols) and gives what
    DGL gives there."""
    src, dst, n = small_graph(97, 613, 3)
    feat = torch.randn(n, 23)
    model, prepare, prep, trace, _ = _record(name, src, dst, n, feat)
    src2, dst2, n2 = small_graph(211, 1733, 4)
    feat2 = torch.randn(n2, 23)
    g2 = bm.make_dgl_graph(src2, dst2, n2, prepare)
    with dgl_ugraph.disabled():
        model.eval()
        with torch.no_grad():
            ref = model(g2, feat2)
    graph = bm.ReplayGraph(src2, dst2, n2, prep)
    out = bm.Replayer(trace, graph, bm.UGraphSparse(graph), dict(model.state_dict()), feat2).run()
    assert bm.parity([out], [ref])[1]


def test_replay_graph_self_loops_match_dgl():
    src, dst, n = small_graph(50, 200, 5)
    g = bm.make_dgl_graph(src, dst, n, lambda g: dgl.add_self_loop(dgl.remove_self_loop(g)))
    rg = bm.ReplayGraph(src, dst, n, "self_loop")
    s, d = g.edges()
    assert torch.equal(rg.src, s) and torch.equal(rg.dst, d) and rg.e == g.num_edges()


def test_init_params_shapes_follow_symbols():
    src, dst, n = small_graph(40, 160, 6)
    _, _, prep, trace, _ = _record("GIN", src, dst, n, torch.randn(n, 11))
    params = bm.init_params(trace, 1000, 5000, "cpu")
    assert params["layers.0.apply_func.linears.0.weight"].shape == (64, 11)
    assert torch.equal(params["norms.0.running_var"], torch.ones(64))


def test_fn_names_resolve():
    for func in (torch.relu, torch.Tensor.add, torch.nn.functional.linear, torch.nn.functional.elu, torch.matmul):
        assert bm.resolve_fn(bm.fn_name(func)) is func


def test_pyg_models_build_when_installed():
    pytest.importorskip("torch_geometric")
    for name in bm.MODELS:
        net = bm.pyg_model(name, 20, 3)
        assert net is None or sum(p.numel() for p in net.parameters()) > 0


def test_gpu_mode_path_runs_on_cpu(tmp_path):
    """The --gpu loop end to end on CPU (--gpu-device cpu): traces recorded for one stand-in,
    replayed through our kernels and the torch path, rows written with parity."""
    traces = tmp_path / "traces"
    args = ["--record-traces", "--no-datasets", "--standins", "cora", "--models", "GCN,GAT", "--traces", str(traces)]
    bm.main(args)
    data = bm.load_traces(traces / "GAT.json.gz")
    assert data["traces"]["sim-cora"]["replay_check"]["ok"]
    out = tmp_path / "gpu.csv"
    bm.main(["--gpu", "--gpu-device", "cpu", "--models", "GCN,GAT", "--traces", str(traces), "--out", str(out),
             "--gpu-reps", "2"])
    import csv
    rows = list(csv.DictReader(open(out)))
    assert {(r["model"], r["impl"]) for r in rows} >= {(m, i) for m in ("GCN", "GAT") for i in ("ugraph", "torch_cusparse")}
    assert all(r["parity_ok"] == "1" and r["graph"] == "sim-cora" for r in rows)


def test_summary_of_rows(tmp_path):
    rows = [dict(device="cpu", model=m, graph=g, mode=mode, impl=impl, ms=ms, V=10, E=e, feat=4, classes=2,
                 ms_min=ms, ms_max=ms, reps=5, parity_maxdiff="0", parity_ok=1, ugraph_share="")
            for m in ("GCN", "GAT") for g, e in (("a", 100), ("sim-b", 60_000)) for mode in ("inference", "training")
            for impl, ms in (("dgl", 2.0), ("ugraph", 1.0 if m == "GAT" else 4.0))]
    path = tmp_path / "m.csv"
    bm.write_rows(path, rows, append=False)
    text = bm.summarize(path)
    assert "| all graphs | 1.00x (4) | 1.00x (4) |" in text  # GAT 2x and GCN 0.5x on each graph
    assert "| GAT | 2.00x, 2.00-2.00 | 2.00x, 2.00-2.00 |" in text
    assert "4 of 8 cases" in text


def test_dgl_mode_with_pyg_and_the_bound(tmp_path):
    """The --device cuda loop (PyG beside DGL on and off, and the bound) run on CPU with --pyg."""
    pytest.importorskip("torch_geometric")
    out = tmp_path / "gpu.csv"
    bm.main(["--device", "cpu", "--pyg", "--sparse-free", "--no-datasets", "--standins", "cora", "--models",
             "GCN,SAGE-gcn", "--out", str(out), "--reps", "2", "--min-s", "0", "--max-reps", "2"])
    import csv
    rows = list(csv.DictReader(open(out)))
    impls = {(r["model"], r["mode"]): set() for r in rows}
    for r in rows:
        impls[(r["model"], r["mode"])].add(r["impl"])
    assert len(impls) == 4
    for (model, mode), found in impls.items():
        want = {"dgl", "ugraph", bm.SPARSE_FREE} | ({"pyg"} if model != "SAGE-gcn" else set())
        assert found == want, (model, mode)
    assert all(r["parity_ok"] == "1" and r["graph"] == "sim-cora" for r in rows)


@pytest.mark.parametrize("name", ["GCN", "GAT", "GIN", "SAGE-mean", "SAGE-pool"])
def test_pyg_models_train_on_the_same_inputs(name):
    pytest.importorskip("torch_geometric")
    src, dst, n = small_graph(50, 300, 7)
    inputs = bm.prepare_inputs((src, dst, n, None, None))
    fns = bm.pyg_fns(name, inputs[3], inputs[4], inputs[5], torch.stack([inputs[0], inputs[1]]))
    assert fns["inference"]().shape == (n, inputs[5])
    assert fns["training"]().shape == (n, inputs[5])


def _rows(device, graphs, impls_ms):
    return [dict(device=device, model=m, graph=g, mode=mode, impl=impl, ms=ms * (3.0 if g.startswith("big") else 1.0),
                 V=10, E=e, feat=4, classes=2, ms_min=ms, ms_max=ms, reps=5, parity_maxdiff="0", parity_ok=1,
                 ugraph_share="")
            for m in ("GCN", "GAT") for g, e in graphs for mode in ("inference", "training")
            for impl, ms in impls_ms.items()]


def test_gpu_summary_and_merge(tmp_path):
    gpu = "NVIDIA H200 (torch 2.11.0+cu130, DGL 2.4.0)"
    path = tmp_path / "m.csv"
    cpu_rows = _rows("cpu (x)", [("cora", 100)], {"dgl": 2.0, "ugraph": 1.0})
    bm.write_rows(path, cpu_rows + _rows("old gpu", [("cora", 100)], {"dgl": 1.0, "ugraph": 1.0}), append=False)
    run = tmp_path / "run.csv"
    gpu_rows = _rows(gpu, [("cora", 10_000), ("big-skewed", 40_000_000)],
                     {"dgl": 4.0, "ugraph": 2.0, "pyg": 1.0, bm.SPARSE_FREE: 1.5})
    bm.write_rows(run, gpu_rows, append=False)
    bm.main(["--merge", str(run), "--out", str(path)])
    merged = list(__import__("csv").DictReader(open(path)))
    assert len(merged) == len(cpu_rows) + 8 + len(gpu_rows)  # another device's rows stay
    with pytest.raises(SystemExit, match="several devices"):
        bm.summarize_gpu(path)
    text = bm.summarize_gpu(run)
    assert "| all graphs | 2.00x (4) | 2.00x (4) |" in text  # vs DGL: 4 / 2 on every case
    assert "| large synthetic graphs (40M edges) | 2.00x (2) | 2.00x (2) |" in text
    assert "| graphs with E >= 1M | 0.50x (2) | 0.50x (2) |" in text  # vs PyG: 1 / 2
    # on cora PyG is 1 ms behind our 2 ms, and the bound (1.5 ms) leaves half of it to DGL's own time
    assert "| inference | 2 | 2 | 2.00 | 1.50 | 4.00 | 50%; 50% |" in text
    assert "2.67x (4)" in text  # the bound: 4 / 1.5
    assert bm.summarize(path, kind="cpu").startswith("| cases |")
