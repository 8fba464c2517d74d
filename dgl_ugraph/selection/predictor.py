"""The learned strategy predictor: scores every candidate (strategy, grouping, tiling) of a case
with a LightGBM tree ensemble and picks the best.

The model is trained offline (dgl_ugraph.tuning: benchmarks/train_predictor.py, or
`python -m dgl_ugraph tune` on the user's GPU) on grid-search timings and stored as LightGBM's own JSON dump beside a manifest, one
per GPU family (`sm90.json` + `sm90.manifest.json`). At run time lightgbm is not needed: the dump
is parsed with `json` (never pickle or eval), its trees are flattened into arrays once, and the
compiled evaluator in csrc/forest.cpp scores all candidates in one call. Without a model for the
device (CPU, an unknown GPU family, a stale or broken file) `load()` returns None and the
hand-written rules serve (`policy` decides which).

Features (FEATURES) are uGrapher's (V, E, in-degree std, edge_op, gather_op, A/B/C types) plus
the message width, reduce size, dtype, index width, average and max in-degree and the device's SM
count and L2 size, then the configuration (strategy one-hot, log2 g, log2 t) and a few products of
the two that trees cannot form cheaply themselves (workers per SM, elements per worker). The same
functions build the features for training rows and for run-time decisions, so the two cannot drift.
"""
from __future__ import annotations

import ctypes
import json
import math
import pathlib
import threading
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from dgl_ugraph import settings
from dgl_ugraph.core import _ext
from dgl_ugraph.core.abstraction import (DTYPE_BYTES, EDGE_OP_CODE, GATHER_OP_CODE, GROUPINGS, STRATEGIES,
                                         TENSOR_TYPE_CODE, ParallelInfo, Signature)

FORMAT = "dgl_ugraph-predictor"
# Bump when FEATURES or their meaning change: a model trained on other features is refused.
FEATURE_VERSION = 1
GRID_GROUPINGS: Tuple[int, ...] = GROUPINGS
# The paper's tiling grid; every value 1..64 can run, but the search space is these seven.
GRID_TILINGS: Tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
WARP = 32


CASE_FEATURES: Tuple[str, ...] = (
    "log2_src", "log2_dst", "log2_edges", "avg_deg", "std_deg", "log2_max_deg", "cv_deg", "empty_frac",
    "edge_op", "gather_op", "a_type", "b_type", "c_type",
    "width", "log2_width", "out_len", "reduce_size", "broadcast", "dtype_bytes", "is_bf16", "index_bits",
    "sm_count", "l2_mb",
    "log2_work", "log2_src_bytes_over_l2", "log2_rows_per_sm",
)
CONFIG_FEATURES: Tuple[str, ...] = (
    "s_thread_vertex", "s_thread_edge", "s_warp_vertex", "s_warp_edge", "log2_g", "log2_t",
    "log2_workers_per_sm", "log2_elems_per_worker", "log2_edges_per_worker", "idle_lanes",
)
FEATURES: Tuple[str, ...] = CASE_FEATURES + CONFIG_FEATURES
N_CASE = len(CASE_FEATURES)


# ---- the search space --------------------------------------------------------------------------

def max_tiling(strategy: str, width: int) -> int:
    """The largest useful tiling: a thread strategy gives each tile at least one element of the
    message; a warp strategy gives each warp at least one 32-lane chunk (past that, warps idle)."""
    lanes = WARP if strategy.startswith("warp") else 1
    return max(1, math.ceil(width / lanes))


def config_space(sig: Signature, allowed: Sequence[str]) -> List[ParallelInfo]:
    """The paper's grid (strategy x g x t) for this case, among the strategies that can run it,
    without tilings past `max_tiling`."""
    return list(_space(tuple(allowed), sig.width)[0])


