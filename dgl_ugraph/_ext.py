"""Loads the compiled core once; a failed load is remembered, not raised, so the DGL layer can
fall back to DGL's own kernels with one warning."""
from __future__ import annotations

from typing import Optional

try:
    from . import _C  # type: ignore[attr-defined]
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


def compiled_cuda_keys() -> frozenset:
    """(strategy, dtype-name) pairs compiled into the CUDA core."""
    if not has_cuda():
        return frozenset()
    keys = set()
    for item in _C.build_info()["cuda_build"].split("kernels=", 1)[-1].split(";")[0].split(","):
        if "/" in item:
            strategy, dtype = item.strip().split("/")
            keys.add((strategy, dtype))
    return frozenset(keys)
