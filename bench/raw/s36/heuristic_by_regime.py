"""Session 36: selection/rules.py's heuristic against the one before it (00bebbe), over every
collected case of data/predictor (the grid's timings of the H100 and H200 team kernels), by regime:
speed = the grid's best time / the chosen configuration's time; geomean, 10th percentile, worst,
cases. (tests/test_rules.py::test_heuristic_over_the_collection holds the whole collection's.)

    PYTHONPATH=. python bench/raw/s36/heuristic_by_regime.py
"""
from __future__ import annotations

import collections
import math
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from dgl_ugraph.core.abstraction import DTYPE_BYTES  # noqa: E402
from dgl_ugraph.selection import rules  # noqa: E402
from dgl_ugraph.tuning import shards, training  # noqa: E402

BEFORE = "00bebbe"


def regime(case, sig) -> str:
    row = sig.out_len * DTYPE_BYTES[sig.dtype]
    if sig.edge_op == "dot":
        return "dot messages"
    if sig.gather_op == "none":
        return "messages, rows <= 32 B" if row <= 32 else "messages, rows > 32 B"
    big = " (E > 1M)" if int(case.row["num_edges"]) > 1_000_000 else ""
    return ("aggregation, rows <= 64 B" if row <= 64 else "aggregation, rows > 64 B") + big


def main():
    source = subprocess.run(["git", "show", f"{BEFORE}:dgl_ugraph/selection/rules.py"], capture_output=True, text=True,
                            cwd=ROOT, check=True).stdout
    before: dict = {}
    exec(compile(source, f"rules.py@{BEFORE}", "exec"), before)  # noqa: S102 - the repository's own file
    cases = training.load_cases(shards.collected_files([ROOT / "data" / "predictor"], "cases"))
    for name, rule in ((f"before ({BEFORE})", before["heuristic"]), ("now", rules.heuristic)):
        groups = collections.defaultdict(list)
        for case in cases:
            _, sig, _ = case.info()
            ms = dict(zip(case.configs, case.ms))[rule(sig, case.stats(), case.allowed())]
            speed = math.log(case.best_ms / ms)
            for key in ("all", case.row["device"], regime(case, sig)):
                groups[key].append(speed)
        print(f"{name}:")
        for key, logs in sorted(groups.items()):
            print(f"  {key:36} {math.exp(np.mean(logs)):.3f}  p10 {math.exp(np.percentile(logs, 10)):.3f}  "
                  f"worst {math.exp(min(logs)):.3f}  ({len(logs)})")


if __name__ == "__main__":
    main()
