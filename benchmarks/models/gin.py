"""Graph Isomorphism Network (Xu et al., ICLR 2019) for node classification, with the sum, max or
mean neighbour aggregator, in the style of DGL's examples.

    python benchmarks/models/gin.py --dataset cora --aggregator sum
    python benchmarks/models/gin.py --synthetic --aggregator max --device cuda
"""
import torch.nn as nn
import torch.nn.functional as F

import dgl.nn as dglnn

from data import arg_parser, run


class MLP(nn.Module):
    def __init__(self, in_size, hid_size, out_size):
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(in_size, hid_size, bias=False), nn.Linear(hid_size, out_size)])
        self.norm = nn.BatchNorm1d(hid_size)

    def forward(self, x):
        return self.linears[1](F.relu(self.norm(self.linears[0](x))))


class GIN(nn.Module):
    def __init__(self, in_size, hid_size, out_size, aggregator="sum", num_layers=3, dropout=0.5):
        super().__init__()
        self.layers = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(num_layers - 1):
            mlp = MLP(in_size if i == 0 else hid_size, hid_size, hid_size)
            self.layers.append(dglnn.GINConv(mlp, aggregator, learn_eps=True))
            self.norms.append(nn.BatchNorm1d(hid_size))
        self.classify = nn.Linear(hid_size, out_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, features):
        h = features
        for layer, norm in zip(self.layers, self.norms):
            h = self.dropout(F.relu(norm(layer(g, h))))
        return self.classify(h)


def main():
    parser = arg_parser("GIN node classification")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--aggregator", choices=("sum", "max", "mean"), default="sum")
    args = parser.parse_args()
    run(f"GIN-{args.aggregator}", args, lambda in_size, classes: GIN(in_size, args.hidden, classes, args.aggregator))


if __name__ == "__main__":
    main()
