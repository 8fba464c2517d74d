"""The switching table (patterns/switching_table.json): DGL's kernel calls -> uGrapher's op_info.

A kernel key is `call:op:reduce_op:lhs_target:rhs_target`, exactly as DGL passes them to `_gspmm`
(which always reads lhs from u and rhs from e) and `_gsddmm`. '-' stands for "no reduction" and
'*' for an operand the op does not read, so `copy_u` is `gspmm:copy_lhs:sum:u:*`. DGL's own fused
kernels that dgl_ugraph replaces whole (the CPU edge softmax) are keyed by DGL's function name,
and so is a sequence of DGL's calls that dgl_ugraph runs as one unified operator (a fused row
with an op_info: the backward of a copy_u mean).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Tuple, Union

TABLE_NAME = "switching_table.json"
# The package folder (dgl_ugraph/), where an installed copy of the table lies.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The fused row of a copy_u mean's backward (dgl_ugraph/dgl/mean.py).
MEAN_BACKWARD = "gspmm_mean_backward"
# The fused row of GraphConv's normalized aggregation (dgl_ugraph/dgl/modules/fused.py).
NORM_SUM = "gspmm_norm_sum"
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


@lru_cache(maxsize=1)
def table() -> dict:
    with open(table_path(), encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=1)
def _indexes() -> Tuple[Dict[str, Pattern], List[Tuple[Tuple[str, ...], str]], Dict[str, Pattern]]:
    raw = table()
    mapped = {}
    for row in raw["mapped"]:
        mapped[row["dgl"]] = Pattern(row["dgl"], row["edge_op"], row["gather_op"], row["A"], row["B"], row["C"])
    unsupported = [(tuple(row["dgl"].split(":")), row["reason"]) for row in raw["unsupported"]]
    operators = {row["dgl"]: Pattern(row["dgl"], row["edge_op"], row["gather_op"], row["A"], row["B"], row["C"])
                 for row in raw["fused"] if "edge_op" in row}
    return mapped, unsupported, operators


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


def unsupported_reason(key: str) -> Optional[str]:
    """The table's reason for a key it lists as unsupported, else None."""
    parts = tuple(key.split(":"))
    for pattern, reason in _indexes()[1]:
        if len(pattern) == len(parts) and all(p in ("*", k) for p, k in zip(pattern, parts)):
            return reason
    return None


def fused_operators() -> Dict[str, Pattern]:
    """The fused rows that run as one unified operator, by name."""
    return _indexes()[2]


def lookup(key: str) -> Union[Pattern, str]:
    """The mapped (or fused operator's) Pattern, or the reason the key runs on DGL."""
    pattern = mapped().get(key) or fused_operators().get(key)
    if pattern is not None:
        return pattern
    return unsupported_reason(key) or (
        f"{key} is not in the switching table (no DGL builtin produces it); DGL runs it or raises")


def builtin_lowering() -> Dict[str, dict]:
    return table()["builtins"]


def modules() -> Dict[str, dict]:
    """The dgl.nn convolutions with a lean path of dgl_ugraph's, by class name: a class not
    listed here keeps DGL's forward (dgl_ugraph/dgl/modules)."""
    return {row["module"]: row for row in table().get("modules", [])}


def fused() -> Dict[str, dict]:
    """DGL's fused kernels that dgl_ugraph replaces with fused kernels of its own, by DGL's name."""
    return {row["dgl"]: row for row in table()["fused"]}


def markdown_table() -> str:
    """The README's supported-operators table, generated from the switching table: one row per
    kernel call family, with its op_info and the DGL builtins that reach it in the forward pass."""
    groups: Dict[tuple, List[Pattern]] = {}
    for key, p in mapped().items():
        call, op, _, lhs, rhs = key.split(":")
        family = (call, op, lhs, rhs) if call == "gspmm" or op.startswith("copy") else (call, "binary", lhs, rhs)
        groups.setdefault(family, []).append(p)
    lines = ["| DGL kernel call | uGrapher op_info (edge_op, gather_op, A, B, C) | reached in the forward pass by "
             "(dgl.ops names, + update_all/apply_edges builtin pairs) |",
             "|---|---|---|"]
    builtins = builtin_lowering()
    for (call, op, lhs, rhs), rows in groups.items():
        keys = {p.key for p in rows}
        ops = "{" + ",".join(dict.fromkeys(p.edge_op for p in rows)) + "}" if op == "binary" else op
        gathers = "/".join(dict.fromkeys(p.gather_op for p in rows))
        reduce = "{" + ",".join(dict.fromkeys(p.gather_op for p in rows)) + "}" if call == "gspmm" else "-"
        edge_ops = ops.strip("{}").replace(",", "/")
        reached = [name for name, entry in builtins.items() if keys & set(entry.get("calls", []))]
        named = [name[len("dgl.ops."):] for name in reached if name.startswith("dgl.ops.")]
        pairs = len(reached) - len(named)
        reached_by = ", ".join(named) + (f" (+{pairs} fn pairs)" if pairs else "") if reached else \
            "backward passes and direct calls only"
        lines.append(f"| `{call}:{ops}:{reduce}:{lhs}:{rhs}` | ({edge_ops}, {gathers}, {rows[0].A_type}, "
                     f"{rows[0].B_type}, {rows[0].C_type}) | {reached_by} |")
    for name, row in fused().items():
        if name in fused_operators():
            p = fused_operators()[name]
            lines.append(f"| `{name}` | ({p.edge_op}, {p.gather_op}, {p.A_type}, {p.B_type}, {p.C_type}): "
                         f"{row['kernel']} | {row.get('reached', 'backward passes')} on {row['device'].upper()} |")
            continue
        reached = [b[len("dgl.ops."):] for b, entry in builtins.items()
                   if name in entry.get(f"{row['device']}_calls", [])]
        reached_by = ", ".join(reached) + f" on {row['device'].upper()}" if reached else \
            f"backward passes on {row['device'].upper()}"
        lines.append(f"| `{name}` ({row['device'].upper()}) | {row['kernel']} | {reached_by} |")
    for row in table()["unsupported"]:
        lines.append(f"| `{row['dgl']}` | runs on DGL | {row['reason']} |")
    for name, entry in builtins.items():
        note = entry.get("unsupported") or (entry.get("note") if entry.get("calls") == [] else None)
        if note:
            lines.append(f"| `{name}` | {'runs on DGL' if 'unsupported' in entry else 'see note'} | {note} |")
    return "\n".join(lines)
