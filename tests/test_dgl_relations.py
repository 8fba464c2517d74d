"""One relation-graph index per (graph index, edge type) while the plugin is on: the same object
for every update_all/apply_edges on a graph, DGL's own method (a new object per call) while it is
off, slots that go with their graph, and unchanged results."""
import gc

import pytest
import torch

dgl = pytest.importorskip("dgl")
import dgl.function as fn  # noqa: E402
from dgl.heterograph_index import HeteroGraphIndex  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import cache, relations  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")


def _graph(seed=0, n=40, e=200):
    gen = torch.Generator().manual_seed(seed)
    return dgl.graph((torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)),
                     num_nodes=n)


def test_one_relation_index_per_graph_while_on_and_a_new_one_per_call_while_off():
    g = _graph()
    etype = g.canonical_etypes[0]
    assert g[etype]._graph is g[etype]._graph
    with dgl_ugraph.disabled():
        assert HeteroGraphIndex.get_relation_graph is not relations._get_relation_graph
        assert g[etype]._graph is not g[etype]._graph
    assert HeteroGraphIndex.get_relation_graph is relations._get_relation_graph


def test_each_edge_type_of_a_heterograph_keeps_its_own_relation():
    src, dst = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])
    g = dgl.heterograph({("u", "a", "v"): (src, dst), ("u", "b", "v"): (dst, src), ("v", "c", "u"): (src, src)})
    for etype in g.canonical_etypes:
        assert g[etype]._graph is g[etype]._graph
        with dgl_ugraph.disabled():
            want = g[etype].edges()
        got = g[etype].edges()
        assert all(torch.equal(x, y) for x, y in zip(got, want)), etype
    assert len({id(g[etype]._graph) for etype in g.canonical_etypes}) == 3


def test_repeated_message_passing_meets_one_graph_index_and_equals_dgl():
    g = _graph(1)
    x = torch.randn(g.num_nodes(), 8)
    g.ndata["x"] = x
    g.update_all(fn.copy_u("x", "m"), fn.sum("m", "h"))
    slots = len(cache._by_gidx)
    for _ in range(5):
        g.update_all(fn.copy_u("x", "m"), fn.max("m", "h"))
        g.apply_edges(fn.u_dot_v("x", "x", "s"))
    assert len(cache._by_gidx) == slots  # no new graph index to look up
    ours_h, ours_s = g.ndata["h"].clone(), g.edata["s"].clone()
    with dgl_ugraph.disabled():
        g.update_all(fn.copy_u("x", "m"), fn.max("m", "h"))
        g.apply_edges(fn.u_dot_v("x", "x", "s"))
    torch.testing.assert_close(ours_h, g.ndata["h"])
    torch.testing.assert_close(ours_s, g.edata["s"])


def test_a_graph_s_relations_go_with_it_and_disable_lets_go_of_all():
    g = _graph(2)
    g[g.canonical_etypes[0]]
    before = relations.cached_parents()
    del g
    gc.collect()
    assert relations.cached_parents() == before - 1
    keep = _graph(3)
    keep[keep.canonical_etypes[0]]
    assert relations.cached_parents() > 0
    dgl_ugraph.disable()
    assert relations.cached_parents() == 0
    dgl_ugraph.enable()
