"""dgl_ugraph/settings.py is the one place that reads the environment: no other module of the
package does, and each setting follows a change of its variable at once."""
from __future__ import annotations

import os
import pathlib
import re

from dgl_ugraph import settings

PACKAGE = pathlib.Path(settings.__file__).parent


def test_no_other_module_reads_the_environment():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 20 and any(p.parent.name == "core" for p in modules)  # the subpackages too
    readers = [str(p.relative_to(PACKAGE)) for p in modules
               if p.name != "settings.py" and re.search(r"os\.environ|os\.getenv|getenv\(", p.read_text())]
    assert readers == [], readers


def test_settings_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DGL_UGRAPH_STRATEGY", "warp_edge:8:2")
    monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "1")
    monkeypatch.setenv("DGL_UGRAPH_AUTOTUNE_TOPK", "0")
    monkeypatch.setenv("DGL_UGRAPH_PREDICTOR", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert settings.forced_strategy() == "warp_edge:8:2" and settings.deterministic()
    assert settings.autotune_top_k() == 1 and not settings.predictor()
    assert settings.cache_dir() == tmp_path / "dgl_ugraph"
    monkeypatch.delenv("DGL_UGRAPH_STRATEGY")
    monkeypatch.setenv("DGL_UGRAPH_DETERMINISTIC", "0")
    assert settings.forced_strategy() is None and not settings.deterministic()


def test_the_fast_reader_equals_os_environ_get(monkeypatch):
    """settings reads os.environ's own dict (the repeat-call paths read settings on every call):
    it must give os.environ.get's answer after every kind of change."""
    name = "DGL_UGRAPH_TEST_SETTING"
    monkeypatch.delenv(name, raising=False)
    assert settings._get(name) is None and settings._get(name, "d") == "d"
    for value in ("1", "", "warp_edge:8:2", "caf\u00e9"):
        monkeypatch.setenv(name, value)
        assert settings._get(name) == os.environ.get(name) == value
    os.environ[name] = "direct"
    assert settings._get(name) == "direct"
    del os.environ[name]
    assert settings._get(name, "gone") == "gone"
    monkeypatch.setattr(os, "environ", {name: "a plain dict"})  # not CPython's os._Environ
    assert settings._get(name) == "a plain dict"


def test_selection_state_follows_each_variable_the_policy_reads(monkeypatch):
    names = ("DGL_UGRAPH_STRATEGY", "DGL_UGRAPH_DETERMINISTIC", "DGL_UGRAPH_AUTOTUNE", "DGL_UGRAPH_AUTOTUNE_TOPK",
             "DGL_UGRAPH_MODEL", "DGL_UGRAPH_PREDICTOR")
    for name in names:
        monkeypatch.delenv(name, raising=False)
    base = settings.selection_state()
    for name in names:
        monkeypatch.setenv(name, "7")
        assert settings.selection_state() != base, name
        monkeypatch.delenv(name)
    assert settings.selection_state() == base


def test_a_default_tier_up_leaves_the_users_setting(monkeypatch):
    monkeypatch.setenv("DGL_UGRAPH_TIER_UP", "7")
    settings.default_tier_up(0)
    assert settings.tier_up() == 7
    monkeypatch.delenv("DGL_UGRAPH_TIER_UP")
    assert settings.tier_up() == 16
    settings.default_tier_up(0)
    assert settings.tier_up() == 0