@lru_cache(maxsize=1024)
def _space(allowed: Tuple[str, ...], width: int):
    """(configs, static config columns): strategy one-hot, log2 g, log2 t, lanes, g, t."""
    configs = [ParallelInfo(s, g, t) for s in STRATEGIES if s in allowed
               for g in GRID_GROUPINGS for t in GRID_TILINGS if t <= max_tiling(s, width)]
    cols = np.zeros((len(configs), 9))
    for i, c in enumerate(configs):
        cols[i, STRATEGIES.index(c.strategy)] = 1.0
        cols[i, 4] = math.log2(c.grouping)
        cols[i, 5] = math.log2(c.tiling)
        cols[i, 6] = WARP if c.strategy.startswith("warp") else 1
        cols[i, 7] = c.grouping
        cols[i, 8] = c.tiling
    cols.setflags(write=False)
    return tuple(configs), cols


# ---- the device and the graph ------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceInfo:
    name: str
    sm_count: int
    l2_bytes: int
    major: int
    minor: int

    @property
    def family(self) -> str:
        """The model family: one model per compute capability (H100 and H200 are both sm90;
        the SM count and L2 size features tell them apart)."""
        return f"sm{self.major}{self.minor}"

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() else "-" for c in self.name).strip("-").lower() or "gpu"


