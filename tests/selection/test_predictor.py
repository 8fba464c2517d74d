"""The strategy predictor on the CPU: the forest evaluator against hand-built trees and against
lightgbm, features, the autotune cache, and the collector with a simulated GPU (a fake timer
and clock): resumability, the budget stop, failure recording and recovery from a lost context."""
from __future__ import annotations

import gzip
import json
import math
import pathlib
import sys
import types
import warnings
from collections import Counter

import numpy as np
import pytest
import torch

from dgl_ugraph import ugrapher
from dgl_ugraph.core import _ext, timing
from dgl_ugraph.core.abstraction import EVERY_CUDA_KEY, STRATEGIES, ParallelInfo, Signature
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.core.ops import signature
from dgl_ugraph.selection import autotune, policy, predictor
from dgl_ugraph.tuning import calls, collect, run, shards, training
from dgl_ugraph.tuning import graph_suite as gs

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEV = predictor.DeviceInfo("Fake GPU 9000", 100, 40 * 2 ** 20, 9, 0)
HAS_FOREST = _ext._C is not None and hasattr(_ext._C, "forest_predict")


def sig(edge_op="copy_lhs", gather="sum", a="src", b="null", width=64, reduce_size=1, dtype=torch.float32):
    return Signature(edge_op, gather, a, b, "edge" if gather == "none" else "dst", dtype, width, reduce_size, False, "cuda")


# ---- the forest ----------------------------------------------------------------------------------------

def hand_forest() -> predictor.Forest:
    """Two trees. Tree 0: x0 <= 0.5 ? (x1 <= 2 ? 1.0 : 2.0) : 3.0, its root missing-type NaN with
    default right; tree 1: x2 <= -1 (missing Zero, default left) ? 10 : 20. Tree 2 is one leaf."""
    dump = {"num_tree_per_iteration": 1, "num_class": 1, "max_feature_idx": 2, "tree_info": [
        {"tree_structure": {"split_feature": 0, "threshold": 0.5, "decision_type": "<=", "default_left": False,
                            "missing_type": "NaN",
                            "left_child": {"split_feature": 1, "threshold": 2.0, "decision_type": "<=", "default_left": True,
                                           "missing_type": "None", "left_child": {"leaf_value": 1.0},
                                           "right_child": {"leaf_value": 2.0}},
                            "right_child": {"leaf_value": 3.0}}},
        {"tree_structure": {"split_feature": 2, "threshold": -1.0, "decision_type": "<=", "default_left": True,
                            "missing_type": "Zero", "left_child": {"leaf_value": 10.0}, "right_child": {"leaf_value": 20.0}}},
        {"tree_structure": {"leaf_value": 0.25}},
    ]}
    return predictor.Forest.from_lightgbm_dump(dump)


def hand_expected(x):
    """LightGBM's rule by hand: NaN takes the default side only under the NaN missing type
    (otherwise it counts as 0.0); under the Zero type, |x| <= 1e-35 takes the default side."""
    x0, x1, x2 = x
    if math.isnan(x0) or x0 > 0.5:
        t0 = 3.0
    else:
        v1 = 0.0 if math.isnan(x1) else x1
        t0 = 1.0 if v1 <= 2.0 else 2.0
    v2 = 0.0 if math.isnan(x2) else x2
    t1 = 10.0 if abs(v2) <= 1e-35 or v2 <= -1.0 else 20.0
    return t0 + t1 + 0.25


HAND_ROWS = np.array([[0.0, 0.0, -5.0], [0.5, 2.0, 0.0], [0.6, 0.0, 1.0], [np.nan, 0.0, -2.0], [0.1, 3.0, np.nan],
                      [0.1, np.nan, 5.0], [-1e9, 1e9, 1e-40], [0.5000000001, 2.0, -1.0]])


def test_forest_numpy_walk_matches_hand_built_trees():
    f = hand_forest()
    assert f.num_trees == 3 and f.num_features == 3
    assert np.array_equal(f.predict_numpy(HAND_ROWS), [hand_expected(r) for r in HAND_ROWS])


@pytest.mark.skipif(not HAS_FOREST, reason="needs the compiled core (dgl_ugraph._C with forest_predict)")
def test_forest_compiled_walk_matches_hand_built_trees():
    f = hand_forest()
    assert f._compiled is not None
    assert np.array_equal(f.predict(HAND_ROWS), [hand_expected(r) for r in HAND_ROWS])
    # Rows that share columns exercise the evaluator's constant-column shortcut; wide rows too.
    rows = np.repeat(HAND_ROWS[:1], 5, axis=0)
    rows[:, 1] = [0, 1, 2, 3, np.nan]
    assert np.array_equal(f.predict(rows), [hand_expected(r) for r in rows])
    wide = np.hstack([HAND_ROWS, np.ones((len(HAND_ROWS), 4))])
    assert np.array_equal(f.predict(wide), f.predict_numpy(wide))


@pytest.mark.skipif(not HAS_FOREST, reason="needs the compiled core (dgl_ugraph._C with forest_predict)")
def test_forest_compiled_rejects_corrupt_arrays():
    f = hand_forest()
    core = _ext.core()
    left = f.left.copy()
    left[0] = 0  # a cycle: the root as its own child
    with pytest.raises(ValueError, match="preorder"):
        core.forest_predict(f.feature, f.threshold, left, f.right, f.flags, f.leaf_value, f.roots, HAND_ROWS)
    feature = f.feature.copy()
    feature[0] = 7
    with pytest.raises(ValueError, match="missing feature"):
        core.forest_predict(feature, f.threshold, f.left, f.right, f.flags, f.leaf_value, f.roots, HAND_ROWS)
    with pytest.raises(ValueError):
        core.forest_predict(f.feature, f.threshold, f.left, f.right, f.flags, f.leaf_value[:1], f.roots, HAND_ROWS)


def test_forest_rejects_categorical_and_multiclass():
    with pytest.raises(ValueError, match="categorical"):
        predictor.Forest.from_lightgbm_dump({"max_feature_idx": 0, "tree_info": [{"tree_structure": {
            "split_feature": 0, "threshold": "1||2", "decision_type": "==", "left_child": {"leaf_value": 1},
            "right_child": {"leaf_value": 2}}}]})
    with pytest.raises(ValueError, match="single-output"):
        predictor.Forest.from_lightgbm_dump({"num_class": 3, "num_tree_per_iteration": 3, "max_feature_idx": 0, "tree_info": []})


