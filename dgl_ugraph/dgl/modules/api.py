"""DGL's functions that the lean forwards call."""
from __future__ import annotations

_dgl = {}  # filled by the first call of dgl_api


def dgl_api() -> dict:
    """DGL's functions that the lean forwards call (dgl.ops.spmm and DGL's PyTorch backend as modules,
    whose globals the plugin replaces and are looked up per call), imported on first use: this
    package must import without DGL."""
    if not _dgl:
        import dgl.ops.spmm
        from dgl import DGLError
        from dgl.backend.pytorch import sparse
        from dgl.backend import replace_inf_with_zero
        from dgl.nn.functional import edge_softmax
        from dgl.ops.spmm import reshape_lhs_rhs
        from dgl.utils import check_eq_shape, expand_as_pair
        _dgl.update(spmm=dgl.ops.spmm, sparse=sparse, edge_softmax=edge_softmax, DGLError=DGLError,
                    replace_inf_with_zero=replace_inf_with_zero, reshape_lhs_rhs=reshape_lhs_rhs,
                    expand_as_pair=expand_as_pair, check_eq_shape=check_eq_shape)
    return _dgl
