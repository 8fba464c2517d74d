"""The graph-tensor cache: built once per graph and reused (reverse graphs and DGL's per-call
relation wrappers included), never stale after a graph changes, and bounded."""
import gc
import weakref

import pytest
import torch

import dgl
import dgl.function as fn
import dgl_ugraph
from dgl.backend.pytorch import sparse
from dgl_ugraph.dgl import cache, recognition


@pytest.fixture(autouse=True)
def fresh_cache():
    was = dgl_ugraph.is_enabled()
    dgl_ugraph.enable()
    cache.clear()
    yield
    cache.clear()
    if not was:
        dgl_ugraph.disable()


@pytest.fixture
def builds(monkeypatch):
    """Counts the UGraphs built."""
    count = []
    real = cache._build

    def counting(*args):
        entry = real(*args)
        count.append(entry)
        return entry

    monkeypatch.setattr(cache, "_build", counting)
    return count


def random_graph(seed, nodes=40, edges=200):
    gen = torch.Generator().manual_seed(seed)
    return dgl.graph((torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)),
                     num_nodes=nodes)


def step(g, x, weight):
    """An update_all forward and backward (DGL wraps g in a new gidx for every call, and the
    backward makes a reverse gidx)."""
    with g.local_scope():
        g.srcdata["h"] = x @ weight
        g.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
        out = g.dstdata["h"]
    out.square().sum().backward()
    return out.detach()


def native(func, *args):
    with dgl_ugraph.disabled():
        return func(*args)


def test_one_build_for_the_graph_and_one_for_its_reverse(builds):
    g, x = random_graph(0), torch.rand(40, 8)
    weight = torch.rand(8, 8, requires_grad=True)
    for _ in range(5):
        step(g, x, weight)
    assert len(builds) == 2
    forward = cache.entry_for(g._graph)
    assert forward.reverse is not None and forward.reverse in builds
    rev = forward.reverse.ugraph
    assert (rev.num_src, rev.num_dst, rev.num_edges) == (g.num_dst_nodes(), g.num_src_nodes(), g.num_edges())


def test_reverse_entry_matches_dgls_reverse_graph():
    g = random_graph(1)
    entry = cache.entry_for(g._graph.reverse())
    _, _, indptr, indices, eids = g._graph.reverse().adjacency_matrix_tensors(0, True, "csr")
    assert torch.equal(entry.ugraph.indptr, indptr) and torch.equal(entry.ugraph.col, indices)
    assert torch.equal(entry.ugraph.eid, eids)


def test_decisions_are_made_once_per_graph_and_signature(monkeypatch):
    made = []
    real = recognition._decide

    def counting(*args):
        made.append(args[1])
        return real(*args)

    monkeypatch.setattr(recognition, "_decide", counting)
    g = random_graph(2)
    for _ in range(4):
        dgl.ops.copy_u_sum(g, torch.rand(40, 8))
    dgl.ops.copy_u_sum(g, torch.rand(40, 3))  # another signature
    assert made == ["gspmm:copy_lhs:sum:u:*", "gspmm:copy_lhs:sum:u:*"]


@pytest.mark.parametrize("mutate", ["add_edges", "remove_edges", "add_nodes", "in_place_add_edges"])
def test_a_mutated_graph_never_hits_a_stale_entry(mutate):
    g = random_graph(3)
    x = torch.rand(40, 8)
    torch.testing.assert_close(dgl.ops.copy_u_sum(g, x), native(dgl.ops.copy_u_sum, g, x))
    if mutate == "add_edges":
        g = dgl.add_edges(g, torch.tensor([0, 1, 2]), torch.tensor([5, 5, 5]))
    elif mutate == "remove_edges":
        g = dgl.remove_edges(g, torch.arange(0, 200, 3))
    elif mutate == "add_nodes":
        g = dgl.add_nodes(g, 3)
        x = torch.rand(43, 8)
    else:
        g.add_edges(torch.tensor([7, 8]), torch.tensor([9, 9]))
    torch.testing.assert_close(dgl.ops.copy_u_sum(g, x), native(dgl.ops.copy_u_sum, g, x))
    e = torch.rand(g.num_edges(), 8)
    assert torch.equal(dgl.ops.u_mul_e_max(g, x, e), native(dgl.ops.u_mul_e_max, g, x, e))


def test_graphs_rebuilt_with_the_same_sizes_are_not_confused():
    x = torch.rand(40, 8)
    for seed in range(30):  # freed arrays of the same size are what an allocator hands out again
        g = random_graph(100 + seed)
        assert torch.equal(dgl.ops.copy_u_max(g, x), native(dgl.ops.copy_u_max, g, x))
        del g
        gc.collect()


def test_nothing_outlives_the_graphs_beyond_the_recent_few():
    x = torch.rand(40, 8)
    g = random_graph(4)
    dgl.ops.copy_u_sum(g, x)
    first = weakref.ref(cache.entry_for(g._graph))
    gidx_slots = len(cache._by_gidx)
    del g
    gc.collect()
    assert first() is not None  # kept among the RECENT_GRAPHS most recently used
    for seed in range(cache.RECENT_GRAPHS + 5):
        dgl.ops.copy_u_sum(random_graph(200 + seed), x)
    gc.collect()
    assert first() is None
    assert cache.cached_graphs() <= cache.RECENT_GRAPHS
    assert len(cache._by_gidx) <= gidx_slots  # gidx slots go with their gidx objects


