"""The switching table (patterns/switching_table.json): DGL's kernel calls -> uGrapher's op_info.

A kernel key is `call:op:reduce_op:lhs_target:rhs_target`, exactly as DGL passes them to `_gspmm`
(which always reads lhs from u and rhs from e) and `_gsddmm`. '-' stands for "no reduction" and
'*' for an operand the op does not read, so `copy_u` is `gspmm:copy_lhs:sum:u:*`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Tuple, Union

TABLE_NAME = "switching_table.json"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# DGL accepts these aliases for gsddmm targets (dgl._sparse_ops.target_mapping).
_TARGET_ALIASES = {"u": "u", "v": "v", "e": "e", "src": "u", "dst": "v", "edge": "e"}


def table_path() -> str:
    """The canonical file in a source checkout, else the copy installed inside the package."""
    checkout = os.path.join(os.path.dirname(_PACKAGE_DIR), "patterns", TABLE_NAME)
    if os.path.isfile(checkout):
        return checkout
    installed = os.path.join(_PACKAGE_DIR, TABLE_NAME)
    if os.path.isfile(installed):
        return installed
    raise FileNotFoundError(f"the switching table is missing: looked for {checkout} and {installed}")


@dataclass(frozen=True)
class Pattern:
    """One mapped row: a DGL kernel key and the op_info skeleton it becomes."""

    key: str
    edge_op: str
    gather_op: str
    A_type: str
    B_type: str
    C_type: str

    @property
    def call(self) -> str:
        return self.key.split(":", 1)[0]


@lru_cache(maxsize=1)
def table() -> dict:
    with open(table_path(), encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=1)
def _indexes() -> Tuple[Dict[str, Pattern], List[Tuple[Tuple[str, ...], str]]]:
    raw = table()
    mapped = {}
    for row in raw["mapped"]:
        mapped[row["dgl"]] = Pattern(row["dgl"], row["edge_op"], row["gather_op"], row["A"], row["B"], row["C"])
    unsupported = [(tuple(row["dgl"].split(":")), row["reason"]) for row in raw["unsupported"]]
    return mapped, unsupported


def mapped() -> Dict[str, Pattern]:
    return _indexes()[0]


def spmm_key(op: str, reduce_op: str) -> str:
    return f"gspmm:{op}:{reduce_op}:{'*' if op == 'copy_rhs' else 'u'}:{'*' if op == 'copy_lhs' else 'e'}"


def sddmm_key(op: str, lhs_target, rhs_target) -> str:
    lhs = "*" if op == "copy_rhs" else _TARGET_ALIASES.get(lhs_target, str(lhs_target))
    rhs = "*" if op == "copy_lhs" else _TARGET_ALIASES.get(rhs_target, str(rhs_target))
    return f"gsddmm:{op}:-:{lhs}:{rhs}"


def hetero_key(call: str, op: str, reduce_op: str = "-") -> str:
    return f"{call}:{op}:{reduce_op}:*:*"


def unsupported_reason(key: str) -> str:
    """Why a key that is not mapped runs on DGL's kernels."""
    parts = tuple(key.split(":"))
    for pattern, reason in _indexes()[1]:
        if len(pattern) == len(parts) and all(p in ("*", k) for p, k in zip(pattern, parts)):
            return reason
    return f"{key} is not in the switching table (an op, reducer or target DGL's builtins never produce); DGL runs it"


def lookup(key: str) -> Union[Pattern, str]:
    """The mapped Pattern, or the reason the key falls back."""
    pattern = mapped().get(key)
    return pattern if pattern is not None else unsupported_reason(key)


def builtin_lowering() -> Dict[str, dict]:
    return table()["builtins"]


def markdown_table() -> str:
    """The README's supported-operators table, generated from the switching table."""
    lines = ["| DGL builtin (forward) | kernel calls | uGrapher op_info (edge_op, gather_op, A, B, C) |",
             "|---|---|---|"]
    patterns = mapped()
    for name, entry in builtin_lowering().items():
        if "unsupported" in entry:
            lines.append(f"| `{name}` | (DGL) | not intercepted: {entry['unsupported']} |")
            continue
        if "generic" in entry:
            lines.append(f"| `{name}` | any `_{entry['generic']}` row | {entry['note']} |")
            continue
        calls = entry["calls"] or entry.get("calls_cuda", [])
        infos = []
        for key in calls:
            p = patterns.get(key)
            infos.append(f"({p.edge_op}, {p.gather_op}, {p.A_type}, {p.B_type}, {p.C_type})" if p
                         else f"DGL: {unsupported_reason(key)}")
        shown = ", ".join(f"`{k}`" for k in calls) or "none"
        if not entry["calls"] and entry.get("calls_cuda"):
            shown = f"CUDA only: {shown}"
        note = f" — {entry['note']}" if entry.get("note") else ""
        lines.append(f"| `{name}` | {shown} | {'; '.join(infos)}{note} |")
    return "\n".join(lines)


def describe(pattern: Optional[Pattern]) -> str:
    if pattern is None:
        return "-"
    return f"{pattern.edge_op}/{pattern.gather_op} A={pattern.A_type} B={pattern.B_type} C={pattern.C_type}"
