"""Module patterns: the dgl.nn convolutions that run a lean path of dgl_ugraph's while the plugin
is on (`convs`), listed as data in the switching table's "modules" rows.

A layer of DGL's spends most of a small graph's forward in DGL's Python (the graph's local scope,
its frames, update_all's lookups, the per-forward degree work and the zero-in-degree check that
waits for the device), not in its kernel. While the plugin is on, the forward of each listed
class is replaced by one that recognizes the call and runs the lean path, or runs DGL's own
forward unchanged and says why in stats()["modules"]. A call is recognized when:
  * the module's class does not override forward (a subclass's own forward runs as written, and
    its super().forward() is DGL's);
  * the graph has one edge type, and the cache holds its entry (on CUDA, after the graph's
    tier-up: its first calls run DGL's forward, as its kernels);
  * the features are floating tensors of a dtype the kernels run, on the graph's device, with
    the graph's source (and destination) node count in rows, outside autocast;
  * the module's configuration is one the lean path has (`_configuration`): SAGEConv's mean, gcn
    and pool aggregators, GINConv's sum, max, mean and min. It is read on every call, so a module
    whose attributes change after its first call is judged anew.
Anything else, errors included, is DGL's forward's to compute or raise.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import warnings
from typing import Optional

import torch

from dgl_ugraph import settings
from dgl_ugraph.dgl import cache, patterns
from dgl_ugraph.dgl.modules import attention, convs
from dgl_ugraph.dgl.recognition import KERNEL_DTYPES
from dgl_ugraph.dgl.stats import DGL, UGRAPHER, module_record

# DGL's forward signature per class, and the lean forward that stands in for it.
_SIGNATURES = {"GraphConv": ("self", "graph", "feat", "weight", "edge_weight"),
               "SAGEConv": ("self", "graph", "feat", "edge_weight"),
               "GINConv": ("self", "graph", "feat", "edge_weight"),
               "GATConv": ("self", "graph", "feat", "edge_weight", "get_attention"),
               "GATv2Conv": ("self", "graph", "feat", "get_attention"),
               "DotGatConv": ("self", "graph", "feat", "get_attention"),
               "EdgeWeightNorm": ("self", "graph", "edge_weight")}
# The classes whose forward's tensor argument holds a row per edge, not per source node.
_EDGE_ROWS = frozenset({"EdgeWeightNorm"})
_LEAN = {"GraphConv": convs.graph_conv, "SAGEConv": convs.sage_conv, "GINConv": convs.gin_conv,
         "GATConv": attention.gat_conv, "GATv2Conv": attention.gatv2_conv, "DotGatConv": attention.dot_gat_conv,
         "EdgeWeightNorm": convs.edge_weight_norm}
SAGE_AGGREGATORS = ("mean", "gcn", "pool")
GIN_AGGREGATORS = ("sum", "max", "mean", "min")

_dgl = {}  # class -> DGL's own forward, captured by enable()
_replacements = {}  # class -> the forward that replaced it
_lock = threading.Lock()


def _configuration(name: str, module) -> Optional[str]:
    """Why the module's configuration has no lean path, or None."""
    if name == "SAGEConv" and module._aggre_type not in SAGE_AGGREGATORS:
        return f"aggregator_type={module._aggre_type!r}: the lean path has {', '.join(SAGE_AGGREGATORS)}"
    if name == "GINConv" and module._aggregator_type not in GIN_AGGREGATORS:
        return f"aggregator_type={module._aggregator_type!r}: the lean path has {', '.join(GIN_AGGREGATORS)}"
    return None


def _features(feat):
    """(source features, destination features or None), or None where they are not tensors."""
    if isinstance(feat, tuple):
        if len(feat) == 2 and isinstance(feat[0], torch.Tensor) and isinstance(feat[1], torch.Tensor):
            return feat
        return None
    return (feat, None) if isinstance(feat, torch.Tensor) else None


