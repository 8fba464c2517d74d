"""The models benchmark's rows: CSV columns, markdown summaries of one device kind, merging runs."""
from __future__ import annotations

import csv
import math
import pathlib
from typing import List

from .graphs import graph_set
from .models import MODELS, MODES
from .parity import RTOL
from .timing import SPARSE_FREE
from dgl_ugraph.tuning.shards import write_rows  # noqa: E402  (after the package put the repository on sys.path)

COLUMNS = ["device", "model", "graph", "mode", "impl", "ms", "V", "E", "feat", "classes", "ms_min", "ms_max",
           "reps", "parity_maxdiff", "parity_ok", "ugraph_share", "parity_fp64_maxdiff", "paired_x"]


def device_kind(device: str) -> str:
    """cpu or cuda, from a row's device column (CPU rows start with "cpu")."""
    return "cpu" if device.startswith("cpu") else "cuda"


GROUPS = {
    "cpu": [("all graphs", lambda c: True),
            ("shared datasets (real graphs)", lambda c: graph_set(c["graph"]) == "real"),
            ("paper stand-ins (synthetic)", lambda c: graph_set(c["graph"]) == "standin"),
            ("graphs with E >= 50K", lambda c: c["E"] >= 50_000),
            ("graphs with E < 10K", lambda c: c["E"] < 10_000)],
    "cuda": [("all graphs", lambda c: True),
             ("shared datasets (real graphs)", lambda c: graph_set(c["graph"]) == "real"),
             ("uGrapher Table 3 stand-ins, full size", lambda c: graph_set(c["graph"]) == "standin"),
             ("large synthetic graphs (40M edges)", lambda c: graph_set(c["graph"]) == "large"),
             ("graphs with E > 100K", lambda c: c["E"] > 100_000),
             ("graphs with E >= 1M", lambda c: c["E"] >= 1_000_000),
             ("graphs with E < 100K", lambda c: c["E"] < 100_000)],
}


def read_rows(path, kind: str) -> List[dict]:
    """The rows of one device kind; several devices of that kind are refused (one run, one device)."""
    rows = [r for r in csv.DictReader(open(path, newline="")) if device_kind(r["device"]) == kind]
    devices = sorted({r["device"] for r in rows})
    if len(devices) > 1:
        raise SystemExit(f"{path} has {kind} rows of several devices {devices}: summarize one run's CSV")
    return rows


def summarize(path, impl="ugraph", baseline="dgl", kind="cpu", details=True) -> str:
    """Markdown tables of a models CSV's rows of one device kind: geomean speedups (the paired
    speedup of a row that has one against dgl, else baseline ms / impl ms) overall, by graph set
    and per model, and (details) every case where impl is slower and the parity results."""
    rows = read_rows(path, kind)
    ms = {(r["mode"], r["model"], r["graph"], r["impl"]): r for r in rows}
    cases = []
    for (mode, model, graph, i), r in ms.items():
        b = ms.get((mode, model, graph, baseline))
        if i == impl and b is not None:
            cases.append(dict(mode=mode, model=model, graph=graph, E=int(r["E"]), feat=int(r["feat"]),
                              base=float(b["ms"]), ours=float(r["ms"]),
                              x=float(r["paired_x"]) if baseline == "dgl" and r.get("paired_x") else
                              float(b["ms"]) / float(r["ms"]),
                              parity=r["parity_ok"], fp64=r.get("parity_fp64_maxdiff") or "",
                              maxdiff=r["parity_maxdiff"]))

    def gm(xs):
        xs = list(xs)
        return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (float("nan"), 0)

    modes = [m for m in MODES if any(c["mode"] == m for c in cases)]
    lines = ["| cases | " + " | ".join(f"{m} geomean (cases)" for m in modes) + " |",
             "|---|" + "---|" * len(modes)]
    for label, keep in GROUPS[kind]:
        cells = []
        for m in modes:
            g, k = gm(c["x"] for c in cases if c["mode"] == m and keep(c))
            cells.append(f"{g:.2f}x ({k})" if k else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| model | " + " | ".join(f"{m}: geomean, min-max" for m in modes) + " |",
              "|---|" + "---|" * len(modes)]
    for model in MODELS:
        cells = []
        for m in modes:
            xs = [c["x"] for c in cases if c["mode"] == m and c["model"] == model]
            g, k = gm(xs)
            cells.append(f"{g:.2f}x, {min(xs):.2f}-{max(xs):.2f}" if k else "-")
        if any(cell != "-" for cell in cells):
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
    if not details:
        return "\n".join(lines)
    slow = sorted((c for c in cases if c["x"] < 1.0), key=lambda c: c["x"])
    lines += ["", f"Slower with {impl} than {baseline}: {len(slow)} of {len(cases)} cases; "
              f"{sum(c['x'] < 0.9 for c in slow)} by more than 10%, {sum(c['x'] < 0.75 for c in slow)} by more than 25%; "
              f"{sum(c['E'] > 100_000 for c in slow)} on graphs with more than 100K edges.",
              "", "| model | slower cases (inference, training) | of which < 0.9x | worst |", "|---|---|---|---|"]
    for model in MODELS:
        mine = [c for c in slow if c["model"] == model]
        if mine:
            w = mine[0]
            lines.append(f"| {model} | {len(mine)} ({sum(c['mode'] == 'inference' for c in mine)}, "
                         f"{sum(c['mode'] == 'training' for c in mine)}) | {sum(c['x'] < 0.9 for c in mine)} | "
                         f"{w['x']:.2f}x ({w['graph']}, {w['mode']}) |")
    lines += ["", "<details><summary>every slower case</summary>", "",
              "| model | graph | mode | E | F | baseline ms | ours ms | speedup |", "|---|---|---|---|---|---|---|---|"]
    for c in slow:
        lines.append(f"| {c['model']} | {c['graph']} | {c['mode']} | {c['E']} | {c['feat']} | {c['base']:.2f} | "
                     f"{c['ours']:.2f} | {c['x']:.2f}x |")
    lines += ["", "</details>"]
    bad = [c for c in cases if c["parity"] != "1"]
    lines += ["", f"Parity (float32, rtol {RTOL:g}): {len(cases) - len(bad)} of {len(cases)} cases pass."]
    for c in bad:
        lines.append(f"- {c['model']} {c['graph']} {c['mode']}: float32 maxdiff {c['maxdiff']}"
                     + (f"; float64 maxdiff {c['fp64']}" if c["fp64"] else ""))
    return "\n".join(lines)


