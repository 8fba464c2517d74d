"""DGLGraph's all-node in/out-degrees served from the graph cache: the very values, dtype and
device of DGL's own methods on every kind of graph, a new tensor per call, and DGL's own method
for every call the cache does not serve."""
import pytest
import torch

dgl = pytest.importorskip("dgl")
from dgl.heterograph import DGLGraph  # noqa: E402

import dgl_ugraph  # noqa: E402
from dgl_ugraph.dgl import degrees  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on", "index_width")


def _own(graph, name, *args):
    with dgl_ugraph.disabled():
        return getattr(graph, name)(*args)


def _check_equal(graph):
    for name in ("in_degrees", "out_degrees"):
        ours, theirs = getattr(graph, name)(), _own(graph, name)
        assert ours.dtype == theirs.dtype == graph.idtype and ours.device == theirs.device
        assert torch.equal(ours, theirs), name


def _skewed(n, e, seed, idtype):
    gen = torch.Generator().manual_seed(seed)
    dst = torch.multinomial(1.0 / torch.arange(1, n + 1).double(), e, replacement=True, generator=gen)
    src = torch.randint(0, n, (e,), generator=gen)
    return dgl.graph((src, dst), num_nodes=n, idtype=idtype)


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_equal_to_dgl_on_a_skewed_graph_with_isolated_nodes_and_multi_edges(idtype):
    g = _skewed(300, 2000, 0, idtype)
    g = dgl.add_nodes(g, 7)  # isolated nodes at the end
    assert (_own(g, "in_degrees") == 0).any() and (_own(g, "out_degrees") == 0).any()
    _check_equal(g)


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_equal_to_dgl_on_bipartite_graphs_and_blocks(idtype):
    bip = dgl.heterograph({("user", "buys", "item"): (torch.tensor([0, 0, 3, 4]), torch.tensor([1, 2, 2, 0]))},
                          num_nodes_dict={"user": 6, "item": 3}, idtype=idtype)
    _check_equal(bip)
    seeds = torch.arange(10, dtype=idtype)
    block = dgl.to_block(dgl.in_subgraph(_skewed(50, 300, 1, idtype), seeds), dst_nodes=seeds)
    assert block.num_src_nodes() > block.num_dst_nodes() == 10 and block.num_edges() > 0
    _check_equal(block)


def test_zero_edges_and_zero_nodes():
    _check_equal(dgl.graph(([], []), num_nodes=5))
    _check_equal(dgl.graph(([], []), num_nodes=0))


def test_each_call_returns_a_new_tensor():
    g = _skewed(100, 600, 2, torch.int64)
    for name in ("in_degrees", "out_degrees"):
        first = getattr(g, name)()
        expected = first.clone()
        first.zero_()
        assert torch.equal(getattr(g, name)(), expected)


def test_a_changed_graph_has_its_own_degrees():
    g = _skewed(100, 600, 3, torch.int64)
    before = g.out_degrees(), g.in_degrees()
    g = dgl.add_edges(g, torch.tensor([0, 0, 5]), torch.tensor([9, 9, 9]))
    _check_equal(g)
    assert g.out_degrees()[0] == before[0][0] + 2 and g.in_degrees()[9] == before[1][9] + 3


def test_other_calls_go_to_dgl():
    g = _skewed(100, 600, 4, torch.int64)
    assert g.in_degrees(3) == _own(g, "in_degrees", 3) and isinstance(g.in_degrees(3), int)
    nodes = torch.tensor([5, 1, 5])
    assert torch.equal(g.out_degrees(nodes), _own(g, "out_degrees", nodes))
    hetero = dgl.heterograph({("a", "x", "b"): ([0, 1], [1, 1]), ("b", "y", "a"): ([0], [1])})
    assert torch.equal(hetero.in_degrees(etype="x"), _own(hetero, "in_degrees", "__ALL__", "x"))
    with pytest.raises(dgl.DGLError):
        hetero.in_degrees()  # several edge types and none named: DGL's own error


def test_a_graph_without_csc_keeps_dgl_degrees_and_formats():
    g = _skewed(100, 600, 5, torch.int64).formats("coo")
    _check_equal(g)
    assert g.formats()["created"] == ["coo"]


def test_disable_gives_dgl_its_own_methods_back():
    dgl_ugraph.disable()
    assert DGLGraph.in_degrees is degrees._dgl["in_degrees"] and DGLGraph.out_degrees is degrees._dgl["out_degrees"]
    dgl_ugraph.enable()
    assert DGLGraph.in_degrees is degrees._in_degrees and DGLGraph.out_degrees is degrees._out_degrees


def test_graphconv_norms_equal_dgl():
    g = dgl.add_self_loop(_skewed(200, 1500, 6, torch.int64))
    x = torch.randn(200, 8)
    for norm in ("both", "left", "right"):
        conv = dgl.nn.GraphConv(8, 4, norm=norm)
        with dgl_ugraph.disabled():
            expected = conv(g, x)
        torch.testing.assert_close(conv(g, x), expected, rtol=1e-5, atol=1e-6)
