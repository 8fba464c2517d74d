"""Grid-search collection and predictor training; the body of `python -m dgl_ugraph tune`.

Collection (also driven by scripts/collect.py on our own GPUs): every graph of a suite x every
kernel call that DGL's GCN, GIN, SAGE and GAT layers issue, forward and backward (DGL_CALLS) x
feature widths x dtypes; per case, every configuration of the paper's grid (predictor.config_space)
is timed by autotune.time_configs. Results are appended case by case to gzip shards, so a run that
is stopped, killed or out of budget keeps all it finished, and the next run skips those cases.
A supervising process restarts the worker when a configuration kills the GPU context; the worker
then re-runs that case one configuration at a time to name the culprit, records it as failed and
goes on.

Training reads the shards, builds FEATURES for every (case, configuration) and fits LightGBM to
log(time / case best), grouped by graph; the model is exported as LightGBM's JSON dump plus a
manifest (predictor.py loads both without lightgbm).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import gzip
import hashlib
import io
import json
import math
import os
import pathlib
import random
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from dgl_ugraph import graph_suite as gs
from dgl_ugraph import settings
from dgl_ugraph.core import _ext
from dgl_ugraph.core.abstraction import DTYPE_NAMES, STRATEGIES, OpInfo, ParallelInfo, Signature
from dgl_ugraph.core.capability import candidates
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.core.ops import signature
from dgl_ugraph.core.timing import CudaRunner, DeviceLost, Refused, Timing, TimingPolicy, time_configs
from dgl_ugraph.selection import predictor
from dgl_ugraph.selection.predictor import CaseInfo, DeviceInfo

WIDTHS: Tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
GAT_HEADS = 4  # heads of GAT's layer-width calls: ft is (N, 4, F/4)
ATTENTION_HEADS: Tuple[int, ...] = (1, 4, 8)  # GAT's per-head calls (scores, edge softmax) at these head counts
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
IDTYPES = {"int32": torch.int32, "int64": torch.int64}
EXIT_DEVICE_LOST = 3


# ---- what DGL issues ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    """One distinct kernel call: on the graph G or its reverse, with operand (type, shape) where
    shapes are written F (layer width), H (heads) and D = F / H. `per_width` calls are collected
    at every F of WIDTHS (with H = GAT_HEADS); the others at every H of ATTENTION_HEADS."""

    graph: str  # "G" | "rev"
    edge_op: str
    gather_op: str
    a: Optional[Tuple[str, str]]
    b: Optional[Tuple[str, str]]
    per_width: bool


CALLS: Dict[str, Call] = {
    "copy_u_sum": Call("G", "copy_lhs", "sum", ("src", "F"), None, True),
    "copy_u_sum_rev": Call("rev", "copy_lhs", "sum", ("src", "F"), None, True),
    "u_mul_w_sum": Call("G", "mul", "sum", ("src", "F"), ("edge", "1"), True),
    "u_mul_w_sum_rev": Call("rev", "mul", "sum", ("src", "F"), ("edge", "1"), True),
    "copy_u_max": Call("G", "copy_lhs", "max", ("src", "F"), None, True),
    "gat_u_mul_e_sum": Call("G", "mul", "sum", ("src", "H,D"), ("edge", "H,1"), True),
    "gat_u_mul_e_sum_rev": Call("rev", "mul", "sum", ("src", "H,D"), ("edge", "H,1"), True),
    "gat_u_dot_v": Call("G", "dot", "none", ("src", "H,D"), ("dst", "H,D"), True),
    "gat_u_add_v": Call("G", "add", "none", ("src", "H,1"), ("dst", "H,1"), False),
    "gat_copy_e_max": Call("G", "copy_rhs", "max", None, ("edge", "H,1"), False),
    "gat_e_sub_v": Call("G", "sub", "none", ("edge", "H,1"), ("dst", "H,1"), False),
    "gat_copy_e_sum": Call("G", "copy_rhs", "sum", None, ("edge", "H,1"), False),
    "gat_e_div_v": Call("G", "div", "none", ("edge", "H,1"), ("dst", "H,1"), False),
    "gat_e_mul_v": Call("G", "mul", "none", ("edge", "H,1"), ("dst", "H,1"), False),
    "gat_copy_e_sum_rev": Call("rev", "copy_rhs", "sum", None, ("edge", "H,1"), False),
}

# (model, pass, call, how DGL 2.1 issues it): read from dgl/nn/pytorch/conv/{graphconv,ginconv,
# sageconv,gatconv}.py, dgl/ops/edge_softmax.py and dgl/backend/pytorch/sparse.py. GCN is
# GraphConv (norm 'both'; gcn_ew: with a scalar edge_weight, as after EdgeWeightNorm); GIN is
# GINConv's default 'sum' (its 'max' issues SAGE-pool's calls); SAGE 'mean' runs a sum in _gspmm
# and divides in torch. A backward of max/min issues no kernel: GSpMM.backward scatters the
# gradient with torch's scatter_add_ at argX (NO_KERNEL).
DGL_CALLS: Tuple[Tuple[str, str, str, str], ...] = (
    ("gcn", "fwd", "copy_u_sum", "update_all(copy_u, sum): _gspmm(G, copy_lhs, sum, X[N,F], None)"),
    ("gcn", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("gcn_ew", "fwd", "u_mul_w_sum", "update_all(u_mul_e, sum), edge_weight (E,) padded to (E,1): _gspmm(G, mul, sum, X[N,F], W[E,1])"),
    ("gcn_ew", "bwd", "u_mul_w_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), mul, sum, dZ[N,F], W[E,1]) (W needs no grad)"),
    ("gin", "fwd", "copy_u_sum", "update_all(copy_u, sum): _gspmm(G, copy_lhs, sum, X[N,F], None)"),
    ("gin", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("sage_mean", "fwd", "copy_u_sum", "update_all(copy_u, mean): _gspmm(G, copy_lhs, sum, X[N,F], None), / in_degrees in torch"),
    ("sage_mean", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("sage_gcn", "fwd", "copy_u_sum", "update_all(copy_u, sum): _gspmm(G, copy_lhs, sum, X[N,F], None)"),
    ("sage_gcn", "bwd", "copy_u_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), copy_lhs, sum, dZ[N,F], None)"),
    ("sage_pool", "fwd", "copy_u_max", "update_all(copy_u, max): _gspmm(G, copy_lhs, max, relu(fc_pool(X))[N,F], None)"),
    ("gin_max", "fwd", "copy_u_max", "update_all(copy_u, max): _gspmm(G, copy_lhs, max, X[N,F], None)"),
    ("gat", "fwd", "gat_u_add_v", "apply_edges(u_add_v): _gsddmm(G, add, el[N,H,1], er[N,H,1], u, v)"),
    ("gat", "fwd", "gat_copy_e_max", "EdgeSoftmax.forward: _gspmm(G, copy_rhs, max, None, e[E,H,1])"),
    ("gat", "fwd", "gat_e_sub_v", "EdgeSoftmax.forward: _gsddmm(G, sub, e[E,H,1], max[N,H,1], e, v)"),
    ("gat", "fwd", "gat_copy_e_sum", "EdgeSoftmax.forward: _gspmm(G, copy_rhs, sum, None, exp[E,H,1])"),
    ("gat", "fwd", "gat_e_div_v", "EdgeSoftmax.forward: _gsddmm(G, div, exp[E,H,1], sum[N,H,1], e, v)"),
    ("gat", "fwd", "gat_u_mul_e_sum", "update_all(u_mul_e, sum): _gspmm(G, mul, sum, ft[N,H,D], a[E,H,1])"),
    ("gat", "bwd", "gat_u_mul_e_sum_rev", "GSpMM.backward dX: gspmm(G.reverse(), mul, sum, dZ[N,H,D], a[E,H,1])"),
    ("gat", "bwd", "gat_u_dot_v", "GSpMM.backward dY (reduce_last): gsddmm(G, dot, ft[N,H,D], dZ[N,H,D], u, v)"),
    ("gat", "bwd", "gat_copy_e_sum", "EdgeSoftmax.backward: gspmm(G, copy_rhs, sum, None, out*grad[E,H,1])"),
    ("gat", "bwd", "gat_e_mul_v", "EdgeSoftmax.backward: gsddmm(G, mul, out[E,H,1], accum[N,H,1], e, v)"),
    ("gat", "bwd", "gat_copy_e_sum_rev", "GSDDMM.backward (add) dX, lhs u: gspmm(G.reverse(), copy_rhs, sum, None, dZ[E,H,1])"),
    ("gat", "bwd", "gat_copy_e_sum", "GSDDMM.backward (add) dY, rhs v: gspmm(G, copy_rhs, sum, None, dZ[E,H,1])"),
)
NO_KERNEL: Tuple[Tuple[str, str, str], ...] = (
    ("sage_pool", "bwd", "GSpMM.backward for max: dX.scatter_add_(0, argX, dZ) in torch"),
    ("gin_max", "bwd", "GSpMM.backward for max: dX.scatter_add_(0, argX, dZ) in torch"),
)


def call_users(call: str) -> str:
    return ";".join(sorted({f"{m}.{p}" for m, p, c, _ in DGL_CALLS if c == call}))


def operand_shape(template: str, width: int, heads: int) -> Tuple[int, ...]:
    dims = {"F": width, "1": 1, "H": heads, "D": max(1, width // heads)}
    return tuple(dims[d] for d in template.split(","))


# ---- cases -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GraphSource:
    """A graph of the suite: a graph_suite spec or a dataset file, with its split and the
    (dtype, idtype) variants collected on it."""

    name: str
    family: str  # degree | molecules | standin | dataset
    split: str  # train | holdout
    num_edges: int
    spec: Optional[gs.GraphSpec] = None
    path: Optional[str] = None
    variants: Tuple[Tuple[str, str], ...] = (("float32", "int32"),)


@dataclass(frozen=True)
class CaseSpec:
    graph: str
    call: str
    width: int  # F for per-width calls, H for per-head calls
    dtype: str
    idtype: str

    @property
    def key(self) -> str:
        return f"{self.graph}|{self.call}|{self.width}|{self.dtype}|{self.idtype}"

    @property
    def heads(self) -> int:
        """H of the operand shapes: the width itself for per-head calls, GAT_HEADS for GAT's
        layer-width calls, 1 where no operand has heads."""
        call = CALLS[self.call]
        if not call.per_width:
            return self.width
        return GAT_HEADS if any(o is not None and "H" in o[1] for o in (call.a, call.b)) else 1


def graph_cases(src: GraphSource, widths: Sequence[int] = WIDTHS,
                heads: Sequence[int] = ATTENTION_HEADS, calls: Sequence[str] = tuple(CALLS)) -> List[CaseSpec]:
    """A graph's cases in collection order: variant by variant (fp32 first), narrow before wide."""
    out = []
    for dtype, idtype in src.variants:
        for h in heads:
            out += [CaseSpec(src.name, c, h, dtype, idtype) for c in calls if not CALLS[c].per_width]
        for f in widths:
            out += [CaseSpec(src.name, c, f, dtype, idtype) for c in calls if CALLS[c].per_width]
    return out


def stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def is_audit(key: str, every: int) -> bool:
    return every > 0 and stable_hash("audit:" + key) % every == 0


def load_source(src: GraphSource) -> Tuple[np.ndarray, np.ndarray, int]:
    """(src, dst, num_nodes) as int32 numpy arrays; runs in a helper process in real runs."""
    if src.path is not None:
        with np.load(src.path) as z:
            return z["src"].astype(np.int32), z["dst"].astype(np.int32), int(z["num_nodes"])
    s, d, n = gs.make(src.spec)
    return s.numpy().astype(np.int32), d.numpy().astype(np.int32), n


# ---- the device side ---------------------------------------------------------------------------------

class CudaBackend:
    """Graphs, operands and runners on one GPU."""

    def __init__(self, device: str = "cuda"):
        self.device = torch.device(device)
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._ext = _ext
        self._tensors: Dict[tuple, torch.Tensor] = {}
        self._gen = torch.Generator(device=self.device).manual_seed(0)

    def device_info(self) -> DeviceInfo:
        return predictor.device_info(self.device)

    def compiled(self) -> frozenset:
        return self._ext.compiled_cuda_keys()

    def core_hash(self) -> str:
        return str(self._ext.core().build_info().get("cuda_source_hash", ""))

    def graph(self, src: np.ndarray, dst: np.ndarray, n: int):
        s = torch.from_numpy(src).to(self.device, non_blocking=False)
        d = torch.from_numpy(dst).to(self.device, non_blocking=False)
        return UGraph.from_coo(s, d, n, n, torch.int32)

    def with_idtype(self, graph, idtype: str):
        return graph if graph.idtype == IDTYPES[idtype] else graph.to(idtype=IDTYPES[idtype])

    def reverse(self, graph):
        return graph.reverse()

    def operand(self, graph, rows: int, shape: Tuple[int, ...], dtype: str) -> torch.Tensor:
        """Random values in [0.5, 1.5) (never zeros: they can run faster than real data), shared
        by consecutive calls of one width; the least recently used of more than 8 are dropped."""
        key = (id(graph), rows, shape, dtype)
        t = self._tensors.pop(key, None)
        if t is None:
            t = torch.rand((rows,) + shape, generator=self._gen, device=self.device).to(DTYPES[dtype]) + 0.5
        self._tensors[key] = t
        while len(self._tensors) > 8:
            self._tensors.pop(next(iter(self._tensors)))
        return t

    def runner(self, graph, op: OpInfo, first: ParallelInfo):
        return CudaRunner(graph, op, first)

    def release(self) -> None:
        self._tensors.clear()
        if self.alive():
            torch.cuda.empty_cache()

    def alive(self) -> bool:
        """False once the context has a sticky error (every later CUDA call would fail)."""
        try:
            torch.cuda.synchronize(self.device)
            return True
        except Exception:  # noqa: BLE001 - RuntimeError, or torch.AcceleratorError in newer torch
            return False


