"""dgl_ugraph on a machine with two GPUs: every call runs on the device of its tensors whichever
device is current, and leaves the current device as it was; plans, zeroed workspaces, the edge
softmax and online autotuning keep each device's own; DGL's models give DGL's results on the
second GPU; and data-parallel training over NCCL, one process a GPU, takes the same steps with the
plugin on as with DGL's own kernels. Skipped with fewer than two GPUs; the DGL parts also without a
CUDA build of DGL (scripts/gpu_check.sh stage multi-gpu loads one; device kind nvidia-h200-x2).

    python -m pytest tests/gpu/test_multi_gpu.py -q -rs
"""
from __future__ import annotations

import copy
import itertools
import os
import pathlib
import socket
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]), str(_HERE.parent), str(_HERE.parent / "dgl"), str(_HERE)) if p not in sys.path]

from cases import PARALLEL_SAMPLES, make_op, needs_cuda_dgl, op_cases, suite_graph  # noqa: E402
from reference import hub_graph, reference, softmax_oracle, softmax_scores  # noqa: E402
from test_kernels_gpu import check_args, close, run_unless_refused  # noqa: E402

from dgl_ugraph import ugrapher  # noqa: E402
from dgl_ugraph.core import _ext, ops  # noqa: E402
from dgl_ugraph.core.abstraction import DTYPE_NAMES, STRATEGIES, OpInfo, ParallelInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import autotune, policy  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _ext.has_cuda() and torch.cuda.device_count() >= 2),
                                reason="needs two GPUs and the CUDA core")

SECOND = "cuda:1"


@pytest.fixture
def current_device(request):
    """The test's current device (request.param), and the one before it back afterwards."""
    was = torch.cuda.current_device()
    torch.cuda.set_device(request.param)
    yield request.param
    torch.cuda.set_device(was)


@pytest.mark.parametrize("current_device", (0, 1), ids=("current0", "current1"), indirect=True)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_op_on_the_second_gpu(strategy, current_device):
    """The kernel suite's op_infos on a graph on cuda:1 in float32 and float16, one (g, t) sample
    each, against the oracle there (a result on another device fails the comparison)."""
    compiled = _ext.compiled_cuda_keys()
    failures, ran = [], 0
    samples = itertools.cycle(PARALLEL_SAMPLES)
    for dtype, idtype in ((torch.float32, torch.int32), (torch.float16, torch.int64)):
        if (strategy, DTYPE_NAMES[dtype]) not in compiled:
            continue
        graph = suite_graph(idtype, SECOND)
        gen = torch.Generator().manual_seed(hash((strategy, str(dtype), current_device)) % 2**31)
        for case in op_cases():
            op = make_op(case, graph, dtype, SECOND, gen)
            sig, _ = ops.signature(graph, op)
            pinfo = ParallelInfo(strategy, *next(samples))
            ok, failure = run_unless_refused(graph, op, sig, pinfo, dtype, compiled)
            ran += ok
            if failure:
                failures.append(f"{case} {pinfo} {dtype}: {failure}")
            assert torch.cuda.current_device() == current_device, "a call changed the current device"
    if not ran:
        pytest.skip(f"{strategy} is not compiled for float32 or float16")
    assert not failures, f"{len(failures)} of {ran} failed:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("poison", (True, False), ids=("poisoned", "direct_launch"))
def test_plans_and_zeroed_workspaces_of_two_gpus_in_turn(poison, monkeypatch):
    """The same signature on a graph on each GPU, called in turn (the kernel API's repeat calls,
    `ops.Plan`): each keeps its own plan and zeroed workspace and computes its own device's
    result. `direct_launch` takes Plan.run's launch without `_launch`, where the current device
    is the call's, and the guarded one where it is not."""
    monkeypatch.setattr(ops, "POISON_OUTPUTS", poison)
    gen = torch.Generator().manual_seed(5)
    graphs = [suite_graph(torch.int32, f"cuda:{d}") for d in (0, 1)]
    configs = [ParallelInfo("warp_edge", 4, 1), ParallelInfo("thread_edge", 1, 2), ParallelInfo("warp_vertex", 2, 1), None]
    for rounds in range(3):
        for config, gather, dtype, graph in itertools.product(configs, ("sum", "max"), (torch.float32, torch.float16),
                                                              graphs):
            x = torch.randn(graph.num_src, 4, 8, generator=gen).to(dtype).to(graph.device)
            w = torch.randn(graph.num_edges, 4, 1, generator=gen).to(dtype).to(graph.device)
            op = OpInfo("mul", gather, x, "src", w, "edge", "dst")
            c, arg_a, arg_b = ugrapher(graph, op, config)
            ref_c, ref_a, ref_b = reference(graph, op)
            assert c.device == graph.device and close(c, ref_c, dtype), (rounds, config, gather, dtype, graph.device)
            if gather == "max":
                assert check_args(graph, op, c, arg_a, ref_a, "src", dtype)
                assert check_args(graph, op, c, arg_b, ref_b, "edge", dtype)
    for graph in graphs:
        assert len(graph.plans) == len(configs) * 2 * 2


