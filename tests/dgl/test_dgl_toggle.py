"""Turning the interception on and off: identity of DGL's functions, the version gate, the
start-up hook (.pth) and `python -m dgl_ugraph`."""
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import dgl
import dgl_ugraph
from dgl.backend.pytorch import sparse
from dgl_ugraph.dgl import interception

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
        assert getattr(sparse, name) is interception._REPLACEMENTS[name]
    dgl_ugraph.disable()
    for name in NAMES:
        assert getattr(sparse, name) is dgl_own(name)
    dgl_ugraph.enable()
    dgl_ugraph.enable()  # idempotent: DGL's originals stay captured, not our own functions
    dgl_ugraph.disable()
    for name in NAMES:
        assert getattr(sparse, name) is dgl_own(name)


def test_edge_softmax_above_edgesoftmax_is_routed_and_restored(restore_state):
    """dgl.ops.edge_softmax's backend function: dgl_ugraph's while enabled (CUDA tensors run its
    fused kernel), DGL's own after disable(); a CPU tensor goes through DGL's function, whose
    EdgeSoftmax reaches the fused CPU kernel."""
    module = sys.modules["dgl.ops.edge_softmax"]
    own = dgl.backend.edge_softmax
    dgl_ugraph.enable()
    assert module.edge_softmax_internal is interception._edge_softmax
    g = dgl.graph((torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])))
    x = torch.randn(4, 2)
    calls = dgl_ugraph.stats()["patterns"].get("edge_softmax_forward", {"intercepted": 0})["intercepted"]
    ours = dgl.ops.edge_softmax(g, x)
    assert dgl_ugraph.stats()["patterns"]["edge_softmax_forward"]["intercepted"] == calls + 1
    assert "edge_softmax" not in dgl_ugraph.stats()["patterns"]  # the CUDA pattern: no CPU call counts
    dgl_ugraph.disable()
    assert module.edge_softmax_internal is own
    torch.testing.assert_close(ours, dgl.ops.edge_softmax(g, x))


def test_disabled_context_restores_previous_state(restore_state):
    dgl_ugraph.enable()
    with dgl_ugraph.disabled():
        assert sparse._gspmm is dgl_own("_gspmm")
        assert not dgl_ugraph.is_enabled()
    assert sparse._gspmm is interception._gspmm
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


def test_replaced_wraps_dgls_own_functions_then_restores(restore_state):
    """The benchmarks' hook: DGL's own functions wrapped for the block (routing off), then the
    state before, even after an error."""
    dgl_ugraph.enable()
    seen = []

    def make(own):
        def wrapper(*args, **kwargs):
            seen.append(own)
            return own(*args, **kwargs)
        return wrapper
    g = dgl.graph(([0, 1], [1, 2]))
    with interception.replaced(make, ("_gspmm",)):
        assert not dgl_ugraph.is_enabled() and sparse._gsddmm is dgl_own("_gsddmm")
        dgl.ops.copy_u_sum(g, torch.ones(3, 2))
    assert seen == [dgl_own("_gspmm")] and sparse._gspmm is interception._gspmm and dgl_ugraph.is_enabled()
    with pytest.raises(KeyError):
        with interception.replaced(make):
            raise KeyError("inside")
    assert dgl_functions() == {name: interception._REPLACEMENTS[name] for name in dgl_functions()}


def dgl_functions():
    """Every function of DGL's that enable() may replace, as this DGL has them now."""
    return {name: getattr(sparse, name) for name in interception._SIGNATURES if hasattr(sparse, name)}


@pytest.mark.parametrize("version", ["3.0.0", "2.5.0", "1.0.2", "0.9.1", "nightly"])
def test_dgl_outside_the_range_is_refused_and_left_untouched(restore_state, monkeypatch, version):
    dgl_ugraph.disable()
    own = dgl_functions()
    monkeypatch.setattr(dgl, "__version__", version)
    with pytest.raises(dgl_ugraph.UnsupportedDGLError,
                       match=f"supports DGL 1.1 to 2.4, found DGL {version}; DGL was left untouched"):
        dgl_ugraph.enable()
    assert not dgl_ugraph.is_enabled()
    assert dgl_functions() == own


@pytest.mark.parametrize("name", sorted(interception._SIGNATURES))
def test_changed_dgl_signature_is_refused_and_dgl_left_untouched(restore_state, monkeypatch, name):
    dgl_ugraph.disable()
    if not hasattr(sparse, name):
        pytest.skip(f"DGL {dgl.__version__} has no {name}")

    def changed(*args, extra=None):
        raise AssertionError("never called")

    monkeypatch.setattr(sparse, name, changed)
    own = dgl_functions()
    with pytest.raises(dgl_ugraph.UnsupportedDGLError,
                       match=rf"sparse\.{name}\(.*\) is not the expected {name}\(.*DGL was left untouched"):
        dgl_ugraph.enable()
    assert not dgl_ugraph.is_enabled()
    assert dgl_functions() == own


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


def test_enable_before_dgl_is_imported():
    """enable() imports DGL, whose import runs the hook that `import dgl_ugraph` armed: both turn the
    plugin on once, and neither waits for the other."""
    out = run_python("""
        import sys, dgl_ugraph
        assert "dgl" not in sys.modules
        dgl_ugraph.enable()
        import dgl
        from dgl.backend.pytorch import sparse
        print(dgl_ugraph.is_enabled(), sparse._gspmm is not dgl._sparse_ops._gspmm)
    """)
    assert out.split() == ["True", "True"]


def test_import_before_dgl_enables_when_dgl_arrives():
    out = run_python("""
        import sys, dgl_ugraph
        assert "dgl" not in sys.modules
        import dgl
        from dgl.backend.pytorch import sparse
        print(dgl_ugraph.is_enabled(), sparse._gspmm.__module__)
    """)
    assert out.split() == ["True", "dgl_ugraph.dgl.interception"]


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
    assert out.strip() == "['--epochs', '3', 'x y'] train.py True __main__ dgl_ugraph.dgl.interception"


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
    assert "tested on CPU with: " + ", ".join(f"DGL {d} + torch {t}" for d, t in interception.TESTED) in out


def test_tested_versions_are_the_pinned_environments_and_the_readme_names_them():
    with open(os.path.join(REPO, "scripts", "setup_env.sh"), encoding="utf-8") as f:
        pins = re.findall(r"VENV=\S+ TORCH=(\S+) DGL=(\S+)", f.read())
    assert sorted((d, t) for t, d in pins) == sorted(interception.TESTED)
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for d, t in interception.TESTED:
        assert f"torch {t}, DGL {d}" in readme


def test_import_with_a_dgl_outside_the_range_warns_and_leaves_dgl_untouched():
    out = run_python("""
        import warnings
        import dgl
        dgl.__version__ = "3.0.0"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import dgl_ugraph
        from dgl.backend.pytorch import sparse
        print(dgl_ugraph.is_enabled(), sparse._gspmm is dgl._sparse_ops._gspmm, sparse._gsddmm is dgl._sparse_ops._gsddmm)
        print([str(w.message) for w in caught])
    """)
    state, messages = out.splitlines()
    assert state.split() == ["False", "True", "True"]
    assert "dgl_ugraph supports DGL 1.1 to 2.4, found DGL 3.0.0; DGL was left untouched" in messages
