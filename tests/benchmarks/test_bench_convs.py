"""Smoke test of benchmarks/bench_convs.py on CPU: a run over two convs of a small stand-in writes
its rows (both sides, both modes, float64 parity, the whole share on dgl_ugraph) and a summary,
and --summarize merges runs into the same summary."""
import csv
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

pytest.importorskip("dgl")
import bench_convs as bc  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")


def run(monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["bench_convs.py", *argv])
    bc.main()


def test_a_run_writes_rows_and_a_summary(monkeypatch, tmp_path):
    out, md = tmp_path / "convs.csv", tmp_path / "convs.md"
    run(monkeypatch, "--device", "cpu", "--graphs", "sim-citeseer", "--convs", "GATConv,SAGEConv-pool",
        "--reps", "1", "--warmup", "0", "--min-s", "0", "--max-reps", "1", "--out", str(out), "--md", str(md))
    rows = list(csv.DictReader(open(out)))
    assert {(r["conv"], r["mode"], r["impl"]) for r in rows} == {
        (c, m, i) for c in ("GATConv", "SAGEConv-pool") for m in bc.MODES for i in ("dgl", "ugraph")}
    ours = [r for r in rows if r["impl"] == "ugraph"]
    assert all(r["parity_ok"] == "1" and r["parity_dtype"] == "float64" for r in ours)
    assert all(float(r["ugraph_share"]) == 1.0 and float(r["paired_x"]) > 0 for r in ours)
    text = md.read_text()
    assert "| GATConv |" in text and "| SAGEConv-pool |" in text and "Parity failures: 0." in text
    merged, merged_csv = tmp_path / "merged.md", tmp_path / "merged.csv"
    run(monkeypatch, "--summarize", f"{out},{out}", "--md", str(merged))
    assert merged.read_text() == text
    # A later run's row replaces the earlier one of its case, in the CSV and the summary.
    later = tmp_path / "later.csv"
    redone = [dict(r, paired_x="9.5") for r in rows if r["conv"] == "GATConv" and r["impl"] == "ugraph"]
    bc.write_rows(str(later), redone, bc.COLUMNS)
    run(monkeypatch, "--summarize", f"{out},{later}", "--out", str(merged_csv), "--md", str(merged))
    again = list(csv.DictReader(open(merged_csv)))
    assert len(again) == len(rows) and "| GATConv | 9.50 | 9.50 |" in merged.read_text()


def test_a_run_cut_short_keeps_the_cases_it_finished(monkeypatch, tmp_path):
    """The device tool's time limit kills a run mid-case: the rows of the cases before it stay."""
    out = tmp_path / "convs.csv"
    real = bc.bench

    def killed_at_the_second(cname, *rest):
        if cname == "SAGEConv-pool":
            raise KeyboardInterrupt  # what a timeout's signal leaves: no code after it runs
        return real(cname, *rest)

    monkeypatch.setattr(bc, "bench", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        run(monkeypatch, "--device", "cpu", "--graphs", "sim-citeseer", "--convs", "GATConv,SAGEConv-pool",
            "--reps", "1", "--warmup", "0", "--min-s", "0", "--max-reps", "1", "--out", str(out))
    rows = list(csv.DictReader(open(out)))
    assert {(r["conv"], r["impl"]) for r in rows} == {("GATConv", "dgl"), ("GATConv", "ugraph")}
