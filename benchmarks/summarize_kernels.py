"""Summarizes benchmarks/results/kernels.csv into the ratios the acceptance criteria name (markdown).

    python benchmarks/summarize_kernels.py benchmarks/results/kernels.csv --out benchmarks/results/kernels.md

The header names the device (the CSV's) and the CUDA core measured (--core, else the loaded
extension's source hash): plots.py reads both from it. A CSV may be gzip'd (.csv.gz).
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip
import math
import pathlib


# (heads, op) of GAT's aggregation in bench_kernels.py's OPERATORS.
GAT_OPS = ((1, "gat1_u_mul_e-sum"), (4, "gat_u_mul_e-sum"), (8, "gat8_u_mul_e-sum"))


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def load(paths):
    cases = collections.defaultdict(dict)
    meta = {}
    for path in paths:
        with (gzip.open(path, "rt", newline="") if str(path).endswith(".gz") else open(path, newline="")) as fh:
            for r in csv.DictReader(fh):
                key = (r["graph"], r["op"], int(r["F"]), r["dtype"])
                cases[key][r["impl"]] = float(r["ms"])
                cases[key]["config:" + r["impl"]] = r["config"]
                meta[key] = r
    return cases, meta


def paired(cases, op, partner, ratio, dtype_of=lambda dt: dt, impl="ugraph", dtype=None):
    """(ratio(ours, partner's), graph, op, F) where the case and its partner both have impl:
    partner(graph, F) names the other case's graph, op and F, dtype_of(dtype) its dtype. `dtype`:
    only our cases of that dtype."""
    out = []
    for (g, o, f, dt), c in cases.items():
        if o != op or impl not in c or dtype not in (None, dt):
            continue
        other = cases.get(partner(g, f) + (dtype_of(dt),), {})
        if impl in other:
            out.append((ratio(c[impl], other[impl]), g, o, f))
    return out


def bandwidth_rows(cases, meta, ops, copy, keep):
    """(% of copy bandwidth on bytes_noreuse, graph, op, F) for impl=ugraph."""
    out = []
    for key, c in cases.items():
        if key[1] in ops and "ugraph" in c and keep(key, meta[key]):
            out.append((int(meta[key]["bytes_noreuse"]) / (c["ugraph"] * 1e-3) / 1e9 / copy * 100, key[0], key[1], key[2]))
    return out


def ratio_rows(cases, ops, num, den):
    """speedup = den time / num time over the cases that have both."""
    out = []
    for (g, op, f, dt), c in cases.items():
        if op in ops and num in c and den in c:
            out.append((c[den] / c[num], g, op, f))
    return out


def floor_rows(cases, meta, op, partner, copy, dtype_of=lambda dt: dt, over_partner=True, dtype=None):
    """How close the bar of a paired ratio can come, case by case: the case's compulsory bytes
    (bytes_compulsory, every output included) at the run's copy bandwidth, the least time any
    kernel can take, as (floor / partner's time) or, over_partner False, (partner's time / floor),
    with partner(graph, F), dtype_of and dtype as in `paired`. A floor ratio past the bar says that no
    kernel for this case meets it against the partner as fast as it is today."""
    out = []
    for (g, o, f, dt), c in cases.items():
        if o != op or "ugraph" not in c or dtype not in (None, dt):
            continue
        other = cases.get(partner(g, f) + (dtype_of(dt),), {})
        if "ugraph" not in other:
            continue
        floor_ms = int(meta[(g, o, f, dt)]["bytes_compulsory"]) / (copy * 1e9) * 1e3
        out.append((floor_ms / other["ugraph"] if over_partner else other["ugraph"] / floor_ms, g, o, f))
    return out


def floor_line(label, rows, bar, higher):
    """One row of floor ratios: how many cases the traffic alone keeps from the bar."""
    if not rows:
        return f"| {label} | – | – | 0 | |"
    beyond = [r for r in rows if (r[0] < bar if higher else r[0] > bar)]
    worst = min(rows) if higher else max(rows)
    return (f"| {label} | {geomean([r[0] for r in rows]):.2f} | {worst[0]:.2f} ({worst[1]}, F={worst[3]}) | "
            f"{len(rows)} | {len(beyond)} cases cannot meet {bar}x |")


def line(label, rows, bar=None, worst_bar=None, higher=True, unit="x"):
    """One table row; bar applies to the geomean, worst_bar to every case (higher or lower is
    better as `higher` says)."""
    if not rows:
        return f"| {label} | – | – | – | 0 | |"
    vals = [r[0] for r in rows]
    gm = geomean(vals)
    worst = min(rows) if higher else max(rows)
    ok = lambda v, b: v >= b if higher else v <= b  # noqa: E731
    verdict = []
    if bar is not None:
        verdict.append(("meets" if ok(gm, bar) else "below") + f" {bar}{unit} geomean")
    if worst_bar is not None:
        verdict.append(("meets" if ok(worst[0], worst_bar) else "misses") + f" {worst_bar}{unit} every case")
    best = max(vals) if higher else min(vals)
    return (f"| {label} | {gm:.2f} | {worst[0]:.2f} ({worst[1]}, F={worst[3]}) | {best:.2f} | {len(rows)} | "
            f"{'; '.join(verdict)} |")


def core_hash() -> str:
    """The CUDA core's source hash from the loaded extension's build info, else "unknown"."""
    try:
        import dgl_ugraph.core._ext as ext
        return ext._C.build_info().get("cuda_source_hash") or "unknown"
    except Exception:  # no built extension here: the caller names the core with --core
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="kernels CSVs of one run (e.g. fp32, half and reversed graphs)")
    ap.add_argument("--out")
    ap.add_argument("--core", default=None, help="the CUDA core the rows measured (default: the loaded extension's)")
    args = ap.parse_args()
    cases, meta = load(args.csv)
    device = next(iter(meta.values()))["device"] if meta else "?"
    copy = float(next(iter(meta.values()))["copy_GBps"]) if meta else float("nan")
    core = args.core or core_hash()
    # Named as the results files (a run on the device machine writes them elsewhere, then they are copied).
    sources = " ".join(f"benchmarks/results/{pathlib.Path(p).name}" for p in args.csv)
    lines = [f"# Kernel benchmark summary ({device}, CUDA core {core}, copy bandwidth {copy:.0f} GB/s, read+write)", "",
             f"Regenerate: `python benchmarks/summarize_kernels.py {sources} --core {core}"
             + (f" --out benchmarks/results/{pathlib.Path(args.out).name}`" if args.out else "`")
             + " (the rows: `bash scripts/gpu_check.sh build suite`).", "",
             f"Sources: {', '.join('`' + pathlib.Path(p).name + '`' for p in args.csv)}; {len(cases)} "
             "(graph, op, F, dtype) cases. Speedups are baseline time / our time; ratios to our own cases "
             "are our time / theirs. Geomeans over cases; *-rev graphs are the backward aggregations.", "",
             "| comparison (impl=ugraph unless named) | geomean | worst (case) | best | cases | bar |",
             "|---|---|---|---|---|---|"]
    sums = ("copy_u-sum", "u_mul_e-sum")
    fwd = lambda g: not g.endswith("-rev")  # noqa: E731
    vs = lambda rows, keep: [r for r in rows if keep(r[1])]  # noqa: E731
    l2_bytes = 50e6
    lines += [
        line("sums (copy_u, u_mul_e) vs cuSPARSE, forward", vs(ratio_rows(cases, sums, "ugraph", "cusparse"), fwd), 1.8, 1.0),
        line("sums vs cuSPARSE, backward (reversed graphs)",
             vs(ratio_rows(cases, sums, "ugraph", "cusparse"), lambda g: not fwd(g)), 1.8, 1.0),
        line("u_mul_e-sum vs cuSPARSE with presorted weights (cuSPARSE alone)",
             ratio_rows(cases, ("u_mul_e-sum",), "ugraph", "cusparse_presorted")),
        line("ugraph_best vs cuSPARSE (sums)", ratio_rows(cases, sums, "ugraph_best", "cusparse")),
        line("copy_u-max time / our copy_u-sum time", paired(cases, "copy_u-max", lambda g, f: (g, "copy_u-sum", f),
                                                               lambda a, b: a / b), 1.25, 1.25, higher=False),
    ]
    gat = {heads: paired(cases, op, lambda g, f: (g, "copy_u-sum", f), lambda a, b: a / b) for heads, op in GAT_OPS}
    lines += [line(f"GAT (N,{heads},F/{heads})x(E,{heads},1) time / our copy_u-sum at width F", gat[heads], 1.2, 1.2,
                   higher=False) for heads, _ in GAT_OPS]
    lines.append(line("GAT, H in {1, 4, 8} together", [r for rows in gat.values() for r in rows], 1.2, 1.2,
                      higher=False))
    for half in ("float16", "bfloat16"):
        for op in sums:
            rows = [r for r in paired(cases, op, lambda g, f: (g, op, f), lambda a, b: b / a, lambda dt: "float32",
                                      dtype=half) if r[3] >= 64]
            lines.append(line(f"{op} {half}: speedup over our float32 (F >= 64)", rows, 1.6, 1.6))
    large = bandwidth_rows(cases, meta, sums + ("copy_u-max",) + tuple(op for _, op in GAT_OPS), copy,
                           lambda k, r: k[2] >= 64 and int(r["V"]) * k[2] * 4 >= 10 * l2_bytes)
    lines.append(line("large graphs (features >= 10x L2, F >= 64): % of copy BW, no-reuse bytes", large, 80, 80, unit="%"))
    sddmm = bandwidth_rows(cases, meta, ("u_add_v", "u_mul_v", "u_dot_v"), copy,
                           lambda k, r: int(r["E"]) >= 1_000_000 and (k[1] != "u_dot_v" or k[2] >= 64))
    lines.append(line("SDDMM (u_add_v, u_mul_v heads; u_dot_v F >= 64), E >= 1M: % of copy BW", sddmm, 75, 75, unit="%"))
    floors = {g: c["empty_launch"] for (g, op, _, _), c in cases.items() if op == "empty_launch"}
    small = [(c["ugraph"] / floors[g], g, op, f) for (g, op, f, dt), c in cases.items()
             if g in floors and "ugraph" in c and int(meta[(g, op, f, dt)]["E"]) <= 20_000]
    lines += [
        line("small graphs (E <= 20K): ugraph time / an empty torch launch's", small, higher=False),
        line("copy_u-max: ugraph vs torch scatter_reduce", ratio_rows(cases, ("copy_u-max",), "ugraph", "torch_scatter")),
        line("all ops: ugraph_best time / ugraph (selector) time",
             [(c["ugraph_best"] / c["ugraph"], g, op, f) for (g, op, f, _), c in cases.items()
              if "ugraph" in c and "ugraph_best" in c]),
    ]
    # The bars' floors: what the compulsory traffic alone allows against today's partner case.
    lines += ["", "| floor of a bar's ratio (compulsory bytes at the copy bandwidth) | geomean | tightest (case) | "
              "cases | cases the traffic keeps from the bar |", "|---|---|---|---|---|",
              floor_line("copy_u-max floor / our copy_u-sum time",
                         floor_rows(cases, meta, "copy_u-max", lambda g, f: (g, "copy_u-sum", f), copy), 1.25, False),
              floor_line("GAT floor (H = 1, 4, 8) / our copy_u-sum time",
                         [r for _, op in GAT_OPS
                          for r in floor_rows(cases, meta, op, lambda g, f: (g, "copy_u-sum", f), copy)], 1.2, False)]
    for half in ("float16", "bfloat16"):
        rows = [r for op in sums for r in floor_rows(cases, meta, op, lambda g, f, op=op: (g, op, f), copy,
                                                     lambda dt: "float32", over_partner=False, dtype=half)
                if r[3] >= 64]
        lines.append(floor_line(f"sums: our float32 time / {half} floor (F >= 64)", rows, 1.6, True))
    # Fraction of copy bandwidth on compulsory and no-reuse bytes per op: the searched best where
    # the run searched, else the selector's choice.
    lines += ["", "| op | median % of copy BW, compulsory bytes | median % on no-reuse bytes |", "|---|---|---|"]
    per_op = collections.defaultdict(list)
    for key, c in cases.items():
        impl = "ugraph_best" if "ugraph_best" in c else "ugraph"
        if impl in c:
            r = meta[key]
            sec = c[impl] * 1e-3
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
