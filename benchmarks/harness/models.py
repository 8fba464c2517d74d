"""The benchmark models: benchmarks/models/'s DGL networks at the uGrapher paper's sizes, PyG
2.8's twins, and the steps timed (inference; one training step without the optimizer)."""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from . import ROOT

MODELS = ("GCN", "GAT", "GIN", "SAGE-mean", "SAGE-gcn", "SAGE-pool")
# The models of the GPU run (SAGE-gcn has no PyG twin).
GPU_MODELS = ("GCN", "GAT", "GIN", "SAGE-mean", "SAGE-pool")
MODES = ("inference", "training")


def _model_modules():
    models_dir = str(ROOT / "benchmarks" / "models")
    if models_dir not in sys.path:
        sys.path.insert(0, models_dir)
    import gat
    import gcn
    import gin
    import sage
    return gcn, gat, gin, sage


def build_model(name: str, in_size: int, classes: int):
    """(model, prepare_graph or None) with the paper's layer sizes."""
    gcn, gat, gin, sage = _model_modules()
    if name == "GCN":
        return gcn.GCN(in_size, 16, classes), gcn.prepare_graph
    if name == "GAT":
        return gat.GAT(in_size, 8, classes, heads=(8, 1)), gat.prepare_graph
    if name == "GIN":  # benchmarks/models/gin.py counts the classifier: num_layers=6 is 5 GINConv layers
        return gin.GIN(in_size, 64, classes, "sum", num_layers=6), None
    if name.startswith("SAGE-"):
        return sage.SAGE(in_size, 16, classes, name.split("-", 1)[1]), None
    raise ValueError(f"unknown model {name!r}")


def make_dgl_graph(src, dst, n, prepare=None, device="cpu"):
    import dgl

    g = dgl.graph((src.to(device), dst.to(device)), num_nodes=n)
    if prepare is not None:
        g = prepare(g)
    return g.formats(["csc", "coo", "csr"])  # as the models use it; formats are built on first use


def inference_fn(model, *inputs):
    def run():
        model.eval()
        with torch.no_grad():
            return model(*inputs)
    return run


def training_fn(model, labels, *inputs):
    """One training step without the optimizer: forward, cross-entropy, backward."""
    def run():
        model.train()
        model.zero_grad(set_to_none=True)
        out = model(*inputs)
        F.cross_entropy(out, labels).backward()
        return out
    return run


def pyg_fns(model_name, feat, labels, classes, edge_index):
    """{mode: fn} of PyG's model of the same sizes on the same inputs, or None where PyG has none."""
    torch.manual_seed(0)
    net = pyg_model(model_name, feat.shape[1], classes)
    if net is None:
        return None
    net = net.to(feat.device)
    return {"inference": inference_fn(net, feat, edge_index), "training": training_fn(net, labels, feat, edge_index)}


def pyg_model(name: str, in_size: int, classes: int):
    """PyG 2.8 models of the paper's sizes, as a PyG user writes them: an edge_index input, the
    layers, activations, normalizations and dropouts of models/*.py in the same places. None
    where PyG has no equivalent layer. What differs from the DGL models, all of it PyG's own way:
    - GCNConv and GATConv add the self-loops in every forward (the DGL models get a graph with
      self-loops once); GCNConv recomputes its symmetric normalization in every forward (DGL's
      GraphConv recomputes the degrees too);
    - aggregation is torch's scatter over an edge_index in the graph's edge order (PyG 2.8's
      default without torch_sparse/pyg-lib), where DGL runs sparse kernels on its CSC;
    - SAGE-pool: DGL's pool is max over relu(fc_pool(h)) with fc_pool square and biased, then
      fc_neigh + fc_self; SAGEConv(aggr="max", project=True) is that layer exactly (a biased
      square projection with relu, max, lin_l + lin_r), with the bias on lin_l instead of a
      separate one;
    - weights are PyG's own initialization (no parity is claimed: the rows time the same work)."""
    import torch.nn as nn
    from torch_geometric import nn as pnn

    class Net(nn.Module):
        def __init__(self, convs, act, final=None, norms=None, dropout=0.5, input_dropout=True):
            super().__init__()
            self.convs, self.act, self.final = nn.ModuleList(convs), act, final
            self.norms = nn.ModuleList(norms) if norms else None
            self.dropout = nn.Dropout(dropout)
            self.input_dropout = input_dropout

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                if i or self.input_dropout:
                    x = self.dropout(x)
                x = conv(x, edge_index)
                if self.norms is not None:
                    x = self.norms[i](x)
                if i != len(self.convs) - 1 or self.final is not None:
                    x = self.act(x)
            return self.final(self.dropout(x)) if self.final is not None else x

    if name == "GCN":  # benchmarks/models/gcn.py: dropout between the layers only
        return Net([pnn.GCNConv(in_size, 16), pnn.GCNConv(16, classes)], F.relu, input_dropout=False)
    if name == "GAT":  # benchmarks/models/gat.py: feat_drop before each layer, attn_drop on the attention
        return Net([pnn.GATConv(in_size, 8, heads=8, dropout=0.6), pnn.GATConv(64, classes, heads=1, dropout=0.6)],
                   F.elu, dropout=0.6)
    if name == "GIN":  # benchmarks/models/gin.py: dropout(relu(norm(conv))) per layer, then the classifier
        def mlp(i):
            return nn.Sequential(nn.Linear(i, 64, bias=False), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64))
        return Net([pnn.GINConv(mlp(in_size if i == 0 else 64), train_eps=True) for i in range(5)], F.relu,
                   final=nn.Linear(64, classes), norms=[nn.BatchNorm1d(64) for _ in range(5)], input_dropout=False)
    if name == "SAGE-mean":  # benchmarks/models/sage.py: dropout on the input and between the layers
        return Net([pnn.SAGEConv(in_size, 16, aggr="mean"), pnn.SAGEConv(16, classes, aggr="mean")], F.relu)
    if name == "SAGE-pool":
        return Net([pnn.SAGEConv(in_size, 16, aggr="max", project=True),
                    pnn.SAGEConv(16, classes, aggr="max", project=True)], F.relu)
    return None  # SAGE-gcn: PyG's SAGEConv has no gcn aggregator
