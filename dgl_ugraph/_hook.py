"""Enables dgl_ugraph the moment a program imports DGL, and imports nothing before that.

Two callers. `import dgl_ugraph` uses it when DGL is not imported yet. The start-up file
dgl_ugraph.pth runs this file's source (not the package: that would import torch) at interpreter
start when DGL_UGRAPH=1, so that an unchanged `python train.py` runs with the plugin on; a start
that never imports DGL then pays for one finder on sys.meta_path and nothing else. The file
therefore imports only `sys` and has no package-relative imports.
"""
import sys


class _CallAfterImport:
    """A one-shot meta-path finder: lets the other finders find `name`, then wraps that module's
    loader so that `callback` runs right after the module has executed."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        callback = self.callback

        def exec_module(module):
            del loader.exec_module  # one shot: the loader's own method from here on
            loader.exec_module(module)
            try:
                callback()
            except Exception as exc:  # the plugin must never break the program's import of DGL
                import warnings
                warnings.warn(f"dgl_ugraph could not enable itself: {exc}", RuntimeWarning, stacklevel=2)

        try:
            loader.exec_module = exec_module
        except AttributeError:  # a loader that takes no attributes: leave the import alone
            pass
        return spec


def call_when_imported(name, callback):
    """Calls `callback` now if module `name` is imported, else right after it is."""
    if name in sys.modules:
        callback()
        return
    for finder in sys.meta_path:
        if getattr(finder, "name", None) == name and getattr(finder, "callback", None) is callback:
            return
    sys.meta_path.insert(0, _CallAfterImport(name, callback))


def _import_plugin():
    import importlib
    importlib.import_module("dgl_ugraph")


if __name__ == "_dgl_ugraph_startup":  # executed by dgl_ugraph.pth with DGL_UGRAPH=1
    call_when_imported("dgl", _import_plugin)