def make_op(backend, graph, call: Call, width: int, heads: int, dtype: str) -> OpInfo:
    def operand(spec):
        if spec is None:
            return None, "null"
        ttype, template = spec
        return backend.operand(graph, graph.rows(ttype), operand_shape(template, width, heads), dtype), ttype

    a, at = operand(call.a)
    b, bt = operand(call.b)
    return OpInfo(call.edge_op, call.gather_op, a, at, b, bt, "edge" if call.gather_op == "none" else "dst")


def beyond_tilings(strategy: str, width: int) -> List[int]:
    """The next grid tiling past max_tiling, timed on audited cases to show it never pays."""
    limit = predictor.max_tiling(strategy, width)
    return [t for t in predictor.GRID_TILINGS if t > limit][:1]


# ---- shards -------------------------------------------------------------------------------------------

CASE_COLUMNS = (
    "case_id", "run_id", "device", "sm_count", "l2_bytes", "cc", "graph", "family", "split", "call", "models",
    "direction", "F", "heads", "dtype", "idtype", "num_src", "num_dst", "num_edges", "mean_deg", "std_deg",
    "max_deg", "empty_rows", "edge_op", "gather_op", "a_type", "b_type", "c_type", "out_len", "reduce_size",
    "broadcast", "width", "n_configs", "n_timed", "best_config", "best_ms", "status", "audit", "starved_batches",
    "wall_s", "message",
)
TIMING_COLUMNS = ("case_id", "strategy", "g", "t", "status", "ms", "first_ms", "reps", "message")


def read_gzip_text(path: pathlib.Path) -> str:
    """The text of a gzip file made of appended members, up to the last complete member (a
    member cut short by a killed writer is dropped)."""
    data = pathlib.Path(path).read_bytes()
    out = []
    while data:
        d = zlib.decompressobj(wbits=31)
        try:
            chunk = d.decompress(data)
        except zlib.error:
            break
        if not d.eof:
            break
        out.append(chunk)
        data = d.unused_data
    return b"".join(out).decode()


def read_rows(path: pathlib.Path) -> List[dict]:
    return list(csv.DictReader(io.StringIO(read_gzip_text(path))))


class Shards:
    """This run's two files, cases-*.csv.gz and timings-*.csv.gz, each appended one gzip member
    per case (timings first, so a case row means its timings are complete)."""

    def __init__(self, out_dir: pathlib.Path, tag: str):
        self.cases_path = out_dir / f"cases-{tag}.csv.gz"
        self.timings_path = out_dir / f"timings-{tag}.csv.gz"

    @staticmethod
    def _append(path: pathlib.Path, columns, rows: Sequence[dict]) -> None:
        buf = io.StringIO()
        w = csv.DictWriter(buf, columns, lineterminator="\n")
        if not path.exists() or path.stat().st_size == 0:
            w.writeheader()
        w.writerows(rows)
        # Flushed to the OS at once, so a killed run loses nothing it finished (no fsync: a lost
        # machine takes the output folder with it anyway).
        with open(path, "ab") as fh:
            fh.write(gzip.compress(buf.getvalue().encode(), compresslevel=6))

    def write(self, case_row: dict, timing_rows: Sequence[dict]) -> None:
        self._append(self.timings_path, TIMING_COLUMNS, timing_rows)
        self._append(self.cases_path, CASE_COLUMNS, [case_row])


def collected_files(dirs: Iterable[pathlib.Path], prefix: str) -> List[pathlib.Path]:
    files = []
    for d in dirs:
        d = pathlib.Path(d)
        if d.is_dir():
            files += sorted(d.rglob(f"{prefix}-*.csv.gz"))
    return files


def done_keys(dirs: Iterable[pathlib.Path], device_name: str) -> set:
    """Cases already collected on this GPU model (any status: a failed case is not retried)."""
    keys = set()
    for path in collected_files(dirs, "cases"):
        for row in read_rows(path):
            if row.get("device") == device_name:
                keys.add(row["case_id"])
    return keys


