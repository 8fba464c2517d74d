"""The graph-tensor cache: one UGraph per set of DGL adjacency arrays, built once and reused.

DGL hands the kernels a `HeteroGraphIndex` (gidx). Several gidx objects can share one set of
arrays: above all, `gidx.reverse()`, which every backward pass calls, returns a new object on
every call whose in-CSR is the original's out-CSR. So entries are keyed on the arrays' start
addresses and the node counts, and each gidx object is only a fast path to its entry.

Lifetimes:
  * An entry holds zero-copy torch views of DGL's arrays, so while it lives those addresses
    cannot be reused by another graph: a key never points at a stale entry. A mutated graph
    (`add_edges`, `remove_edges`, ...) has new arrays, hence a new key.
  * `_by_gidx` holds an entry strongly only while one of its gidx objects is alive (a weak
    reference's callback drops it); `_by_arrays` holds entries weakly. A reverse graph's entry is
    owned by its forward graph's entry.
  * The gidx objects DGL passes may be short-lived wrappers: by DGL's own methods `update_all`
    wraps the user's graph in a new relation-graph gidx on every call, and `reverse()` makes a new
    one in every backward (while the plugin is on, `indexes` keeps one of each per graph index).
    Python cannot see when the underlying C++ graph dies, so the RECENT_GRAPHS entries
    used last are also held strongly; an older one goes once no live gidx refers to it. That
    bounds what is kept beyond the user's own graphs; `clear()` releases it at once.

Tier-up (CUDA): a graph index gets its entry on its (settings.tier_up() + 1)-th call through
dgl_ugraph's routes; its earlier calls run on DGL's kernels (`warming`). An entry's first call on a
new graph costs the GPU machine's host about 1.2-1.7 ms against DGL's 0.55 ms (the CSC DGL makes,
our UGraph, the degree statistics' wait for the device, selection and the plan; H200), where a
repeat call saves 35-150 us against DGL's. A graph
called a few times in its life, as the blocks a neighbor sampler makes for one training step
are (GAT calls a block about ten times a step), would pay for its entry and never get it back:
mini-batch training ran at 0.47-0.55x DGL with an entry from the first call (H200).
"""
from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections import OrderedDict
from typing import Dict, Optional, Tuple, Union

import torch

from dgl_ugraph import settings
from dgl_ugraph.core.graph import UGraph

RECENT_GRAPHS = 8
# Devices on which an int64 graph whose node and edge counts fit 31 bits runs as int32 (_build):
# on CUDA the 32-bit index paths ran the aggregations 1.15-1.65x faster than the same graph at
# int64 with the same configuration (H200, the uGrapher stand-ins: copy_u sum 1.15-1.40x, max
# 1.35-1.62x, the GAT sum 1.17-1.54x, u_add_v/u_dot_v 1.00-1.16x). On the
# 2-core CPU the two widths measured within noise of each other, so CPU graphs keep DGL's.
NARROW_DEVICES = ("cuda",)
NARROW_LIMIT = 2 ** 31 - 1

_by_gidx: Dict[int, Tuple[weakref.ref, object]] = {}
_recent: "OrderedDict[tuple, GraphEntry]" = OrderedDict()
_by_arrays: "weakref.WeakValueDictionary[tuple, GraphEntry]" = weakref.WeakValueDictionary()
_calls: Dict[int, list] = {}  # id(gidx) -> [weak reference, calls so far]: warming's counts
_roots: Dict[int, tuple] = {}  # id(derived gidx) -> (weak reference to it, weak reference to its root)
_reversed: Dict[int, tuple] = {}  # id(reverse gidx) -> (weak reference to it, weak reference to the gidx it reverses)
TIERED = sys.maxsize  # warming's count of a graph that has tiered up
_lock = threading.Lock()


