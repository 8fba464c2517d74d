"""A graph index's pure queries answered once per index while the plugin is on: the same relation
and reverse index for every call on a graph, DGL's own methods (a new object per call) while it
is off, the same answers as DGL's, answers that go with their index, with pinning and with
disable(), and message passing that meets no new graph index in forward or backward."""
import gc

import pytest
import torch

dgl = pytest.importorskip("dgl")
import dgl.function as fn  # noqa: E402
from dgl.graph_index import GraphIndex  # noqa: E402
from dgl.heterograph_index import HeteroGraphIndex  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import cache, indexes, interception  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")


def _graph(seed=0, n=40, e=200):
    gen = torch.Generator().manual_seed(seed)
    return dgl.graph((torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)),
                     num_nodes=n)


def _hetero():
    src, dst = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])
    return dgl.heterograph({("u", "a", "v"): (src, dst), ("u", "b", "v"): (dst, src), ("v", "c", "u"): (src, src)},
                           num_nodes_dict={"u": 4, "v": 3})


def test_every_query_is_replaced_while_on_and_dgl_s_own_while_off():
    classes = {"HeteroGraphIndex": HeteroGraphIndex, "GraphIndex": GraphIndex}
    replaced = {(c, name): classes[c].__dict__[name] for c, queries in indexes.QUERIES.items() for name in queries}
    assert all(attr.__doc__ is not None for attr in replaced.values())
    with dgl_ugraph.disabled():
        for (c, name), ours in replaced.items():
            assert classes[c].__dict__[name] is not ours, name
    for (c, name), ours in replaced.items():
        assert classes[c].__dict__[name] is ours, name


def test_one_relation_and_one_reverse_index_per_graph_while_on_and_new_ones_per_call_while_off():
    g = _graph()
    etype = g.canonical_etypes[0]
    assert g[etype]._graph is g[etype]._graph
    assert g._graph.reverse() is g._graph.reverse()
    assert g._graph.metagraph is g._graph.metagraph
    with dgl_ugraph.disabled():
        assert g[etype]._graph is not g[etype]._graph
        assert g._graph.reverse() is not g._graph.reverse()


def _answers(gidx):
    """Every memoized query of an index, asked once each (edge types and node types in turn)."""
    etypes, ntypes = range(gidx.number_of_etypes()), range(gidx.number_of_ntypes())
    return [gidx.number_of_etypes(), gidx.number_of_ntypes(), str(gidx.dtype), str(gidx.ctx),
            [gidx.num_nodes(t) for t in ntypes], [gidx.num_edges(t) for t in etypes],
            [gidx.get_relation_graph(t).num_edges(0) for t in etypes],
            [tuple(x.tolist() for x in gidx.reverse().edges(t)) for t in etypes],
            gidx.metagraph.num_edges(), gidx.metagraph.num_nodes(), [gidx.metagraph.find_edge(t) for t in etypes]]


@pytest.mark.parametrize("make", [_graph, _hetero], ids=["homogeneous", "heterograph"])
def test_the_answers_are_dgl_s(make):
    g = make()
    gidx = g._graph
    asked = [_answers(gidx) for _ in range(2)]  # the second round is answered from the index's cache
    with dgl_ugraph.disabled():
        want = _answers(gidx)
    assert asked == [want, want]
    for etype in g.canonical_etypes:  # each edge type keeps its own relation
        assert g[etype]._graph is g[etype]._graph
        with dgl_ugraph.disabled():
            theirs = g[etype].edges()
        assert all(torch.equal(x, y) for x, y in zip(g[etype].edges(), theirs)), etype


def test_an_id_that_is_not_an_int_gets_dgl_s_answer_unmemoized():
    gidx = _graph()._graph
    assert gidx.num_nodes(torch.tensor(0)) == gidx.num_nodes(0) == 40
    assert not any(isinstance(x, torch.Tensor) for k in gidx._cache if isinstance(k, tuple) for x in k)