def test_forest_equals_lightgbm_on_a_trained_model(tmp_path):
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(3)
    x = rng.random((3000, 6))
    x[:, 3] = rng.integers(0, 3, 3000)  # low-cardinality, like the one-hots
    x[rng.random(x.shape) < 0.05] = 0.0
    x[rng.random(x.shape) < 0.02] = np.nan
    y = 2 * x[:, 0] + np.sin(6 * np.nan_to_num(x[:, 1])) + x[:, 3] * np.nan_to_num(x[:, 4])
    booster = lgb.train({"num_leaves": 15, "verbose": -1, "min_data_in_leaf": 5, "seed": 1}, lgb.Dataset(x, y), 40)
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(booster.dump_model()))
    forest = predictor.Forest.from_lightgbm_dump(json.loads(path.read_text()))
    test = rng.random((400, 6))
    test[rng.random(test.shape) < 0.1] = 0.0
    test[rng.random(test.shape) < 0.05] = np.nan
    test[:50, :3] = test[0, :3]  # shared columns, as in one decision
    want = booster.predict(test)
    assert np.array_equal(forest.predict_numpy(test), want)
    assert np.array_equal(forest.predict(test), want)


# ---- features and the search space ----------------------------------------------------------------------

def test_config_space_is_the_paper_grid_within_the_tiling_limits():
    wide = predictor.config_space(sig(width=512), list(STRATEGIES))
    assert len(wide) == 2 * 7 * 7 + 2 * 7 * 5  # warps: t up to ceil(512 / 32) = 16
    narrow = predictor.config_space(sig(width=8), list(STRATEGIES))
    assert {c.tiling for c in narrow if c.strategy.startswith("thread")} == {1, 2, 4, 8}
    assert {c.tiling for c in narrow if c.strategy.startswith("warp")} == {1}
    assert all(c.strategy != "warp_edge" for c in predictor.config_space(sig(), ["thread_vertex", "warp_vertex"]))
    assert calls.beyond_tilings("warp_edge", 64) == [4] and calls.beyond_tilings("thread_vertex", 64) == []


def test_feature_matrix_layout_and_values():
    case = predictor.CaseInfo(1000, 2000, 10000, 32, 5.0, 7.0, 300, 10)
    s = sig("mul", "sum", "src", "edge", width=64, dtype=torch.bfloat16)
    configs, x = predictor.feature_matrix(case, s, DEV, list(STRATEGIES))
    assert x.shape == (len(configs), len(predictor.FEATURES))
    col = {name: x[:, i] for i, name in enumerate(predictor.FEATURES)}
    assert np.all(col["log2_edges"] == math.log2(10000)) and np.all(col["avg_deg"] == 5.0)
    assert np.all(col["std_deg"] == 7.0) and np.all(col["dtype_bytes"] == 2) and np.all(col["is_bf16"] == 1)
    assert np.all(col["edge_op"] == 4) and np.all(col["b_type"] == 3) and np.all(col["sm_count"] == 100)
    for i, c in enumerate(configs):
        assert col["s_" + c.strategy][i] == 1 and sum(col["s_" + s][i] for s in STRATEGIES) == 1
        assert col["log2_g"][i] == math.log2(c.grouping) and col["log2_t"][i] == math.log2(c.tiling)
        items = 10000 if c.strategy.endswith("edge") else 2000
        lanes = 32 if c.strategy.startswith("warp") else 1
        assert col["log2_workers_per_sm"][i] == pytest.approx(math.log2(math.ceil(items / c.grouping) * c.tiling * lanes / 100))
    # Training rows and run-time rows come from the same function: a case rebuilt from a CSV row
    # gives the same matrix.
    row = dict(num_src="1000", num_dst="2000", num_edges="10000", idtype="int32", mean_deg="5.0", std_deg="7.0",
               max_deg="300", empty_rows="10", edge_op="mul", gather_op="sum", a_type="src", b_type="edge",
               c_type="dst", dtype="bfloat16", out_len="64", reduce_size="1", broadcast="0", cc="9.0",
               device=DEV.name, sm_count="100", l2_bytes=str(DEV.l2_bytes))
    c2 = training.Case(row, list(configs), np.ones(len(configs)))
    info, s2, dev2 = c2.info()
    assert np.array_equal(predictor.feature_matrix(info, s2, dev2, list(STRATEGIES))[1], x)


def test_case_info_from_graph():
    g = UGraph.from_coo(torch.tensor([0, 1, 2, 0]), torch.tensor([1, 1, 1, 2]), 4, 4, torch.int32)
    info = predictor.CaseInfo.from_graph(g)
    assert (info.num_edges, info.max_deg, info.empty_rows, info.index_bits) == (4, 3, 2, 32)
    assert info.mean_deg == 1.0


def _export_model(tmp_path, booster, family="sm90", objective="regression"):
    result = training.TrainResult(booster, {**training.DEFAULT_PARAMS, "objective": objective}, {}, 1, 0, 1, ["g"])
    src = tmp_path / "cases-x.csv.gz"
    src.write_bytes(gzip.compress(b"case_id\n"))
    return training.export(result, tmp_path / "models", family, [src], [DEV.name])


def test_model_files_load_and_rank(tmp_path, monkeypatch):
    lgb = pytest.importorskip("lightgbm")
    case = predictor.CaseInfo(5000, 5000, 50000, 32, 10.0, 3.0, 40, 0)
    configs, x = predictor.feature_matrix(case, sig(), DEV, list(STRATEGIES))
    # A target that makes warp_vertex:1:2 the best configuration.
    target = np.array([abs(c.grouping - 1) + abs(c.tiling - 2) + (0 if c.strategy == "warp_vertex" else 3) for c in configs], float)
    booster = lgb.train({"num_leaves": 31, "verbose": -1, "min_data_in_leaf": 1, "min_data_in_bin": 1},
                        lgb.Dataset(np.repeat(x, 3, axis=0), np.repeat(target, 3), feature_name=list(predictor.FEATURES)), 60)
    path = _export_model(tmp_path, booster)
    monkeypatch.setenv("DGL_UGRAPH_MODEL", str(path))
    predictor.reset()
    model = predictor.load("sm90")
    assert model is not None and model.path == path
    assert model.choose(case, sig(), DEV, list(STRATEGIES)) == ParallelInfo("warp_vertex", 1, 2)
    assert model.rank(case, sig(), DEV, list(STRATEGIES), k=3)[0] == ParallelInfo("warp_vertex", 1, 2)
    assert len(model.rank(case, sig(), DEV, list(STRATEGIES))) == len(configs)
    # A manifest of other features is refused with a warning, and the heuristic serves.
    manifest = predictor.manifest_path(path)
    data = json.loads(manifest.read_text())
    data["feature_version"] = -1
    manifest.write_text(json.dumps(data))
    predictor.reset()
    with pytest.warns(RuntimeWarning, match="other features"):
        assert predictor.load("sm90") is None
    predictor.reset()