@pytest.mark.parametrize("split", (False, True), ids=("one_launch", "split"))
@pytest.mark.parametrize("current_device", (0, 1), ids=("current0", "current1"), indirect=True)
def test_edge_softmax_on_the_second_gpu(current_device, split, monkeypatch):
    monkeypatch.setattr(ops, "SOFTMAX_SPLIT_ELEMENTS", 0 if split else 1 << 62)
    monkeypatch.setattr(ops, "SOFTMAX_SPLIT_FORWARD_ROW_BYTES", 0)
    monkeypatch.setattr(ops, "SOFTMAX_SPLIT_FORWARD_STATS_BYTES", 1 << 62)
    graph = hub_graph(torch.int32).to(SECOND)
    for shape, dtype, tol in (((), torch.float32, 1e-5), ((4, 1), torch.float32, 1e-5), ((8,), torch.float16, 2e-3)):
        x = softmax_scores(graph, shape, dtype).to(SECOND)
        out = ops.edge_softmax(graph, x)
        assert out.device == x.device
        torch.testing.assert_close(out.double(), softmax_oracle(graph, x), rtol=tol, atol=tol)
        y = (out.double() * torch.rand(out.shape, dtype=torch.float64, device=SECOND)).to(dtype)
        torch.testing.assert_close(ops.edge_softmax(graph, out, y).double(), softmax_oracle(graph, out, y),
                                   rtol=tol, atol=tol)
    assert torch.cuda.current_device() == current_device


