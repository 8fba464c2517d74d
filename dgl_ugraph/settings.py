"""Every DGL_UGRAPH_* variable (and the cache location), read in this one module. Each is read
when it is used, so a program, or a test through monkeypatch.setenv, can change it at any time.

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
| DGL_UGRAPH_DATASETS | `datasets()` | the folder of the example graphs (models/, benchmarks) |
| XDG_CACHE_HOME | `cache_dir()` | the per-user cache (autotune winners, tuned models) |
"""
from __future__ import annotations

import os
import pathlib
from typing import Optional


def _flag(name: str, default: str) -> bool:
    return os.environ.get(name, default) == "1"


def on_import() -> bool:
    return os.environ.get("DGL_UGRAPH", "1") != "0"


def on_import_text() -> str:
    """DGL_UGRAPH as set, for `python -m dgl_ugraph info`."""
    return os.environ.get("DGL_UGRAPH", "unset")


def log() -> bool:
    return _flag("DGL_UGRAPH_LOG", "0")


def forced_strategy() -> Optional[str]:
    return os.environ.get("DGL_UGRAPH_STRATEGY") or None


def deterministic() -> bool:
    return _flag("DGL_UGRAPH_DETERMINISTIC", "0")


def autotune() -> bool:
    return _flag("DGL_UGRAPH_AUTOTUNE", "0")


def autotune_top_k() -> int:
    return max(1, int(os.environ.get("DGL_UGRAPH_AUTOTUNE_TOPK", "5")))


def model_file() -> Optional[str]:
    return os.environ.get("DGL_UGRAPH_MODEL") or None


def predictor() -> bool:
    return os.environ.get("DGL_UGRAPH_PREDICTOR", "1") != "0"


def debug_poison() -> bool:
    return _flag("DGL_UGRAPH_DEBUG_POISON", "0")


def datasets() -> Optional[str]:
    return os.environ.get("DGL_UGRAPH_DATASETS") or None


def cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "dgl_ugraph"