def test_no_model_means_none(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("DGL_UGRAPH_MODEL", raising=False)
    predictor.reset()
    assert predictor.load("sm00") is None
    monkeypatch.setenv("DGL_UGRAPH_PREDICTOR", "0")
    assert predictor.load("sm90") is None
    predictor.reset()


def test_user_cache_model_is_preferred(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("DGL_UGRAPH_MODEL", raising=False)
    paths = predictor.model_paths("sm90")
    assert paths[0] == tmp_path / "dgl_ugraph" / "models" / "sm90.json"
    assert paths[1] == predictor.SHIPPED_DIR / "sm90.json"


# ---- the autotune cache -----------------------------------------------------------------------------------

def test_autotune_cache_round_trip_and_merge(tmp_path):
    path = tmp_path / "cache.json"
    a = autotune.AutotuneCache(path, DEV, "h1")
    a.put("k1", ParallelInfo("warp_edge", 8, 4), 0.5, 5)
    a.save()
    b = autotune.AutotuneCache(path, DEV, "h1")  # another process, started later
    assert b.get("k1") == ParallelInfo("warp_edge", 8, 4)
    b.put("k2", ParallelInfo("thread_vertex", 1, 2), 0.1, 5)
    b.save()
    a.put("k3", ParallelInfo("thread_edge", 2, 1), 0.2, 5)
    a.save()  # merges b's entry instead of dropping it
    c = autotune.AutotuneCache(path, DEV, "h1")
    assert {k: str(c.get(k)) for k in ("k1", "k2", "k3")} == {"k1": "warp_edge:8:4", "k2": "thread_vertex:1:2",
                                                                "k3": "thread_edge:2:1"}
    assert not [p for p in tmp_path.iterdir() if p.name != "cache.json"]  # no temporary files left


@pytest.mark.parametrize("content, match", [
    ("{not json", "ignoring"),
    (json.dumps({"format": "something else"}), "not a dgl_ugraph autotune cache"),
    (json.dumps({"format": autotune.CACHE_FORMAT, "version": autotune.CACHE_VERSION,
                 "device": {"name": "Other GPU"}, "entries": {}}), "written for"),
])
def test_autotune_cache_ignores_corrupt_or_foreign_files(tmp_path, content, match):
    path = tmp_path / "cache.json"
    path.write_text(content)
    with pytest.warns(RuntimeWarning, match=match) as record:
        cache = autotune.AutotuneCache(path, DEV, "h1")
    assert len(record) == 1 and cache.entries == {}
    cache.put("k", ParallelInfo("warp_vertex"), 1.0, 1)
    cache.save()  # the bad file is replaced by a valid one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert autotune.AutotuneCache(path, DEV, "h1").get("k") == ParallelInfo("warp_vertex")


def test_autotune_cache_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "cache.json"
    cache = autotune.AutotuneCache(path, DEV, "h1")
    cache.put("k", ParallelInfo("warp_vertex"), 1.0, 1)
    cache.save()
    before = path.read_bytes()

    def broken_dump(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(autotune.json, "dump", broken_dump)
    cache.put("k2", ParallelInfo("thread_edge"), 1.0, 1)
    with pytest.raises(OSError):
        cache.save()
    assert path.read_bytes() == before  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]


def test_autotuner_times_top_k_once_then_remembers(tmp_path):
    timed = []
    times = {ParallelInfo("warp_edge", 8, 4): 0.3, ParallelInfo("thread_edge", 1, 1): 0.5,
             ParallelInfo("warp_vertex", 1, 1): 0.2, ParallelInfo("thread_vertex", 1, 1): 0.1}

    def measure(graph, op, configs):
        timed.append(list(configs))
        return {c: times[c] for c in configs}
    cache = autotune.AutotuneCache(tmp_path / "c.json", DEV, "h")
    tuner = autotune.Autotuner(cache)
    case = predictor.CaseInfo(10, 10, 20, 32, 2.0, 1.0, 4, 0)
    ranked = list(times)
    assert tuner.choose(None, None, case, sig(), ranked, 3, measure) == ParallelInfo("warp_vertex", 1, 1)
    assert timed == [ranked[:3]]
    assert tuner.choose(None, None, case, sig(), ranked, 3, measure) == ParallelInfo("warp_vertex", 1, 1)
    assert len(timed) == 1 and tuner.hits == 1
    # A new process reads the winner from the file; a winner no longer valid is re-tuned.
    fresh = autotune.Autotuner(autotune.AutotuneCache(tmp_path / "c.json", DEV, "h"))
    assert fresh.choose(None, None, case, sig(), ranked, 3, measure) == ParallelInfo("warp_vertex", 1, 1) and len(timed) == 1
    assert fresh.choose(None, None, case, sig(), [ranked[0], ranked[3]], 2, measure) == ParallelInfo("thread_vertex", 1, 1)
    assert len(timed) == 2
    assert autotune.cache_key(case, sig()) != autotune.cache_key(case, sig(width=32))


# ---- the timing engine with a fake runner ------------------------------------------------------------------

class World:
    """A simulated GPU: a clock, a cost model, configurations that are refused, that raise, or
    that kill the context."""

    def __init__(self, refuse=(), error=(), lose=None, lose_times=1, noise=0.0, seed=0):
        self.now = 0.0
        self.refuse, self.error = set(refuse), set(error)
        self.lose, self.lose_times = lose, lose_times  # (case-key substring, config string)
        self.dead = False
        self.rng = np.random.default_rng(seed)
        self.noise = noise
        self.launches = 0

    def cost_ms(self, graph, sig_, c: ParallelInfo) -> float:
        """Time grows with work over parallelism, vertex strategies suffer from skew, edge
        strategies from atomics, and tiles narrower than a warp waste lanes."""
        st = graph.stats
        e, width = max(graph.num_edges, 1), sig_.width
        items = e if c.strategy.endswith("edge") else max(graph.num_dst, 1)
        lanes = 32 if c.strategy.startswith("warp") else 1
        workers = math.ceil(items / c.grouping) * c.tiling * lanes
        par = min(workers, 20000) / 20000
        base = e * width * 1e-7 / par
        if c.strategy.endswith("vertex"):
            base += st.max * width / c.tiling * c.grouping * 1e-5
        elif sig_.gather_op != "none":
            base *= 1.3
        if lanes > 1:
            base *= 32 * math.ceil(width / c.tiling / 32) / max(width / c.tiling, 1)
        return (base + 0.004) * (1 + self.noise * self.rng.random())


class FakeRunner:
    def __init__(self, world, graph, op, key):
        self.world, self.graph, self.key = world, graph, key
        self.sig = signature(graph, op)[0]
        self.starved_batches = 0

    def set(self, c):
        if str(c) in self.world.refuse:
            raise timing.Refused("not for this case")
        if str(c) in self.world.error:
            raise RuntimeError("launch failed")
        return c

    def time(self, batch):
        w = self.world
        out = []
        for c, n in batch:
            if w.lose and w.lose_times > 0 and w.lose[0] in self.key and str(c) == w.lose[1]:
                w.lose_times -= 1
                w.dead = True
            samples = [w.cost_ms(self.graph, self.sig, c) for _ in range(n)]
            w.now += sum(samples) / 1e3 + 1e-4 * n
            w.launches += n
            out.append(samples)
        if w.dead:
            raise timing.DeviceLost("an illegal memory access was encountered")
        return out, False


class FakeBackend:
    def __init__(self, world):
        self.world = world
        self.key = ""

    def device_info(self):
        return DEV

    def compiled(self):
        return EVERY_CUDA_KEY

    def graph(self, src, dst, n):
        return UGraph.from_coo(torch.from_numpy(src).long(), torch.from_numpy(dst).long(), n, n, torch.int32)

    def with_idtype(self, graph, idtype):
        return graph if graph.idtype == calls.IDTYPES[idtype] else graph.to(idtype=calls.IDTYPES[idtype])

    def reverse(self, graph):
        return graph.reverse()

    def operand(self, graph, rows, shape, dtype):
        if self.world.dead:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return torch.empty((rows,) + shape, dtype=calls.DTYPES[dtype])

    def runner(self, graph, op, first):
        return FakeRunner(self.world, graph, op, self.key)

    def release(self):
        pass

    def alive(self):
        return not self.world.dead


def test_time_configs_cuts_repeats_and_records_failures():
    world = World(refuse={"warp_edge:1:1"}, error={"warp_vertex:2:1"})
    g = UGraph.from_coo(*[torch.from_numpy(a).long() for a in calls.load_source(
        calls.GraphSource("x", "degree", "train", 2000, spec=gs.GraphSpec("x", "degree", 500, 2000, 20.0, seed=1)))[:2]],
        500, 500, torch.int32)
    op = calls.make_op(FakeBackend(world), g, calls.CALLS["copy_u_sum"], 64, 1, "float32")
    runner = FakeRunner(world, g, op, "k")
    configs = predictor.config_space(runner.sig, list(STRATEGIES))
    timings = timing.time_configs(runner, configs, timing.TimingPolicy(cut=2.0, target_ms=1.0))
    by = {str(t.config): t for t in timings}
    assert by["warp_edge:1:1"].status == "refused" and by["warp_vertex:2:1"].status == "error"
    ok = [t for t in timings if t.status == "ok"]
    best = min(t.first_ms for t in timings if t.status in ("ok", "cut"))
    assert ok and all(t.first_ms <= 2.0 * best for t in ok) and all(t.reps >= 1 for t in ok)
    assert all(t.first_ms > 2.0 * best and t.reps == 1 and t.ms == t.first_ms for t in timings if t.status == "cut")
    assert {t.status for t in timings} == {"ok", "cut", "refused", "error"}


# ---- the collector with the fake backend -------------------------------------------------------------------

def small_sources():
    specs = [gs.GraphSpec("a-small", "degree", 300, 1500, 3.0, seed=1),
             gs.GraphSpec("b-skewed", "degree", 400, 4000, 40.0, "clustered", seed=2),
             gs.GraphSpec("c-banded", "degree", 200, 800, 0.5, "banded", seed=3)]
    out = [calls.GraphSource(s.name, s.family, "holdout" if i == 2 else "train", s.num_edges, spec=s,
                            variants=(("float32", "int32"),) + ((("float16", "int32"),) if i == 0 else ()))
           for i, s in enumerate(specs)]
    return out


def make_collector(tmp_path, world, deadline=1e9, widths=(8, 64), **kw):
    backend = FakeBackend(world)
    cfg = collect.CollectConfig(tmp_path, "run1", deadline, widths=widths, heads=(1, 4),
                             calls=("copy_u_sum", "copy_u_sum_rev", "gat_u_dot_v", "gat_e_sub_v"), **kw)
    col = collect.Collector(backend, cfg, clock=lambda: world.now, log=lambda s: None)
    real = col._run_case

    def run_case(src, graph, case):
        backend.key = case.key
        return real(src, graph, case)
    col._run_case = run_case
    return col


def planned(sources, widths=(8, 64)):
    return {c.key for s in sources for c in calls.graph_cases(s, widths, (1, 4),
            ("copy_u_sum", "copy_u_sum_rev", "gat_u_dot_v", "gat_e_sub_v"))}


def test_collector_writes_every_case_and_resumes(tmp_path):
    sources = small_sources()
    world = World()
    stats = make_collector(tmp_path, world).run(sources)
    assert stats.stop_reason == "suite complete" and stats.failed == 0
    rows = shards.read_rows(tmp_path / f"cases-{DEV.slug}-run1.csv.gz")
    assert {r["case_id"] for r in rows} == planned(sources) and len(rows) == len(planned(sources))
    timings = shards.read_rows(tmp_path / f"timings-{DEV.slug}-run1.csv.gz")
    r = next(r for r in rows if r["call"] == "gat_u_dot_v" and r["F"] == "64")
    assert (r["edge_op"], r["a_type"], r["b_type"], r["heads"], r["out_len"], r["reduce_size"]) == \
        ("dot", "src", "dst", "4", "4", "16")
    assert r["models"] == "gat.bwd" and r["split"] == "train" and r["device"] == DEV.name
    mine = [t for t in timings if t["case_id"] == r["case_id"]]
    assert int(r["n_configs"]) == len(predictor.config_space(Signature("dot", "none", "src", "dst", "edge",
                                                                       torch.float32, 4, 16, False, "cuda"), STRATEGIES))
    assert len([t for t in mine if t["status"] != "beyond"]) == int(r["n_configs"])
    assert float(r["best_ms"]) == min(float(t["ms"]) for t in mine if t["status"] in ("ok", "cut"))
    # A second run finds nothing to do.
    world2 = World()
    stats2 = make_collector(tmp_path, world2).run(sources)
    assert stats2.cases == 0 and world2.launches == 0


def test_collector_stops_at_budget_and_the_next_run_finishes(tmp_path):
    sources = small_sources()
    total = planned(sources)
    world = World()
    first = make_collector(tmp_path, world, deadline=0.05).run(sources)
    assert first.stop_reason == "budget" and 0 < first.cases < len(total)
    rows = shards.read_rows(tmp_path / f"cases-{DEV.slug}-run1.csv.gz")
    assert len(rows) == first.cases  # everything finished was flushed
    # It stopped near the deadline: past it by less than one case.
    assert world.now < 0.05 + max(float(r["wall_s"]) for r in rows)
    # The next run (a new run id, so new files) does the rest and nothing twice.
    world2 = World()
    backend = FakeBackend(world2)
    cfg = collect.CollectConfig(tmp_path / "next", "run2", 1e9, resume_dirs=(tmp_path,), widths=(8, 64), heads=(1, 4),
                             calls=("copy_u_sum", "copy_u_sum_rev", "gat_u_dot_v", "gat_e_sub_v"))
    second = collect.Collector(backend, cfg, clock=lambda: world2.now, log=lambda s: None).run(sources)
    rows2 = shards.read_rows(tmp_path / "next" / f"cases-{DEV.slug}-run2.csv.gz")
    keys1, keys2 = {r["case_id"] for r in rows}, {r["case_id"] for r in rows2}
    assert not keys1 & keys2 and keys1 | keys2 == total and second.stop_reason == "suite complete"


def test_collector_survives_a_config_that_kills_the_context(tmp_path):
    sources = small_sources()[:1]
    victim = "a-small|copy_u_sum|64|float32|int32"
    world = World(lose=(victim, "thread_vertex:64:1"), lose_times=2)
    restarts = 0
    while True:  # what the supervisor does: a new worker (new collector, fresh context) each time
        world.dead = False
        col = make_collector(tmp_path, world)
        try:
            stats = col.run(sources)
            break
        except timing.DeviceLost:
            col.note_device_lost()
            restarts += 1
            assert restarts < 5
    assert restarts == 2  # batch death, then the isolating re-run names the configuration
    rows = {r["case_id"]: r for r in shards.read_rows(tmp_path / f"cases-{DEV.slug}-run1.csv.gz")}
    assert set(rows) == planned(sources) and rows[victim]["status"] == "ok"
    bad = [t for t in shards.read_rows(tmp_path / f"timings-{DEV.slug}-run1.csv.gz")
           if t["case_id"] == victim and t["status"] == "error"]
    assert [(t["strategy"], t["g"], t["t"], t["message"]) for t in bad] == [("thread_vertex", "64", "1", "killed the GPU context")]
    state = json.loads((tmp_path / "state-run1.json").read_text())
    assert state["suspect"] is None and state["bad"] == {} and stats.stop_reason == "suite complete"


def test_collector_records_failed_cases_and_goes_on(tmp_path, monkeypatch):
    sources = small_sources()[:1]
    world = World()
    col = make_collector(tmp_path, world)
    real = calls.make_op

    def flaky(backend, graph, call, width, heads, dtype):
        if call.edge_op == "dot" and width == 8:
            raise MemoryError("out of memory")
        return real(backend, graph, call, width, heads, dtype)
    monkeypatch.setattr(collect, "make_op", flaky)
    stats = col.run(sources)
    rows = shards.read_rows(tmp_path / f"cases-{DEV.slug}-run1.csv.gz")
    failed = [r for r in rows if r["status"] == "failed"]
    assert stats.failed == len(failed) == 2 and all("out of memory" in r["message"] for r in failed)
    assert len(rows) == len(planned(sources))


def test_truncated_shard_keeps_complete_members(tmp_path):
    path = tmp_path / "cases-x.csv.gz"
    shards.Shards._append(path, ("a", "b"), [{"a": 1, "b": 2}])
    shards.Shards._append(path, ("a", "b"), [{"a": 3, "b": 4}])
    whole = path.read_bytes()
    shards.Shards._append(path, ("a", "b"), [{"a": 5, "b": 6}])
    path.write_bytes(path.read_bytes()[:len(whole) + 12])  # the last member cut short by a kill
    assert shards.read_rows(path) == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]


def test_tier_scheduler_spreads_time_over_sizes():
    srcs = [calls.GraphSource(f"s{i}", "degree", "train", 1000) for i in range(3)] + \
           [calls.GraphSource(f"l{i}", "degree", "train", 10 ** 7) for i in range(3)]
    sched = collect.TierScheduler(srcs)
    order = []
    while (s := sched.pop()) is not None:
        order.append(s.name)
        sched.charge(s, 10.0 if s.name.startswith("l") else 1.0)
    assert order[:2] == ["s0", "l0"] and order.index("l1") > order.index("s2")


def test_sample_cases_spreads_over_calls_and_is_stable():
    src = calls.GraphSource("g", "degree", "train", 1000, variants=(("float32", "int32"), ("float64", "int32")))
    every = calls.graph_cases(src)
    picked = calls.sample_cases(every, 40)
    assert len(picked) == 40 and picked == calls.sample_cases(list(reversed(every)), 40)[::-1]
    assert [c for c in every if c in picked] == picked  # collection order kept
    counts = {name: sum(c.call == name for c in picked) for name in {c.call for c in every}}
    assert max(counts.values()) - min(counts.values()) <= 1  # round-robin over the calls
    assert calls.sample_cases(every, 0) == every and calls.sample_cases(every, 10 ** 6) == every


def test_collector_caps_cases_per_graph(tmp_path):
    specs = [gs.GraphSpec(f"c{i}", "degree", 300, 1500, 3.0, "random", seed=i) for i in range(2)]
    sources = [calls.GraphSource(s.name, "degree", "train", s.num_edges, spec=s) for s in specs]
    col = make_collector(tmp_path, World(noise=0.0), cases_per_graph=7)
    col.run(sources)
    rows = shards.read_rows(next(tmp_path.glob("cases-*.csv.gz")))
    assert sorted(r["graph"] for r in rows) == ["c0"] * 7 + ["c1"] * 7


def test_collector_runs_only_the_given_case_ids(tmp_path):
    specs = [gs.GraphSpec(f"c{i}", "degree", 300, 1500, 3.0, "random", seed=i) for i in range(2)]
    sources = [calls.GraphSource(s.name, "degree", "train", s.num_edges, spec=s) for s in specs]
    wanted = {"c1|copy_u_sum|64|float32|int32", "c1|gat_u_dot_v|8|float32|int32"}
    col = make_collector(tmp_path, World(noise=0.0), case_ids=frozenset(wanted))
    col.run(sources)
    rows = shards.read_rows(next(tmp_path.glob("cases-*.csv.gz")))
    assert {r["case_id"] for r in rows} == wanted


def test_audit_summary_reports_cut_losses_and_beyond_limit_wins():
    cases = [{"case_id": "c", "audit": "1", "status": "ok"}]
    timings = [dict(case_id="c", status="ok", ms="1.0", first_ms="3.0"),   # the winner, slow at screening
               dict(case_id="c", status="ok", ms="1.2", first_ms="1.0"),
               dict(case_id="c", status="beyond", ms="0.9", first_ms="0.9")]
    s = run.audit_summary(cases, timings, cut=2.5)
    assert s["audited_cases"] == 1 and s["cut_lost_winner"] == 1 and s["cut_worst_slowdown"] == pytest.approx(1.2)
    assert s["beyond_limit_faster_cases"] == 1


# ---- DGL's calls ---------------------------------------------------------------------------------------------

@pytest.mark.skipif(_ext._C is None, reason="needs the compiled core")
def test_every_collected_call_runs_on_the_cpu_core():
    s, d, n = calls.load_source(small_sources()[2])
    backend = FakeBackend(World())
    g = backend.graph(s, d, n)
    backend.operand = lambda graph, rows, shape, dtype: torch.rand((rows,) + shape, dtype=calls.DTYPES[dtype]) + 0.5
    for name, call in calls.CALLS.items():
        graph = g.reverse() if call.graph == "rev" else g
        case = calls.CaseSpec("g", name, 16 if call.per_width else 4, "float32", "int32")
        op = calls.make_op(backend, graph, call, case.width, case.heads, "float32")
        out = ugrapher(graph, op)[0]
        assert out.shape[0] == (graph.num_edges if call.gather_op == "none" else graph.num_dst)
        assert torch.isfinite(out).all()


def test_dgl_calls_table_matches_what_dgl_issues(monkeypatch):
    """Records the _gspmm/_gsddmm calls of DGL's layers, forward and backward, on the CPU and
    checks each maps to a collected call. (EdgeSoftmax takes a CPU-only kernel on the CPU; its
    GPU calls are checked against the source text instead.)"""
    dgl = pytest.importorskip("dgl")
    import dgl.backend.pytorch.sparse as sp
    from dgl.nn.pytorch import GATConv, GINConv, GraphConv, SAGEConv
    seen = []
    real_spmm, real_sddmm = sp._gspmm, sp._gsddmm

    def shape(t):
        return None if t is None else tuple(t.shape[1:])

    def spmm(gidx, op, reduce_op, u, e):
        seen.append(("spmm", op, reduce_op, shape(u), shape(e)))
        return real_spmm(gidx, op, reduce_op, u, e)

    def sddmm(gidx, op, lhs, rhs, lt="u", rt="v"):
        seen.append(("sddmm", op, lt, rt, shape(lhs), shape(rhs)))
        return real_sddmm(gidx, op, lhs, rhs, lt, rt)
    monkeypatch.setattr(sp, "_gspmm", spmm)
    monkeypatch.setattr(sp, "_gsddmm", sddmm)
    g = dgl.graph((torch.tensor([0, 1, 2, 3, 4, 0]), torch.tensor([1, 2, 3, 4, 0, 2])), num_nodes=5)
    f = 8
    layers = {"gcn": GraphConv(f, f), "gin": GINConv(None, "sum"), "sage_mean": SAGEConv(f, f, "mean"),
              "sage_gcn": SAGEConv(f, f, "gcn"), "sage_pool": SAGEConv(f, f, "pool"), "gat": GATConv(f, f // 4, 4)}
    expected = set()
    for name, call in calls.CALLS.items():
        def templ(o, width=f, heads=4):
            return None if o is None else calls.operand_shape(o[1], width, heads)
        a, b = templ(call.a), templ(call.b)
        if call.gather_op == "none":
            tgt = {"src": "u", "dst": "v", "edge": "e"}
            expected.add(("sddmm", call.edge_op, tgt[call.a[0]], tgt[call.b[0]], a, b))
        else:
            expected.add(("spmm", call.edge_op, call.gather_op, a, b))
    for name, layer in layers.items():
        seen.clear()
        x = torch.rand(5, f, requires_grad=True)
        layer(g, x).sum().backward()
        for s in seen:
            # GAT's per-head calls are collected at H in ATTENTION_HEADS; here H = 4.
            assert s in expected, f"{name} issued {s}, which the collector does not cover"
    # GraphConv with an edge weight issues u_mul_w_sum forward and backward.
    seen.clear()
    x = torch.rand(5, f, requires_grad=True)
    GraphConv(f, f, norm="none")(g, x, edge_weight=torch.rand(6)).sum().backward()
    assert set(seen) <= expected and ("spmm", "mul", "sum", (f,), (1,)) in seen


# ---- the decision and the whole pipeline --------------------------------------------------------------------

class CudaLikeGraph:
    """What policy.learned() reads from a graph, on a pretend CUDA device."""

    def __init__(self):
        g = UGraph.from_coo(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4, 4, torch.int32)
        self.num_src, self.num_dst, self.num_edges, self.idtype, self.stats = 4, 4, 4, torch.int32, g.stats
        self.device = torch.device("cuda", 0)


class FixedModel:
    def __init__(self, order):
        self.order = order

    def choose(self, case, sig_, dev, allowed):
        return self.order[0]

    def rank(self, case, sig_, dev, allowed, k=None):
        return list(self.order)


def test_decide_uses_the_model_then_the_autotuner(monkeypatch, tmp_path):
    order = [ParallelInfo("warp_edge", 8, 4), ParallelInfo("thread_edge", 1, 1), ParallelInfo("warp_vertex", 2, 1)]
    monkeypatch.setattr(predictor, "device_info", lambda device=None: DEV)
    monkeypatch.setattr(predictor, "load", lambda family: FixedModel(order))
    monkeypatch.setattr(policy, "_failed", [])
    graph = CudaLikeGraph()
    assert policy.learned(graph, sig(), list(STRATEGIES)) == order[0]
    assert policy.learned(UGraph.from_coo(torch.tensor([0]), torch.tensor([0]), 1, 1), sig(), list(STRATEGIES)) is None
    # Autotuning: the top-k are timed once, the fastest wins and is remembered.
    measured = []

    def measure(g, op, configs):
        measured.append(list(configs))
        return {c: 1.0 + i for i, c in enumerate(reversed(configs))}
    tuner = autotune.Autotuner(autotune.AutotuneCache(tmp_path / "a.json", DEV, "h"))
    monkeypatch.setenv("DGL_UGRAPH_AUTOTUNE", "1")
    monkeypatch.setenv("DGL_UGRAPH_AUTOTUNE_TOPK", "2")
    monkeypatch.setattr(autotune, "tuner_for", lambda dev, core_hash: tuner)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(_ext, "core", lambda: type("Core", (), {"build_info": staticmethod(lambda: {"cuda_source_hash": "h"})}))
    assert policy.learned(graph, sig(), list(STRATEGIES), op=object(), measure=measure) == order[1]
    assert policy.learned(graph, sig(), list(STRATEGIES), op=object(), measure=measure) == order[1]
    assert measured == [order[:2]]
    # Without the operands, or without a way to time them, there is nothing to time: the model decides.
    assert policy.learned(graph, sig(), list(STRATEGIES)) == order[0]
    assert policy.learned(graph, sig(), list(STRATEGIES), op=object()) == order[0]


def test_decide_without_a_model_autotunes_the_shortlist_or_defers(monkeypatch):
    monkeypatch.setattr(predictor, "device_info", lambda device=None: DEV)
    monkeypatch.setattr(predictor, "load", lambda family: None)
    monkeypatch.setattr(policy, "_failed", [])
    graph = CudaLikeGraph()
    assert policy.learned(graph, sig(), list(STRATEGIES)) is None  # the heuristic serves
    short = policy.shortlist(sig(width=8), graph.stats, list(STRATEGIES))
    assert len(short) == len(set(short)) and all(c.tiling <= predictor.max_tiling(c.strategy, 8) for c in short)
    assert {c.strategy for c in short} == set(STRATEGIES)


def test_decide_failure_warns_once_and_defers(monkeypatch):
    class Broken:
        def choose(self, *a):
            raise RuntimeError("corrupt")
    monkeypatch.setattr(predictor, "device_info", lambda device=None: DEV)
    monkeypatch.setattr(predictor, "load", lambda family: Broken())
    monkeypatch.setattr(policy, "_failed", [])
    with pytest.warns(RuntimeWarning, match="corrupt"):
        assert policy.learned(CudaLikeGraph(), sig(), list(STRATEGIES)) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert policy.learned(CudaLikeGraph(), sig(), list(STRATEGIES)) is None


def _script(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_collect_train_export_evaluate(tmp_path):
    """The whole offline path on simulated timings: collect, train_predictor.py, the exported
    model loaded without lightgbm's help, eval_predictor.py's files."""
    pytest.importorskip("lightgbm")
    pytest.importorskip("matplotlib")
    specs = [gs.GraphSpec(f"g{i}", "degree", 300 + 100 * i, 1500 + 900 * i, [0.5, 3.0, 30.0][i % 3],
                          ["random", "banded", "clustered"][i % 3], seed=i) for i in range(6)]
    sources = [calls.GraphSource(s.name, "degree", "holdout" if i in (1, 4) else "train", s.num_edges, spec=s)
               for i, s in enumerate(specs)]
    world = World(noise=0.02)
    make_collector(tmp_path / "data", world).run(sources)
    assert _script("train_predictor").main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "models"),
                                            "--trees", "40"]) == 0
    model = predictor.Predictor.from_files(tmp_path / "models" / "sm90.json")
    manifest = model.manifest
    assert manifest["training_data"]["cases"] > 0 and manifest["family"] == "sm90" and manifest["devices"] == [DEV.name]
    assert _script("eval_predictor").main(["--data", str(tmp_path / "data"), "--model", str(tmp_path / "models" / "sm90.json"),
                                           "--out-dir", str(tmp_path / "bench")]) == 0
    import csv as _csv
    with gzip.open(tmp_path / "bench" / "predictor.csv.gz", "rt", newline="") as fh:
        rows = list(_csv.DictReader(fh))
    assert list(rows[0])[:8] == ["graph", "op", "F", "dtype", "predicted_ms", "oracle_ms", "heuristic_ms", "fixed_best_ms"]
    assert {r["graph"] for r in rows} == {"g1", "g4"}
    assert all(float(r[k]) >= float(r["oracle_ms"]) for r in rows for k in ("predicted_ms", "heuristic_ms"))
    assert (tmp_path / "bench" / "predictor_fig12.png").stat().st_size > 10_000
    assert "Acceptance" in (tmp_path / "bench" / "predictor.md").read_text()

    # The shipped recipe: every graph in training, none held back; then cross-validation by graph
    # evaluates every case with a model that never saw its graph.
    assert _script("train_predictor").main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "all"),
                                            "--trees", "40", "--include-holdout", "--val-fraction", "0"]) == 0
    manifest = predictor.Predictor.from_files(tmp_path / "all" / "sm90.json").manifest
    assert manifest["training_data"]["graphs"] == 6 and manifest["training_data"]["validation_cases"] == 0
    assert _script("eval_predictor").main(["--data", str(tmp_path / "data"), "--model", str(tmp_path / "all" / "sm90.json"),
                                           "--out-dir", str(tmp_path / "cv"), "--cv", "3"]) == 0
    with gzip.open(tmp_path / "cv" / "predictor.csv.gz", "rt", newline="") as fh:
        rows = list(_csv.DictReader(fh))
    assert {r["graph"] for r in rows} == {s.name for s in specs}
    assert all(float(r["predicted_ms"]) >= float(r["oracle_ms"]) for r in rows)
    assert "3-fold cross-validation by graph" in (tmp_path / "cv" / "predictor.md").read_text()