def pyg_gap(rows) -> str:
    """On the shared datasets (real graphs, all small): how far PyG is ahead of dgl_ugraph, and how
    much of that gap DGL's own time explains. DGL's own time is what the same program still takes
    with every sparse call free (dgl_sparse_free); in a case where PyG is faster than us, the part
    of the gap (ours - PyG) that dgl_sparse_free - PyG covers is out of any kernel's reach."""
    ms = {(r["mode"], r["model"], r["graph"], r["impl"]): float(r["ms"]) for r in rows}
    lines = ["| mode | cases | PyG faster than dgl_ugraph | dgl_ugraph / PyG (geomean) | "
             "dgl_sparse_free / PyG (geomean) | DGL / PyG (geomean) | share of the gap that is DGL's own time "
             "(summed ms; median case) |", "|---|---|---|---|---|---|---|"]
    for mode in MODES:
        keys = sorted({k[:3] for k in ms if k[0] == mode and graph_set(k[2]) == "real"
                       and all((*k[:3], i) in ms for i in ("dgl", "ugraph", "pyg", SPARSE_FREE))})
        if not keys:
            continue
        ours, pyg, free, dgl = ([ms[(*k, i)] for k in keys] for i in ("ugraph", "pyg", SPARSE_FREE, "dgl"))
        behind = [i for i in range(len(keys)) if ours[i] > pyg[i]]
        shares = sorted(min(max(free[i] - pyg[i], 0.0), ours[i] - pyg[i]) / (ours[i] - pyg[i]) for i in behind)
        summed = sum(min(max(free[i] - pyg[i], 0.0), ours[i] - pyg[i]) for i in behind) / \
            max(sum(ours[i] - pyg[i] for i in behind), 1e-12)

        def gm(a, b):
            return math.exp(sum(math.log(x / y) for x, y in zip(a, b)) / len(a))
        median = f"{100 * shares[len(shares) // 2]:.0f}%" if shares else "-"
        lines.append(f"| {mode} | {len(keys)} | {len(behind)} | {gm(ours, pyg):.2f} | {gm(free, pyg):.2f} | "
                     f"{gm(dgl, pyg):.2f} | {100 * summed:.0f}%; {median} |" if behind else
                     f"| {mode} | {len(keys)} | 0 | {gm(ours, pyg):.2f} | {gm(free, pyg):.2f} | {gm(dgl, pyg):.2f} | - |")
    return "\n".join(lines)


def summarize_gpu(path) -> str:
    """The GPU run's tables (the non-CPU rows of one device): dgl_ugraph vs DGL-native, vs PyG
    2.8 and DGL-native vs PyG, the sparse-free bound, and the gap to PyG on the real graphs."""
    rows = read_rows(path, "cuda")
    if not rows:
        return f"{path}: no GPU rows"
    impls = {r["impl"] for r in rows}
    parts = [f"Device: {rows[0]['device']}; {len({(r['model'], r['graph']) for r in rows})} (model, graph) cases.",
             "", "### dgl_ugraph vs DGL-native (DGL ms / dgl_ugraph ms)", "", summarize(path, "ugraph", "dgl", "cuda")]
    if "pyg" in impls:
        parts += ["", "### dgl_ugraph vs PyG 2.8 (PyG ms / dgl_ugraph ms)", "",
                  summarize(path, "ugraph", "pyg", "cuda", details=False),
                  "", "### DGL-native vs PyG 2.8 (PyG ms / DGL ms)", "", summarize(path, "dgl", "pyg", "cuda", details=False)]
    if SPARSE_FREE in impls:
        parts += ["", f"### The bound: DGL with every gspmm/gsddmm answered by a copy of its result (DGL ms / "
                      f"{SPARSE_FREE} ms)", "", summarize(path, SPARSE_FREE, "dgl", "cuda", details=False)]
    if "pyg" in impls and SPARSE_FREE in impls:
        parts += ["", "### The gap to PyG on the shared datasets (real graphs, all under 1M edges)", "", pyg_gap(rows)]
    return "\n".join(parts)


def merge(source, target):
    """Replaces target's rows of the devices that source has rows for with source's rows (a GPU
    run's CSV into benchmarks/results/models.csv, whose CPU rows stay)."""
    new = list(csv.DictReader(open(source, newline="")))
    devices = {r["device"] for r in new}
    old = [r for r in csv.DictReader(open(target, newline=""))] if pathlib.Path(target).exists() else []
    kept = [r for r in old if r["device"] not in devices]
    write_rows(target, kept + new, COLUMNS, append=False)
    print(f"{target}: {len(kept)} rows kept, {len(new)} rows of {sorted(devices)} from {source}")