def _l2_bytes_from_driver(index: int) -> int:
    """torch < 2.4 does not report the L2 size: ask the driver (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        dev, value = ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
            return 0
        if lib.cuDeviceGetAttribute(ctypes.byref(value), 38, dev) != 0:
            return 0
        return int(value.value)
    except OSError:
        return 0


@lru_cache(maxsize=None)
def _device_info(index: int) -> DeviceInfo:
    props = torch.cuda.get_device_properties(index)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or _l2_bytes_from_driver(index)
    return DeviceInfo(props.name, int(props.multi_processor_count), l2, int(props.major), int(props.minor))


def device_info(device=None) -> DeviceInfo:
    device = torch.device(device if device is not None else "cuda")
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _device_info(index)


@dataclass(frozen=True)
class CaseInfo:
    """What the features need from the graph: its sizes, index width and in-degree statistics."""

    num_src: int
    num_dst: int
    num_edges: int
    index_bits: int
    mean_deg: float
    std_deg: float
    max_deg: int
    empty_rows: int

    @classmethod
    def from_graph(cls, graph) -> "CaseInfo":
        st = graph.stats
        return cls(graph.num_src, graph.num_dst, graph.num_edges, 32 if graph.idtype == torch.int32 else 64,
                   st.mean, st.std, st.max, st.empty_rows)

    def rounded(self) -> "CaseInfo":
        """The case a run-time choice is made for: sizes, the largest in-degree and the degrees'
        spread rounded to 1/ROUNDING of an octave, the share of empty rows to 1/64, the mean
        following the rounded sizes. Graphs that differ by less (a sampler's blocks, batch after
        batch) are one case, whose choice the model makes once (Predictor.choose)."""
        num_dst = _round_count(self.num_dst)
        num_edges = _round_count(self.num_edges)
        empty = round(self.empty_rows / max(self.num_dst, 1) * 64) / 64
        return CaseInfo(_round_count(self.num_src), num_dst, num_edges, self.index_bits,
                        num_edges / max(num_dst, 1), _round_octave(self.std_deg), _round_count(self.max_deg),
                        round(empty * num_dst))


ROUNDING = 16  # steps an octave: neighbouring rounded values differ by 4.4%


def _round_octave(x: float) -> float:
    return 2.0 ** (round(math.log2(x) * ROUNDING) / ROUNDING) if x > 0 else 0.0


def _round_count(n: int) -> int:
    return int(round(_round_octave(n)))


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -1.0


# A mean runs the sum's kernels with a division at each row's store: the model knows it as a sum.
_AS_MEASURED = {"mean": "sum"}


def case_vector(case: CaseInfo, sig: Signature, dev: DeviceInfo) -> np.ndarray:
    """CASE_FEATURES for one (graph, signature, device)."""
    nbytes = DTYPE_BYTES[sig.dtype]
    l2 = max(dev.l2_bytes, 1)
    return np.array([
        _log2(case.num_src), _log2(case.num_dst), _log2(case.num_edges),
        case.num_edges / max(case.num_dst, 1), case.std_deg, _log2(case.max_deg),
        case.std_deg / max(case.mean_deg, 1e-9), case.empty_rows / max(case.num_dst, 1),
        EDGE_OP_CODE[sig.edge_op], GATHER_OP_CODE[_AS_MEASURED.get(sig.gather_op, sig.gather_op)],
        TENSOR_TYPE_CODE[sig.a_type],
        TENSOR_TYPE_CODE[sig.b_type], TENSOR_TYPE_CODE[sig.c_type],
        sig.width, _log2(sig.width), sig.out_len, sig.reduce_size, float(sig.broadcast), nbytes,
        float(sig.dtype == torch.bfloat16), case.index_bits,
        dev.sm_count, l2 / 2 ** 20,
        _log2(case.num_edges * sig.width), _log2(case.num_src * sig.width * nbytes / l2),
        _log2(case.num_dst / max(dev.sm_count, 1)),
    ])


def feature_matrix(case: CaseInfo, sig: Signature, dev: DeviceInfo,
                   allowed: Sequence[str]) -> Tuple[Tuple[ParallelInfo, ...], np.ndarray]:
    """(configs, X): one row of FEATURES per configuration of `config_space`."""
    configs, cols = _space(tuple(allowed), sig.width)
    n = len(configs)
    x = np.empty((n, len(FEATURES)))
    x[:, :N_CASE] = case_vector(case, sig, dev)
    x[:, N_CASE:N_CASE + 6] = cols[:, :6]
    lanes, g, t = cols[:, 6], cols[:, 7], cols[:, 8]
    edge_parallel = cols[:, 1] + cols[:, 3]  # thread_edge or warp_edge: workers walk edges
    items = np.where(edge_parallel > 0, max(case.num_edges, 1), max(case.num_dst, 1))
    workers = np.ceil(items / g) * t * lanes
    x[:, N_CASE + 6] = np.log2(workers / max(dev.sm_count, 1))
    elems = np.ceil(sig.width / t)
    x[:, N_CASE + 7] = np.log2(elems)
    # Edges one worker walks in sequence: g of them on edge strategies, g rows' worth on vertex ones.
    per_item = np.where(edge_parallel > 0, 1.0, max(case.num_edges / max(case.num_dst, 1), 1.0))
    x[:, N_CASE + 8] = np.log2(g * per_item)
    x[:, N_CASE + 9] = np.where(lanes > 1, 1.0 - elems / (np.ceil(elems / WARP) * WARP), 0.0)
    return configs, x


# ---- the tree ensemble ---------------------------------------------------------------------------

MISSING_TYPES = {"None": 0, "Zero": 1, "NaN": 2}
ZERO_THRESHOLD = 1e-35  # LightGBM's kZeroThreshold


class Forest:
    """A LightGBM tree ensemble flattened into arrays, in preorder so every child follows its
    parent (which lets the evaluator reject cycles). A child >= 0 is a node; < 0 is leaf ~child.
    flags: bit 0 default_left, bits 1-2 the missing type (0 None, 1 Zero, 2 NaN)."""

    def __init__(self, feature, threshold, left, right, flags, leaf_value, roots, num_features: int):
        self.feature = np.ascontiguousarray(feature, dtype=np.int32)
        self.threshold = np.ascontiguousarray(threshold, dtype=np.float64)
        self.left = np.ascontiguousarray(left, dtype=np.int32)
        self.right = np.ascontiguousarray(right, dtype=np.int32)
        self.flags = np.ascontiguousarray(flags, dtype=np.uint8)
        self.leaf_value = np.ascontiguousarray(leaf_value, dtype=np.float64)
        self.roots = np.ascontiguousarray(roots, dtype=np.int32)
        self.num_features = int(num_features)
        self._arrays = (self.feature, self.threshold, self.left, self.right, self.flags, self.leaf_value, self.roots)
        self._compiled = _compiled_predict()

    @property
    def num_trees(self) -> int:
        return len(self.roots)

    @classmethod
    def from_lightgbm_dump(cls, dump: dict) -> "Forest":
        """From `Booster.dump_model()`. Only what the collector's models use is accepted: one tree
        per iteration, numerical splits, summed outputs."""
        if dump.get("num_tree_per_iteration", 1) != 1 or dump.get("num_class", 1) != 1:
            raise ValueError("only single-output models are supported")
        if dump.get("average_output", False):
            raise ValueError("averaged (random forest) models are not supported")
        feature, threshold, left, right, flags, leaves, roots = [], [], [], [], [], [], []

        def walk(node) -> int:
            if "leaf_value" in node or "split_feature" not in node:
                leaves.append(float(node["leaf_value"]))
                return ~(len(leaves) - 1)
            if node.get("decision_type", "<=") != "<=":
                raise ValueError(f"unsupported split {node.get('decision_type')!r} (categorical features are not used)")
            i = len(feature)
            feature.append(int(node["split_feature"]))
            threshold.append(float(node["threshold"]))
            flags.append(int(bool(node.get("default_left", True))) | (MISSING_TYPES[node.get("missing_type", "None")] << 1))
            left.append(0)
            right.append(0)
            left[i] = walk(node["left_child"])
            right[i] = walk(node["right_child"])
            return i

        for tree in dump["tree_info"]:
            roots.append(walk(tree["tree_structure"]))
        return cls(feature, threshold, left, right, flags, leaves, roots, int(dump["max_feature_idx"]) + 1)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Raw scores (the sum of every tree's leaf), one per row of x."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] < self.num_features:
            raise ValueError(f"expected rows of {self.num_features} features, got shape {x.shape}")
        if self._compiled is not None:
            return self._compiled(*self._arrays, x)
        return self.predict_numpy(x)

    def predict_numpy(self, x: np.ndarray) -> np.ndarray:
        """The same walk in numpy: the reference for the compiled evaluator, and its stand-in
        where the core was built without it."""
        x = np.asarray(x, dtype=np.float64)
        rows = np.arange(x.shape[0])
        out = np.zeros(x.shape[0])
        for root in self.roots:
            node = np.full(x.shape[0], root, dtype=np.int64)
            active = node >= 0
            while active.any():
                n = node[active]
                fval = x[rows[active], self.feature[n]]
                mtype = self.flags[n] >> 1
                nan = np.isnan(fval)
                fval = np.where(nan & (mtype != 2), 0.0, fval)
                missing = ((mtype == 1) & (np.abs(fval) <= ZERO_THRESHOLD)) | ((mtype == 2) & np.isnan(fval))
                go_left = np.where(missing, (self.flags[n] & 1) == 1, fval <= self.threshold[n])
                node[active] = np.where(go_left, self.left[n], self.right[n])
                active = node >= 0
            out += self.leaf_value[~node]
        return out


def _compiled_predict():
    """The core's forest_predict, or None where the core is missing or older than it."""
    try:
        return getattr(_ext.core(), "forest_predict", None)
    except ImportError:
        return None


