"""Graph Convolutional Network (Kipf & Welling, ICLR 2017) node classification, as in DGL's examples.

    python benchmarks/models/gcn.py --dataset cora
    python benchmarks/models/gcn.py --synthetic --device cuda
"""
import torch.nn as nn
import torch.nn.functional as F

import dgl
import dgl.nn as dglnn

from data import arg_parser, run


class GCN(nn.Module):
    def __init__(self, in_size, hid_size, out_size, dropout=0.5):
        super().__init__()
        self.layers = nn.ModuleList([
            dglnn.GraphConv(in_size, hid_size, activation=F.relu),
            dglnn.GraphConv(hid_size, out_size),
        ])
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, features):
        h = features
        for i, layer in enumerate(self.layers):
            if i != 0:
                h = self.dropout(h)
            h = layer(g, h)
        return h


def prepare_graph(g):
    # GraphConv needs every node to receive a message; the examples add a self-loop per node.
    return dgl.add_self_loop(dgl.remove_self_loop(g))


def main():
    parser = arg_parser("GCN node classification")
    parser.add_argument("--hidden", type=int, default=16)
    args = parser.parse_args()
    run("GCN", args, lambda in_size, classes: GCN(in_size, args.hidden, classes), prepare_graph)


if __name__ == "__main__":
    main()
