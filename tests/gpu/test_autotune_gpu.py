"""Online autotuning on the GPU (DGL_UGRAPH_AUTOTUNE=1): the first call of a kind times
the shortlist on the call's own tensors with the core's timing loop, writes the winner to the
per-device cache file, and computes the right result; a new process (a fresh tuner over the same
file) reuses the winner without timing again."""
from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(_HERE.parents[1]),) if p not in sys.path]

from dgl_ugraph.core import _ext, timing  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import autotune, policy, predictor  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _ext.has_cuda()),
                                reason="needs a GPU and the CUDA core")


def _graph(seed: int) -> UGraph:
    gen = torch.Generator().manual_seed(seed)
    n, e = 3000, 40000
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n, (e,), generator=gen)
    return UGraph.from_coo(src.cuda(), dst.cuda(), n, n, torch.int32)


def _fresh_tuners(monkeypatch):
    monkeypatch.setattr(autotune, "_tuners", {})
    policy._failed.clear()


def test_autotune_times_once_writes_the_cache_and_a_new_tuner_reuses_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DGL_UGRAPH_AUTOTUNE", "1")
    _fresh_tuners(monkeypatch)
    graph = _graph(0)
    x = torch.rand(graph.num_src, 64, device="cuda", dtype=torch.float64) + 0.5
    op = OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst")
    timed = []
    real = timing.measure_on_gpu

    def measure(g, o, configs):
        timed.append(list(configs))
        return real(g, o, configs)
    out = policy.ugrapher(graph, op, measure=measure)[0]
    ref = torch.zeros(graph.num_dst, 64, dtype=torch.float64, device="cuda")
    ref.index_add_(0, graph.row.long(), x[graph.col.long()])
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    assert len(timed) == 1 and len(timed[0]) >= 2  # the candidates, timed once

    dev = predictor.device_info(graph.device)
    path = tmp_path / "dgl_ugraph" / "autotune" / f"{dev.slug}.json"
    data = json.loads(path.read_text())
    assert data["device"]["name"] == dev.name and len(data["entries"]) == 1
    assert data["device"]["core"] == str(_ext.core().build_info().get("cuda_source_hash", ""))

    # A new process: a fresh tuner reads the file; a new graph object of the same kind is not timed.
    _fresh_tuners(monkeypatch)
    timed.clear()
    again = _graph(0)
    out2 = policy.ugrapher(again, OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"), measure=measure)[0]
    torch.testing.assert_close(out2, ref, rtol=1e-12, atol=1e-12)
    assert timed == []
    assert autotune.tuner_for(dev, data["device"]["core"]).hits == 1


def test_autotune_off_times_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("DGL_UGRAPH_AUTOTUNE", raising=False)
    _fresh_tuners(monkeypatch)
    graph = _graph(1)
    x = torch.rand(graph.num_src, 16, device="cuda") + 0.5
    calls = []
    policy.ugrapher(graph, OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"),
                    measure=lambda g, o, c: calls.append(c) or {})
    assert calls == [] and not (tmp_path / "dgl_ugraph" / "autotune").exists()