# ---- models on disk --------------------------------------------------------------------------------

SHIPPED_DIR = pathlib.Path(__file__).resolve().parents[1] / "predictor_models"

def model_paths(family: str) -> List[pathlib.Path]:
    """Where a model for `family` is looked for, first match wins: DGL_UGRAPH_MODEL (a file), the
    model `tune` wrote to the user cache, the one shipped in the package."""
    forced = settings.model_file()
    if forced:
        return [pathlib.Path(forced)]
    return [settings.cache_dir() / "models" / f"{family}.json", SHIPPED_DIR / f"{family}.json"]


def manifest_path(model_path: pathlib.Path) -> pathlib.Path:
    return model_path.with_name(model_path.name[:-len(".json")] + ".manifest.json")


class Predictor:
    """A loaded model: scores configurations (lower is better after `sign`)."""

    def __init__(self, forest: Forest, manifest: dict, path: Optional[pathlib.Path] = None):
        if tuple(manifest.get("features", ())) != FEATURES or manifest.get("feature_version") != FEATURE_VERSION:
            raise ValueError(f"the model was trained on other features (feature_version "
                             f"{manifest.get('feature_version')}, this package has {FEATURE_VERSION})")
        if forest.num_features > len(FEATURES):
            raise ValueError(f"the model reads {forest.num_features} features, there are {len(FEATURES)}")
        # Regression targets log(time / best): lower is better; ranking scores: higher is better.
        self.sign = -1.0 if manifest.get("higher_is_better", False) else 1.0
        self.forest, self.manifest, self.path = forest, manifest, path
        self._chosen: Dict[tuple, ParallelInfo] = {}  # choose's answers, by rounded case

    @classmethod
    def from_files(cls, model_path: pathlib.Path) -> "Predictor":
        with open(model_path) as fh:
            dump = json.load(fh)
        with open(manifest_path(model_path)) as fh:
            manifest = json.load(fh)
        if not isinstance(dump, dict) or not isinstance(manifest, dict):
            raise ValueError(f"{model_path} and its manifest must each hold one JSON object")
        if manifest.get("format") != FORMAT:
            raise ValueError(f"{manifest_path(model_path)} is not a {FORMAT} manifest")
        if list(dump.get("feature_names", [])) != list(manifest.get("features", [])):
            raise ValueError("the model's feature names differ from its manifest's")
        return cls(Forest.from_lightgbm_dump(dump), manifest, model_path)

    def scores(self, case: CaseInfo, sig: Signature, dev: DeviceInfo,
               allowed: Sequence[str]) -> Tuple[Tuple[ParallelInfo, ...], np.ndarray]:
        """(configs, costs): lower cost is predicted faster."""
        configs, x = feature_matrix(case, sig, dev, allowed)
        return configs, self.sign * self.forest.predict(x)

    def rank(self, case: CaseInfo, sig: Signature, dev: DeviceInfo, allowed: Sequence[str],
             k: Optional[int] = None) -> List[ParallelInfo]:
        """The configurations, predicted fastest first (the k best when k is given), for the
        rounded case."""
        configs, cost = self.scores(case.rounded(), sig, dev, allowed)
        if k is not None and k < len(configs):
            top = np.argpartition(cost, k)[:k]
            order = top[np.argsort(cost[top], kind="stable")]
        else:
            order = np.argsort(cost, kind="stable")
        return [configs[i] for i in order]

    def pick(self, case: CaseInfo, sig: Signature, dev: DeviceInfo, allowed: Sequence[str]) -> ParallelInfo:
        """The predicted fastest configuration for the case as given, scored now."""
        configs, cost = self.scores(case, sig, dev, allowed)
        return configs[int(np.argmin(cost))]

    def choose(self, case: CaseInfo, sig: Signature, dev: DeviceInfo, allowed: Sequence[str]) -> ParallelInfo:
        """`pick` for the rounded case, scored once per rounded case (a forest over the whole grid
        takes about 0.35 ms on the GPU machine's host, per new graph where training samples one
        per step)."""
        key = (case.rounded(), sig, dev, tuple(allowed))
        found = self._chosen.get(key)
        if found is None:
            found = self.pick(key[0], sig, dev, allowed)
            if len(self._chosen) >= CHOSEN_KEPT:
                self._chosen.clear()
            self._chosen[key] = found
        return found


CHOSEN_KEPT = 4096  # rounded cases whose choice a Predictor keeps


_loaded: Dict[str, Optional[Predictor]] = {}
_load_lock = threading.Lock()


def load(family: str) -> Optional[Predictor]:
    """The model for a GPU family, loaded once; None (with one warning if a file was there but
    unusable) when there is none. DGL_UGRAPH_PREDICTOR=0 turns the predictor off."""
    if not settings.predictor():
        return None
    key = f"{family}|{settings.model_file() or ''}"
    with _load_lock:
        if key not in _loaded:
            _loaded[key] = _load_first(family)
        return _loaded[key]


def _load_first(family: str) -> Optional[Predictor]:
    for path in model_paths(family):
        if not path.is_file():
            continue
        try:
            return Predictor.from_files(path)
        # RecursionError: json's answer to absurdly deep nesting in a crafted file.
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            warnings.warn(f"dgl_ugraph: ignoring the strategy model {path}: {exc}", RuntimeWarning, stacklevel=3)
    return None


def reset() -> None:
    """Forgets loaded models (after `tune` wrote a new one, or in tests)."""
    with _load_lock:
        _loaded.clear()