class State:
    """What a restarted worker must know: the case that was running when the GPU context died,
    the configuration being tried in isolation, and the configurations that killed it before."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        try:
            self.data = json.loads(path.read_text())
        except (OSError, ValueError):
            self.data = {}
        self.data.setdefault("bad", {})

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def suspect(self, key: Optional[str], trying: Optional[str] = None) -> None:
        self.data["suspect"], self.data["trying"] = key, trying
        self.save()

    def bad_configs(self, key: str) -> List[str]:
        return list(self.data["bad"].get(key, []))


# ---- the collector --------------------------------------------------------------------------------------

TIERS: Tuple[Tuple[float, float], ...] = ((3e5, 0.25), (3e6, 0.40), (math.inf, 0.35))


class TierScheduler:
    """Spreads the budget over graph sizes: the next graph comes from the size tier (small,
    medium, large by edges) that has had the least of its share so far, so a run that stops at
    its budget has measured all sizes rather than only the small graphs."""

    def __init__(self, sources: Sequence[GraphSource], tiers=TIERS):
        self.tiers = tiers
        self.queues: List[List[GraphSource]] = [[] for _ in tiers]
        for s in sources:
            self.queues[self.tier_of(s)].append(s)
        self.spent = [0.0] * len(tiers)

    def tier_of(self, src: GraphSource) -> int:
        return next(i for i, (limit, _) in enumerate(self.tiers) if src.num_edges < limit)

    def heads(self) -> List[GraphSource]:
        return [q[0] for q in self.queues if q]

    def pop(self) -> Optional[GraphSource]:
        live = [i for i, q in enumerate(self.queues) if q]
        if not live:
            return None
        i = min(live, key=lambda k: (self.spent[k] / self.tiers[k][1], k))
        return self.queues[i].pop(0)

    def charge(self, src: GraphSource, seconds: float) -> None:
        self.spent[self.tier_of(src)] += seconds


@dataclass
class CollectConfig:
    out_dir: pathlib.Path
    run_id: str
    deadline: float  # on `clock`
    resume_dirs: Tuple[pathlib.Path, ...] = ()
    widths: Tuple[int, ...] = WIDTHS
    heads: Tuple[int, ...] = ATTENTION_HEADS
    calls: Tuple[str, ...] = tuple(CALLS)
    policy: TimingPolicy = TimingPolicy()
    audit_every: int = 16
    max_isolation_restarts: int = 3


@dataclass
class CollectStats:
    cases: int = 0
    timings: int = 0
    failed: int = 0
    stop_reason: str = ""
    by_split: Dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Collector:
    """Runs the cases of a graph suite on a backend (CudaBackend, or a fake in tests)."""

    def __init__(self, backend, cfg: CollectConfig, clock: Callable[[], float] = time.time,
                 log: Callable[[str], None] = print, progress=None, loader=None):
        self.backend, self.cfg, self.clock, self.log, self.progress = backend, cfg, clock, log, progress
        self.loader = loader
        self.dev = backend.device_info()
        self.compiled = backend.compiled()
        self.tag = f"{self.dev.slug}-{cfg.run_id}"
        cfg.out_dir.mkdir(parents=True, exist_ok=True)
        self.shards = Shards(cfg.out_dir, self.tag)
        self.state = State(cfg.out_dir / f"state-{cfg.run_id}.json")
        self.stats = CollectStats()
        self.done = done_keys((cfg.out_dir,) + tuple(cfg.resume_dirs), self.dev.name)
        # A case's seconds ~ configurations x (overhead + per_unit x edges x width), both learned
        # as cases finish (overhead from small cases, per_unit from large ones).
        self._overhead, self._per_unit = 1e-4, 1e-11
        self._last: Optional[Tuple[str, int, float]] = None  # (graph, width, seconds) of the last case
        self._sched: Optional[TierScheduler] = None
        self._pending: Dict[str, object] = {}  # graph name -> AsyncResult of `loader` (a multiprocessing pool)

    # -- graphs
    def _prefetch(self, sources: Sequence[GraphSource]) -> None:
        if self.loader is None:
            return
        for s in sources:
            if s.name not in self._pending:
                self._pending[s.name] = self.loader.apply_async(load_source, (s,))

    def _load(self, src: GraphSource):
        pending = self._pending.pop(src.name, None)
        return pending.get() if pending is not None else load_source(src)

    # -- the run
    def plan(self, sources: Sequence[GraphSource]) -> None:
        """Orders the graphs still to do and starts generating the first ones."""
        todo = [s for s in sources if any(c.key not in self.done for c in self._cases(s))]
        self._sched = TierScheduler(todo)
        total = sum(len([c for c in self._cases(s) if c.key not in self.done]) for s in todo)
        if self.progress is not None:
            self.progress.start(total, self.cfg.deadline)
        self.log(f"{self.dev.name} ({self.dev.sm_count} SMs, L2 {self.dev.l2_bytes >> 20} MiB): "
                 f"{len(todo)} graphs, {total} cases to do ({len(self.done)} done before)")
        self._prefetch(self._sched.heads())

    def run(self, sources: Optional[Sequence[GraphSource]] = None) -> CollectStats:
        """Runs graph after graph until the suite is done or no case fits before the deadline
        (a graph whose next case would overrun is left for the next run; smaller ones go on)."""
        if self._sched is None:
            self.plan(sources)
        sched, cut_short = self._sched, False
        while self.clock() < self.cfg.deadline:
            src = sched.pop()
            if src is None:
                break
            self._prefetch(sched.heads())
            t0 = self.clock()
            cut_short |= self._run_graph(src)
            sched.charge(src, self.clock() - t0)
        self.stats.stop_reason = "budget" if cut_short or sched.heads() else "suite complete"
        return self.stats

    def _cases(self, src: GraphSource) -> List[CaseSpec]:
        return graph_cases(src, self.cfg.widths, self.cfg.heads, self.cfg.calls)

    def _estimate(self, num_edges: int, case: CaseSpec) -> float:
        """Seconds the case will take: the graph's previous case scaled by the width (a graph's
        cases go narrow to wide), else the learned model."""
        if self._last is not None and self._last[0] == case.graph:
            return self._last[2] * max(case.width / self._last[1], 1.0)
        return 150 * (self._overhead + self._per_unit * num_edges * case.width)

    def _learn(self, case: CaseSpec, num_edges: int, n_configs: int, seconds: float) -> None:
        per_config = seconds / max(n_configs, 1)
        units = num_edges * case.width
        if units < 1e6:
            self._overhead = 0.5 * self._overhead + 0.5 * per_config
        else:
            self._per_unit = 0.5 * self._per_unit + 0.5 * max(per_config - self._overhead, 0.0) / units
        self._last = (case.graph, case.width, seconds)

    def _run_graph(self, src: GraphSource) -> bool:
        """Runs a graph's cases; True when the budget cut it short (or left it unstarted)."""
        cases = [c for c in self._cases(src) if c.key not in self.done]
        if self.clock() + self._estimate(src.num_edges, cases[0]) > self.cfg.deadline:
            return True
        t0 = self.clock()
        try:
            s, d, n = self._load(src)
            base = self.backend.graph(s, d, n)
            del s, d
        except Exception as exc:  # noqa: BLE001 - left for the next run, not recorded as failed
            if not self.backend.alive():
                raise DeviceLost(f"{type(exc).__name__}: {exc}") from exc
            self.log(f"{src.name}: could not build the graph ({type(exc).__name__}: {exc}); skipped in this run")
            self.backend.release()
            return False
        graphs: Dict[Tuple[str, str], object] = {}
        done_here = 0
        stopped = False
        try:
            for case in cases:
                if self.clock() + self._estimate(base.num_edges, case) > self.cfg.deadline:
                    stopped = True
                    break
                call = CALLS[case.call]
                gkey = (call.graph, case.idtype)
                if gkey not in graphs:
                    g = self.backend.with_idtype(base, case.idtype)
                    graphs[gkey] = self.backend.reverse(g) if call.graph == "rev" else g
                self._run_case(src, graphs[gkey], case)
                done_here += 1
        finally:
            del graphs, base
            self.backend.release()
        self.log(f"{src.name:36} {src.split:7} E={src.num_edges:<9d} {done_here:3d} cases in "
                 f"{self.clock() - t0:6.1f} s (run total {self.stats.cases}, {self.stats.timings} timings)")
        return stopped

    def _run_case(self, src: GraphSource, graph, case: CaseSpec) -> None:
        t0 = self.clock()
        call = CALLS[case.call]
        row = self._case_row(src, graph, case, call)
        timings: List[Timing] = []
        deaths = self.state.data.get("deaths", {}).get(case.key, 0)
        try:
            if deaths > self.cfg.max_isolation_restarts:
                raise RuntimeError(f"the GPU context died {deaths} times on this case outside any configuration")
            op = make_op(self.backend, graph, call, case.width, case.heads, case.dtype)
            sig, _ = signature(graph, op)
            row.update(out_len=sig.out_len, reduce_size=sig.reduce_size, broadcast=int(sig.broadcast), width=sig.width)
            allowed = candidates(sig, graph.num_edges, self.compiled)
            configs = predictor.config_space(sig, allowed)
            if not configs:
                raise Refused(f"no compiled strategy runs {DTYPE_NAMES[sig.dtype]} {case.call}")
            audit = is_audit(case.key, self.cfg.audit_every)
            extra = [ParallelInfo(s, g, t) for s in allowed for t in beyond_tilings(s, sig.width)
                     for g in predictor.GRID_GROUPINGS] if audit else []
            policy = dataclasses.replace(self.cfg.policy, cut=None) if audit else self.cfg.policy
            bad = self.state.bad_configs(case.key)
            isolate = self.state.data.get("suspect") == case.key
            runnable = [c for c in configs if str(c) not in bad]
            runner = self.backend.runner(graph, op, runnable[0] if runnable else configs[0])
            self.state.suspect(case.key)

            def on_try(c: ParallelInfo) -> None:
                self.state.suspect(case.key, str(c))

            timings = time_configs(runner, runnable, policy, extra=[c for c in extra if str(c) not in bad],
                                   isolate=isolate, on_try=on_try if isolate else None)
            timings += [Timing(c, "error", message="killed the GPU context") for c in configs if str(c) in bad]
            ok = [t for t in timings if t.status in ("ok", "cut")]
            best = min(ok, key=lambda t: t.ms) if ok else None
            row.update(n_configs=len(configs), n_timed=len(ok), audit=int(audit),
                       starved_batches=runner.starved_batches,
                       best_config=str(best.config) if best else "", best_ms=round(best.ms, 6) if best else "",
                       status="ok" if ok else "failed",
                       message="" if ok else "no configuration ran: " + "; ".join(sorted({t.message for t in timings})[:3]))
            if best is not None:
                self._learn(case, graph.num_edges, len(configs), self.clock() - t0)
        except DeviceLost:
            raise
        except Exception as exc:  # noqa: BLE001 - a case that cannot be built is recorded, never fatal
            if not self.backend.alive():  # not this case's fault alone: let a new worker retry it
                raise DeviceLost(f"{type(exc).__name__}: {exc}") from exc
            row.update(status="failed", message=f"{type(exc).__name__}: {exc}"[:300])
        row["wall_s"] = round(self.clock() - t0, 4)
        self.shards.write(row, [self._timing_row(case, t) for t in timings])
        self.state.data["bad"].pop(case.key, None)
        self.state.data.get("deaths", {}).pop(case.key, None)
        self.state.suspect(None)
        self.done.add(case.key)
        self.stats.cases += 1
        self.stats.timings += len(timings)
        self.stats.by_split[src.split] += 1
        if row["status"] != "ok":
            self.stats.failed += 1
        if self.progress is not None:
            self.progress.update(self.stats.cases, self.clock())

    def _case_row(self, src: GraphSource, graph, case: CaseSpec, call: Call) -> dict:
        st = graph.stats
        return dict(case_id=case.key, run_id=self.cfg.run_id, device=self.dev.name, sm_count=self.dev.sm_count,
                    l2_bytes=self.dev.l2_bytes, cc=f"{self.dev.major}.{self.dev.minor}", graph=src.name,
                    family=src.family, split=src.split, call=case.call, models=call_users(case.call),
                    direction=call.graph, F=case.width, heads=case.heads, dtype=case.dtype, idtype=case.idtype,
                    num_src=graph.num_src, num_dst=graph.num_dst, num_edges=graph.num_edges,
                    mean_deg=round(st.mean, 6), std_deg=round(st.std, 6), max_deg=st.max, empty_rows=st.empty_rows,
                    edge_op=call.edge_op, gather_op=call.gather_op, a_type=call.a[0] if call.a else "null",
                    b_type=call.b[0] if call.b else "null", c_type="edge" if call.gather_op == "none" else "dst",
                    out_len="", reduce_size="", broadcast="", width="", n_configs=0, n_timed=0, best_config="",
                    best_ms="", status="", audit=0, starved_batches=0, wall_s=0.0, message="")

    @staticmethod
    def _timing_row(case: CaseSpec, t: Timing) -> dict:
        def num(x):
            return "" if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, 6)
        return dict(case_id=case.key, strategy=t.config.strategy, g=t.config.grouping, t=t.config.tiling,
                    status=t.status, ms=num(t.ms), first_ms=num(t.first_ms), reps=t.reps, message=t.message[:200])

    def note_device_lost(self) -> None:
        """After DeviceLost: a case being tried in isolation has its configuration marked bad;
        a case that died in batch mode will be re-run in isolation by the next worker."""
        suspect, trying = self.state.data.get("suspect"), self.state.data.get("trying")
        if suspect and trying:
            self.state.data["bad"].setdefault(suspect, []).append(trying)
            self.state.data["trying"] = None
        elif suspect:
            deaths = self.state.data.setdefault("deaths", {})
            deaths[suspect] = deaths.get(suspect, 0) + 1
        self.state.data["restarts"] = self.state.data.get("restarts", 0) + 1
        self.state.save()


