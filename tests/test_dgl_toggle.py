"""Turning the interception on and off: identity of DGL's functions, the version gate, the
start-up hook (.pth) and `python -m dgl_ugraph`."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import dgl
import dgl_ugraph
from dgl.backend.pytorch import sparse
from dgl_ugraph import integration

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ("_gspmm", "_gsddmm", "_gspmm_hetero", "_gsddmm_hetero")


def dgl_own(name):
    return getattr(dgl._sparse_ops, name)


@pytest.fixture
def restore_state():
    was = dgl_ugraph.is_enabled()
    yield
    dgl_ugraph.enable() if was else dgl_ugraph.disable()


def test_import_enables_and_disable_restores_dgl_objects(restore_state):
    dgl_ugraph.enable()
    for name in NAMES:
        assert getattr(sparse, name) is integration._REPLACEMENTS[name]
    dgl_ugraph.disable()
    for name in NAMES:
        assert getattr(sparse, name) is dgl_own(name)
    dgl_ugraph.enable()
    dgl_ugraph.enable()  # idempotent: DGL's originals stay captured, not our own functions
    dgl_ugraph.disable()
    for name in NAMES:
        assert getattr(sparse, name) is dgl_own(name)


def test_disabled_context_restores_previous_state(restore_state):
    dgl_ugraph.enable()
    with dgl_ugraph.disabled():
        assert sparse._gspmm is dgl_own("_gspmm")
        assert not dgl_ugraph.is_enabled()
    assert sparse._gspmm is integration._gspmm
    dgl_ugraph.disable()
    with dgl_ugraph.disabled():
        pass
    assert sparse._gspmm is dgl_own("_gspmm")


def test_disabled_context_restores_on_error(restore_state):
    dgl_ugraph.enable()
    with pytest.raises(KeyError):
        with dgl_ugraph.disabled():
            raise KeyError("inside")
    assert dgl_ugraph.is_enabled()


def test_unknown_dgl_version_is_refused_and_dgl_untouched(restore_state, monkeypatch):
    dgl_ugraph.disable()
    monkeypatch.setattr(dgl, "__version__", "3.0.0")
    with pytest.raises(dgl_ugraph.UnsupportedDGLError, match="supports DGL 1.1 to 2.4, found DGL 3.0.0"):
        dgl_ugraph.enable()
    assert not dgl_ugraph.is_enabled()
    for name in NAMES:
        assert getattr(sparse, name) is dgl_own(name)
    monkeypatch.setattr(dgl, "__version__", "1.0.2")
    with pytest.raises(dgl_ugraph.UnsupportedDGLError):
        dgl_ugraph.enable()


def test_changed_dgl_signature_is_refused(restore_state, monkeypatch):
    dgl_ugraph.disable()

    def _gspmm(gidx, op, reduce_op, u, e, extra=None):
        raise AssertionError("never called")

    monkeypatch.setattr(sparse, "_gspmm", _gspmm)
    with pytest.raises(dgl_ugraph.UnsupportedDGLError, match="is not the expected _gspmm"):
        dgl_ugraph.enable()
    assert sparse._gspmm is _gspmm
    assert sparse._gsddmm is dgl_own("_gsddmm")


def run_python(code, env_extra=None, args=(), cwd=None):
    env = dict(os.environ)
    env.pop("DGL_UGRAPH", None)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    result = subprocess.run([sys.executable, *args, "-c", textwrap.dedent(code)] if code else [sys.executable, *args],
                            env=env, cwd=cwd or REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


PROBE = """
    import sys
    print("startup", "torch" in sys.modules, "dgl_ugraph" in sys.modules)
    import dgl
    from dgl.backend.pytorch import sparse
    print("patched", sparse._gspmm is not dgl._sparse_ops._gspmm)
"""


def test_import_respects_dgl_ugraph_0():
    out = run_python("""
        import dgl, dgl_ugraph
        from dgl.backend.pytorch import sparse
        print(dgl_ugraph.is_enabled(), sparse._gspmm is dgl._sparse_ops._gspmm)
    """, {"DGL_UGRAPH": "0"})
    assert out.split() == ["False", "True"]


def test_import_before_dgl_enables_when_dgl_arrives():
    out = run_python("""
        import sys, dgl_ugraph
        assert "dgl" not in sys.modules
        import dgl
        from dgl.backend.pytorch import sparse
        print(dgl_ugraph.is_enabled(), sparse._gspmm.__module__)
    """)
    assert out.split() == ["True", "dgl_ugraph.integration"]


@pytest.mark.parametrize("flag,patched", [(None, "False"), ("0", "False"), ("1", "True")])
def test_pth_hook_is_lazy_and_enables_only_with_dgl_ugraph_1(tmp_path, flag, patched):
    # site.addsitedir processes a .pth exactly as interpreter start-up does for site-packages.
    (tmp_path / "dgl_ugraph.pth").write_text((open(os.path.join(REPO, "dgl_ugraph", "dgl_ugraph.pth")).read()))
    code = f"import site\nsite.addsitedir({str(tmp_path)!r})\n" + textwrap.dedent(PROBE)
    out = run_python(code, {"DGL_UGRAPH": flag} if flag else None)
    assert out.split() == ["startup", "False", "False", "patched", patched]


def test_python_m_runs_script_with_arguments_and_plugin_on(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        import dgl
        from dgl.backend.pytorch import sparse
        print(sys.argv[1:], os.path.basename(sys.argv[0]), sys.path[0] == os.path.dirname(os.path.abspath(__file__)),
              __name__, sparse._gspmm.__module__)
    """))
    out = run_python(None, args=("-m", "dgl_ugraph", str(script), "--epochs", "3", "x y"), cwd=str(tmp_path))
    assert out.strip() == "['--epochs', '3', 'x y'] train.py True __main__ dgl_ugraph.integration"


def test_python_m_propagates_exit_status(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nsys.exit(3)\n")
    env = dict(os.environ, PYTHONPATH=REPO)
    result = subprocess.run([sys.executable, "-m", "dgl_ugraph", str(script)], env=env, capture_output=True, timeout=300)
    assert result.returncode == 3


def test_python_m_info_reports_the_build():
    out = run_python(None, args=("-m", "dgl_ugraph", "info"))
    assert "compiled core" in out and f"torch {torch.__version__}" in out and f"DGL {dgl.__version__}" in out
    assert "switching table" in out
