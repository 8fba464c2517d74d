"""dgl_ugraph: uGrapher's adaptive kernels under DGL's built-in message passing."""
from .abstraction import OpInfo, ParallelInfo
from .graph import UGraph
from .ops import ugrapher

__all__ = ["OpInfo", "ParallelInfo", "UGraph", "ugrapher"]
