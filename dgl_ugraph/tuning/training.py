"""Training: reads the shards, builds FEATURES for every (case, configuration) and fits LightGBM
to log(time / case best), grouped by graph; the model is exported as LightGBM's JSON dump plus a
manifest (selection.predictor loads both without lightgbm).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import pathlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from dgl_ugraph.core.abstraction import STRATEGIES, ParallelInfo, Signature
from dgl_ugraph.core.graph import DegreeStats
from dgl_ugraph.selection import predictor
from dgl_ugraph.selection.predictor import CaseInfo, DeviceInfo
from dgl_ugraph.tuning.calls import DTYPES, stable_hash
from dgl_ugraph.tuning.shards import read_gzip_text, read_rows

GOOD = ("ok", "cut")  # statuses that carry a time for a configuration of the grid


@dataclass
class Case:
    row: dict
    configs: List[ParallelInfo]
    ms: np.ndarray  # per config, seconds-free milliseconds

    @property
    def best_ms(self) -> float:
        return float(self.ms.min())

    def info(self) -> Tuple[CaseInfo, Signature, DeviceInfo]:
        r = self.row
        case = CaseInfo(int(r["num_src"]), int(r["num_dst"]), int(r["num_edges"]), 32 if r["idtype"] == "int32" else 64,
                        float(r["mean_deg"]), float(r["std_deg"]), int(r["max_deg"]), int(r["empty_rows"]))
        sig = Signature(r["edge_op"], r["gather_op"], r["a_type"], r["b_type"], r["c_type"], DTYPES[r["dtype"]],
                        int(r["out_len"]), int(r["reduce_size"]), r["broadcast"] == "1", "cuda")
        major, minor = (int(x) for x in r["cc"].split("."))
        dev = DeviceInfo(r["device"], int(r["sm_count"]), int(r["l2_bytes"]), major, minor)
        return case, sig, dev

    def allowed(self) -> List[str]:
        return [s for s in STRATEGIES if any(c.strategy == s for c in self.configs)]

    def stats(self) -> DegreeStats:
        """The graph's in-degree statistics as the case row keeps them (what the heuristic reads)."""
        r = self.row
        return DegreeStats(float(r["mean_deg"]), float(r["std_deg"]), int(r["max_deg"]), int(r["empty_rows"]),
                           int(r["num_edges"]))


STALE_FILE = "stale.json"


def stale_rules(paths: Sequence[pathlib.Path]) -> List[dict]:
    """The rules of every STALE_FILE in the folders that hold the shards or their parents (the
    collection's root, data/predictor/). Each rule names the CUDA cores (source hashes) whose
    timings of some cases a later kernel change made stale, and those cases by case-row fields:
    {"cores": [hash, ...], "match": {"edge_op": ["dot"], "gather_op": ["none"]}, "why": "..."}."""
    rules, seen = [], set()
    for path in paths:
        for folder in (path.parent, path.parent.parent):
            f = folder / STALE_FILE
            if f in seen or not f.is_file():
                continue
            seen.add(f)
            rules += json.loads(f.read_text())["rules"]
    return rules


def run_core(cases_path: pathlib.Path) -> Optional[str]:
    """The CUDA core (source hash) a run measured, from the meta file beside its shards."""
    meta = cases_path.with_name(cases_path.name.replace("cases-", "meta-", 1).replace(".csv.gz", ".json"))
    if not meta.is_file():
        return None
    return json.loads(meta.read_text()).get("core", {}).get("cuda_source_hash")


def is_stale(row: dict, core: Optional[str], rules: Sequence[dict]) -> bool:
    return any(core in r["cores"] and all(row.get(k) in v for k, v in r["match"].items()) for r in rules)


