"""Graphs and the training loop shared by the example models (plain DGL, no dgl_ugraph).

A dataset is one `<name>.npz` from the shared datasets folder (`<repo>/../shared/datasets`, or
$DGL_UGRAPH_DATASETS): src, dst, num_nodes, and feat/label where the source has them. A graph
without features gets random features whose first two columns are its standardized log
in/out-degrees; a graph without labels gets four in-degree-quantile classes. `--synthetic` builds a
skewed graph with planted communities instead, so accuracy means something on any machine.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import dgl

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dataset_dir():
    return os.environ.get("DGL_UGRAPH_DATASETS") or os.path.join(REPO, "..", "shared", "datasets")


def arg_parser(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dataset", default="cora", help="a <name>.npz in the datasets folder")
    parser.add_argument("--synthetic", action="store_true", help="train on a synthetic skewed graph instead")
    parser.add_argument("--nodes", type=int, default=20000, help="synthetic graph: nodes")
    parser.add_argument("--edges", type=int, default=200000, help="synthetic graph: edges")
    parser.add_argument("--feat-dim", type=int, default=64, help="feature width where a graph has none")
    parser.add_argument("--classes", type=int, default=5, help="synthetic graph: classes")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def synthetic_graph(nodes, edges, classes, feat_dim, seed=0):
    """A graph with skewed in-degrees (Zipf-like destination popularity) and planted communities:
    80% of edges stay inside a class, and features are noisy class centroids."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (nodes,), generator=gen)
    popularity = 1.0 / torch.arange(1, nodes + 1, dtype=torch.float64) ** 0.8
    popularity = popularity[torch.randperm(nodes, generator=gen)]
    dst = torch.multinomial(popularity, edges, replacement=True, generator=gen)
    by_class = [torch.nonzero(labels == c).flatten() for c in range(classes)]
    same = torch.rand(edges, generator=gen) < 0.8
    src = torch.randint(0, nodes, (edges,), generator=gen)
    for c in range(classes):
        pick = same & (labels[dst] == c)
        members = by_class[c]
        src[pick] = members[torch.randint(0, len(members), (int(pick.sum()),), generator=gen)]
    centroids = torch.randn(classes, feat_dim, generator=gen)
    feat = centroids[labels] + 2.0 * torch.randn(nodes, feat_dim, generator=gen)
    g = dgl.graph((src, dst), num_nodes=nodes)
    return g, feat.float(), labels


def _degree_features(g, feat_dim, seed):
    gen = torch.Generator().manual_seed(seed)
    feat = torch.randn(g.num_nodes(), feat_dim, generator=gen)
    degrees = torch.stack([g.in_degrees(), g.out_degrees()], 1).double().log1p()
    degrees = (degrees - degrees.mean(0)) / degrees.std(0).clamp_min(1e-6)
    feat[:, :2] = degrees.float()[:, : min(2, feat_dim)]
    return feat


def load_npz(path, feat_dim, seed=0):
    data = np.load(path)
    num_nodes = int(data["num_nodes"])
    g = dgl.graph((torch.from_numpy(data["src"].astype(np.int64)), torch.from_numpy(data["dst"].astype(np.int64))),
                  num_nodes=num_nodes)
    feat = torch.from_numpy(data["feat"]).float() if "feat" in data else _degree_features(g, feat_dim, seed)
    if "label" in data:
        labels = torch.from_numpy(data["label"].astype(np.int64))
    else:
        deg = g.in_degrees().double()
        cuts = torch.quantile(deg, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
        labels = torch.bucketize(deg, cuts)
    return g, feat, labels


def masks(num_nodes, seed=0):
    """A seeded random split: 60% train, 20% validation, 20% test."""
    order = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))
    n_train, n_val = int(0.6 * num_nodes), int(0.2 * num_nodes)
    result = []
    for part in (order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[part] = True
        result.append(mask)
    return result


def load(args):
    """(graph, features, labels, train/val/test masks, classes) on args.device; exits cleanly when
    the dataset folder is absent."""
    if args.synthetic:
        g, feat, labels = synthetic_graph(args.nodes, args.edges, args.classes, args.feat_dim, args.seed)
    else:
        path = os.path.join(dataset_dir(), f"{args.dataset}.npz")
        if not os.path.isfile(path):
            print(f"skipped: no dataset {path} (set DGL_UGRAPH_DATASETS, or use --synthetic)")
            sys.exit(0)
        g, feat, labels = load_npz(path, args.feat_dim, args.seed)
    train, val, test = masks(g.num_nodes(), args.seed)
    device = torch.device(args.device)
    classes = int(labels.max()) + 1
    return (g.to(device), feat.to(device), labels.to(device), train.to(device), val.to(device), test.to(device),
            classes)


def accuracy(logits, labels, mask):
    return (logits[mask].argmax(1) == labels[mask]).float().mean().item()


def train(model, g, feat, labels, train_mask, val_mask, test_mask, args):
    """Full-graph training as in DGL's examples; prints loss, validation accuracy and epoch time."""
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    cuda = feat.is_cuda
    durations = []
    for epoch in range(args.epochs):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        model.train()
        logits = model(g, feat)
        loss = F.cross_entropy(logits[train_mask], labels[train_mask])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()
        durations.append(time.perf_counter() - start)
        model.eval()
        with torch.no_grad():
            logits = model(g, feat)
        print(f"Epoch {epoch:03d} | Loss {loss.item():.4f} | Train Acc {accuracy(logits, labels, train_mask):.4f} | "
              f"Val Acc {accuracy(logits, labels, val_mask):.4f} | Time(s) {durations[-1]:.4f}")
    model.eval()
    with torch.no_grad():
        logits = model(g, feat)
    warmup = 3 if len(durations) > 3 else 0
    steady = durations[warmup:]
    print(f"Test Acc {accuracy(logits, labels, test_mask):.4f} | mean training-step time {sum(steady) / len(steady):.4f} s"
          + (f" (after {warmup} warm-up epochs)" if warmup else ""))
    return accuracy(logits, labels, test_mask)


def run(name, args, make_model, prepare_graph=None):
    """Loads the graph args name, builds make_model(in_size, classes) on its device (after
    prepare_graph(graph), if given), says what it runs on and trains it."""
    g, feat, labels, train_mask, val_mask, test_mask, classes = load(args)
    if prepare_graph is not None:
        g = prepare_graph(g)
    model = make_model(feat.shape[1], classes).to(feat.device)
    print(f"{name} on {'synthetic' if args.synthetic else args.dataset}: {g.num_nodes()} nodes, {g.num_edges()} edges, "
          f"{feat.shape[1]} features, {classes} classes, {feat.device}")
    return train(model, g, feat, labels, train_mask, val_mask, test_mask, args)