def _fake_case(graph: str, i: int) -> training.Case:
    return training.Case({"graph": graph, "case_id": f"{graph}-{i}"}, [], np.ones(1))


def test_folds_deal_whole_graphs_evenly_and_stably():
    cases = [_fake_case(f"g{g}", i) for g in range(11) for i in range(1 + g % 3)]
    fold = training.fold_of_graph(cases, 4)
    assert set(fold) == {f"g{g}" for g in range(11)}
    sizes = Counter(fold.values())
    assert set(sizes) == {0, 1, 2, 3} and max(sizes.values()) - min(sizes.values()) <= 1
    assert training.fold_of_graph(list(reversed(cases)), 4) == fold


def test_cross_validation_never_trains_on_the_graph_it_decides(monkeypatch):
    """Each fold's model is trained on the other folds' graphs alone, and decides every case of its
    own fold once."""
    cases = [_fake_case(f"g{g}", i) for g in range(6) for i in range(2)]
    fold = training.fold_of_graph(cases, 3)
    trained_on = []

    def fake_train(train_cases, num_trees, val_fraction, params, log):
        assert val_fraction == 0.0
        trained_on.append({training.graph_group(c) for c in train_cases})
        return types.SimpleNamespace(booster=types.SimpleNamespace(predict=None))

    decided = []

    def fake_pick(case, predict, higher_is_better):
        graphs = trained_on[-1]
        assert training.graph_group(case) not in graphs and len(graphs) == 4
        decided.append(case.row["case_id"])
        return ParallelInfo("warp_edge", 1, 1), ParallelInfo("warp_edge", 1, 1)

    monkeypatch.setattr(training, "train", fake_train)
    monkeypatch.setattr(training, "ranked_pick", fake_pick)
    out = training.cross_validate(cases, 3, log=lambda _: None)
    assert sorted(decided) == sorted(c.row["case_id"] for c in cases) and set(out) == {id(c) for c in cases}
    assert [sorted(g) for g in trained_on] == [sorted(g for g in fold if fold[g] != k) for k in range(3)]
    with pytest.raises(ValueError):
        training.cross_validate(cases[:2], 3)