def load_cases(paths: Sequence[pathlib.Path]) -> List[Case]:
    """Complete cases (status ok) from cases/timings shards, less those that stale_rules mark
    stale for the core that measured them; a case collected twice keeps its latest run."""
    rules = stale_rules(paths)
    rows: Dict[Tuple[str, str], dict] = {}
    for path in paths:
        core = run_core(path) if rules else None
        for row in read_rows(path):
            if row.get("status") == "ok" and not is_stale(row, core, rules):
                rows[(row["device"], row["case_id"])] = row
    wanted = {(r["run_id"], r["case_id"]): key for key, r in rows.items()}
    timings: Dict[Tuple[str, str], List[dict]] = defaultdict(list)
    for path in paths:
        tpath = path.with_name(path.name.replace("cases-", "timings-", 1))
        if not tpath.exists():
            continue
        run_id = next(iter(read_rows(path)), {}).get("run_id")
        for t in read_rows(tpath):
            key = wanted.get((run_id, t["case_id"]))
            if key is not None and t["status"] in GOOD:
                timings[key].append(t)
    cases = []
    for key, row in rows.items():
        ts = timings.get(key)
        if not ts:
            continue
        configs = [ParallelInfo(t["strategy"], int(t["g"]), int(t["t"])) for t in ts]
        cases.append(Case(row, configs, np.array([float(t["ms"]) for t in ts])))
    cases.sort(key=lambda c: (c.row["device"], c.row["case_id"]))
    return cases