def warm_modules(backend, variants: Iterable[Tuple[str, str]], calls: Sequence[str], compiled: frozenset,
                 log: Callable[[str], None] = print) -> int:
    """Runs every configuration of every call once on a tiny graph, so the CUDA modules are
    loaded before anything is timed (lazy loading would otherwise land in a screening run)."""
    rng = np.random.default_rng(0)
    n = 64
    base = backend.graph(rng.integers(0, n, 512).astype(np.int32), rng.integers(0, n, 512).astype(np.int32), n)
    runs = 0
    for dtype, idtype in variants:
        g = backend.with_idtype(base, idtype)
        rev = backend.reverse(g)
        for name in calls:
            call = CALLS[name]
            graph = rev if call.graph == "rev" else g
            spec = CaseSpec("warm-up", name, 64 if call.per_width else 4, dtype, idtype)
            op = make_op(backend, graph, call, spec.width, spec.heads, dtype)
            sig, _ = signature(graph, op)
            configs = predictor.config_space(sig, candidates(sig, graph.num_edges, compiled))
            if not configs:
                continue
            try:
                runner = backend.runner(graph, op, configs[0])
                time_configs(runner, configs, TimingPolicy(cut=0.0, max_reps=1))
            except DeviceLost:
                raise
            except Exception as exc:  # noqa: BLE001 - the case itself will record what fails
                log(f"warm-up: {name} {dtype}/{idtype}: {type(exc).__name__}: {exc}")
                continue
            runs += len(configs)
    backend.release()
    return runs


