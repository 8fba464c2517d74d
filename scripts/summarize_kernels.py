"""Summarizes bench/kernels.csv into the ratios the acceptance criteria name (markdown)."""
from __future__ import annotations

import argparse
import collections
import csv
import math
import pathlib


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def load(path):
    cases = collections.defaultdict(dict)
    meta = {}
    with open(path) as fh:
        for r in csv.DictReader(fh):
            key = (r["graph"], r["op"], int(r["F"]), r["dtype"])
            cases[key][r["impl"]] = float(r["ms"])
            cases[key]["config:" + r["impl"]] = r["config"]
            meta[key] = r
    return cases, meta


def ratio_rows(cases, ops, num, den):
    """speedup = den time / num time over the cases that have both."""
    out = []
    for (g, op, f, dt), c in cases.items():
        if op in ops and num in c and den in c:
            out.append((c[den] / c[num], g, op, f))
    return out


def line(label, rows, bar=None):
    if not rows:
        return f"| {label} | – | – | – | 0 | |"
    vals = [r[0] for r in rows]
    gm = geomean(vals)
    worst = min(rows)
    verdict = "" if bar is None else ("meets" if gm >= bar else "below") + f" {bar}x"
    return (f"| {label} | {gm:.2f}x | {worst[0]:.2f}x ({worst[1]}, F={worst[3]}) | {max(vals):.2f}x | {len(rows)} | {verdict} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("--out")
    args = ap.parse_args()
    cases, meta = load(args.csv)
    device = next(iter(meta.values()))["device"] if meta else "?"
    copy = float(next(iter(meta.values()))["copy_GBps"]) if meta else float("nan")
    lines = [f"# Kernel benchmark summary ({device}, copy bandwidth {copy:.0f} GB/s, read+write)", "",
             f"Source: `{pathlib.Path(args.csv).name}`, {len(cases)} (graph, op, F, dtype) cases. "
             "Speedup = baseline time / our time (higher is better); geomean over cases.", "",
             "| comparison | geomean | worst (case) | best | cases | bar |", "|---|---|---|---|---|---|"]
    sums = ("copy_u-sum", "u_mul_e-sum")
    lines += [
        line("sum (copy_u, u_mul_e): ugraph_best vs cuSPARSE", ratio_rows(cases, sums, "ugraph_best", "cusparse"), 1.0),
        line("sum (copy_u, u_mul_e): ugraph (selector) vs cuSPARSE", ratio_rows(cases, sums, "ugraph", "cusparse")),
        line("copy_u-max: ugraph_best vs torch scatter_reduce", ratio_rows(cases, ("copy_u-max",), "ugraph_best", "torch_scatter"), 10.0),
        line("u_add_v, u_dot_v: ugraph_best vs torch gather", ratio_rows(cases, ("u_add_v", "u_dot_v"), "ugraph_best", "torch_scatter"), 10.0),
        line("u_mul_v: ugraph_best vs torch gather", ratio_rows(cases, ("u_mul_v",), "ugraph_best", "torch_scatter")),
        line("GAT u_mul_e-sum: ugraph_best vs torch", ratio_rows(cases, ("gat_u_mul_e-sum",), "ugraph_best", "torch_scatter")),
        line("all ops: ugraph (selector) vs ugraph_best", [(c["ugraph_best"] / c["ugraph"], g, op, f) for (g, op, f, _), c in cases.items() if "ugraph" in c and "ugraph_best" in c]),
    ]
    # Fraction of copy bandwidth on compulsory and no-reuse bytes, best config, per op.
    lines += ["", "| op | median % of copy BW, compulsory bytes | median % on no-reuse bytes |", "|---|---|---|"]
    per_op = collections.defaultdict(list)
    for key, c in cases.items():
        if "ugraph_best" in c:
            r = meta[key]
            sec = c["ugraph_best"] * 1e-3
            per_op[key[1]].append((int(r["bytes_compulsory"]) / sec / 1e9 / copy * 100, int(r["bytes_noreuse"]) / sec / 1e9 / copy * 100))
    for op, vals in sorted(per_op.items()):
        a = sorted(v[0] for v in vals)
        b = sorted(v[1] for v in vals)
        lines.append(f"| {op} | {a[len(a) // 2]:.1f}% | {b[len(b) // 2]:.1f}% |")
    wins = collections.Counter(c["config:ugraph_best"].split(":")[0] for c in cases.values() if "config:ugraph_best" in c)
    lines += ["", "Winning strategy counts (ugraph_best): " + ", ".join(f"{k} {v}" for k, v in wins.most_common())]
    text = "\n".join(lines) + "\n"
    if args.out:
        pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
