"""The GPU tests import helper modules of the other test folders (tests/dgl's fuzz cases, graphs and
models), which no CPU run collects beside them: each tests/gpu file must name every such folder on
its own sys.path, or it fails to import on the GPU machine alone."""
from __future__ import annotations

import ast
import pathlib

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
HELPERS = {p.stem: p.parent.name for p in TESTS.glob("*/*.py") if p.parent.name != "gpu"}


@pytest.mark.parametrize("path", sorted((TESTS / "gpu").glob("*.py")), ids=lambda p: p.name)
def test_gpu_tests_reach_their_helpers(path):
    source = path.read_text()
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    folders = {HELPERS[n] for n in names if n in HELPERS}
    missing = [f for f in sorted(folders) if f'_HERE.parent / "{f}"' not in source]
    assert not missing, f"{path.name} imports helpers of tests/{missing} without putting them on sys.path"
