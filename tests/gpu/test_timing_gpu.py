"""The core's timing loop (ug_cuda_time) and the runner built on it, on the GPU: its times agree
with CUDA events around the same launches timed from Python, a refused configuration queues
nothing, a batch longer than the launch queue finishes (the gate times out), and the collector's
path (core.timing.time_configs) finds the configuration that plain timing finds fastest."""
from __future__ import annotations

import pathlib
import statistics
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]), str(_HERE.parent), str(_HERE)) if p not in sys.path]

from reference import reference

from dgl_ugraph.core import _ext, ops, timing
from dgl_ugraph.core.abstraction import STRATEGY_CODE, OpInfo, ParallelInfo
from dgl_ugraph.core.graph import UGraph

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _ext.has_cuda()),
                                reason="needs a GPU and the CUDA core")

UG_ERR_UNSUPPORTED = 2


def _call(num_nodes=200_000, num_edges=4_000_000, width=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    graph = UGraph.from_coo(src, dst, num_nodes, num_nodes, torch.int32).to(device="cuda")
    a = (torch.rand(num_nodes, width, generator=gen) + 0.5).cuda()
    return graph, OpInfo("copy_lhs", "sum", a, "src", None, "null", "dst")


def _params(prep, pinfo: ParallelInfo):
    return prep.params.replace(strategy=STRATEGY_CODE[pinfo.strategy], grouping=pinfo.grouping, tiling=pinfo.tiling)


def _python_events(core, params, runs: int):
    stream = torch.cuda.current_stream()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(runs + 1)]
    torch.cuda._sleep(50_000_000)  # keeps the GPU busy while the host queues
    events[0].record(stream)
    for i in range(runs):
        core.run_cuda(params, stream.cuda_stream)
        events[i + 1].record(stream)
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in zip(events, events[1:])]


def test_times_agree_with_events_timed_from_python_and_outputs_stay_right():
    core = _ext.core()
    graph, op = _call()
    configs = [ParallelInfo("warp_vertex", 4, 2), ParallelInfo("thread_vertex", 32, 1)]
    prep = ops.prepare(graph, op, configs[0])
    ps = [_params(prep, c) for c in configs]
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(2):
        status, why, failed, ms, starved = core.cuda_time(ps, [5, 7], stream, 2000.0)
        assert status == 0 and why == "" and failed == -1 and not starved
        assert len(ms) == 12 and all(t > 0 for t in ms)
        for i, (p, got) in enumerate(zip(ps, (ms[:5], ms[5:]))):
            want = statistics.median(_python_events(core, p, 7))
            assert 0.8 * want <= statistics.median(got) <= 1.25 * want, (configs[i], got, want)
    ref = reference(graph, op)[0]
    assert torch.allclose(prep.outputs[0].double(), ref, rtol=2e-5, atol=2e-5 * ref.abs().max().item())


def test_a_refused_configuration_queues_nothing():
    core = _ext.core()
    graph, op = _call(num_nodes=5_000, num_edges=60_000, width=16)
    prep = ops.prepare(graph, op, ParallelInfo("warp_vertex", 4, 1))
    good = _params(prep, ParallelInfo("warp_vertex", 4, 1))
    bad = good.replace(tiling=0)
    prep.outputs[0].fill_(float("nan"))
    status, why, failed, ms, _ = core.cuda_time([good, bad], [3, 3], torch.cuda.current_stream().cuda_stream, 2000.0)
    torch.cuda.synchronize()
    assert status != 0 and failed == 1 and why and ms == [0.0] * 6
    assert torch.isnan(prep.outputs[0]).all()


def test_a_gate_that_times_out_reports_the_batch_as_starved_and_a_long_batch_finishes():
    core = _ext.core()
    graph, op = _call(num_nodes=5_000, num_edges=60_000, width=16)
    prep = ops.prepare(graph, op, ParallelInfo("warp_vertex", 4, 1))
    p = _params(prep, ParallelInfo("warp_vertex", 4, 1))
    stream = torch.cuda.current_stream().cuda_stream
    status, _, _, ms, starved = core.cuda_time([p], [200], stream, 1e-6)
    assert status == 0 and starved and len(ms) == 200
    status, _, _, ms, starved = core.cuda_time([p], [200], stream, 2000.0)
    assert status == 0 and not starved
    # More launches and events than the GPU's queue holds: the host blocks until the gate gives up.
    status, _, _, ms, _ = core.cuda_time([p], [4000], stream, 200.0)
    assert status == 0 and len(ms) == 4000 and all(t > 0 for t in ms)


def test_time_configs_on_the_gpu_agrees_with_plain_timing():
    graph, op = _call()
    configs = [ParallelInfo("warp_vertex", 4, 2), ParallelInfo("thread_vertex", 32, 1), ParallelInfo("thread_edge", 64, 1)]
    runner = timing.CudaRunner(graph, op, configs[0])
    timings = {t.config: t for t in timing.time_configs(runner, configs, timing.TimingPolicy(cut=None, min_reps=5))}
    assert all(t.status == "ok" and t.reps >= 5 for t in timings.values())
    core = _ext.core()
    plain = {}
    for c in configs:
        p = runner.set(c)
        plain[c] = statistics.median(_python_events(core, p, 7))
    assert min(plain, key=plain.get) == min(timings, key=lambda c: timings[c].ms)
    for c in configs:
        assert 0.8 * plain[c] <= timings[c].ms <= 1.25 * plain[c], (c, timings[c].ms, plain[c])


@pytest.mark.parametrize("first", ["warp_edge", "thread_edge"])
def test_a_runner_whose_first_configuration_needs_a_workspace_times_every_strategy(first):
    # max on an edge strategy combines through a workspace; the runner's first configuration
    # configured the prepared call's own, which must not stand in for the runner's.
    graph, op = _call(num_nodes=20_000, num_edges=400_000, width=16)
    op = OpInfo("copy_lhs", "max", op.A, "src", None, "null", "dst")
    configs = [ParallelInfo(first, 16, 1), ParallelInfo("warp_vertex", 1, 1), ParallelInfo("warp_edge", 64, 1),
               ParallelInfo("thread_edge", 4, 4)]
    configs = list(dict.fromkeys(configs))
    runner = timing.CudaRunner(graph, op, configs[0])
    timings = timing.time_configs(runner, configs, timing.TimingPolicy(cut=None, min_reps=3))
    assert [(t.config, t.status) for t in timings] == [(c, "ok") for c in configs], [t.message for t in timings]
