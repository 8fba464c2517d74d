"""benchmarks/bench_kernels.py on the GPU, on a small graph where host launch gaps would dominate
per-call events: graph replay removes them, the search and the finalists run on the core's
timing loop, and a case's rows are complete and consistent."""
from __future__ import annotations

import pathlib
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]), str(_HERE.parents[1] / "benchmarks")) if p not in sys.path]

import bench_kernels as bk  # noqa: E402

from dgl_ugraph.core import _ext, ops  # noqa: E402
from dgl_ugraph.core.abstraction import ParallelInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _ext.has_cuda()),
                                reason="needs a GPU and the CUDA core")


def _small_graph(n=2_700, e=10_600, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n, (e,), generator=gen)
    return UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)


def test_replay_removes_the_launch_gaps_of_a_small_call():
    graph = _small_graph()
    gen = torch.Generator(device="cuda").manual_seed(1)
    op = bk.make_inputs("copy_u-sum", graph, 16, torch.float32, gen)
    prep = ops.prepare(graph, op, ParallelInfo("warp_vertex", 1, 1))
    per_call = bk.time_ms(prep.run, 50, 5)
    replayed, how = bk.replay_ms(prep.run, reps=20)
    assert how == "graph_replay"
    assert 0 < replayed < per_call
    # the replayed call computes what an eager one does
    out = prep.run()[0]
    assert torch.allclose(out, ops.prepare(graph, op, ParallelInfo("thread_edge", 1, 1)).run()[0], rtol=1e-5, atol=1e-5)


def test_replay_times_a_long_call_with_events():
    x = torch.rand(4096, 4096, device="cuda")
    ms, how = bk.replay_ms(lambda: x @ x, reps=5)
    assert how == "events" and ms > 0


@pytest.mark.parametrize("name", ["copy_u-sum", "u_mul_e-sum", "u_dot_v"])
def test_a_case_has_every_row_and_the_best_is_not_slower_than_the_choice(name):
    graph = _small_graph(seed=2)
    gen = torch.Generator(device="cuda").manual_seed(3)
    args = type("Args", (), {"strategies": ",".join(bk.STRATEGIES)})()
    case, search_rows = bk.bench_case(graph, "small", name, 64, torch.float32, gen, bk.GRIDS["quick"], args,
                                      torch.cuda.get_device_name(), 3000.0)
    impls = {r["impl"]: r for r in case}
    assert {"ugraph", "ugraph_best", "torch_scatter"} <= set(impls)
    assert impls["ugraph_best"]["ms"] <= impls["ugraph"]["ms"]
    assert all(r["ms"] > 0 and r["timing"] in ("core_loop", "graph_replay", "events") for r in case + search_rows)
    assert {r["config"] for r in search_rows} >= {impls["ugraph"]["config"]}
    if name != "u_dot_v":
        assert impls["cusparse"]["timing"] in ("graph_replay", "events")


def test_grid_none_times_the_choice_alone():
    graph = _small_graph(seed=4)
    gen = torch.Generator(device="cuda").manual_seed(5)
    args = type("Args", (), {"strategies": ",".join(bk.STRATEGIES)})()
    case, search_rows = bk.bench_case(graph, "small", "copy_u-sum", 64, torch.float32, gen, bk.GRIDS["none"], args,
                                      torch.cuda.get_device_name(), 3000.0)
    impls = {r["impl"] for r in case}
    assert search_rows == [] and "ugraph" in impls and not any(i.startswith("ugraph_") for i in impls)
    assert {"cusparse", "torch_scatter"} <= impls and all(r["ms"] > 0 for r in case)
