"""Regenerates every PNG under benchmarks/results/plots/ from the CSVs (no measurement here):

    .venv/bin/python benchmarks/plots.py

- models_heatmap_<device>.png: latency with dgl_ugraph normalized to the baseline, model x graph,
  inference and training (as the uGrapher paper's Fig. 1), from benchmarks/results/models.csv: CPU rows
  (baseline: DGL's own CPU kernels) and GPU rows (the --device cuda run; baseline DGL-native, and
  PyG 2.8 in models_heatmap_gpu_pyg.png). The trace replay's rows (benchmarks/results/models_gpu_replay.csv,
  baselines PyG and cuSPARSE/torch) give models_*_gpu_replay.png when that file exists.
- models_speedup_<device>.png: per model, the geomean speedup over graphs (bars), with the
  slowest and fastest graph (whiskers).
- kernels_vs_cusparse.png: per operator, our kernels' speedup over cuSPARSE (torch.sparse.mm on
  CSR) on the uGrapher stand-ins and the large graphs (forward, fp32), from
  benchmarks/results/kernels.csv (the device from its rows, the CUDA core from kernels.md's header),
  for the selector's choice and, where the run searched, the best configuration. Operators cuSPARSE
  cannot express are shown against the torch gather/scatter path, and say so.

The GPU charts take the last GPU device in models.csv (the current run). Each PNG is saved with a
256-colour palette, which keeps it a fraction of the size at the same resolution.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import math
import pathlib
import re
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODELS = ("GCN", "GAT", "GIN", "SAGE-mean", "SAGE-gcn", "SAGE-pool")
RESULTS = ROOT / "benchmarks" / "results"
# The kernels chart's colours: the selector's choice, the best configuration.
KERNEL_COLORS = {"ugraph": "#fdae6b", "ugraph_best": "#e6550d"}
DPI = 110


def save(fig, path, dpi=DPI):
    """Writes fig as a palette PNG (256 colours: the charts' flat fills and text lose nothing)."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    plt.close(fig)
    buf.seek(0)
    with Image.open(buf) as img:
        img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


def geomean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def read_csv(path):
    path = pathlib.Path(path)
    with (gzip.open(path, "rt", newline="") if path.suffix == ".gz" else open(path, newline="")) as fh:
        return list(csv.DictReader(fh))


def model_ratios(rows, impl, baseline):
    """{(mode, model, graph): baseline ms / impl ms} (speedup; > 1 is faster)."""
    ms = {(r["mode"], r["model"], r["graph"], r["impl"]): float(r["ms"]) for r in rows}
    out = {}
    for (mode, model, graph, i), t in ms.items():
        if i == impl and (mode, model, graph, baseline) in ms and t > 0:
            out[(mode, model, graph)] = ms[(mode, model, graph, baseline)] / t
    return out


def graph_order(rows):
    """Shared datasets first (by edges), then the synthetic graphs (by edges)."""
    edges = {}
    for r in rows:
        edges[r["graph"]] = int(r["E"])
    return sorted(edges, key=lambda g: (g.startswith("sim-") or g.startswith("big-"), edges[g], g))


def device_rows(rows, kind):
    """The rows of the last device of one kind in the file (CPU rows' device starts with "cpu"):
    the current run, where an earlier run's rows stay beside it; and that device's name."""
    mine = [r for r in rows if r["device"].startswith("cpu") == (kind == "cpu")]
    device = mine[-1]["device"] if mine else ""
    return [r for r in mine if r["device"] == device], device


def heatmap(rows, impl, baseline, title, path):
    ratios = model_ratios(rows, impl, baseline)
    modes = [m for m in ("inference", "training") if any(k[0] == m for k in ratios)]
    graphs = [g for g in graph_order(rows) if any(k[2] == g for k in ratios)]
    models = [m for m in MODELS if any(k[1] == m for k in ratios)]
    if not modes or not graphs:
        return None
    fig, axes = plt.subplots(len(modes), 1, figsize=(max(8, 0.42 * len(graphs) + 2), len(modes) * (2.6 + 0.45 * len(models))),
                             squeeze=False)
    norm = TwoSlopeNorm(vmin=0.25, vcenter=1.0, vmax=2.0)
    for ax, mode in zip(axes[:, 0], modes):
        grid = [[1.0 / ratios[(mode, m, g)] if (mode, m, g) in ratios else float("nan") for g in graphs] for m in models]
        im = ax.imshow([[min(max(v, 0.25), 2.0) for v in row] for row in grid], cmap="RdYlGn_r", norm=norm,
                       aspect="auto")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if not math.isnan(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6.5)
        ax.set_yticks(range(len(models)), models, fontsize=8)
        ax.set_xticks(range(len(graphs)), graphs, rotation=70, ha="right", fontsize=7)
        gm = geomean([ratios[k] for k in ratios if k[0] == mode])
        ax.set_title(f"{mode}: normalized latency (ours / {baseline}; < 1 is faster); geomean speedup {gm:.2f}x",
                     fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.02, pad=0.01)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def speedup_bars(rows, pairs, title, path):
    """pairs: [(impl, baseline, label)]; one bar group per model, one bar per (mode, pair)."""
    series = []
    for impl, baseline, label in pairs:
        ratios = model_ratios(rows, impl, baseline)
        for mode in ("inference", "training"):
            if any(k[0] == mode for k in ratios):
                series.append((f"{mode}, {label}", {m: [v for k, v in ratios.items() if k[0] == mode and k[1] == m]
                                                    for m in MODELS}))
    if not series:
        return None
    models = [m for m in MODELS if any(s[1][m] for s in series)]
    fig, ax = plt.subplots(figsize=(1.6 * len(models) + 2, 4.2))
    width = 0.8 / len(series)
    for i, (label, per_model) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(models))]
        gms = [geomean(per_model[m]) for m in models]
        lo = [g - min(per_model[m]) if per_model[m] else 0 for g, m in zip(gms, models)]
        hi = [max(per_model[m]) - g if per_model[m] else 0 for g, m in zip(gms, models)]
        bars = ax.bar(xs, gms, width, label=label, yerr=[lo, hi], capsize=2, error_kw={"lw": 0.7})
        for b, g in zip(bars, gms):
            ax.text(b.get_x() + b.get_width() / 2, g, f"{g:.2f}", ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("speedup (geomean over graphs; whiskers: min-max)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path)


def kernel_cases(path):
    """{op: [(case label, impl, speedup, baseline name)]} for impl in ugraph (selector), ugraph_best."""
    rows = read_csv(path)
    by_case = defaultdict(dict)
    for r in rows:
        # The datasets and the reversed graphs would crowd the chart out of legibility.
        if r["dtype"] == "float32" and not r["graph"].startswith("ds-") and not r["graph"].endswith("-rev"):
            by_case[(r["op"], r["graph"], int(r["F"]), r["dtype"])][r["impl"]] = float(r["ms"])
    out = defaultdict(list)
    for (op, graph, f, dtype), impls in sorted(by_case.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        base = "cusparse" if "cusparse" in impls else "torch_scatter"
        if base not in impls:
            continue
        for impl in ("ugraph", "ugraph_best"):
            if impl in impls:
                out[op].append((f"{graph} F={f}", impl, impls[base] / impls[impl], base))
    return out


def kernels_header(md_path):
    """(device, CUDA core) from kernels.md's first line, as summarize_kernels.py writes it."""
    try:
        first = pathlib.Path(md_path).read_text().split("\n", 1)[0]
    except OSError:
        return None, None
    m = re.match(r"# Kernel benchmark summary \((?P<device>[^,]+), CUDA core (?P<core>[^,]+),", first)
    return (m["device"], m["core"]) if m else (None, None)


def kernels_chart(path, csv_path=RESULTS / "kernels.csv", md_path=RESULTS / "kernels.md"):
    csv_path = pathlib.Path(csv_path)
    if not csv_path.exists():
        return None
    rows = read_csv(csv_path)
    device, core = kernels_header(md_path)
    device = (rows[0]["device"] if rows else None) or device or "GPU"
    cases_by_op = kernel_cases(csv_path)
    if not cases_by_op:
        return None
    ops = sorted(cases_by_op, key=lambda o: (o not in ("copy_u-sum", "u_mul_e-sum"), o))
    fig, axes = plt.subplots(len(ops), 1, figsize=(19, 2.6 * len(ops)), squeeze=False)
    for ax, op in zip(axes[:, 0], ops):
        cases = cases_by_op[op]
        labels = list(dict.fromkeys(c[0] for c in cases))
        pos = {lab: i for i, lab in enumerate(labels)}
        bases = {c[3] for c in cases}
        for impl, color in KERNEL_COLORS.items():
            pts = [c for c in cases if c[1] == impl]
            if not pts:
                continue
            both = len({c[1] for c in cases}) > 1
            off = (-0.2 if impl == "ugraph" else 0.2) if both else 0.0
            gm = geomean([c[2] for c in pts])
            ax.bar([pos[c[0]] + off for c in pts], [c[2] for c in pts], 0.4 if both else 0.6, color=color,
                   label=f"{'selector' if impl == 'ugraph' else 'best config'} (geomean {gm:.2f}x)")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)), labels, rotation=70, ha="right", fontsize=6)
        base = "cuSPARSE (torch.sparse.mm, CSR)" if bases == {"cusparse"} else \
            "torch gather/scatter (cuSPARSE has no such op)"
        kernels = f"CUDA core {core}" if core else "kernels.csv"
        ax.set_title(f"{op}: speedup vs {base}; {device}, fp32; {kernels}", fontsize=9)
        ax.set_ylabel("speedup")
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    fig.tight_layout()
    return save(fig, path, dpi=80)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(RESULTS / "plots"))
    ap.add_argument("--models-csv", default=str(RESULTS / "models.csv"), help="the models benchmark's rows")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    made = []
    models_csv = pathlib.Path(args.models_csv)
    rows, _ = device_rows(read_csv(models_csv), "cpu") if models_csv.exists() else ([], "")
    if rows:
        made.append(heatmap(rows, "ugraph", "dgl",
                            "CPU (2 shared cores), DGL 2.1.0: dgl_ugraph on vs off (baseline: DGL's own CPU kernels)",
                            out / "models_heatmap_cpu.png"))
        pairs = [("ugraph", "dgl", "dgl_ugraph vs DGL")]
        if any(r["impl"] == "dgl_sparse_free" for r in rows):
            pairs.append(("dgl_sparse_free", "dgl", "bound: sparse ops free"))
        made.append(speedup_bars(rows, pairs,
                                 "CPU (2 shared cores): speedup over DGL's own kernels, per model; the bound answers "
                                 "every gspmm/gsddmm with a copy of its result",
                                 out / "models_speedup_cpu.png"))
    rows, device = device_rows(read_csv(models_csv), "cuda") if models_csv.exists() else ([], "")
    if rows:
        made.append(heatmap(rows, "ugraph", "dgl", f"{device}: dgl_ugraph on vs off (baseline: DGL-native CUDA kernels)",
                            out / "models_heatmap_gpu.png"))
        if any(r["impl"] == "pyg" for r in rows):
            made.append(heatmap(rows, "ugraph", "pyg", f"{device}: DGL with dgl_ugraph vs the same models in PyG 2.8",
                                out / "models_heatmap_gpu_pyg.png"))
        pairs = [("ugraph", "dgl", "dgl_ugraph vs DGL"), ("ugraph", "pyg", "dgl_ugraph vs PyG 2.8"),
                 ("dgl_sparse_free", "dgl", "bound: sparse ops free, vs DGL")]
        made.append(speedup_bars(rows, [p for p in pairs if any(r["impl"] == p[0] for r in rows)
                                        and any(r["impl"] == p[1] for r in rows)],
                                 f"{device}: speedup per model (geomean over graphs; whiskers: min-max)",
                                 out / "models_speedup_gpu.png"))
    replay = RESULTS / "models_gpu_replay.csv"
    if replay.exists():
        rows = read_csv(replay)
        made.append(heatmap(rows, "ugraph", "pyg", "GPU inference: our kernels (trace replay) vs PyG 2.8's models",
                            out / "models_heatmap_gpu_replay.png"))
        made.append(speedup_bars(rows, [("ugraph", "pyg", "vs PyG 2.8"), ("ugraph", "torch_cusparse", "vs cuSPARSE/torch")],
                                 "GPU inference: speedup of our kernels (trace replay), per model",
                                 out / "models_speedup_gpu_replay.png"))
    made.append(kernels_chart(out / "kernels_vs_cusparse.png"))
    for p in made:
        if p:
            print(f"wrote {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}")


if __name__ == "__main__":
    main()
