"""A graph index's pure queries, answered once per index while the plugin is on.

DGL's Python asks its `HeteroGraphIndex` the same questions on every message-passing call:
`update_all` and `apply_edges` ask `number_of_etypes()` (through `metagraph`: two calls into C and
a GraphIndex object made and freed) at every level of their stack and the metagraph's `find_edge`, `g[etype]` makes a new
relation-graph index per call (`get_relation_graph`), every backward pass makes a new reverse
graph (`reverse()`), and setting features asks `num_nodes`, `ctx` and `dtype`. Each answer is a
call through DGL's C API; on the GPU machine's DGL 2.4 (a ctypes FFI) that is 6-14 us, about 150
calls in a training step of a two-layer GAT (1-2 ms of a 7 ms step on cora). A new relation or
reverse index also costs the graph cache a lookup by arrays through the same API (`cache._resolve`).

A graph index does not change once made: DGLGraph's structure-changing methods build a new index,
DGL's C++ refuses the index's legacy `add_nodes`/`add_edges` on the graphs DGL makes, and its
in-place `clear()` empties the index's `_cache` dict. So the answers go into that same dict, under
keys of dgl_ugraph's own, and go with the index (or with a `clear()`). `pin_memory_` and
`unpin_memory_` change an index in place, and with it the C++ graphs it shares with its relation
and reverse indexes: each opens a new pinning epoch, and answers of an earlier epoch are asked
again, on every index (pinning happens once, before training; `is_pinned`, which DGL asks each
time features are set, is then answered once too). DGL's own methods serve every call while the
plugin is off, and `disable()` takes the answers back out of every index that still holds some;
a block run with the plugin off (`dgl_ugraph.disabled()`) leaves them for the plugin's return,
unless an index's pinning changed meanwhile.
"""
from __future__ import annotations

import inspect
import threading
import warnings
import weakref
from typing import Dict, Tuple

from dgl_ugraph.dgl import cache

_TAG = "dgl_ugraph"
# The queries answered once, per class: name -> the parameters after self (None: a property).
QUERIES = {
    "HeteroGraphIndex": {
        "metagraph": None,
        "dtype": None,
        "ctx": None,
        "number_of_etypes": (),
        "number_of_ntypes": (),
        "num_nodes": ("ntype",),
        "num_edges": ("etype",),
        "get_relation_graph": ("etype",),
        "reverse": (),
        "is_pinned": (),
    },
    # The metagraph, which update_all asks for its edge type's node types on every call. Its
    # legacy mutators empty its _cache too.
    "GraphIndex": {"find_edge": ("eid",), "num_nodes": (), "num_edges": ()},
}
# The queries whose answers are graph indexes of the same edges (cache.derived).
_DERIVING = frozenset({"get_relation_graph", "reverse"})
# The in-place changes after which answers are asked again.
_INVALIDATORS = {"HeteroGraphIndex": ("pin_memory_", "unpin_memory_"), "GraphIndex": ()}

_dgl = {}  # (class, name) -> DGL's own attribute, captured by enable()
_ours = {}  # (class, name) -> its replacement, made once: an off-and-on program meets the same objects
# The indexes holding answers, for disable(): id -> (weak reference, None), by id because DGL's
# objects hash through a C API call (as the graph cache's slots).
_holders: Dict[int, Tuple[weakref.ref, None]] = {}
_lock = threading.Lock()
_epoch = 0  # the pinning epoch: bumped by every pin_memory_ and unpin_memory_
# The holders' pinning states when disable(keep=True) left the answers in place, else None.
_pinned_when_left = None


def _ask(self, answers, key, query, args):
    """DGL's answer, kept in `answers` (the index's `_cache`) under `key` for this epoch. A
    relation or reverse graph index is recorded as derived from this one (cache.derived)."""
    epoch = _epoch
    value = query(self, *args)
    answers[key] = (epoch, value)
    if key[1] in _DERIVING:
        cache.derived(value, self, reverse=key[1] == "reverse")
    slot = _holders.get(id(self))
    if slot is None or slot[0]() is not self:
        with _lock:
            _holders[id(self)] = (weakref.ref(self, cache.forget_slot(_holders, id(self))), None)
    return value


def _answer(name, query, arity):
    """Method `name` answered from the index's `_cache`, its one int argument (arity 1) in the key.
    A fast path per arity: DGL asks these dozens of times per training step."""
    if arity == 0:
        key = (_TAG, name)

        def method(self):
            answers = getattr(self, "_cache", None)
            if answers is None:
                return query(self)
            found = answers.get(key)
            if found is not None and found[0] == _epoch:
                return found[1]
            return _ask(self, answers, key, query, ())
    else:
        def method(self, arg):
            answers = getattr(self, "_cache", None)
            if answers is None or arg.__class__ is not int:
                return query(self, arg)  # a numpy or tensor id: DGL's own answer, not memoized
            key = (_TAG, name, arg)
            found = answers.get(key)
            if found is not None and found[0] == _epoch:
                return found[1]
            return _ask(self, answers, key, query, (arg,))
    method.__name__ = name
    method.__doc__ = query.__doc__
    return method


