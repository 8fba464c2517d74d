"""Grid-search collection: every case of a graph suite (calls.graph_cases), every configuration of
the paper's grid (predictor.config_space) timed by core.timing.time_configs, results appended case
by case to the shards. A case whose configuration kills the GPU context is re-run by the next
worker one configuration at a time to name the culprit, which is recorded as failed.
"""
from __future__ import annotations

import dataclasses
import math
import pathlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from tqdm import tqdm

from dgl_ugraph.core import _ext
from dgl_ugraph.core.abstraction import DTYPE_NAMES, OpInfo, ParallelInfo
from dgl_ugraph.core.capability import candidates
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.core.ops import signature
from dgl_ugraph.core.timing import CudaRunner, DeviceLost, Refused, Timing, TimingPolicy, time_configs
from dgl_ugraph.selection import predictor
from dgl_ugraph.selection.predictor import DeviceInfo
from dgl_ugraph.tuning.calls import (ATTENTION_HEADS, CALLS, DTYPES, IDTYPES, WIDTHS, Call, CaseSpec, GraphSource,
                                     beyond_tilings, call_users, graph_cases, is_audit, load_source, make_op,
                                     sample_cases)
from dgl_ugraph.tuning.shards import Shards, State, done_keys

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
    cases_per_graph: int = 0  # 0: every case of a graph; else calls.sample_cases' spread subset
    # Case keys to run, every other case skipped (re-timing an earlier core's cases on a new one);
    # empty: no such filter.
    case_ids: FrozenSet[str] = frozenset()


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
                 log: Callable[[str], None] = print, progress: Optional[tqdm] = None, loader=None):
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
            self.progress.reset(total=total)
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
        cases = graph_cases(src, self.cfg.widths, self.cfg.heads, self.cfg.calls)
        if self.cfg.case_ids:
            cases = [c for c in cases if c.key in self.cfg.case_ids]
        return sample_cases(cases, self.cfg.cases_per_graph)

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
            self.progress.set_postfix_str(f"{max(0.0, self.cfg.deadline - self.clock()):.0f} s of budget left",
                                          refresh=False)
            self.progress.update(1)

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
