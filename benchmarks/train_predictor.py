"""Trains the strategy predictor on collected timings and exports it for the package.

    python benchmarks/train_predictor.py --include-holdout --val-fraction 0   # the shipped model
    python benchmarks/train_predictor.py                       # the training split only, for --split evaluation
    python benchmarks/train_predictor.py --data DIR --family sm90 --out DIR

Reads every cases-*/timings-*.csv.gz pair under --data, keeps the complete cases of one GPU
family (compute capability), and fits LightGBM's LambdaRank to each case's configurations
(training.DEFAULT_PARAMS says why), grouped by graph. By default it leaves out the held-out graphs
(split column) and holds back a seeded fifth of the rest for the manifest's decision quality. The
shipped model is trained on every graph: `benchmarks/eval_predictor.py --cv 5` measures it on graphs
unseen in training by training the same way on four fifths of the graphs. Writes <family>.json
(LightGBM's JSON dump) and <family>.manifest.json. Needs lightgbm.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dgl_ugraph.tuning import shards, training  # noqa: E402


def family_of(case: training.Case) -> str:
    major, minor = case.row["cc"].split(".")
    return f"sm{major}{minor}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=pathlib.Path, nargs="+", default=[ROOT / "data" / "predictor"])
    ap.add_argument("--family", default=None, help="GPU family to train for (default: the only one in the data)")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "dgl_ugraph" / "predictor_models")
    ap.add_argument("--trees", type=int, default=200, help="boosting rounds")
    ap.add_argument("--leaves", type=int, default=63)
    ap.add_argument("--include-holdout", action="store_true", help="train on the held-out graphs too")
    ap.add_argument("--val-fraction", type=float, default=0.2,
                    help="share of the graphs held back to report the manifest's validation (0: train on all)")
    args = ap.parse_args(argv)
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        print("train_predictor.py needs lightgbm (pip install lightgbm)", file=sys.stderr)
        return 2
    paths = shards.collected_files(args.data, "cases")
    cases = training.load_cases(paths)
    if not cases:
        print(f"no complete cases under {[str(d) for d in args.data]}", file=sys.stderr)
        return 1
    families = Counter(family_of(c) for c in cases)
    family = args.family or (next(iter(families)) if len(families) == 1 else None)
    if family is None:
        print(f"the data holds several GPU families {dict(families)}: pick one with --family", file=sys.stderr)
        return 1
    cases = [c for c in cases if family_of(c) == family]
    train_cases = [c for c in cases if args.include_holdout or c.row["split"] != "holdout"]
    print(f"{family}: {len(cases)} cases on {dict(Counter(c.row['device'] for c in cases))}; "
          f"training on {len(train_cases)} ({len(cases) - len(train_cases)} held out)")
    result = training.train(train_cases, num_trees=args.trees, val_fraction=args.val_fraction,
                            params={"num_leaves": args.leaves})
    used = sorted({p for p in paths if any(c.row["run_id"] in p.name for c in cases)})
    out = training.export(result, args.out, family, used, [c.row["device"] for c in cases])
    print(f"wrote {out} and {out.with_name(out.stem + '.manifest.json').name}: {result.booster.num_trees()} trees, "
          f"{out.stat().st_size / 2 ** 20:.1f} MiB; validation {result.validation}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