def _invalidating(change):
    def method(self, *args, **kwargs):
        global _epoch
        _epoch += 1
        try:
            return change(self, *args, **kwargs)
        finally:
            _epoch += 1
    method.__name__ = change.__name__
    method.__doc__ = change.__doc__
    return method


def _forget(index) -> None:
    answers = getattr(index, "_cache", None)
    if answers:
        for key in [k for k in answers if isinstance(k, tuple) and k and k[0] == _TAG]:
            answers.pop(key, None)


def _classes():
    from dgl.graph_index import GraphIndex
    from dgl.heterograph_index import HeteroGraphIndex
    return {"HeteroGraphIndex": HeteroGraphIndex, "GraphIndex": GraphIndex}


def _replacements(cls, queries, invalidators):
    """{name: replacement} for one of this DGL's index classes, or a reason it is left alone."""
    new = inspect.getattr_static(cls, "__new__", None)
    code = getattr(getattr(new, "__func__", new), "__code__", None)
    if code is None or "_cache" not in code.co_names:
        return f"{cls.__name__} keeps no _cache dict"
    out = {}
    for name, params in queries.items():
        attr = inspect.getattr_static(cls, name, None)
        if params is None:
            if not isinstance(attr, property) or attr.fset is not None:
                return f"{cls.__name__}.{name} is not a read-only property"
            out[name] = property(_answer(name, attr.fget, 0), doc=attr.__doc__)
        else:
            if not inspect.isfunction(attr) or tuple(inspect.signature(attr).parameters)[1:] != params:
                return f"{cls.__name__}.{name} is not the expected {name}{('self',) + params}"
            out[name] = _answer(name, attr, len(params))
    for name in invalidators:
        attr = inspect.getattr_static(cls, name, None)
        if attr is None:
            continue
        if not inspect.isfunction(attr):
            return f"{cls.__name__}.{name} is not a method"
        out[name] = _invalidating(attr)
    return out


def enable() -> None:
    """Answers the queries from each index's `_cache`; where a DGL's index class looks otherwise
    it keeps its own methods (with a warning), the kernels being rerouted all the same."""
    global _epoch, _pinned_when_left
    classes = _classes()
    with _lock:
        if _dgl:
            return
        if _pinned_when_left is not None:  # answers kept by disable(keep=True): still this epoch's?
            now = _pinning()
            if any(now.get(key, pinned) != pinned for key, pinned in _pinned_when_left.items()):
                _epoch += 1
            _pinned_when_left = None
        if not _ours:
            for cname, cls in classes.items():
                found = _replacements(cls, QUERIES[cname], _INVALIDATORS[cname])
                if isinstance(found, str):
                    warnings.warn(f"{found}: DGL asks its graph indexes through its C API on every call",
                                  RuntimeWarning, stacklevel=3)
                    continue
                _ours.update(((cname, name), replacement) for name, replacement in found.items())
        for (cname, name), replacement in _ours.items():
            cls = classes[cname]
            _dgl[cname, name] = cls.__dict__[name]
            setattr(cls, name, replacement)


def disable(keep: bool = False) -> None:
    """Puts DGL's own attributes back and takes the answers out of every index holding some; with
    `keep` (a block run with the plugin off, `dgl_ugraph.disabled()`), the answers stay for the
    plugin's return, and each holder's pinning state is noted: where it differs then (a pin or
    unpin while DGL's own methods ran, which no epoch counted), every answer is asked again."""
    global _pinned_when_left
    classes = _classes()
    with _lock:
        for (cname, name), own in _dgl.items():
            setattr(classes[cname], name, own)
        _dgl.clear()
        if keep:
            _pinned_when_left = _pinning()
            return
        _pinned_when_left = None
        holders = [ref() for ref, _ in _snapshot().values()]
        _holders.clear()
    for index in holders:
        if index is not None:
            _forget(index)


def _snapshot() -> Dict[int, Tuple[weakref.ref, None]]:
    """`_holders` as it is now. dict.copy allocates no collectable object while it reads: a
    garbage collection during a read of the table itself (list(items()) makes a tuple an item)
    runs the weak-reference callbacks of indexes in reference cycles, which delete their slots
    mid-iteration ("dictionary changed size during iteration")."""
    return _holders.copy()


def _pinning() -> Dict[int, bool]:
    """Each live holder's pinning state, asked of DGL's own method (a C API call an index)."""
    states = {}
    for key, (ref, _) in _snapshot().items():
        index = ref()
        if index is not None and hasattr(index, "is_pinned"):
            states[key] = bool(index.is_pinned())
    return states


def holding() -> int:
    """How many graph indexes hold answers (for tests)."""
    return len(_holders)
