"""What the interception did: calls per pattern, where they ran, why, and with which configuration;
and the dgl.nn modules' forward calls, on their lean paths or on DGL's forward and why.

Every decision points at one `SignatureRecord`, so counting a call is one integer increment. A
record is shared by every graph that sees the same signature (pattern, dtype, feature shapes,
device, index type) with the same outcome, which keeps the report short for minibatch training
where each batch is a new graph.
"""
from __future__ import annotations

import logging
import threading
from typing import Dict, Optional, Tuple

from dgl_ugraph import settings
from dgl_ugraph.dgl import cache

_log = logging.getLogger("dgl_ugraph")
if settings.log() and not _log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("[dgl_ugraph] %(message)s"))
    _log.addHandler(_handler)
    _log.setLevel(logging.INFO)

UGRAPHER = "dgl_ugraph"
DGL = "dgl"


class SignatureRecord:
    """One signature with one outcome: where it runs (dgl_ugraph or DGL), why or how."""

    __slots__ = ("pattern", "signature", "runs_on", "detail", "op_info", "calls")

    def __init__(self, pattern: str, signature: tuple, runs_on: str, detail: str, op_info: str):
        self.pattern = pattern
        self.signature = signature  # (dtype, lhs feature shape, rhs feature shape, device, idtype)
        self.runs_on = runs_on
        self.detail = detail  # the configuration when it runs on dgl_ugraph, the reason otherwise
        self.op_info = op_info
        self.calls = 0

    def as_dict(self) -> dict:
        dtype, lhs, rhs, device, idtype = self.signature
        row = {"pattern": self.pattern, "op_info": self.op_info, "dtype": dtype, "lhs_shape": lhs,
               "rhs_shape": rhs, "device": device, "idtype": idtype, "runs_on": self.runs_on,
               "calls": self.calls}
        row["config" if self.runs_on == UGRAPHER else "reason"] = self.detail
        return row


_records: Dict[Tuple, SignatureRecord] = {}
_lock = threading.Lock()


def record(pattern: str, signature: tuple, runs_on: str, detail: str, op_info: str = "-") -> SignatureRecord:
    """The record for this outcome, created (and logged once) on first sight."""
    key = (pattern, signature, runs_on, detail)
    rec = _records.get(key)
    if rec is None:
        with _lock:
            rec = _records.get(key)
            if rec is None:
                rec = _records[key] = SignatureRecord(pattern, signature, runs_on, detail, op_info)
                if runs_on == UGRAPHER:
                    _log.info("%s %s -> dgl_ugraph %s [%s]", pattern, _describe(signature), op_info, detail)
                else:
                    _log.info("%s %s -> DGL: %s", pattern, _describe(signature), detail)
    return rec


def _describe(signature: tuple) -> str:
    dtype, lhs, rhs, device, idtype = signature
    return f"{dtype} lhs={lhs} rhs={rhs} on {device} ({idtype})"


class ModuleRecord:
    """Forward calls of one dgl.nn module class with one outcome: its lean path, or DGL's
    forward and why (dgl_ugraph/dgl/modules). Counted apart from the kernel calls, which every
    forward makes either way."""

    __slots__ = ("module", "runs_on", "detail", "calls")

    def __init__(self, module: str, runs_on: str, detail: str):
        self.module = module
        self.runs_on = runs_on
        self.detail = detail
        self.calls = 0


_module_records: Dict[Tuple[str, str, str], ModuleRecord] = {}


def module_record(module: str, runs_on: str, detail: str) -> ModuleRecord:
    key = (module, runs_on, detail)
    rec = _module_records.get(key)
    if rec is None:
        with _lock:
            rec = _module_records.setdefault(key, ModuleRecord(module, runs_on, detail))
            if runs_on == DGL:
                _log.info("%s.forward -> DGL: %s", module, detail)
    return rec


def _tally(records: list, name: str, ours: str, theirs: str) -> Dict[str, dict]:
    """The calls of `records` (SignatureRecords or ModuleRecords) summed by their attribute `name`:
    {ours: calls on dgl_ugraph, theirs: calls on DGL, "reasons": DGL's calls by reason}, by name."""
    out: Dict[str, dict] = {}
    for rec in records:
        entry = out.setdefault(getattr(rec, name), {ours: 0, theirs: 0, "reasons": {}})
        if rec.runs_on == UGRAPHER:
            entry[ours] += rec.calls
        else:
            entry[theirs] += rec.calls
            entry["reasons"][rec.detail] = entry["reasons"].get(rec.detail, 0) + rec.calls
    return dict(sorted(out.items()))


# Whether DGL's functions are routed here now; interception.enable()/disable() say so, so that
# this module needs nothing from the one that records into it.
_enabled = False


def set_enabled(on: bool):
    global _enabled
    _enabled = on


def stats() -> dict:
    """Calls intercepted and fallen back, per pattern with reasons, and every signature seen
    with the configuration it ran with (or the reason it ran on DGL)."""
    called = [rec for rec in list(_records.values()) if rec.calls]
    patterns = _tally(called, "pattern", "intercepted", "fallback")
    rows = [rec.as_dict() for rec in called]
    modules = _tally([rec for rec in list(_module_records.values()) if rec.calls], "module", "lean", "dgl")
    intercepted = sum(p["intercepted"] for p in patterns.values())
    fallback = sum(p["fallback"] for p in patterns.values())
    return {"enabled": _enabled, "calls": intercepted + fallback, "intercepted": intercepted,
            "fallback": fallback, "patterns": patterns,
            "signatures": sorted(rows, key=lambda r: (r["pattern"], -r["calls"])),
            "modules": modules, "graphs_cached": cache.cached_graphs()}


def reset_stats():
    """Zeroes every counter (the decisions themselves stay cached)."""
    with _lock:
        for rec in list(_records.values()) + list(_module_records.values()):
            rec.calls = 0


def report(data: Optional[dict] = None) -> str:
    """stats() as text."""
    s = data or stats()
    share = f"{100.0 * s['intercepted'] / s['calls']:.1f}%" if s["calls"] else "-"
    lines = [f"dgl_ugraph {'enabled' if s['enabled'] else 'disabled'}: {s['calls']} kernel calls, "
             f"{s['intercepted']} on dgl_ugraph ({share}), {s['fallback']} on DGL; "
             f"{s['graphs_cached']} graphs cached"]
    for name, p in s["patterns"].items():
        lines.append(f"  {name:28s} dgl_ugraph {p['intercepted']:7d}   DGL {p['fallback']:7d}")
        for reason, n in p["reasons"].items():
            lines.append(f"      {n:7d} on DGL: {reason}")
    for name, m in s["modules"].items():
        lines.append(f"  {name + '.forward':28s} lean path {m['lean']:6d}   DGL {m['dgl']:7d}")
        for reason, n in m["reasons"].items():
            lines.append(f"      {n:7d} on DGL: {reason}")
    if s["signatures"]:
        lines.append("  signatures:")
    for r in s["signatures"]:
        how = f"config {r['config']}" if r["runs_on"] == UGRAPHER else "DGL"
        lines.append(f"    {r['pattern']:28s} {r['dtype']:9s} lhs={r['lhs_shape']} rhs={r['rhs_shape']} "
                     f"{r['device']} {r['idtype']}: {r['calls']} calls, {how}")
    return "\n".join(lines)
