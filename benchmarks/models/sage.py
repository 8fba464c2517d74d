"""GraphSAGE (Hamilton et al., NeurIPS 2017) full-graph node classification with the mean, gcn or
pool aggregator, as in DGL's examples.

    python benchmarks/models/sage.py --dataset cora --aggregator mean
    python benchmarks/models/sage.py --synthetic --aggregator pool --device cuda
"""
import torch.nn as nn
import torch.nn.functional as F

import dgl.nn as dglnn

from data import arg_parser, run


class SAGE(nn.Module):
    def __init__(self, in_size, hid_size, out_size, aggregator="mean", dropout=0.5):
        super().__init__()
        self.layers = nn.ModuleList([
            dglnn.SAGEConv(in_size, hid_size, aggregator),
            dglnn.SAGEConv(hid_size, out_size, aggregator),
        ])
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, features):
        h = self.dropout(features)
        for i, layer in enumerate(self.layers):
            h = layer(g, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def main():
    parser = arg_parser("GraphSAGE node classification")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--aggregator", choices=("mean", "gcn", "pool"), default="mean")
    args = parser.parse_args()
    run(f"SAGE-{args.aggregator}", args, lambda in_size, classes: SAGE(in_size, args.hidden, classes, args.aggregator))


if __name__ == "__main__":
    main()