def test_what_empties_the_index_s_cache_or_pins_any_index_asks_again():
    g = _graph()
    gidx, other = g._graph, _graph(5)._graph
    reverse, relation = gidx.reverse(), other.get_relation_graph(0)
    gidx._cache.clear()  # what the index's in-place clear() does
    assert gidx.reverse() is not reverse
    reverse = gidx.reverse()
    assert gidx.is_pinned() is False and gidx.is_pinned() is False
    try:
        gidx.pin_memory_()
    except Exception:  # a CPU-only DGL cannot pin; the answers go all the same
        pass
    # Pinning changes C++ graphs that other indexes share: every index asks again.
    assert gidx.reverse() is not reverse
    assert other.get_relation_graph(0) is not relation
    with dgl_ugraph.disabled():
        pinned = gidx.is_pinned()
    assert gidx.is_pinned() is pinned


def test_repeated_training_steps_meet_no_new_graph_index_and_equal_dgl():
    g = _graph(1)
    x = torch.randn(g.num_nodes(), 8, requires_grad=True)
    w = torch.randn(g.num_edges(), 1, requires_grad=True)

    def step():
        g.ndata["x"] = x
        g.edata["w"] = w
        g.update_all(fn.u_mul_e("x", "w", "m"), fn.max("m", "h"))
        g.apply_edges(fn.u_dot_v("h", "x", "s"))
        loss = g.edata["s"].sum() + g.ndata["h"].pow(2).sum()
        x.grad = w.grad = None
        loss.backward()
        return g.ndata["h"].detach().clone(), x.grad.clone(), w.grad.clone()

    step()
    slots = len(cache._by_gidx)
    for _ in range(3):
        ours = step()
    assert len(cache._by_gidx) == slots  # no new relation or reverse graph index to look up
    with dgl_ugraph.disabled():
        theirs = step()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


def test_answers_go_with_their_index_and_disable_takes_them_all_back():
    g = _graph(2)
    g[g.canonical_etypes[0]]
    before = indexes.holding()
    del g
    gc.collect()
    assert indexes.holding() < before
    keep = _graph(3)
    keep[keep.canonical_etypes[0]]
    assert indexes.holding() > 0
    dgl_ugraph.disable()
    assert indexes.holding() == 0
    assert not any(isinstance(k, tuple) and k[0] == "dgl_ugraph" for k in keep._graph._cache)
    dgl_ugraph.enable()


def test_a_block_with_the_plugin_off_keeps_the_answers_unless_a_pinning_changed():
    gidx = _graph(4)._graph
    reverse, relation = gidx.reverse(), gidx.get_relation_graph(0)
    with dgl_ugraph.disabled():
        assert gidx.reverse() is not reverse  # DGL's own method: a new index per call
    assert gidx.reverse() is reverse and gidx.get_relation_graph(0) is relation
    try:
        with dgl_ugraph.disabled():
            gidx.pin_memory_()  # DGL's own pin: no epoch counts it
        assert gidx.reverse() is not reverse and gidx.is_pinned()
        gidx.unpin_memory_()
    except Exception:  # a CPU-only DGL cannot pin
        pass
    reverse = gidx.reverse()
    interception.disable(keep_answers=True)  # as disabled() leaves; then a pinning state moves
    assert id(gidx) in indexes._pinned_when_left
    indexes._pinned_when_left = {key: not pinned for key, pinned in indexes._pinned_when_left.items()}
    dgl_ugraph.enable()
    assert gidx.reverse() is not reverse


def test_a_collection_while_the_holders_are_read_drops_no_slot_mid_read():
    """Indexes in reference cycles die only in a collection; one that falls inside the read of the
    holders' table runs their weak-reference callbacks, which delete slots of that table. The
    sweep puts the collection at each of the read's first allocations."""
    def cyclic_holder():
        gidx = _graph(5, n=4, e=6)._graph
        gidx.number_of_nodes(0)  # an answer: the index holds a slot
        gidx.loop = gidx

    threshold = gc.get_threshold()
    try:
        for allocations in range(16):
            gc.collect()
            gc.disable()
            for _ in range(20):
                cyclic_holder()
            assert indexes.holding() >= 20
            gc.set_threshold(gc.get_count()[0] + allocations)
            gc.enable()
            indexes._pinning()
            gc.set_threshold(*threshold)
            gc.collect()
    finally:
        gc.set_threshold(*threshold)
        gc.enable()
