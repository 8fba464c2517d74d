"""Loads the compiled core once; a failed load is remembered, not raised, so the DGL layer can
fall back to DGL's own kernels with one warning."""
from __future__ import annotations

import importlib.machinery
import pathlib
from functools import lru_cache
from typing import Optional


def _load_error(exc: ImportError) -> str:
    """What failed and the command that builds the core: a checkout without it gets Python's
    'cannot import name _C from partially initialized module', which reads like a circular import."""
    package = pathlib.Path(__file__).resolve().parents[1]
    built = [path for suffix in importlib.machinery.EXTENSION_SUFFIXES for path in package.glob(f"_C{suffix}")]
    if not built:
        return (f"the compiled core is not built for this Python: {package} has no _C extension. Build it "
                "in a checkout with `make dev` (CPU) or `scripts/build_inplace.sh`, or install the package "
                "with `pip install .`; meanwhile DGL's own kernels run every call")
    return f"the compiled core failed to load: {exc} ({built[0].name}; rebuild it with `make dev` or `pip install .`)"


try:
    from dgl_ugraph import _C  # type: ignore[attr-defined]
    LOAD_ERROR: Optional[str] = None
except ImportError as exc:  # a missing or broken build
    _C = None
    LOAD_ERROR = _load_error(exc)


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