def _recognize(name: str, module, graph, feat):
    """(the graph's cache entry, None) for a call the lean path runs, else (None, the reason). A
    graph the cache already holds is of one edge type: a repeat call asks DGL nothing."""
    reason = _configuration(name, module)
    if reason is not None:
        return None, reason
    gidx = getattr(graph, "_graph", None)
    if gidx is None:
        return None, "not a DGLGraph"
    if len(graph.ntypes) > 2:
        return None, "a graph of more than two node types"
    pair = _features(feat)
    if pair is None:
        return None, "features that are not a tensor or a pair of tensors"
    src, dst = pair
    if src.dtype not in KERNEL_DTYPES.get(src.device.type, ()) or (dst is not None and dst.dtype != src.dtype):
        return None, f"features of {src.dtype} on {src.device.type}"
    if torch.is_autocast_enabled():
        return None, "autocast: DGL's aggregation casts its operands"
    entry = cache.seen(gidx)
    if entry is None:
        if gidx.number_of_etypes() != 1:
            return None, "a graph of several edge types"
        if src.is_cuda and cache.warming(gidx):
            return None, "the graph's first calls run on DGL (tier-up, DGL_UGRAPH_TIER_UP)"
        entry = cache.entry_for(gidx)
        if entry.__class__ is not cache.GraphEntry:
            return None, entry
    ug = entry.ugraph
    if src.device != ug.device or (dst is not None and dst.device != ug.device):
        return None, "features on another device than the graph"
    if name in _EDGE_ROWS:
        if dst is not None or src.dim() == 0 or src.shape[0] != ug.num_edges:
            return None, "edge weights whose rows are not the graph's edges"
    elif src.dim() == 0 or src.shape[0] != ug.num_src or (dst is not None and (dst.dim() == 0 or dst.shape[0] != ug.num_dst)):
        return None, "features whose rows are not the graph's nodes"
    return entry, None


def _make_forward(name: str, own, lean):
    runs = patterns.modules()[name]["runs"]
    lean_record = module_record(name, UGRAPHER, runs)

    def forward(self, graph, feat, *args, **kwargs):  # feat: EdgeWeightNorm's edge_weight
        if type(self).forward is not forward:
            reason = f"{type(self).__name__} overrides forward"
        else:
            entry, reason = _recognize(name, self, graph, feat)
            if reason is None:
                lean_record.calls += 1
                return lean(self, graph, entry, feat, *args, **kwargs)
        module_record(name, DGL, reason).calls += 1
        return own(self, graph, feat, *args, **kwargs)

    functools.update_wrapper(forward, own)  # DGL's name, docstring and, through __wrapped__, signature
    forward.__module__ = __name__
    return forward


def _classes():
    # Looked up on first use: this package must import without DGL, for kernel-only use.
    from dgl.nn.pytorch import conv
    return {name: getattr(conv, name) for name in patterns.modules() if hasattr(conv, name) and name in _LEAN}


def enable() -> None:
    """Replaces the forward of each listed class whose signature is DGL's; another keeps its own
    (with a warning), the kernels being rerouted all the same. DGL_UGRAPH_MODULES=0 keeps every
    DGL forward."""
    if not settings.modules():
        return
    with _lock:
        for name, cls in _classes().items():
            own = cls.__dict__.get("forward")
            if own is None or own is _replacements.get(cls):
                continue
            if tuple(inspect.signature(own).parameters) != _SIGNATURES[name]:
                warnings.warn(f"{name}.forward is not the expected forward{_SIGNATURES[name][1:]}: DGL's forward "
                              "runs, on dgl_ugraph's kernels", RuntimeWarning, stacklevel=3)
                continue
            _dgl[cls] = own
            _replacements[cls] = cls.forward = _make_forward(name, own, _LEAN[name])


def disable() -> None:
    """Puts DGL's own forwards back."""
    with _lock:
        for cls, own in _dgl.items():
            if cls.__dict__.get("forward") is _replacements.get(cls):
                cls.forward = own
        _dgl.clear()
        _replacements.clear()


@contextlib.contextmanager
def disabled():
    """The block with DGL's forwards (the plugin's kernels still serve them), the lean paths back
    after where they were on: the benchmarks' kernels-only implementation."""
    was = bool(_dgl)
    disable()
    try:
        yield
    finally:
        if was:
            enable()
