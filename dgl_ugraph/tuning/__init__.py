"""Offline tooling, behind `python -m dgl_ugraph tune` and benchmarks/collect.py,
train_predictor.py, eval_predictor.py: the graph suite, the kernel calls collected (`calls`), the
collector and its shards, training the model that selection.predictor evaluates, and the
supervised run. May import dgl_ugraph.selection and dgl_ugraph.core; nothing at run time imports it.
"""
