"""Every DGL_UGRAPH_* variable of the package (and the cache location), read in this one module.
Each is read when it is used, so a program, or a test through monkeypatch.setenv, can change it
at any time; two are read once, at import: DGL_UGRAPH_LOG (it installs the log handler) and
DGL_UGRAPH_DEBUG_POISON (ops.POISON_OUTPUTS, which a program may set itself afterwards).

| variable | function | meaning |
|---|---|---|
| DGL_UGRAPH | `on_import()` | 0: `import dgl_ugraph` and the start-up hook leave DGL alone |
| DGL_UGRAPH_LOG | `log()` | 1: log each new decision to stderr |
| DGL_UGRAPH_STRATEGY | `forced_strategy()` | strategy[:g[:t]] for every CUDA case it can run |
| DGL_UGRAPH_DETERMINISTIC | `deterministic()` | 1: no strategy whose sums depend on atomics' order |
| DGL_UGRAPH_AUTOTUNE | `autotune()` | 1: time the model's top configurations on first sight |
| DGL_UGRAPH_AUTOTUNE_TOPK | `autotune_top_k()` | how many configurations autotuning times (5) |
| DGL_UGRAPH_MODEL | `model_file()` | the strategy model file to use |
| DGL_UGRAPH_PREDICTOR | `predictor()` | 0: no learned model, the heuristic serves |
| DGL_UGRAPH_DEBUG_POISON | `debug_poison()` | 1: fill outputs with NaN / -7 before each kernel |
| DGL_UGRAPH_MODULES | `modules()` | 0: the dgl.nn convolutions keep DGL's forward (their kernels still run here) |
| DGL_UGRAPH_TIER_UP | `tier_up()` | a CUDA graph's calls that run on DGL's kernels before it gets dgl_ugraph's (16; 0: none) |
| DGL_UGRAPH_DATASETS | `datasets()` | the folder of the example graphs (benchmarks/models/, benchmarks) |
| XDG_CACHE_HOME | `cache_dir()` | the per-user cache (autotune winners, tuned models) |
"""
from __future__ import annotations

import os
import pathlib
from typing import Optional


_encoded = {}  # os.environ.encodekey of a name, or of each name of a tuple of names


def _get(name: str, default: Optional[str] = None) -> Optional[str]:
    """os.environ.get(name, default), read from os.environ's own dict of encoded names where it
    is CPython's os._Environ: that dict is what os.environ.get reads, so every change through
    os.environ (monkeypatch.setenv included) shows at once, at a tenth of a microsecond where
    os.environ.get takes two for an unset variable (it raises and catches KeyError twice). The
    repeat-call paths read several settings on every call."""
    environ = os.environ
    data = getattr(environ, "_data", None)
    if data is None or not hasattr(environ, "encodekey"):
        return environ.get(name, default)
    key = _encoded.get(name)
    if key is None:
        key = _encoded[name] = environ.encodekey(name)
    value = data.get(key)
    return default if value is None else environ.decodevalue(value)


def _flag(name: str, default: str) -> bool:
    return _get(name, default) == "1"


def on_import() -> bool:
    return _get("DGL_UGRAPH", "1") != "0"


def on_import_text() -> str:
    """DGL_UGRAPH as set, for `python -m dgl_ugraph info`."""
    return _get("DGL_UGRAPH", "unset")


def log() -> bool:
    return _flag("DGL_UGRAPH_LOG", "0")


def forced_strategy() -> Optional[str]:
    return _get("DGL_UGRAPH_STRATEGY") or None


def deterministic() -> bool:
    return _flag("DGL_UGRAPH_DETERMINISTIC", "0")


def autotune() -> bool:
    return _flag("DGL_UGRAPH_AUTOTUNE", "0")


def autotune_top_k() -> int:
    return max(1, int(_get("DGL_UGRAPH_AUTOTUNE_TOPK", "5")))


def model_file() -> Optional[str]:
    return _get("DGL_UGRAPH_MODEL") or None


def predictor() -> bool:
    return _get("DGL_UGRAPH_PREDICTOR", "1") != "0"


def debug_poison() -> bool:
    return _flag("DGL_UGRAPH_DEBUG_POISON", "0")


def modules() -> bool:
    return _get("DGL_UGRAPH_MODULES", "1") != "0"


def tier_up() -> int:
    return max(0, int(_get("DGL_UGRAPH_TIER_UP", "16")))


def default_tier_up(calls: int) -> None:
    """DGL_UGRAPH_TIER_UP for this process where the user did not set it: for a program that knows
    how its graphs are used (the demo reuses one graph every step)."""
    os.environ.setdefault("DGL_UGRAPH_TIER_UP", str(calls))


_SELECTION = ("DGL_UGRAPH_STRATEGY", "DGL_UGRAPH_DETERMINISTIC", "DGL_UGRAPH_AUTOTUNE", "DGL_UGRAPH_AUTOTUNE_TOPK",
              "DGL_UGRAPH_MODEL", "DGL_UGRAPH_PREDICTOR")


def selection_state() -> tuple:
    """The variables a CUDA configuration is chosen from (policy.choose: STRATEGY, DETERMINISTIC,
    AUTOTUNE, AUTOTUNE_TOPK, MODEL, PREDICTOR) as set, undecoded: equal tuples, equal choices.
    A key that every repeat call builds, so read straight from os.environ's dict (see _get),
    with that dict and the encoded names looked up once per os.environ object."""
    environ = os.environ
    source = _selection_source
    if source[0] is not environ:
        data = getattr(environ, "_data", None)
        if data is None or not hasattr(environ, "encodekey"):
            source[:] = environ, None, None
        else:
            source[:] = environ, data, tuple(environ.encodekey(name) for name in _SELECTION)
    data, k = source[1], source[2]
    if data is None:
        return tuple(environ.get(name) for name in _SELECTION)
    get = data.get
    return get(k[0]), get(k[1]), get(k[2]), get(k[3]), get(k[4]), get(k[5])


_selection_source = [None, None, None]  # the os.environ object selection_state read, its dict, the names


def datasets() -> Optional[str]:
    return _get("DGL_UGRAPH_DATASETS") or None


def cache_dir() -> pathlib.Path:
    base = _get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "dgl_ugraph"
