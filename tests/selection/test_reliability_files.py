"""Safe files: the strategy model and the autotune cache are parsed as JSON only (never pickle,
never eval); a crafted, corrupt or foreign file is ignored with one warning; the cache lives in
the user's cache directory and is written atomically (a temporary file, then os.replace).
"""
import json
import os
import pickle
import threading
import warnings

import pytest
import torch

from dgl_ugraph import settings
from dgl_ugraph.core.abstraction import ParallelInfo
from dgl_ugraph.selection import autotune, predictor
from dgl_ugraph.selection.predictor import DeviceInfo

DEV = DeviceInfo("NVIDIA H100 80GB HBM3", 132, 50 * 2 ** 20, 9, 0)
MARKER = "/tmp/dgl_ugraph_pwned"


class Evil:
    """Unpickling this would run os.system (it never should)."""

    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


PAYLOADS = {
    "pickle": pickle.dumps(Evil()),
    "pickle_protocol0": pickle.dumps(Evil(), protocol=0),
    "python_expr": b"__import__('os').system('touch " + MARKER.encode() + b"')",
    "junk": os.urandom(512),
    "empty": b"",
    "truncated_json": b'{"format": "dgl_ugraph-autotune", "version": 1, "entr',
    "json_list": b"[1, 2, 3]",
    "json_nan_bomb": b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b"}",
}


@pytest.fixture(autouse=True)
def no_marker():
    if os.path.exists(MARKER):
        os.unlink(MARKER)
    yield
    assert not os.path.exists(MARKER), "a file was executed while it was read"


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("DGL_UGRAPH_MODEL", raising=False)
    predictor.reset()
    yield tmp_path
    predictor.reset()


def warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if "dgl_ugraph" in str(w.message)]


# ---- the strategy model -------------------------------------------------------------------------------

@pytest.mark.parametrize("payload,which", [(p, w) for w in ("model", "manifest") for p in PAYLOADS])
def test_crafted_model_files_are_ignored_with_one_warning(cache_home, payload, which):
    shipped = predictor.SHIPPED_DIR / "sm90.json"
    models = cache_home / "dgl_ugraph" / "models"
    models.mkdir(parents=True)
    model, manifest = models / "sm90.json", models / "sm90.manifest.json"
    if shipped.is_file() and predictor.manifest_path(shipped).is_file():
        model.write_bytes(shipped.read_bytes())
        manifest.write_bytes(predictor.manifest_path(shipped).read_bytes())
    else:
        model.write_text("{}")
        manifest.write_text("{}")
    (model if which == "model" else manifest).write_bytes(PAYLOADS[payload])
    assert predictor.model_paths("sm90")[0] == model  # the user's model is read first
    loaded, msgs = warnings_of(lambda: predictor.load("sm90"))
    assert len([m for m in msgs if str(model) in m]) == 1, msgs
    # It fell back to the shipped model (or none): never to the crafted file.
    assert loaded is None or loaded.path != model
    _, again = warnings_of(lambda: predictor.load("sm90"))
    assert again == []  # loaded once per process: no second warning


def test_model_loading_uses_json_only(cache_home, monkeypatch):
    """Unpickling and eval are not reachable from loading: poison them and load every file."""
    def forbidden(*args, **kwargs):
        raise AssertionError("pickle/eval used while reading a model file")
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    import builtins
    monkeypatch.setattr(builtins, "eval", forbidden)
    for path in predictor.SHIPPED_DIR.glob("*.json"):
        if path.name.endswith(".manifest.json"):
            continue
        predictor.Predictor.from_files(path)


def test_predictor_source_has_no_unsafe_loaders():
    import inspect
    from dgl_ugraph.selection import autotune as at, predictor as pr
    for module in (pr, at):
        src = inspect.getsource(module)
        for word in ("import pickle", "pickle.load", "eval(", "exec(", "torch.load", "np.load", "yaml.load",
                     "marshal", "shelve", "dill"):
            assert word not in src, (module.__name__, word)
        assert "json.load" in src


# ---- the autotune cache ---------------------------------------------------------------------------------

def test_cache_lives_in_the_users_cache_directory(cache_home, monkeypatch):
    c = autotune.AutotuneCache.for_device(DEV, "abc")
    assert c.path == cache_home / "dgl_ugraph" / "autotune" / f"{DEV.slug}.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(settings.cache_dir()).startswith(os.path.join(os.path.expanduser("~"), ".cache"))


