"""The collector's files: per run, cases-*.csv.gz and timings-*.csv.gz, appended one gzip member
per case so that a run that is stopped, killed or out of budget keeps all it finished; and the
state a restarted worker resumes from.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import pathlib
import zlib
from typing import Iterable, List, Optional, Sequence

CASE_COLUMNS = (
    "case_id", "run_id", "device", "sm_count", "l2_bytes", "cc", "graph", "family", "split", "call", "models",
    "direction", "F", "heads", "dtype", "idtype", "num_src", "num_dst", "num_edges", "mean_deg", "std_deg",
    "max_deg", "empty_rows", "edge_op", "gather_op", "a_type", "b_type", "c_type", "out_len", "reduce_size",
    "broadcast", "width", "n_configs", "n_timed", "best_config", "best_ms", "status", "audit", "starved_batches",
    "wall_s", "message",
)
TIMING_COLUMNS = ("case_id", "strategy", "g", "t", "status", "ms", "first_ms", "reps", "message")


def write_rows(path, rows: Sequence[dict], columns: Optional[Sequence[str]] = None, append: bool = False) -> None:
    """Writes rows to the CSV file at path (its folder made where missing): a header of columns
    (default: the first row's keys) and the rows; with append, after the rows already there, the
    header only where the file is new."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not append or not path.exists()
    with open(path, "w" if new else "a", newline="") as fh:
        w = csv.DictWriter(fh, list(columns) if columns is not None else list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)


def read_gzip_text(path: pathlib.Path) -> str:
    """The text of a gzip file made of appended members, up to the last complete member (a
    member cut short by a killed writer is dropped)."""
    data = pathlib.Path(path).read_bytes()
    out = []
    while data:
        d = zlib.decompressobj(wbits=31)
        try:
            chunk = d.decompress(data)
        except zlib.error:
            break
        if not d.eof:
            break
        out.append(chunk)
        data = d.unused_data
    return b"".join(out).decode()


def read_rows(path: pathlib.Path) -> List[dict]:
    return list(csv.DictReader(io.StringIO(read_gzip_text(path))))


class Shards:
    """This run's two files, cases-*.csv.gz and timings-*.csv.gz, each appended one gzip member
    per case (timings first, so a case row means its timings are complete)."""

    def __init__(self, out_dir: pathlib.Path, tag: str):
        self.cases_path = out_dir / f"cases-{tag}.csv.gz"
        self.timings_path = out_dir / f"timings-{tag}.csv.gz"

    @staticmethod
    def _append(path: pathlib.Path, columns, rows: Sequence[dict]) -> None:
        buf = io.StringIO()
        w = csv.DictWriter(buf, columns, lineterminator="\n")
        if not path.exists() or path.stat().st_size == 0:
            w.writeheader()
        w.writerows(rows)
        # Flushed to the OS at once, so a killed run loses nothing it finished (no fsync: a lost
        # machine takes the output folder with it anyway).
        with open(path, "ab") as fh:
            fh.write(gzip.compress(buf.getvalue().encode(), compresslevel=6))

    def write(self, case_row: dict, timing_rows: Sequence[dict]) -> None:
        self._append(self.timings_path, TIMING_COLUMNS, timing_rows)
        self._append(self.cases_path, CASE_COLUMNS, [case_row])


def collected_files(dirs: Iterable[pathlib.Path], prefix: str) -> List[pathlib.Path]:
    """The runs' files under `dirs`, oldest run first whatever folder holds it (a file's name
    carries its run's start time), so that a reader keeping the last row of a case keeps the
    latest measurement."""
    files = []
    for d in dirs:
        d = pathlib.Path(d)
        if d.is_dir():
            files += d.rglob(f"{prefix}-*.csv.gz")
    return sorted(set(files), key=lambda f: (f.name, str(f)))


def done_keys(dirs: Iterable[pathlib.Path], device_name: str) -> set:
    """Cases already collected on this GPU model (any status: a failed case is not retried)."""
    keys = set()
    for path in collected_files(dirs, "cases"):
        for row in read_rows(path):
            if row.get("device") == device_name:
                keys.add(row["case_id"])
    return keys


class State:
    """What a restarted worker must know: the case that was running when the GPU context died,
    the configuration being tried in isolation, and the configurations that killed it before."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        try:
            self.data = json.loads(path.read_text())
        except (OSError, ValueError):
            self.data = {}
        self.data.setdefault("bad", {})

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def suspect(self, key: Optional[str], trying: Optional[str] = None) -> None:
        self.data["suspect"], self.data["trying"] = key, trying
        self.save()

    def bad_configs(self, key: str) -> List[str]:
        return list(self.data["bad"].get(key, []))
