"""Parity on every example model (benchmarks/models/*.py, plain DGL): forward outputs and every parameter's
gradient are equal with dgl_ugraph on and off, and all their gspmm/gsddmm calls are intercepted.
Training for a few epochs reaches the same accuracy."""
import copy
import io
import os
import sys
from contextlib import redirect_stdout
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import dgl_ugraph

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks", "models"))

import data  # noqa: E402  (benchmarks/models/data.py)
import gat  # noqa: E402
import gcn  # noqa: E402
import gin  # noqa: E402
import sage  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")

FEAT, CLASSES = 24, 5
MODELS = {
    "GCN": (lambda: gcn.GCN(FEAT, 16, CLASSES), gcn.prepare_graph),
    "GAT": (lambda: gat.GAT(FEAT, 8, CLASSES, heads=(4, 1)), gat.prepare_graph),
    "GIN-sum": (lambda: gin.GIN(FEAT, 32, CLASSES, "sum"), None),
    "GIN-max": (lambda: gin.GIN(FEAT, 32, CLASSES, "max"), None),
    "GIN-mean": (lambda: gin.GIN(FEAT, 32, CLASSES, "mean"), None),
    "SAGE-mean": (lambda: sage.SAGE(FEAT, 16, CLASSES, "mean"), None),
    "SAGE-gcn": (lambda: sage.SAGE(FEAT, 16, CLASSES, "gcn"), None),
    "SAGE-pool": (lambda: sage.SAGE(FEAT, 16, CLASSES, "pool"), None),
}


@pytest.fixture(scope="module")
def graph():
    # Skewed in-degrees, nodes without in-edges (where the graph is not given self-loops),
    # self-loops and multi-edges: what the kernels' edge cases need.
    g, feat, labels = data.synthetic_graph(1500, 12000, CLASSES, FEAT, seed=3)
    return g, feat, labels, data.masks(g.num_nodes(), seed=3)[0]


def training_step(model, state, g, feat, labels, train_mask, train=True):
    """One forward (in training mode unless train is False) and backward from a fixed state and a
    fixed dropout seed."""
    model.load_state_dict(state)
    model.train(train)
    model.zero_grad()
    torch.manual_seed(7)
    out = model(g, feat)
    F.cross_entropy(out[train_mask], labels[train_mask]).backward()
    return out.detach(), {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def assert_equal_up_to_order(ours, theirs, what, noise_floor=0.0, rtol=1e-5):
    """Equal up to summation order: rtol per element (1e-5 fits float32), and rtol of the tensor's
    largest magnitude for entries that cancel to nearly 0 (a sum in another order moves those
    most). noise_floor bounds tensors whose exact value is 0 and whose reference is rounding noise."""
    scale = max(theirs.abs().max().item(), 1e-30)
    diff = (ours - theirs).abs()
    worst = (diff - rtol * theirs.abs()).max().item()
    allowed = max(rtol * scale, noise_floor)
    assert worst <= allowed, f"{what}: max |diff| {diff.max().item():.3g} at scale {scale:.3g}"


@pytest.mark.parametrize("name", list(MODELS))
def test_model_parity_and_full_interception(name, graph, index_width):
    make, prepare = MODELS[name]
    g, feat, labels, train_mask = graph
    if prepare is not None:
        g = prepare(g)
    torch.manual_seed(0)
    model = make()
    state = copy.deepcopy(model.state_dict())
    dgl_ugraph.reset_stats()
    out, grads = training_step(model, state, g, feat, labels, train_mask)
    stats = dgl_ugraph.stats()
    with dgl_ugraph.disabled():
        ref, ref_grads = training_step(model, state, g, feat, labels, train_mask)
    assert_equal_up_to_order(out, ref, f"{name} output")
    assert grads.keys() == ref_grads.keys()
    # A Linear bias feeding BatchNorm (GIN's MLP) has an exact gradient of 0: its reference is
    # float32 noise, so it is held to 1e-6 of the model's largest gradient instead of its own.
    model_scale = max(g.abs().max().item() for g in ref_grads.values())
    for pname in grads:
        assert_equal_up_to_order(grads[pname], ref_grads[pname], f"{name} gradient of {pname}", 1e-6 * model_scale)
    assert stats["calls"] > 0
    assert stats["fallback"] == 0, stats["patterns"]
    assert stats["intercepted"] == stats["calls"]


def train_quietly(model, g, feat, labels, masks, epochs):
    args = SimpleNamespace(lr=1e-2, weight_decay=5e-4, epochs=epochs)
    torch.manual_seed(11)
    with redirect_stdout(io.StringIO()):
        return data.train(model, g, feat, labels, *masks, args)


@pytest.mark.parametrize("name", ["GCN", "SAGE-mean", "GIN-max"])
def test_training_reaches_the_same_accuracy(name, graph):
    make, prepare = MODELS[name]
    g, feat, labels, _ = graph
    if prepare is not None:
        g = prepare(g)
    masks = data.masks(g.num_nodes(), seed=5)
    torch.manual_seed(0)
    model = make()
    state = copy.deepcopy(model.state_dict())
    acc_on = train_quietly(model, g, feat, labels, masks, epochs=15)
    model.load_state_dict(state)
    with dgl_ugraph.disabled():
        acc_off = train_quietly(model, g, feat, labels, masks, epochs=15)
    assert abs(acc_on - acc_off) <= 0.02, (acc_on, acc_off)


def test_dataset_model_parity_on_cora():
    path = os.path.join(data.dataset_dir(), "cora.npz")
    if not os.path.isfile(path):
        pytest.skip(f"no {path}")
    g, feat, labels = data.load_npz(path, 32)
    g = gcn.prepare_graph(g)
    torch.manual_seed(0)
    model = gcn.GCN(feat.shape[1], 16, int(labels.max()) + 1)
    state = copy.deepcopy(model.state_dict())
    train_mask = data.masks(g.num_nodes())[0]
    dgl_ugraph.reset_stats()
    out, grads = training_step(model, state, g, feat, labels, train_mask)
    assert dgl_ugraph.stats()["fallback"] == 0
    with dgl_ugraph.disabled():
        ref, ref_grads = training_step(model, state, g, feat, labels, train_mask)
    assert_equal_up_to_order(out, ref, "GCN on cora output")
    for pname in grads:
        assert_equal_up_to_order(grads[pname], ref_grads[pname], f"GCN on cora gradient of {pname}")