@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_corrupt_cache_is_ignored_with_one_warning_and_replaced(cache_home, payload):
    path = cache_home / "cache.json"
    path.write_bytes(PAYLOADS[payload])
    cache, msgs = warnings_of(lambda: autotune.AutotuneCache(path, DEV, "abc"))
    assert cache.entries == {}
    assert len(msgs) == 1 and "ignoring the autotune cache" in msgs[0], msgs
    cache.put("k", ParallelInfo("thread_vertex", 4, 2), 0.1, 3)
    _, msgs = warnings_of(cache.save)
    assert msgs == []  # the save replaces the bad file quietly
    assert json.loads(path.read_text())["entries"]["k"]["config"] == str(ParallelInfo("thread_vertex", 4, 2))


@pytest.mark.parametrize("change", ["device", "core", "format", "version", "entries"])
def test_foreign_cache_is_ignored_with_one_warning(cache_home, change):
    path = cache_home / "cache.json"
    good = autotune.AutotuneCache(path, DEV, "abc")
    good.put("k", ParallelInfo("warp_edge", 8, 1), 0.2, 5)
    good.save()
    data = json.loads(path.read_text())
    if change == "device":
        data["device"]["name"] = "NVIDIA A100"
    elif change == "core":
        data["device"]["core"] = "other"
    elif change == "format":
        data["format"] = "something-else"
    elif change == "version":
        data["version"] = 999
    else:
        data["entries"] = ["not", "a", "table"]
    path.write_text(json.dumps(data))
    cache, msgs = warnings_of(lambda: autotune.AutotuneCache(path, DEV, "abc"))
    assert cache.entries == {} and cache.get("k") is None
    assert len(msgs) == 1, msgs


def test_bad_entries_inside_a_good_cache_are_skipped(cache_home):
    path = cache_home / "cache.json"
    good = autotune.AutotuneCache(path, DEV, "abc")
    good.put("ok", ParallelInfo("thread_edge", 2, 4), 0.2, 5)
    good.save()
    data = json.loads(path.read_text())
    data["entries"].update({"n": None, "l": [1], "c": {"config": 5}, "s": {"config": "__import__('os')"},
                            "x": {"config": "thread_vertex:9999:0"}})
    path.write_text(json.dumps(data))
    cache, msgs = warnings_of(lambda: autotune.AutotuneCache(path, DEV, "abc"))
    assert msgs == []
    assert cache.get("ok") == ParallelInfo("thread_edge", 2, 4)
    for key in ("n", "l", "c", "s", "x"):
        assert cache.get(key) is None


def test_cache_writes_are_atomic(cache_home, monkeypatch):
    """A save that dies mid-write leaves the previous file intact and no temporary file behind;
    the file appears through os.replace of a temporary file in the same folder."""
    path = cache_home / "sub" / "cache.json"
    cache = autotune.AutotuneCache(path, DEV, "abc")
    cache.put("a", ParallelInfo("thread_vertex", 1, 1), 0.1, 1)
    replaced = []
    real_replace = os.replace

    def spy(src, dst):
        replaced.append((str(src), str(dst)))
        return real_replace(src, dst)
    monkeypatch.setattr(autotune.os, "replace", spy)
    cache.save()
    assert len(replaced) == 1 and replaced[0][1] == str(path)
    assert os.path.dirname(replaced[0][0]) == str(path.parent) and replaced[0][0].endswith(".tmp")
    before = path.read_bytes()

    def dies(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-write")
    cache.put("b", ParallelInfo("warp_vertex", 1, 1), 0.1, 1)
    monkeypatch.setattr(autotune.json, "dump", dies)
    with pytest.raises(KeyboardInterrupt):
        cache.save()
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["cache.json"]


def test_concurrent_saves_never_tear(cache_home):
    """Threads and independent cache objects (as separate processes would be) saving at once:
    the file always parses, holds only valid entries, and no temporary file is left. (Saves
    merge with the file but take no lock, so one saver can overwrite another's newest key: a
    lost update costs a re-tune, never a wrong or torn file.)"""
    path = cache_home / "cache.json"
    caches = [autotune.AutotuneCache(path, DEV, "abc") for _ in range(4)]
    errors = []

    def writer(i):
        try:
            for j in range(15):
                caches[i].put(f"{i}-{j}", ParallelInfo("thread_vertex", 1, 1 + j % 4), 0.1, 1)
                caches[i].save()
                json.loads(path.read_text())  # never a torn file
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    final, msgs = warnings_of(lambda: autotune.AutotuneCache(path, DEV, "abc"))
    assert msgs == [] and len(final.entries) >= 15
    for key in final.entries:
        i, j = map(int, key.split("-"))
        assert final.get(key) == ParallelInfo("thread_vertex", 1, 1 + j % 4)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
