"""Online autotuning (DGL_UGRAPH_AUTOTUNE=1): on the first sight of a (graph features, signature)
key, the model's top-k configurations are timed on the call's own tensors and the winner is
remembered in a per-device JSON file under the user's cache directory, so later processes reuse
it. The timing itself is a function the caller hands in (core.timing.measure_on_gpu): this module
never runs a kernel.
"""
from __future__ import annotations

import json
import os
import pathlib
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Sequence, Tuple

from dgl_ugraph import settings
from dgl_ugraph.core.abstraction import DTYPE_NAMES, OpInfo, ParallelInfo, Signature
from dgl_ugraph.selection.predictor import CaseInfo, DeviceInfo

# How a call's candidates are timed: (graph, op_info, configurations) -> median ms of each that
# ran (core.timing.measure_on_gpu).
Measure = Callable[[object, OpInfo, Sequence[ParallelInfo]], Dict[ParallelInfo, float]]

CACHE_FORMAT = "dgl_ugraph-autotune"
CACHE_VERSION = 1


def cache_key(case: CaseInfo, sig: Signature) -> str:
    """What a decision may depend on, as text: the graph's sizes and degree statistics, then the
    signature. Equal keys in another process mean the same kind of call on the same graph."""
    return (f"v{case.num_src}-{case.num_dst}-e{case.num_edges}-i{case.index_bits}-std{case.std_deg:.6g}"
            f"-max{case.max_deg}-empty{case.empty_rows}|{sig.edge_op}|{sig.gather_op}|{sig.a_type}|{sig.b_type}"
            f"|{sig.c_type}|{DTYPE_NAMES[sig.dtype]}|{sig.out_len}|{sig.reduce_size}|{int(sig.broadcast)}")


def _identity(dev: DeviceInfo, core_hash: str) -> dict:
    return {"name": dev.name, "sm_count": dev.sm_count, "l2_bytes": dev.l2_bytes,
            "cc": f"{dev.major}.{dev.minor}", "core": core_hash}


class AutotuneCache:
    """Winners per key for one device and one build of the CUDA core, in one JSON file. A file
    that does not parse, or was written for another device or core, is ignored with one warning
    (and replaced on the next save). Saves merge with what other processes wrote meanwhile and
    land atomically (a temporary file in the same folder, then os.replace)."""

    def __init__(self, path: pathlib.Path, dev: DeviceInfo, core_hash: str = ""):
        self.path = pathlib.Path(path)
        self.identity = _identity(dev, core_hash)
        self.entries: Dict[str, dict] = {}
        self._lock = threading.Lock()
        self.entries = self._read(warn=True)

    @classmethod
    def for_device(cls, dev: DeviceInfo, core_hash: str = "") -> "AutotuneCache":
        return cls(settings.cache_dir() / "autotune" / f"{dev.slug}.json", dev, core_hash)

    def _read(self, warn: bool) -> Dict[str, dict]:
        try:
            with open(self.path) as fh:
                data = json.load(fh)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            if warn:
                warnings.warn(f"dgl_ugraph: ignoring the autotune cache {self.path}: {exc}", RuntimeWarning, stacklevel=3)
            return {}
        reason = None
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("version") != CACHE_VERSION:
            reason = "not a dgl_ugraph autotune cache of this version"
        elif data.get("device") != self.identity:
            reason = f"written for {data.get('device')}, this is {self.identity}"
        elif not isinstance(data.get("entries"), dict):
            reason = "it has no entries table"
        if reason:
            if warn:
                warnings.warn(f"dgl_ugraph: ignoring the autotune cache {self.path}: {reason}", RuntimeWarning, stacklevel=3)
            return {}
        return {k: v for k, v in data["entries"].items() if isinstance(v, dict) and isinstance(v.get("config"), str)}

    def get(self, key: str) -> Optional[ParallelInfo]:
        entry = self.entries.get(key)
        if entry is None:
            return None
        try:
            return ParallelInfo.parse(entry["config"])
        except (ValueError, TypeError):
            return None

    def put(self, key: str, pinfo: ParallelInfo, ms: float, tried: int) -> None:
        with self._lock:
            self.entries[key] = {"config": str(pinfo), "ms": round(float(ms), 6), "tried": int(tried),
                                 "time": int(time.time())}

    def save(self) -> None:
        with self._lock:
            merged = self._read(warn=False)
            merged.update(self.entries)
            self.entries = merged
            data = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "device": self.identity, "entries": merged}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w") as fh:
                    json.dump(data, fh, indent=0, sort_keys=True)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise


@dataclass
class Autotuner:
    """First sight of a key: time the candidates, keep the fastest; later: the remembered one."""

    cache: AutotuneCache
    hits: int = field(default=0)
    tuned: int = field(default=0)

    def choose(self, graph, op: OpInfo, case: CaseInfo, sig: Signature,
               ranked: Sequence[ParallelInfo], k: int, measure: Measure) -> ParallelInfo:
        """`ranked`: the valid configurations, best predicted first; the top k are timed by
        `measure` (core.timing.measure_on_gpu, or a stand-in in tests)."""
        key = cache_key(case, sig)
        known = self.cache.get(key)
        if known is not None and known in ranked:
            self.hits += 1
            return known
        top = list(ranked[:k])
        times = measure(graph, op, top)
        if not times:
            return top[0]
        best = min(times, key=times.get)
        self.cache.put(key, best, times[best], len(top))
        self.cache.save()
        self.tuned += 1
        return best


_tuners: Dict[Tuple[str, str], Autotuner] = {}
_tuners_lock = threading.Lock()


def tuner_for(dev: DeviceInfo, core_hash: str) -> Autotuner:
    """The process-wide tuner of one device (its cache file is read once)."""
    with _tuners_lock:
        key = (dev.slug, core_hash)
        if key not in _tuners:
            _tuners[key] = Autotuner(AutotuneCache.for_device(dev, core_hash))
        return _tuners[key]