# ---- reading collected data and training ------------------------------------------------------------------

GOOD = ("ok", "cut")  # statuses that carry a time for a configuration of the grid


@dataclass
class Case:
    row: dict
    configs: List[ParallelInfo]
    ms: np.ndarray  # per config, seconds-free milliseconds

    @property
    def best_ms(self) -> float:
        return float(self.ms.min())

    def info(self) -> Tuple[CaseInfo, Signature, DeviceInfo]:
        r = self.row
        case = CaseInfo(int(r["num_src"]), int(r["num_dst"]), int(r["num_edges"]), 32 if r["idtype"] == "int32" else 64,
                        float(r["mean_deg"]), float(r["std_deg"]), int(r["max_deg"]), int(r["empty_rows"]))
        sig = Signature(r["edge_op"], r["gather_op"], r["a_type"], r["b_type"], r["c_type"], DTYPES[r["dtype"]],
                        int(r["out_len"]), int(r["reduce_size"]), r["broadcast"] == "1", "cuda")
        major, minor = (int(x) for x in r["cc"].split("."))
        dev = DeviceInfo(r["device"], int(r["sm_count"]), int(r["l2_bytes"]), major, minor)
        return case, sig, dev

    def allowed(self) -> List[str]:
        return [s for s in STRATEGIES if any(c.strategy == s for c in self.configs)]


def load_cases(paths: Sequence[pathlib.Path]) -> List[Case]:
    """Complete cases (status ok) from cases/timings shards; a case collected twice keeps its
    latest run."""
    rows: Dict[Tuple[str, str], dict] = {}
    for path in paths:
        for row in read_rows(path):
            if row.get("status") == "ok":
                rows[(row["device"], row["case_id"])] = row
    wanted = {(r["run_id"], r["case_id"]): key for key, r in rows.items()}
    timings: Dict[Tuple[str, str], List[dict]] = defaultdict(list)
    for path in paths:
        tpath = path.with_name(path.name.replace("cases-", "timings-", 1))
        if not tpath.exists():
            continue
        run_id = next(iter(read_rows(path)), {}).get("run_id")
        for t in read_rows(tpath):
            key = wanted.get((run_id, t["case_id"]))
            if key is not None and t["status"] in GOOD:
                timings[key].append(t)
    cases = []
    for key, row in rows.items():
        ts = timings.get(key)
        if not ts:
            continue
        configs = [ParallelInfo(t["strategy"], int(t["g"]), int(t["t"])) for t in ts]
        cases.append(Case(row, configs, np.array([float(t["ms"]) for t in ts])))
    cases.sort(key=lambda c: (c.row["device"], c.row["case_id"]))
    return cases


