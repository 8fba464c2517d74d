"""Shared test set-up: the repository root on sys.path (so `tests.reference` and `dgl_ugraph`
import from the checkout), and output poisoning for the whole session, so an output element a
kernel forgets to write shows up as NaN / -7 instead of hiding behind allocator leftovers."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# The tests check dgl_ugraph's kernels from a graph's first call: no tier-up (a CUDA graph's first
# calls on DGL's kernels, dgl_ugraph/dgl/cache.py), which has tests of its own that set it.
os.environ["DGL_UGRAPH_TIER_UP"] = "0"


@pytest.fixture(autouse=True, scope="session")
def poison_outputs():
    from dgl_ugraph.core import ops

    was = ops.POISON_OUTPUTS
    ops.POISON_OUTPUTS = True
    yield
    ops.POISON_OUTPUTS = was


@pytest.fixture
def plugin_on():
    """dgl_ugraph routing DGL's calls, with fresh stats, for one test; the state before it comes
    back after."""
    import dgl_ugraph

    was = dgl_ugraph.is_enabled()
    dgl_ugraph.enable()
    dgl_ugraph.reset_stats()
    yield
    if not was:
        dgl_ugraph.disable()


@pytest.fixture(params=(False, True), ids=("dgl_idtype", "narrowed"))
def index_width(request, monkeypatch):
    """Both ways the graph cache may hold an int64 DGL graph: at DGL's index type, and narrowed
    to int32 as on CUDA (cache.NARROW_DEVICES), so that a CPU run covers what a narrowed graph
    gives back to DGL (max/min's args, the degrees) in DGL's index type."""
    from dgl_ugraph.dgl import cache

    if request.param:
        monkeypatch.setattr(cache, "NARROW_DEVICES", ("cpu", "cuda"))
    cache.clear()
    yield request.param
    cache.clear()


@pytest.fixture
def isolated_failures(monkeypatch):
    """Failures recorded by a test stay in that test."""
    from dgl_ugraph.dgl import cache, recognition

    monkeypatch.setattr(recognition, "_failed", {})
    monkeypatch.setattr(recognition, "_warned", set())
    yield
    cache.clear()