class GraphEntry:
    """A UGraph, the per-signature decisions made on it, its in- and out-degrees once asked for,
    and the tensors derived from them (`divisors`: the mean reducer's divisors per result dtype and
    rank, and the lean module paths' norms, keyed by name first; `mean`, `modules`). `idtype` is the DGL
    graph's index type, in which every index tensor goes back to DGL (max/min's args, the
    degrees), whatever the UGraph's (NARROW_DEVICES); `arrays` holds DGL's own adjacency arrays,
    whose addresses are the entry's key (the module doc's lifetimes)."""

    __slots__ = ("ugraph", "key", "idtype", "arrays", "decisions", "reverse", "in_degrees", "out_degrees",
                 "divisors", "__weakref__")

    def __init__(self, ugraph: UGraph, key: tuple, idtype: torch.dtype, arrays: tuple):
        self.ugraph = ugraph
        self.key = key
        self.idtype = idtype
        self.arrays = arrays
        self.decisions: dict = {}
        self.reverse: Optional[GraphEntry] = None
        self.in_degrees = None
        self.out_degrees = None
        self.divisors: dict = {}

    def degrees(self, out: bool):
        """Every node's in- (out-) degree, computed once: the in-degrees from the CSC's indptr,
        the out-degrees by counting its columns; in DGL's index type."""
        deg = self.out_degrees if out else self.in_degrees
        if deg is None:
            ug = self.ugraph
            if out:
                deg = torch.zeros(ug.num_src, dtype=ug.idtype, device=ug.device).index_add_(
                    0, ug.col, torch.ones_like(ug.col)).to(self.idtype)
                self.out_degrees = deg
            else:
                deg = self.in_degrees = (ug.indptr[1:] - ug.indptr[:-1]).to(self.idtype)
        return deg


_dgl_capi = {}


def _dgl_api(name: str):
    # Looked up on first use: this module must import without DGL, for kernel-only use.
    func = _dgl_capi.get(name)
    if func is None:
        from dgl import heterograph_index
        from dgl._ffi import runtime_ctypes
        func = _dgl_capi[name] = getattr(heterograph_index, name, None) or getattr(runtime_ctypes, name)
    return func


def _address(nd) -> int:
    """Where the array's data starts. CUDA's unified addressing keeps host and device addresses
    apart. DGL's Cython NDArray carries its DGLArray* as an int, much cheaper than `.handle`."""
    handle = getattr(nd, "_dgl_handle", None)
    if handle is None:
        c = nd.handle.contents
    else:
        c = _dgl_api("DGLArray").from_address(handle)
    return (c.data or 0) + c.byte_offset


def _adjacency(gidx, in_edges: bool):
    """DGL's (indptr, indices, eids) NDArrays: the CSC when in_edges, else the CSR. Creates the
    format if it does not exist yet, as DGL's own kernels would."""
    result = _dgl_api("_CAPI_DGLHeteroGetAdj")(gidx, 0, in_edges, "csr")
    return tuple(result(i) for i in range(3))


def _graph_key(arrays, num_src: int, num_dst: int) -> tuple:
    """Node counts and the arrays' start addresses. Lengths follow: indptr has num_dst + 1
    entries, whose last one (read from the very same memory) gives the edge count."""
    indptr, indices, eids = arrays
    return (num_src, num_dst, _address(indptr), _address(indices), _address(eids))


def index_dtype(idtype: torch.dtype, device: torch.device, num_src: int, num_dst: int, num_edges: int) -> torch.dtype:
    """The UGraph's index type for a DGL graph of `idtype` (NARROW_DEVICES)."""
    if idtype == torch.int64 and device.type in NARROW_DEVICES and max(num_src, num_dst, num_edges) < NARROW_LIMIT:
        return torch.int32
    return idtype


def _build(arrays, num_src: int, key: tuple) -> GraphEntry:
    from dgl.backend import zerocopy_from_dgl_ndarray
    indptr, indices, eids = tensors = tuple(zerocopy_from_dgl_ndarray(a) for a in arrays)
    idtype = index_dtype(indices.dtype, indices.device, num_src, indptr.numel() - 1, indices.numel())
    ugraph = UGraph.from_csc(indptr, indices, eids if eids.numel() else None, num_src, idtype=idtype)
    return GraphEntry(ugraph, key, indices.dtype, tensors)


def _resolve(gidx) -> Union[GraphEntry, str]:
    metagraph = gidx.metagraph
    etypes = metagraph.num_edges()
    if etypes != 1:
        return f"heterograph with {etypes} edge types: dgl_ugraph runs graphs of one edge type"
    srctype, dsttype = metagraph.find_edge(0)
    num_src, num_dst = gidx.num_nodes(srctype), gidx.num_nodes(dsttype)
    try:
        csc = _adjacency(gidx, True)
    except Exception as exc:  # a graph restricted to other formats: g.formats('coo')
        return f"the graph cannot have a CSC ({str(exc).splitlines()[0]}); DGL runs its own kernels"
    key = _graph_key(csc, num_src, num_dst)
    entry = _by_arrays.get(key)
    if entry is not None:
        return entry
    entry = _build(csc, num_src, key)
    _by_arrays[key] = entry
    # A reverse graph's out-CSR is its forward graph's in-CSR (CSC), shared, not copied: the
    # forward graph's entry owns this one, so it outlives the gidx objects reverse() makes.
    forward = _forward_entry(gidx)
    if forward is not None:
        forward.reverse = entry
    return entry