def data_hash(paths: Sequence[pathlib.Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths, key=lambda p: p.name):
        h.update(p.name.encode())
        h.update(read_gzip_text(p).encode())
    return h.hexdigest()[:16]


TARGET_CLIP = math.log(16.0)


def case_matrix(case: Case) -> Tuple[np.ndarray, np.ndarray]:
    """(X, y) of one case: FEATURES of each timed configuration and log(time / best), clipped
    (a configuration 16x off the best is as useless as one 100x off)."""
    info, sig, dev = case.info()
    configs, x_all = predictor.feature_matrix(info, sig, dev, case.allowed())
    index = {c: i for i, c in enumerate(configs)}
    keep = [i for i, c in enumerate(case.configs) if c in index]
    x = x_all[[index[case.configs[i]] for i in keep]]
    y = np.minimum(np.log(case.ms[keep] / case.best_ms), TARGET_CLIP)
    return x, y


def graph_group(case: Case) -> str:
    return case.row["graph"]


def decision_quality(cases: Sequence[Case], choose: Callable[[Case], ParallelInfo]) -> Dict[str, float]:
    """Speed of the chosen configuration relative to the best measured (1.0 = oracle)."""
    ratios = []
    for case in cases:
        c = choose(case)
        ms = dict(zip(case.configs, case.ms))
        ratios.append(case.best_ms / ms[c] if c in ms else 0.0)
    r = np.array(ratios) if ratios else np.array([math.nan])
    pos = r[r > 0]
    return {"geomean": float(np.exp(np.mean(np.log(pos)))) if pos.size else math.nan,
            "p10": float(np.percentile(r, 10)), "min": float(r.min()), "cases": int(len(ratios)),
            "unmeasured_choice": int((r == 0).sum())}


def predictor_choice(model_predict: Callable[[np.ndarray], np.ndarray], higher_is_better: bool = False):
    """A chooser over the measured configurations of a case for a raw scoring function."""
    sign = -1.0 if higher_is_better else 1.0

    def choose(case: Case) -> ParallelInfo:
        info, sig, dev = case.info()
        configs, x = predictor.feature_matrix(info, sig, dev, case.allowed())
        cost = sign * model_predict(x)
        measured = set(case.configs)
        for i in np.argsort(cost, kind="stable"):
            if configs[i] in measured:
                return configs[i]
        return configs[int(np.argmin(cost))]
    return choose


@dataclass
class TrainResult:
    booster: object
    params: dict
    validation: Dict[str, float]
    n_train_cases: int
    n_val_cases: int
    n_rows: int
    graphs: List[str]


DEFAULT_PARAMS = {
    "objective": "regression", "learning_rate": 0.1, "num_leaves": 31, "min_data_in_leaf": 20,
    "feature_fraction": 0.9, "bagging_fraction": 0.9, "bagging_freq": 1, "lambda_l2": 1.0,
    "verbose": -1, "seed": 7, "deterministic": True, "force_row_wise": True,
}


def train(cases: Sequence[Case], num_trees: int = 150, val_fraction: float = 0.2, params: Optional[dict] = None,
          log: Callable[[str], None] = print) -> TrainResult:
    """LightGBM on log(time / best), grouped by graph: a seeded fraction of the training graphs
    validates (early stopping, and the decision quality the manifest records)."""
    import lightgbm as lgb
    params = {**DEFAULT_PARAMS, **(params or {})}
    graphs = sorted({graph_group(c) for c in cases})
    val_graphs = {g for g in graphs if stable_hash("val:" + g) % 100 < val_fraction * 100} if len(graphs) > 1 else set()
    if len(graphs) > 1 and not val_graphs:
        val_graphs = {graphs[0]}
    parts = {"train": ([], []), "val": ([], [])}
    tr_cases, va_cases = [], []
    for c in cases:
        x, y = case_matrix(c)
        part = "val" if graph_group(c) in val_graphs else "train"
        parts[part][0].append(x)
        parts[part][1].append(y)
        (va_cases if part == "val" else tr_cases).append(c)
    if not parts["train"][0]:
        raise ValueError("no training cases")
    xt, yt = np.concatenate(parts["train"][0]), np.concatenate(parts["train"][1])
    names = list(predictor.FEATURES)
    dtrain = lgb.Dataset(xt, yt, feature_name=names, free_raw_data=False)
    callbacks = [lgb.log_evaluation(0)]
    valid = []
    if parts["val"][0]:
        xv, yv = np.concatenate(parts["val"][0]), np.concatenate(parts["val"][1])
        valid = [lgb.Dataset(xv, yv, reference=dtrain, feature_name=names)]
        callbacks.append(lgb.early_stopping(20, verbose=False))
    booster = lgb.train(params, dtrain, num_boost_round=num_trees, valid_sets=valid, callbacks=callbacks)
    if valid and booster.best_iteration > 0:
        booster = lgb.train(params, dtrain, num_boost_round=booster.best_iteration)
    quality = decision_quality(va_cases, predictor_choice(booster.predict)) if va_cases else {}
    log(f"trained {booster.num_trees()} trees on {len(tr_cases)} cases ({len(yt)} rows) of "
        f"{len(graphs) - len(val_graphs)} graphs; validation on {len(va_cases)} cases of {len(val_graphs)} graphs: {quality}")
    return TrainResult(booster, params, quality, len(tr_cases), len(va_cases), int(len(yt)), graphs)


def export(result: TrainResult, out_dir: pathlib.Path, family: str, sources: Sequence[pathlib.Path],
           devices: Sequence[str]) -> pathlib.Path:
    """Writes <family>.json (LightGBM's dump_model) and <family>.manifest.json; returns the model path."""
    import lightgbm as lgb
    out_dir.mkdir(parents=True, exist_ok=True)
    dump = result.booster.dump_model()
    model_path = out_dir / f"{family}.json"
    manifest = {
        "format": predictor.FORMAT, "feature_version": predictor.FEATURE_VERSION, "features": list(predictor.FEATURES),
        "target": "log(ms / case best ms), clipped at log(16): lower is faster", "higher_is_better": False,
        "objective": result.params.get("objective"), "params": result.params, "lightgbm": lgb.__version__,
        "num_trees": result.booster.num_trees(), "family": family, "devices": sorted(set(devices)),
        "training_data": {"files": sorted(p.name for p in sources), "sha256_16": data_hash(sources),
                          "cases": result.n_train_cases, "validation_cases": result.n_val_cases,
                          "rows": result.n_rows, "graphs": len(result.graphs)},
        "validation": result.validation,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    for path, obj in ((model_path, dump), (predictor.manifest_path(model_path), manifest)):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(obj, separators=(",", ":")) if obj is dump else json.dumps(obj, indent=1))
        os.replace(tmp, path)
    return model_path


# ---- running it: a supervisor and its worker -------------------------------------------------------------

class Progress:
    """A one-line progress bar on stderr (cases done, and time against the budget)."""

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream, self.width = stream, width
        self.total, self.deadline, self.t0, self._last = 0, 0.0, time.time(), 0.0

    def start(self, total: int, deadline: float) -> None:
        self.total, self.deadline, self.t0 = total, deadline, time.time()

    def update(self, done: int, now: float) -> None:
        if now - self._last < 0.5 and done < self.total:
            return
        self._last = now
        frac = min(1.0, max((now - self.t0) / max(self.deadline - self.t0, 1e-9), done / max(self.total, 1)))
        bar = "#" * int(frac * self.width)
        self.stream.write(f"\r[{bar:<{self.width}}] {done}/{self.total} cases, {now - self.t0:5.0f} s of "
                          f"{self.deadline - self.t0:.0f} s")
        self.stream.flush()

    def print(self, message: str) -> None:
        """A log line above the bar."""
        self.stream.write("\r" + message.ljust(self.width + 40) + "\n")
        self._last = 0.0
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def supervise(worker_cmd: List[str], deadline: float, max_restarts: int = 8, log: Callable[[str], None] = print) -> int:
    """Runs the worker until it finishes; a worker that lost its GPU context (exit 3) or died of a
    signal is restarted (it resumes from its shards) while time and restarts remain."""
    restarts = 0
    while True:
        rc = subprocess.call(worker_cmd)
        if rc == 0:
            return 0
        if rc != EXIT_DEVICE_LOST and rc >= 0:
            log(f"worker failed with exit code {rc}; not restarting")
            return rc
        restarts += 1
        if restarts > max_restarts or time.time() >= deadline - 5:
            log(f"worker lost the GPU (exit {rc}); {restarts - 1} restarts done, stopping")
            return rc
        log(f"worker lost the GPU (exit {rc}): restart {restarts} of {max_restarts}")


def run_worker(sources: Sequence[GraphSource], cfg: CollectConfig, progress: Optional[Progress] = None,
               backend=None, log: Callable[[str], None] = print) -> int:
    """The worker's body: returns its exit code (0 done or out of budget, EXIT_DEVICE_LOST)."""
    import multiprocessing
    backend = backend or CudaBackend()
    if progress is not None:
        log = progress.print
    # Graphs are generated in helper processes (numpy work that would otherwise hold the GIL
    # while kernels are being queued); "spawn", as this process has a CUDA context.
    loader = multiprocessing.get_context("spawn").Pool(2)
    collector = Collector(backend, cfg, progress=progress, loader=loader, log=log)
    try:
        collector.plan(sources)  # the first graphs are generated while the modules load
        variants = sorted({v for s in sources for v in s.variants})
        t = time.time()
        runs = warm_modules(backend, variants, cfg.calls, collector.compiled, log)
        log(f"warm-up: {runs} configurations loaded in {time.time() - t:.1f} s")
        stats = collector.run()
    except DeviceLost as exc:
        collector.note_device_lost()
        log(f"GPU context lost ({exc}); the supervisor restarts the worker")
        loader.terminate()
        sys.stdout.flush()
        os._exit(EXIT_DEVICE_LOST)  # the context is gone: skip CUDA teardown
    finally:
        if progress is not None:
            progress.close()
    loader.terminate()
    log(f"worker: {stats.cases} cases ({stats.failed} failed), {stats.timings} timings; stopped: {stats.stop_reason}")
    return 0


def audit_summary(case_rows: Sequence[dict], timing_rows: Sequence[dict], cut: float) -> dict:
    """Evidence for the pruning: on audited cases (every configuration repeated, and the next
    tiling past the limit timed too), would the cut have dropped the winner, and did a tiling
    past the limit ever beat the grid's best?"""
    by_case: Dict[str, List[dict]] = defaultdict(list)
    for t in timing_rows:
        by_case[t["case_id"]].append(t)
    lost, regrets, beyond_wins, beyond_best, n = 0, [], 0, [], 0
    for row in case_rows:
        if row.get("audit") != "1" or row.get("status") != "ok":
            continue
        ts = by_case.get(row["case_id"], [])
        grid = [t for t in ts if t["status"] == "ok" and t["ms"] and t["first_ms"]]
        if not grid:
            continue
        n += 1
        best = min(float(t["ms"]) for t in grid)
        first_best = min(float(t["first_ms"]) for t in grid)
        kept = [float(t["ms"]) for t in grid if float(t["first_ms"]) <= cut * first_best]
        if min(kept) > best:
            lost += 1
        regrets.append(min(kept) / best)
        beyond = [float(t["ms"]) for t in ts if t["status"] == "beyond" and t["ms"]]
        if beyond:
            beyond_best.append(best / min(beyond))
            beyond_wins += min(beyond) < best
    return {"audited_cases": n, "cut_factor": cut, "cut_lost_winner": lost,
            "cut_worst_slowdown": max(regrets) if regrets else None,
            "beyond_limit_faster_cases": beyond_wins,
            "beyond_limit_best_speedup": max(beyond_best) if beyond_best else None}


def finish_meta(meta_path: pathlib.Path, out_dir: pathlib.Path, tag: str, cut: float) -> dict:
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    cases_path, timings_path = out_dir / f"cases-{tag}.csv.gz", out_dir / f"timings-{tag}.csv.gz"
    cases = read_rows(cases_path) if cases_path.exists() else []
    timings = read_rows(timings_path) if timings_path.exists() else []
    status = defaultdict(int)
    for t in timings:
        status[t["status"]] += 1
    meta.update(finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                cases=len(cases), cases_ok=sum(r["status"] == "ok" for r in cases),
                cases_by_split={s: sum(r["split"] == s for r in cases) for s in ("train", "holdout")},
                timings=len(timings), timings_by_status=dict(status),
                starved_batches=sum(int(r["starved_batches"] or 0) for r in cases),
                audit=audit_summary(cases, timings, cut))
    tmp = meta_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, meta_path)
    return meta


