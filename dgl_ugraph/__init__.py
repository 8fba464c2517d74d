"""dgl_ugraph: uGrapher's adaptive kernels under DGL's built-in message passing.

Importing it routes DGL's generalized SpMM/SDDMM through dgl_ugraph (as soon as DGL is imported),
unless DGL_UGRAPH=0. Without DGL installed, the kernel API (`ugrapher`) still works.
"""
from dgl_ugraph import settings
from dgl_ugraph.core.abstraction import OpInfo, ParallelInfo
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.dgl.interception import UnsupportedDGLError, disable, disabled, enable, enable_quietly, is_enabled
from dgl_ugraph.dgl.recognition import UGraphFallbackWarning
from dgl_ugraph.dgl.stats import report, reset_stats, stats
from dgl_ugraph.selection.policy import ugrapher

__all__ = ["OpInfo", "ParallelInfo", "UGraph", "ugrapher", "enable", "disable", "disabled", "is_enabled",
           "stats", "reset_stats", "report", "UnsupportedDGLError", "UGraphFallbackWarning"]

if settings.on_import():
    from dgl_ugraph._hook import call_when_imported

    call_when_imported("dgl", enable_quietly)
