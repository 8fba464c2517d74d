"""Graph Attention Network (Velickovic et al., ICLR 2018) node classification, as in DGL's examples.

    python benchmarks/models/gat.py --dataset cora
    python benchmarks/models/gat.py --synthetic --device cuda
"""
import torch.nn as nn
import torch.nn.functional as F

import dgl
import dgl.nn as dglnn

from data import arg_parser, run


class GAT(nn.Module):
    def __init__(self, in_size, hid_size, out_size, heads=(8, 1), dropout=0.6):
        super().__init__()
        self.layers = nn.ModuleList([
            dglnn.GATConv(in_size, hid_size, heads[0], feat_drop=dropout, attn_drop=dropout, activation=F.elu),
            dglnn.GATConv(hid_size * heads[0], out_size, heads[1], feat_drop=dropout, attn_drop=dropout,
                          activation=None),
        ])

    def forward(self, g, features):
        h = features
        for i, layer in enumerate(self.layers):
            h = layer(g, h)
            h = h.mean(1) if i == len(self.layers) - 1 else h.flatten(1)
        return h


def prepare_graph(g):
    return dgl.add_self_loop(dgl.remove_self_loop(g))


def main():
    parser = arg_parser("GAT node classification")
    parser.add_argument("--hidden", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.set_defaults(lr=5e-3)
    args = parser.parse_args()
    run("GAT", args, lambda in_size, classes: GAT(in_size, args.hidden, classes, heads=(args.heads, 1)), prepare_graph)


if __name__ == "__main__":
    main()