@pytest.mark.skipif(_ext._C is None, reason="needs the compiled core (its Params)")
def test_cuda_runner_glue_on_a_mock_device(monkeypatch):
    """CudaRunner and measure_on_gpu against a stand-in for the core's CUDA entry points (a timing
    loop whose runs cost a known time): the Python glue the GPU run depends on, including a batch
    that starves, one whose configuration fails to queue, and a lost context."""
    real = _ext.core()
    batches = []
    behaviour = {"starve_once": True, "fail_strategy": None, "lose": False}

    def cost(p):
        return 0.01 * (1 + p.strategy) * (1 + p.grouping / 64) / p.tiling ** 0.5

    class Core:
        Params = real.Params

        @staticmethod
        def cuda_check(p):
            return (2, "refused by the core") if p.grouping == 64 and p.strategy == 0 else (0, "")

        @staticmethod
        def cuda_workspace_bytes(p):
            return 256 if p.strategy in (1, 3) else 0

        @staticmethod
        def cuda_time(ps, runs, stream, gate_timeout_ms):
            assert len(ps) == len(runs) and gate_timeout_ms > 0
            if behaviour["lose"]:
                return 4, "an illegal memory access was encountered", -1, [], False
            for i, p in enumerate(ps):
                assert p.strategy not in (1, 3) or (p.workspace != 0 and p.workspace_bytes >= 256
                                                    and p.workspace_zeroed == 1)
                if p.strategy == behaviour["fail_strategy"]:
                    return 4, "too many resources requested for launch", i, [], False
            batches.append(sum(runs))
            starved = behaviour["starve_once"] and sum(runs) > 1
            behaviour["starve_once"] = behaviour["starve_once"] and not starved
            return 0, "", -1, [cost(p) for p, n in zip(ps, runs) for _ in range(n)], starved

    monkeypatch.setattr(_ext, "core", lambda: Core)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    s, d, n = calls.load_source(small_sources()[0])
    g = FakeBackend(World()).graph(s, d, n)
    op = calls.make_op(type("B", (), {"operand": staticmethod(lambda graph, rows, shape, dtype: torch.rand((rows,) + shape))})(),
                      g, calls.CALLS["copy_u_sum"], 16, 1, "float32")
    configs = predictor.config_space(signature(g, op)[0], list(STRATEGIES))
    runner = timing.CudaRunner(g, op, configs[0])
    policy = timing.TimingPolicy(cut=2.0, target_ms=0.05, batch_launches=16)
    timings = timing.time_configs(runner, configs, policy)
    by = {t.config: t for t in timings}
    assert by[ParallelInfo("thread_vertex", 64, 1)].status == "refused"
    for c, t in by.items():
        if t.status in ("ok", "cut"):
            want = 0.01 * (1 + STRATEGIES.index(c.strategy)) * (1 + c.grouping / 64) / c.tiling ** 0.5
            assert t.ms == pytest.approx(want) and t.first_ms == pytest.approx(want)
    # Batches respect the launch limit, and the one that starved was timed again in halves.
    assert max(batches) <= 16 and runner.starved_batches == 1
    assert runner.workspaces[0] is None and runner.workspaces[1].numel() == 256
    best = min((t for t in timings if t.status == "ok"), key=lambda t: t.ms)
    times = timing.measure_on_gpu(g, op, [best.config, ParallelInfo("warp_edge", 1, 1)])
    assert min(times, key=times.get) == best.config

    # A configuration that fails to queue is recorded; the rest of its batch is still timed.
    behaviour["fail_strategy"] = STRATEGIES.index("warp_edge")
    timings = timing.time_configs(timing.CudaRunner(g, op, configs[0]), configs, policy)
    statuses = {t.config.strategy: t.status for t in timings if t.status != "refused"}
    assert statuses["warp_edge"] == "error" and statuses["warp_vertex"] in ("ok", "cut")
    behaviour["lose"] = True
    with pytest.raises(timing.DeviceLost):
        timing.time_configs(timing.CudaRunner(g, op, configs[0]), configs, policy)