def test_clear_releases_everything():
    g = random_graph(5)
    dgl.ops.copy_u_sum(g, torch.rand(40, 8))
    entry = weakref.ref(cache.entry_for(g._graph))
    del g
    cache.clear()
    gc.collect()
    assert entry() is None and cache.cached_graphs() == 0


def test_gidx_objects_sharing_arrays_share_one_entry(builds):
    g = random_graph(6)
    with dgl_ugraph.disabled():  # DGL's own method: a new relation-graph object per call
        relation_a, relation_b = g._graph.get_relation_graph(0), g._graph.get_relation_graph(0)
    assert relation_a is not relation_b
    assert cache.entry_for(relation_a) is cache.entry_for(relation_b) is cache.entry_for(g._graph)
    assert len(builds) == 1


def test_blocks_and_int32_graphs():
    g = random_graph(7).int()
    seeds = torch.arange(10, dtype=torch.int32)
    block = dgl.to_block(dgl.in_subgraph(g, seeds), dst_nodes=seeds)
    entry = cache.entry_for(block._graph)
    assert entry.ugraph.idtype == torch.int32
    assert (entry.ugraph.num_src, entry.ugraph.num_dst) == (block.num_src_nodes(), block.num_dst_nodes())
    x = torch.rand(block.num_src_nodes(), 4)
    assert torch.equal(dgl.ops.copy_u_max(block, x), native(dgl.ops.copy_u_max, block, x))


def test_int64_graphs_narrow_where_the_kernels_gain_and_keep_dgls_index_type(monkeypatch):
    """On CUDA (cache.NARROW_DEVICES) an int64 graph whose counts fit 31 bits runs as int32; what
    goes back to DGL (max's args, the degrees) and what stats() reports keep DGL's int64. An int32
    graph, a graph past NARROW_LIMIT and a CPU graph keep their own type."""
    g = random_graph(5)
    x = torch.randn(g.num_nodes(), 3, requires_grad=True)

    def entry_after_max(graph):
        cache.clear()
        dgl_ugraph.reset_stats()
        dgl.ops.gspmm(graph, "copy_lhs", "max", x, None)
        return cache.entry_for(graph._graph)

    entry = entry_after_max(g)
    assert (entry.ugraph.idtype, entry.idtype) == (torch.int64, torch.int64)  # the CPU keeps DGL's
    monkeypatch.setattr(cache, "NARROW_DEVICES", ("cpu", "cuda"))
    for graph in (g, g.int()):
        entry = entry_after_max(graph)
        assert entry.ugraph.idtype == torch.int32 and entry.idtype == graph.idtype
    dgl_ugraph.reset_stats()
    out, (arg_u, arg_e) = sparse._gspmm(g._graph, "copy_lhs", "max", x, None)
    assert arg_u.dtype == torch.int64 and arg_e is None
    assert g.in_degrees().dtype == g.out_degrees().dtype == torch.int64
    assert {row["idtype"] for row in dgl_ugraph.stats()["signatures"]} == {"int64"}
    monkeypatch.setattr(cache, "NARROW_LIMIT", g.num_edges())
    assert entry_after_max(g).ugraph.idtype == torch.int64


def test_warming_counts_each_graph_index_calls_up_to_the_tier_up(monkeypatch):
    """cache.warming: a CUDA graph's first DGL_UGRAPH_TIER_UP calls run on DGL's kernels, counted
    per index object, together with the relation and reverse indexes derived from it; 0 turns it
    off. A graph that tiered up stays so."""
    class Index:  # a graph index stand-in: any object a weak reference can point to
        pass

    monkeypatch.setenv("DGL_UGRAPH_TIER_UP", "2")
    a, b = Index(), Index()
    assert cache.warming(a) and cache.warming(a, count=True) and cache.warming(a, count=True)
    assert not cache.warming(a, count=True) and not cache.warming(a)
    assert cache.warming(b)
    monkeypatch.setenv("DGL_UGRAPH_TIER_UP", "0")
    assert not cache.warming(b, count=True)
    monkeypatch.setenv("DGL_UGRAPH_TIER_UP", "5")
    assert not cache.warming(b) and not cache.warming(a)  # tiered up for good
    del a
    assert len(cache._calls) == 1  # the dead index's count went with it
    monkeypatch.setenv("DGL_UGRAPH_TIER_UP", "3")
    root, relation, reverse = Index(), Index(), Index()
    cache.derived(relation, root)
    cache.derived(reverse, relation)  # the relation graph's reverse: the same root
    assert cache.warming(relation, count=True) and cache.warming(reverse, count=True)
    assert cache.warming(root, count=True) and cache.warming(Index())  # another graph counts on its own
    assert not cache.warming(reverse, count=True) and not cache.warming(root)
    cache.clear()