@pytest.mark.parametrize("current_device", (0,), ids=("current0",), indirect=True)
def test_autotuning_a_call_on_the_second_gpu(current_device, tmp_path, monkeypatch):
    """Online autotuning times a call on cuda:1 with cuda:0 current: the core's timing loop runs on
    the call's device, the winner is cached, and selection keeps working (no fallback to the
    heuristic for the rest of the process)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DGL_UGRAPH_AUTOTUNE", "1")
    monkeypatch.setattr(autotune, "_tuners", {})
    policy._failed.clear()
    gen = torch.Generator().manual_seed(3)
    n, e = 3000, 40000
    graph = UGraph.from_coo(torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen),
                            n, n, torch.int32).to(SECOND)
    x = torch.rand(n, 64, generator=gen, dtype=torch.float64).to(SECOND) + 0.5
    op = OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ugrapher(graph, op)[0]
    assert not policy._failed, policy._failed
    assert not [w for w in caught if "dgl_ugraph" in str(w.message)], [str(w.message) for w in caught]
    torch.testing.assert_close(out, reference(graph, op)[0], rtol=1e-12, atol=1e-12)
    assert list((tmp_path / "dgl_ugraph" / "autotune").glob("*.json")), "no autotune cache was written"
    assert torch.cuda.current_device() == current_device


# ---- under DGL ----------------------------------------------------------------------------------

# Float64 throughout, so that summation order stays below these bounds and a wrong device,
# stream or result does not.
RTOL = 1e-9
MODELS = ("GCN", "GAT", "SAGE-mean", "SAGE-pool", "GIN-max")


def _model_graph(device):
    import test_dgl_models as tm
    g, feat, labels = tm.data.synthetic_graph(3000, 30000, tm.CLASSES, tm.FEAT, seed=3)
    train_mask = tm.data.masks(g.num_nodes(), seed=3)[0]
    return g.to(device), feat.to(device, torch.float64), labels.to(device), train_mask.to(device)


@needs_cuda_dgl
@pytest.mark.parametrize("current_device", (0, 1), ids=("current0", "current1"), indirect=True)
@pytest.mark.parametrize("name", MODELS)
def test_models_on_the_second_gpu_match_dgl(name, current_device):
    """One training step of each example model on cuda:1: outputs and every gradient as DGL's own
    kernels give them (run with cuda:1 current), every DGL call intercepted on that device."""
    import dgl_ugraph
    import test_dgl_models as tm
    make, prepare = tm.MODELS[name]
    g, feat, labels, train_mask = _model_graph(SECOND)
    if prepare is not None:
        g = prepare(g)
    torch.manual_seed(0)
    model = make().to(SECOND, torch.float64)
    state = copy.deepcopy(model.state_dict())
    dgl_ugraph.enable()
    dgl_ugraph.reset_stats()
    torch.cuda.set_device(current_device)
    out, grads = tm.training_step(model, state, g, feat, labels, train_mask)
    torch.cuda.synchronize(1)
    stats = dgl_ugraph.stats()
    # The reference runs as DGL wants it run, with the graph's device current: DGL's own kernels
    # launch on the current device.
    torch.cuda.set_device(1)
    with dgl_ugraph.disabled():
        ref, ref_grads = tm.training_step(model, state, g, feat, labels, train_mask)
    tm.assert_equal_up_to_order(out, ref, f"{name} output", rtol=RTOL)
    for pname in grads:
        tm.assert_equal_up_to_order(grads[pname], ref_grads[pname], f"{name} gradient of {pname}",
                                    1e-12 * max(r.abs().max().item() for r in ref_grads.values()), RTOL)
    assert stats["calls"] > 0 and stats["intercepted"] == stats["calls"], stats["patterns"]
    assert {r["device"] for r in stats["signatures"]} == {SECOND}, stats["signatures"]


@needs_cuda_dgl
@pytest.mark.parametrize("current_device", (0,), ids=("current0",), indirect=True)
def test_a_graphs_first_call_keeps_the_current_device(current_device):
    """DGL makes the device of the arrays it allocates current and leaves it so: the graph cache,
    which has DGL create the CSC of a graph on cuda:1 on its first call, puts cuda:0 back."""
    from dgl_ugraph.dgl import cache
    g = _model_graph(SECOND)[0]
    assert "csc" not in g.formats()["created"]
    torch.cuda.set_device(current_device)
    entry = cache.entry_for(g._graph)
    assert entry.__class__ is cache.GraphEntry and entry.ugraph.device == torch.device(SECOND)
    assert "csc" in g.formats()["created"]
    assert torch.cuda.current_device() == current_device


# Data-parallel training: one process a GPU, DistributedDataParallel over NCCL, each rank the same
# graph and its own half of the training nodes, so that the all-reduced gradients differ from each
# rank's own.
DDP_MODELS = ("SAGE-mean", "GAT", "GCN")
DDP_STEPS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Trains each of DDP_MODELS for DDP_STEPS steps, once on DGL's kernels and once with
    dgl_ugraph, from the same weights; saves the losses, the final weights and the plugin's
    stats of this rank."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import dgl_ugraph
    import test_dgl_models as tm
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    try:
        g0, feat, labels, train_mask = _model_graph(device)
        mine = train_mask & (torch.arange(g0.num_nodes(), device=device) % world == rank)
        result = {}
        for name in DDP_MODELS:
            make, prepare = tm.MODELS[name]
            g = prepare(g0) if prepare is not None else g0
            torch.manual_seed(0)
            state = make().to(device, torch.float64).state_dict()
            for mode in ("dgl", "ugraph"):
                (dgl_ugraph.enable if mode == "ugraph" else dgl_ugraph.disable)()
                dgl_ugraph.reset_stats()
                model = make().to(device, torch.float64)
                model.load_state_dict(state)
                ddp = DistributedDataParallel(model, device_ids=[rank])
                opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
                torch.manual_seed(7 + rank)
                losses = []
                for _ in range(DDP_STEPS):
                    opt.zero_grad()
                    loss = F.cross_entropy(ddp(g, feat)[mine], labels[mine])
                    loss.backward()
                    opt.step()
                    losses.append(loss.item())
                result[(name, mode)] = {"losses": losses, "state": {k: v.cpu() for k, v in model.state_dict().items()},
                                        "stats": dgl_ugraph.stats()}
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@needs_cuda_dgl
def test_data_parallel_training_over_nccl_matches_dgl(tmp_path):
    """Two processes, one GPU each: per rank the same losses, and on both ranks the same final
    weights, with dgl_ugraph as with DGL's kernels; every call of the plugin's runs intercepted on
    its rank's GPU."""
    import torch.multiprocessing as mp
    world = 2
    mp.spawn(_ddp_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True)
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(world)]
    for name in DDP_MODELS:
        for rank, result in enumerate(results):
            ours, theirs = result[(name, "ugraph")], result[(name, "dgl")]
            torch.testing.assert_close(torch.tensor(ours["losses"]), torch.tensor(theirs["losses"]), rtol=RTOL, atol=0)
            for key, value in ours["state"].items():
                torch.testing.assert_close(value, theirs["state"][key], rtol=RTOL, atol=RTOL * theirs["state"][key].abs().max().item())
                torch.testing.assert_close(value, results[0][(name, "ugraph")]["state"][key], rtol=0, atol=0)
            stats = ours["stats"]
            assert stats["calls"] > 0 and stats["intercepted"] == stats["calls"], (name, rank, stats["patterns"])
            assert {r["device"] for r in stats["signatures"]} == {f"cuda:{rank}"}, (name, rank, stats["signatures"])
            assert result[(name, "dgl")]["stats"]["intercepted"] == 0