def test_supervisor_restarts_a_worker_that_lost_the_gpu(tmp_path):
    counter = tmp_path / "n"
    script = ("import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text()) if p.exists() else 0; "
              "p.write_text(str(n + 1)); sys.exit(3 if n < 2 else 0)")
    logs = []
    rc = run.supervise([sys.executable, "-c", script, str(counter)], deadline=1e12, log=logs.append)
    assert rc == 0 and counter.read_text() == "3" and len(logs) == 2
    counter.unlink()
    rc = run.supervise([sys.executable, "-c", script, str(counter)], deadline=1e12, max_restarts=1, log=logs.append)
    assert rc == 3 and counter.read_text() == "2"
    assert run.supervise([sys.executable, "-c", "raise SystemExit(1)"], deadline=1e12, log=logs.append) == 1


def test_finish_meta_summarises_the_run(tmp_path):
    world = World()
    make_collector(tmp_path, world, audit_every=2).run(small_sources()[:2])
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"run_id": "run1"}))
    out = run.finish_meta(meta, tmp_path, f"{DEV.slug}-run1", cut=2.5)
    assert out["run_id"] == "run1" and out["cases"] == out["cases_ok"] == len(planned(small_sources()[:2]))
    assert out["audit"]["audited_cases"] > 0 and out["timings_by_status"]["ok"] > 0
    assert json.loads(meta.read_text())["cases"] == out["cases"]