def data_hash(paths: Sequence[pathlib.Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths, key=lambda p: p.name):
        h.update(p.name.encode())
        h.update(read_gzip_text(p).encode())
    return h.hexdigest()[:16]


TARGET_CLIP = math.log(16.0)
RELEVANCE_LEVELS = 30


def case_matrix(case: Case) -> Tuple[np.ndarray, np.ndarray]:
    """(X, y) of one case: FEATURES of each timed configuration and log(time / best), clipped
    (a configuration 16x off the best is as useless as one 100x off)."""
    info, sig, dev = case.info()
    configs, x_all = predictor.feature_matrix(info, sig, dev, case.allowed())
    index = {c: i for i, c in enumerate(configs)}
    keep = [i for i, c in enumerate(case.configs) if c in index]
    x = x_all[[index[case.configs[i]] for i in keep]]
    y = np.minimum(np.log(case.ms[keep] / case.best_ms), TARGET_CLIP)
    return x, y


def graph_group(case: Case) -> str:
    return case.row["graph"]


def decision_quality(cases: Sequence[Case], choose: Callable[[Case], ParallelInfo]) -> Dict[str, float]:
    """Speed of the chosen configuration relative to the best measured (1.0 = oracle)."""
    ratios = []
    for case in cases:
        c = choose(case)
        ms = dict(zip(case.configs, case.ms))
        ratios.append(case.best_ms / ms[c] if c in ms else 0.0)
    r = np.array(ratios) if ratios else np.array([math.nan])
    pos = r[r > 0]
    return {"geomean": float(np.exp(np.mean(np.log(pos)))) if pos.size else math.nan,
            "p10": float(np.percentile(r, 10)), "min": float(r.min()), "cases": int(len(ratios)),
            "unmeasured_choice": int((r == 0).sum())}


def ranked_pick(case: Case, model_predict: Callable[[np.ndarray], np.ndarray],
                higher_is_better: bool = False) -> Tuple[ParallelInfo, ParallelInfo]:
    """A raw scoring function's top configuration over the case's whole space, and its best-ranked
    one among those the case measured (the same unless the top was refused or not timed)."""
    info, sig, dev = case.info()
    configs, x = predictor.feature_matrix(info, sig, dev, case.allowed())
    order = np.argsort((-1.0 if higher_is_better else 1.0) * model_predict(x), kind="stable")
    measured = set(case.configs)
    top = configs[int(order[0])]
    return top, next((configs[i] for i in order if configs[i] in measured), top)


def predictor_choice(model_predict: Callable[[np.ndarray], np.ndarray], higher_is_better: bool = False):
    """A chooser over the measured configurations of a case for a raw scoring function."""
    return lambda case: ranked_pick(case, model_predict, higher_is_better)[1]


@dataclass
class TrainResult:
    booster: object
    params: dict
    validation: Dict[str, float]
    n_train_cases: int
    n_val_cases: int
    n_rows: int
    graphs: List[str]


# LambdaRank over each case's configurations: a decision only needs the order within a case, and
# ranking beat regression on log(time / best) in a five-fold cross-validation by graph over the
# 14 training graphs of the H100 collection (data/predictor/h100-eabf9e8): 0.962 geomean speed
# against 0.931-0.957 for regressions of up to 255 leaves x 800 rounds. 200 rounds of 63 leaves
# keep the exported model near 2 MB; 127 leaves x 600 rounds of ranking scored the same.
DEFAULT_PARAMS = {
    "objective": "lambdarank", "learning_rate": 0.1, "num_leaves": 63, "min_data_in_leaf": 50,
    "feature_fraction": 0.9, "bagging_fraction": 0.9, "bagging_freq": 1, "lambda_l2": 1.0,
    "lambdarank_truncation_level": 5, "label_gain": list(range(RELEVANCE_LEVELS + 1)),
    "verbose": -1, "seed": 7, "deterministic": True, "force_row_wise": True,
}


def relevance(y: np.ndarray) -> np.ndarray:
    """Integer relevance of a configuration from its log(time / best): RELEVANCE_LEVELS for the
    best, falling linearly to 0 at TARGET_CLIP (16x slower)."""
    return np.clip(np.round(RELEVANCE_LEVELS * (1.0 - y / TARGET_CLIP)), 0, RELEVANCE_LEVELS).astype(np.int32)


def is_ranking(params: dict) -> bool:
    return params.get("objective") in ("lambdarank", "rank_xendcg")


def train(cases: Sequence[Case], num_trees: int = 200, val_fraction: float = 0.2, params: Optional[dict] = None,
          log: Callable[[str], None] = print) -> TrainResult:
    """LightGBM on the cases' configurations (ranked per case, or regressed on log(time / best)),
    grouped by graph: a seeded fraction of the training graphs is held back to report the decision
    quality the manifest records (none with val_fraction=0: cross_validate measures that model). The
    number of rounds is fixed (chosen by cross-validation, see DEFAULT_PARAMS): early stopping on a
    handful of validation graphs stopped at noise."""
    import lightgbm as lgb
    params = {**DEFAULT_PARAMS, **(params or {})}
    ranking = is_ranking(params)
    if not ranking:
        params = {k: v for k, v in params.items() if not k.startswith(("lambdarank", "label_gain"))}
    graphs = sorted({graph_group(c) for c in cases})
    val_graphs = {g for g in graphs if stable_hash("val:" + g) % 100 < val_fraction * 100} if len(graphs) > 1 else set()
    if val_fraction > 0 and len(graphs) > 1 and not val_graphs:
        val_graphs = {graphs[0]}
    xs, ys, sizes = [], [], []
    tr_cases, va_cases = [], []
    for c in cases:
        if graph_group(c) in val_graphs:
            va_cases.append(c)
            continue
        x, y = case_matrix(c)
        xs.append(x)
        ys.append(relevance(y) if ranking else y)
        sizes.append(len(y))
        tr_cases.append(c)
    if not xs:
        raise ValueError("no training cases")
    xt, yt = np.concatenate(xs), np.concatenate(ys)
    dtrain = lgb.Dataset(xt, yt, group=sizes if ranking else None, feature_name=list(predictor.FEATURES),
                         free_raw_data=False)
    booster = lgb.train(params, dtrain, num_boost_round=num_trees)
    quality = decision_quality(va_cases, predictor_choice(booster.predict, ranking)) if va_cases else {}
    log(f"trained {booster.num_trees()} trees on {len(tr_cases)} cases ({len(yt)} rows) of "
        f"{len(graphs) - len(val_graphs)} graphs; validation on {len(va_cases)} cases of {len(val_graphs)} graphs: {quality}")
    return TrainResult(booster, params, quality, len(tr_cases), len(va_cases), int(len(yt)), graphs)


def fold_of_graph(cases: Sequence[Case], folds: int) -> Dict[str, int]:
    """Graphs dealt round-robin into `folds` groups in the order of a stable hash of their names:
    equal numbers of graphs per fold, the same split on every machine."""
    graphs = sorted({graph_group(c) for c in cases}, key=lambda g: (stable_hash("fold:" + g), g))
    return {g: i % folds for i, g in enumerate(graphs)}


def cross_validate(cases: Sequence[Case], folds: int = 5, num_trees: int = 200, params: Optional[dict] = None,
                   log: Callable[[str], None] = print) -> Dict[int, Tuple[ParallelInfo, ParallelInfo]]:
    """Every case decided by a model that never saw its graph: one model per fold of graphs,
    trained on the other folds. Returns, per id(case), the model's top configuration over the
    whole space and its best-ranked measured one (they differ where the top was refused or not
    timed)."""
    if folds < 2:
        raise ValueError("cross-validation needs at least 2 folds")
    fold = fold_of_graph(cases, folds)
    if len(set(fold.values())) < 2:
        raise ValueError(f"cross-validation needs graphs in at least 2 folds, got {len(fold)} graph(s)")
    ranking = is_ranking({**DEFAULT_PARAMS, **(params or {})})
    out: Dict[int, Tuple[ParallelInfo, ParallelInfo]] = {}
    for k in range(folds):
        test = [c for c in cases if fold[graph_group(c)] == k]
        if not test:
            continue
        result = train([c for c in cases if fold[graph_group(c)] != k], num_trees=num_trees, val_fraction=0.0,
                       params=params, log=log)
        for c in test:
            out[id(c)] = ranked_pick(c, result.booster.predict, ranking)
        log(f"fold {k + 1}/{folds}: {len(test)} cases of {sum(1 for g in fold if fold[g] == k)} graphs decided")
    return out


# What predictor.Forest reads of a node; LightGBM's counts, gains and weights are dropped on export
# (half the file).
_NODE_KEYS = ("split_feature", "threshold", "decision_type", "default_left", "missing_type", "left_child",
              "right_child", "leaf_value")


def _slim(node: dict) -> dict:
    return {k: (_slim(node[k]) if k in ("left_child", "right_child") else node[k]) for k in _NODE_KEYS if k in node}


def export(result: TrainResult, out_dir: pathlib.Path, family: str, sources: Sequence[pathlib.Path],
           devices: Sequence[str]) -> pathlib.Path:
    """Writes <family>.json (LightGBM's dump_model) and <family>.manifest.json; returns the model path."""
    import lightgbm as lgb
    out_dir.mkdir(parents=True, exist_ok=True)
    dump = result.booster.dump_model()
    dump.pop("feature_importances", None)
    for tree in dump["tree_info"]:
        tree["tree_structure"] = _slim(tree["tree_structure"])
    ranking = is_ranking(result.params)
    model_path = out_dir / f"{family}.json"
    manifest = {
        "format": predictor.FORMAT, "feature_version": predictor.FEATURE_VERSION, "features": list(predictor.FEATURES),
        "target": (f"relevance from log(ms / case best ms): {RELEVANCE_LEVELS} for the best, 0 at log(16); higher "
                   "is faster" if ranking else "log(ms / case best ms), clipped at log(16): lower is faster"),
        "higher_is_better": ranking,
        "objective": result.params.get("objective"), "params": result.params, "lightgbm": lgb.__version__,
        "num_trees": result.booster.num_trees(), "family": family, "devices": sorted(set(devices)),
        "training_data": {"files": sorted(p.name for p in sources), "sha256_16": data_hash(sources),
                          "cases": result.n_train_cases, "validation_cases": result.n_val_cases,
                          "rows": result.n_rows, "graphs": len(result.graphs)},
        "validation": result.validation,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    for path, obj in ((model_path, dump), (predictor.manifest_path(model_path), manifest)):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(obj, separators=(",", ":")) if obj is dump else json.dumps(obj, indent=1))
        os.replace(tmp, path)
    return model_path
