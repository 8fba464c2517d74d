"""Loads the compiled core once; a failed load is remembered, not raised, so the DGL layer can
fall back to DGL's own kernels with one warning."""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

try:
    from dgl_ugraph import _C  # type: ignore[attr-defined]
    LOAD_ERROR: Optional[str] = None
except ImportError as exc:  # a missing or broken build
    _C = None
    LOAD_ERROR = f"the compiled core failed to load: {exc}"


def core():
    if _C is None:
        raise ImportError(LOAD_ERROR)
    return _C


def has_cuda() -> bool:
    return _C is not None and bool(_C.build_info()["cuda"])


@lru_cache(maxsize=None)
def capabilities() -> dict:
    """csrc/include/ugraph/capability.h as data: the names of params.h's enums, the rules that
    say what each CUDA strategy cannot run, and the (strategy, dtype) keys compiled in. Without
    a compiled core: no rules and no keys."""
    if _C is None:
        return {"strategies": [], "dtypes": [], "gather_ops": [], "rules": [], "compiled": []}
    return _C.capabilities()


def compiled_cuda_keys() -> frozenset:
    """(strategy, dtype-name) pairs compiled into the CUDA core."""
    return frozenset(tuple(key) for key in capabilities()["compiled"])
