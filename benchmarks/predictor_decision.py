"""Times one uncached predictor decision on this machine: the case's features, the compiled forest
over every configuration of the case, the argmin.

    python benchmarks/predictor_decision.py [--model dgl_ugraph/predictor_models/sm90.json]

Without --model, the shipped model of a family is used if there is one; otherwise a stand-in of
the largest size train_predictor.py exports by default (150 trees of 31 leaves) is trained with
lightgbm on random targets over real feature rows: its tree shapes are random, its size is not.
Writes benchmarks/results/predictor_decision.md.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dgl_ugraph.core.abstraction import STRATEGIES, Signature  # noqa: E402
from dgl_ugraph.selection import predictor  # noqa: E402

DEV = predictor.DeviceInfo("NVIDIA H100 80GB HBM3", 132, 50 * 2 ** 20, 9, 0)
SIGS = {
    "copy_u_sum F=64": Signature("copy_lhs", "sum", "src", "null", "dst", torch.float32, 64, 1, False, "cuda"),
    "copy_u_sum F=512": Signature("copy_lhs", "sum", "src", "null", "dst", torch.float32, 512, 1, False, "cuda"),
    "gat_u_dot_v F=256": Signature("dot", "none", "src", "dst", "edge", torch.float32, 4, 64, False, "cuda"),
    "gat_e_div_v H=4": Signature("div", "none", "edge", "dst", "edge", torch.float16, 4, 1, True, "cuda"),
}
CASES = {
    "cora-like": predictor.CaseInfo(2708, 2708, 10858, 32, 4.0, 5.3, 169, 0),
    "2M nodes, 20M edges": predictor.CaseInfo(2_000_000, 2_000_000, 20_000_000, 64, 10.0, 100.0, 20_000, 5),
}


def stand_in_model() -> predictor.Predictor:
    import lightgbm as lgb
    rng = np.random.default_rng(0)
    rows = []
    for i in range(300):
        v = int(10 ** rng.uniform(3, 6.3))
        e = int(v * rng.uniform(2, 25))
        case = predictor.CaseInfo(v, v, e, 32, e / v, 10 ** rng.uniform(-0.3, 3), int(e / v * 20), 0)
        sig = list(SIGS.values())[i % len(SIGS)]
        rows.append(predictor.feature_matrix(case, sig, DEV, STRATEGIES)[1])
    x = np.concatenate(rows)
    y = rng.random(len(x))
    booster = lgb.train({"num_leaves": 31, "min_data_in_leaf": 5, "verbose": -1, "seed": 1},
                        lgb.Dataset(x, y, feature_name=list(predictor.FEATURES)), 150)
    forest = predictor.Forest.from_lightgbm_dump(booster.dump_model())
    return predictor.Predictor(forest, {"features": list(predictor.FEATURES), "feature_version": predictor.FEATURE_VERSION})


def time_us(fn, n: int):
    fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e6)
    return statistics.median(samples), float(np.percentile(samples, 90))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=pathlib.Path, default=None)
    ap.add_argument("--family", default="sm90")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "predictor_decision.md")
    args = ap.parse_args(argv)
    path = args.model or predictor.SHIPPED_DIR / f"{args.family}.json"
    if path.is_file():
        model, what = predictor.Predictor.from_files(path), f"`{path.name}`"
    else:
        model, what = stand_in_model(), "a stand-in of the default maximum size (no shipped model yet)"
    compiled = model.forest._compiled is not None
    lines = [f"# Uncached decision time on {platform.processor() or platform.machine()} ({os.cpu_count()} cores, "
             f"load average {os.getloadavg()[0]:.1f}), Python {platform.python_version()}", "",
             "Regenerate: `" + " ".join(["python", "benchmarks/predictor_decision.py",
                                         *(argv if argv is not None else sys.argv[1:])]) + "`.", "",
             f"Model: {what}, {model.forest.num_trees} trees, {len(model.forest.feature)} splits; compiled evaluator: "
             f"{'yes' if compiled else 'NO (numpy fallback)'}. Median and 90th percentile of {args.reps} decisions, us.", "",
             "| graph | call | configurations | decision | features | forest |", "|---|---|---:|---:|---:|---:|"]
    worst = 0.0
    for cname, case in CASES.items():
        for sname, sig in SIGS.items():
            configs, x = predictor.feature_matrix(case, sig, DEV, STRATEGIES)
            d = time_us(lambda: model.choose(case, sig, DEV, STRATEGIES), args.reps)
            f = time_us(lambda: predictor.feature_matrix(case, sig, DEV, STRATEGIES), args.reps)
            p = time_us(lambda: model.forest.predict(x), args.reps)
            worst = max(worst, d[0])
            lines.append(f"| {cname} | {sname} | {len(configs)} | {d[0]:.0f} / {d[1]:.0f} | {f[0]:.0f} / {f[1]:.0f} | "
                         f"{p[0]:.0f} / {p[1]:.0f} |")
    lines += ["", f"Worst median: {worst:.0f} us (target: <= 200 us uncached)."]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
