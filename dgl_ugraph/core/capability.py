"""What the compiled core can run: the rules of its capability table
(csrc/include/ugraph/capability.h, read through `_ext.capabilities()`), each strategy with the
reason it cannot run a case. `ops.prepare` refuses a configuration by these rules, and selection
chooses only among the strategies they allow.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from dgl_ugraph import settings
from dgl_ugraph.core import _ext
from dgl_ugraph.core.abstraction import DTYPE_NAMES, STRATEGIES, Signature

# The strategies whose sums depend on the order of atomics: those of the core's
# deterministic-mode rule.
ATOMIC_STRATEGIES = tuple(sorted({s for rule in _ext.capabilities()["rules"] if rule["only_deterministic"]
                                  for s in rule["strategies"]}, key=STRATEGIES.index))


def deterministic() -> bool:
    return settings.deterministic() or torch.are_deterministic_algorithms_enabled()


def why_not(strategy: str, sig: Signature, num_edges: int, compiled: frozenset) -> Optional[str]:
    """None if `strategy` can run the case, else the reason it cannot."""
    if (strategy, DTYPE_NAMES[sig.dtype]) not in compiled:
        return f"{strategy} for {DTYPE_NAMES[sig.dtype]} is not compiled into this build"
    for rule in _ext.capabilities()["rules"]:
        if (strategy in rule["strategies"] and sig.gather_op in rule["gather_ops"]
                and DTYPE_NAMES[sig.dtype] in rule["dtypes"] and num_edges >= rule["min_edges"]
                and (not rule["only_deterministic"] or deterministic())):
            return f"{strategy} {rule['why']}"
    return None


def candidates(sig: Signature, num_edges: int, compiled: frozenset) -> List[str]:
    return [s for s in STRATEGIES if why_not(s, sig, num_edges, compiled) is None]
