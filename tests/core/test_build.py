"""csrc/source_hash.py: the hashes that let a core built elsewhere (make cuda-lib) be used only
with the sources it was built from."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def source_hash():
    spec = importlib.util.spec_from_file_location("source_hash", ROOT / "csrc" / "source_hash.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_archive_hash_reads_the_embedded_marker(tmp_path, source_hash):
    archive = tmp_path / "libugraph_cpu.a"
    archive.write_bytes(b"!<arch>\n\x00\x01" + source_hash.CPU_MARKER.encode() + b"0123456789abcdef\x00\xff")
    assert source_hash.archive_hash(str(archive)) == "0123456789abcdef"
    archive.write_bytes(b"!<arch>\n" + source_hash.CPU_MARKER.encode() + b"not-hex\x00")
    assert source_hash.archive_hash(str(archive)) == "none"


def test_cpu_and_cuda_hashes_differ_and_are_stable(source_hash):
    cpu = source_hash.cpu_source_hash()
    assert len(cpu) == 16 and cpu == source_hash.cpu_source_hash()
    assert cpu != source_hash.source_hash("90", "all", "all")
    assert source_hash.source_hash("90", "all", "all") != source_hash.source_hash("80", "all", "all")


def test_a_built_archive_carries_the_current_hash(source_hash):
    """Wherever this checkout built its CPU core, the archive names the sources it has now."""
    sources = [f for d in ("cpu", "include", "common") for f in (ROOT / "csrc" / d).rglob("*") if f.is_file()]
    newest = max(f.stat().st_mtime for f in sources + [ROOT / "CMakeLists.txt"])
    archives = [p for p in ROOT.glob("build/*/libugraph_cpu.a") if p.stat().st_mtime >= newest]
    if not archives:
        pytest.skip("no CPU core archive built from the current sources under build/")
    assert source_hash.cpu_source_hash() in {source_hash.archive_hash(str(a)) for a in archives}