def new_run_id() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{random.randrange(16 ** 4):04x}"


# ---- `python -m dgl_ugraph tune` ---------------------------------------------------------------------------

def tune_suite(quick: bool) -> List[GraphSource]:
    """The user's own re-collection: the synthetic families (no held-out graphs: every graph
    trains); --quick takes a seeded sample of the smaller ones."""
    specs = gs.synthetic_grid(max_edges=2_500_000 if quick else 12_500_000)
    if quick:
        rng = random.Random(11)
        small = [s for s in specs if s.num_edges <= 1_000_000]
        specs = rng.sample(small, min(18, len(small)))
    return [GraphSource(s.name, s.family, "train", s.num_edges, spec=s) for s in specs]


def _tune_args(argv):
    ap = argparse.ArgumentParser(prog="python -m dgl_ugraph tune",
                                 description="Re-collect strategy timings on this GPU and retrain the predictor.")
    ap.add_argument("--quick", action="store_true", help="a short collection (under 5 minutes in all on an H100)")
    ap.add_argument("--budget-s", type=float, default=None, help="collection time (default 150 quick, 1200 full)")
    ap.add_argument("--fresh", action="store_true", help="discard earlier tune data for this GPU")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-id", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def _tune_widths(quick: bool) -> Tuple[int, ...]:
    return (16, 64, 256) if quick else WIDTHS


def main(argv=None) -> int:
    args = _tune_args(sys.argv[1:] if argv is None else argv)
    try:
        import lightgbm  # noqa: F401  (needed to retrain; checked before spending GPU time)
    except ImportError:
        print("dgl_ugraph tune needs lightgbm to train the model: pip install 'dgl_ugraph[predictor]' "
              "(or pip install lightgbm)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or not _ext.has_cuda():
        print(f"dgl_ugraph tune needs a CUDA GPU and the CUDA core ({_ext.LOAD_ERROR or 'no CUDA core in this build'})",
              file=sys.stderr)
        return 2
    dev = predictor.device_info()
    data_dir = settings.cache_dir() / "tune" / dev.slug
    budget = args.budget_s if args.budget_s is not None else (150.0 if args.quick else 1200.0)
    sources = tune_suite(args.quick)
    widths = _tune_widths(args.quick)
    if args.worker:
        cfg = CollectConfig(data_dir, args.run_id, args.deadline, widths=widths)
        return run_worker(sources, cfg, Progress())
    if args.fresh and data_dir.exists():
        for p in data_dir.glob("*"):
            p.unlink()
    data_dir.mkdir(parents=True, exist_ok=True)
    run_id = new_run_id()
    deadline = time.time() + budget
    print(f"dgl_ugraph tune: collecting on {dev.name} for up to {budget:.0f} s into {data_dir}")
    cmd = [sys.executable, "-m", "dgl_ugraph.tune", "--worker", "--run-id", run_id, "--deadline", str(deadline)]
    cmd += ["--quick"] if args.quick else []
    rc = supervise(cmd, deadline)
    if rc not in (0, EXIT_DEVICE_LOST):
        return rc
    paths = collected_files([data_dir], "cases")
    cases = [c for c in load_cases(paths) if c.row["device"] == dev.name]
    if not cases:
        print("dgl_ugraph tune: no cases were collected", file=sys.stderr)
        return 1
    result = train(cases, num_trees=100 if args.quick else 150)
    out = export(result, settings.cache_dir() / "models", dev.family, paths, [dev.name])
    predictor.reset()
    loaded = predictor.load(dev.family)
    if loaded is None or loaded.path != out:
        print(f"dgl_ugraph tune: the model written to {out} did not load", file=sys.stderr)
        return 1
    print(f"dgl_ugraph tune: {len(cases)} cases; model {out} ({loaded.forest.num_trees} trees) loads and is "
          f"preferred over the shipped one; validation: {result.validation}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