def _forward_entry(gidx) -> Optional[GraphEntry]:
    """The entry of the graph index that `gidx` reverses, where `gidx` came from its reverse()
    while the plugin was on (as every backward pass's does: `derived`) and that index has an entry.
    Asking DGL instead (which formats the graph has, then its CSR) took 12-16 of a new graph's 19
    calls into DGL's C API (0.17 ms on the H200 machine's host)."""
    parent = _linked(_reversed, gidx)
    return seen(parent) if parent is not None else None


@contextlib.contextmanager
def _current_device_kept():
    """DGL's C API makes the device of the arrays it allocates current (cudaSetDevice) and leaves
    it so; where a graph's first call has DGL create a format here, the caller's current device
    is put back, so that a later `device="cuda"` still means the device the caller chose."""
    if not torch.cuda.is_initialized():
        yield
        return
    device = torch.cuda.current_device()
    try:
        yield
    finally:
        if torch.cuda.current_device() != device:
            torch.cuda.set_device(device)


def forget_slot(table: dict, key: int):
    """The weak-reference callback that drops table[key], a (weakref, value) slot keyed by an
    object's id, when that object dies, unless the id already serves a newer object's slot."""
    def callback(ref):
        slot = table.get(key)
        if slot is not None and slot[0] is ref:
            del table[key]
    return callback


def derived(child, parent, reverse: bool = False) -> None:
    """Records that the index `child` derives from `parent` (its relation graph or, with
    `reverse`, its reverse, as `indexes` answers them): `warming` counts their calls together, on
    their root index, and a reverse's entry goes to its parent's (`_forward_entry`). DGL makes such
    indexes anew whenever they are not cached (a plugin turned off and on again drops `indexes`'
    answers), where the user's graph index stays."""
    root = _root(parent)
    _roots[id(child)] = (weakref.ref(child, forget_slot(_roots, id(child))), weakref.ref(root))
    if reverse:
        _reversed[id(child)] = (weakref.ref(child, forget_slot(_reversed, id(child))), weakref.ref(parent))


def _linked(table: dict, gidx):
    """The live index that `table` (`_roots` or `_reversed`) links `gidx` to, or None."""
    slot = table.get(id(gidx))
    return slot[1]() if slot is not None and slot[0]() is gidx else None


def _root(gidx):
    root = _linked(_roots, gidx)
    return gidx if root is None else root


def warming(gidx, count: bool = False) -> bool:
    """Whether the CUDA graph index `gidx` is warming up: its root index (`derived`) has made
    fewer than settings.tier_up() calls (counting this one where `count`), so DGL's kernels run it
    and it gets no entry yet (the module's Tier-up). Keyed by the object, as `seen`."""
    limit = settings.tier_up()
    gidx = _root(gidx)
    key = id(gidx)
    slot = _calls.get(key)
    if slot is None or slot[0]() is not gidx:
        slot = _calls[key] = [weakref.ref(gidx, forget_slot(_calls, key)), 0]
    if slot[1] >= limit:
        slot[1] = TIERED  # for good: a later, higher DGL_UGRAPH_TIER_UP leaves it with dgl_ugraph
        return False
    if count:
        slot[1] += 1
    return True


def seen(gidx) -> Optional[GraphEntry]:
    """The entry of a gidx object resolved before, without resolving one that was not."""
    slot = _by_gidx.get(id(gidx))
    if slot is not None and slot[0]() is gidx and slot[1].__class__ is GraphEntry:
        return slot[1]
    return None


def entry_for(gidx) -> Union[GraphEntry, str]:
    """The cached entry for a gidx, or the reason it cannot have one (then DGL runs the call)."""
    slot = _by_gidx.get(id(gidx))
    if slot is not None and slot[0]() is gidx:
        return slot[1]
    with _lock, _current_device_kept():
        result = _resolve(gidx)
        _by_gidx[id(gidx)] = (weakref.ref(gidx, forget_slot(_by_gidx, id(gidx))), result)
        if result.__class__ is GraphEntry:
            _recent[result.key] = result
            _recent.move_to_end(result.key)
            while len(_recent) > RECENT_GRAPHS:
                _recent.popitem(last=False)
    return result


def cached_graphs() -> int:
    """How many graph entries are alive (for tests and stats)."""
    return len(_by_arrays)


def clear():
    """Drops every entry; live graphs are rebuilt on their next call."""
    with _lock:
        _by_gidx.clear()
        _recent.clear()
        _by_arrays.clear()
        _calls.clear()
        _roots.clear()
        _reversed.clear()