def test_a_case_collected_twice_keeps_the_latest_run_whatever_folder_holds_it(tmp_path):
    # Runs are named by their start time; the folders by the core they measured, which says
    # nothing of their order ("h100-1a14..." sorts before the older "h100-eabf...").
    def run(folder, stamp, ms):
        shards.Shards(tmp_path / folder, f"{DEV.slug}-{stamp}").write(
            {"case_id": "g|copy_u_max|16|float32|int32", "run_id": stamp, "device": DEV.name, "status": "ok"},
            [{"case_id": "g|copy_u_max|16|float32|int32", "strategy": "warp_edge", "g": 4, "t": 1, "status": "ok",
              "ms": ms}])
    (tmp_path / "h100-eabf").mkdir()
    (tmp_path / "h100-1a14").mkdir()
    run("h100-eabf", "20261125T013235-aaaa", 2.0)
    run("h100-1a14", "20261125T224306-bbbb", 1.0)
    paths = shards.collected_files([tmp_path], "cases")
    assert [p.parent.name for p in paths] == ["h100-eabf", "h100-1a14"]
    (case,) = training.load_cases(paths)
    assert case.row["run_id"] == "20261125T224306-bbbb" and list(case.ms) == [1.0]


def test_stale_rules_drop_the_cases_a_later_kernel_change_made_stale(tmp_path):
    # Two runs of older cores, one of the current core; the rule marks dot messages stale on the
    # older cores only, so a copy_u case of an old core stays and a dot case of the new one too.
    def run(stamp, core, cases):
        tag = f"{DEV.slug}-{stamp}"
        s = shards.Shards(tmp_path / "runs", tag)
        for case_id, edge_op, gather_op in cases:
            s.write({"case_id": case_id, "run_id": stamp, "device": DEV.name, "status": "ok", "edge_op": edge_op,
                     "gather_op": gather_op},
                    [{"case_id": case_id, "strategy": "warp_edge", "g": 2, "t": 1, "status": "ok", "ms": 1.0}])
        (tmp_path / "runs" / f"meta-{tag}.json").write_text(json.dumps({"core": {"cuda_source_hash": core}}))
    (tmp_path / "runs").mkdir()
    run("20261125T010000-aaaa", "old1", [("g|u_dot_v|64", "dot", "none"), ("g|copy_u_sum|64", "copy_lhs", "sum")])
    run("20261125T020000-bbbb", "old2", [("h|u_dot_v|64", "dot", "none"), ("h|u_dot_v_sum|64", "dot", "sum")])
    run("20261126T010000-cccc", "new", [("k|u_dot_v|64", "dot", "none")])
    paths = shards.collected_files([tmp_path], "cases")
    assert len(training.load_cases(paths)) == 5
    (tmp_path / training.STALE_FILE).write_text(json.dumps({"rules": [
        {"cores": ["old1", "old2"], "match": {"edge_op": ["dot"], "gather_op": ["none"]}, "why": "test"}]}))
    kept = sorted(c.row["case_id"] for c in training.load_cases(paths))
    assert kept == ["g|copy_u_sum|64", "h|u_dot_v_sum|64", "k|u_dot_v|64"]
