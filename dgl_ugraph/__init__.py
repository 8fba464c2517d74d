"""dgl_ugraph: uGrapher's adaptive kernels under DGL's built-in message passing.

Importing it routes DGL's generalized SpMM/SDDMM through dgl_ugraph (as soon as DGL is imported),
unless DGL_UGRAPH=0. Without DGL installed, the kernel API (`ugrapher`) still works.
"""
from . import settings
from .abstraction import OpInfo, ParallelInfo
from .graph import UGraph
from .integration import UGraphFallbackWarning, UnsupportedDGLError, disable, disabled, enable, enable_quietly, is_enabled
from .ops import ugrapher
from .stats import report, reset_stats, stats

__all__ = ["OpInfo", "ParallelInfo", "UGraph", "ugrapher", "enable", "disable", "disabled", "is_enabled",
           "stats", "reset_stats", "report", "UnsupportedDGLError", "UGraphFallbackWarning"]

if settings.on_import():
    from ._hook import call_when_imported

    call_when_imported("dgl", enable_quietly)
