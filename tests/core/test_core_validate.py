"""The one validator (csrc/common/validate.cpp) that both cores run: CPU and CUDA must accept and
refuse the same params, except for the two documented differences (only CUDA reads the
parallel info; only the CPU reads the data behind indptr and the broadcast offsets). The
capability table (csrc/include/ugraph/capability.h) reaches Python as data and names the
enums as Python does. Runs without a GPU: the CUDA side of the validator is called through _C."""
from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dgl_ugraph.core import _ext, abstraction, capability, ops
from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph

C = _ext.core()
OK, INVALID = 0, 1


def prepared(edge_op="mul", gather="sum", a_shape=(4, 8), b_shape=(4, 8), n=6, e=20, seed=0):
    """A valid CPU call (Prepared, its params filled by ops.prepare), with valid parallel info so
    that the CUDA side has nothing of its own to refuse."""
    gen = torch.Generator().manual_seed(seed)
    graph = UGraph.from_coo(torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen), n, n)
    rows = {"src": n, "dst": n, "edge": e}
    a = torch.randn((rows["src"],) + a_shape, generator=gen) if edge_op != "copy_rhs" else None
    b = torch.randn((rows["edge"],) + b_shape, generator=gen) if edge_op != "copy_lhs" else None
    op = OpInfo(edge_op, gather, a, "src" if a is not None else "null", b, "edge" if b is not None else "null",
                "edge" if gather == "none" else "dst")
    prep = ops.prepare(graph, op)
    prep.params.strategy, prep.params.grouping, prep.params.tiling = 0, 1, 1
    return prep


def verdicts(params):
    return C.validate(params, "cpu")[0], C.validate(params, "cuda")[0]


def test_a_valid_call_passes_both():
    for edge_op, gather in itertools.product(("copy_lhs", "copy_rhs", "add", "mul", "dot"), ("none", "sum", "max")):
        for b_shape in ((4, 8), (1, 8) if edge_op == "dot" else (4, 1)):
            prep = prepared(edge_op, gather, b_shape=b_shape)
            assert verdicts(prep.params) == (OK, OK), (edge_op, gather, C.validate(prep.params, "cpu"))


# Each mutation of one field of a valid call; both backends must refuse it alike.
FIELD_MUTATIONS = {
    "index_bits": [16, 0, 128],
    "num_src": [-1],
    "num_dst": [-3],
    "num_edges": [-1],
    "edge_op": [-1, 7],
    "gather_op": [-1, 5],
    "dtype": [-1, 4],
    "c_type": [0, 1, 3],
    "out_len": [-1],
    "reduce_size": [0, 2],
    "a_len": [0, 3],
    "b_len": [0],
    "a_type": [0, 7],
    "b_type": [0, -2],
    "a_row_stride": [-1],
    "b_row_stride": [-8],
    "indptr": [0],
    "col": [0],
    "row": [0],
    "a": [0],
    "b": [0],
    "c": [0],
    "b_off_block": [-2, 3, 12],
    "arg_bits": [16, 48, -64],
}


@pytest.mark.parametrize("field,value", [(f, v) for f, vs in FIELD_MUTATIONS.items() for v in vs])
def test_both_backends_refuse_a_broken_field_alike(field, value):
    prep = prepared()
    setattr(prep.params, field, value)
    cpu, cuda = C.validate(prep.params, "cpu"), C.validate(prep.params, "cuda")
    assert cpu[0] == cuda[0] == INVALID, (field, value, cpu, cuda)


def test_the_only_differences_are_the_documented_ones():
    # Parallel info (and the workspace's zero-fill promise): only CUDA reads it.
    for field, value in (("strategy", 9), ("grouping", 3), ("grouping", 0), ("tiling", 0), ("tiling", 65),
                         ("workspace_zeroed", 2), ("workspace_zeroed", -1)):
        prep = prepared()
        setattr(prep.params, field, value)
        assert verdicts(prep.params) == (OK, INVALID), (field, value)
    # Data: only the CPU can read indptr and the offsets without a device synchronization.
    prep = prepared()
    indptr = prep._keep[0]  # the graph's indptr, which the params point to
    low, high = int(indptr[2]), int(indptr[3])
    indptr[2], indptr[3] = high + 1, low
    assert verdicts(prep.params) == (INVALID, OK)
    prep = prepared(b_shape=(4, 1))
    b_off = next(t for t in prep._keep if isinstance(t, torch.Tensor) and t.data_ptr() == prep.params.b_off)
    bad = b_off.clone()  # ops caches offsets across calls: never write the shared tensor
    bad[0] = 99
    prep.params.b_off = bad.data_ptr()
    assert verdicts(prep.params) == (INVALID, OK)
    prep = prepared(b_shape=(4, 1))
    prep.params.b_len = 2  # the offsets reach 3
    assert verdicts(prep.params) == (INVALID, OK)
    # b_off_block: its promise is about the offsets' data, which only the CPU reads.
    prep = prepared(b_shape=(4, 1))  # b_off = 0 x8, 1 x8, ...: blocks of 8
    assert prep.params.b_off_block == 8 and verdicts(prep.params) == (OK, OK)
    prep.params.b_off_block = 16
    assert verdicts(prep.params) == (INVALID, OK)


def test_a_block_promise_needs_offsets():
    prep = prepared(b_shape=(4, 8))  # no broadcast: b_off is NULL
    prep.params.b_off_block = 4
    assert verdicts(prep.params) == (INVALID, INVALID)


@settings(max_examples=300, deadline=None)
@given(n_src=st.integers(0, 4), n_dst=st.integers(0, 4), n_edges=st.integers(0, 6),
       null_a=st.booleans(), null_b=st.booleans(), null_c=st.booleans(), out_len=st.integers(0, 3),
       gather=st.integers(0, 3), edge_op=st.integers(0, 6), a_type=st.integers(0, 3), b_type=st.integers(0, 3),
       arg_a=st.booleans(), arg_b=st.booleans(), reduce_size=st.integers(1, 2))
def test_zero_sizes_and_null_pointers_get_one_answer(n_src, n_dst, n_edges, null_a, null_b, null_c, out_len, gather,
                                                     edge_op, a_type, b_type, arg_a, arg_b, reduce_size):
    """Graphs without edges, sides without rows, rows without elements and NULL storage: what one
    backend accepts, so does the other (the data behind the pointers is valid here)."""
    n_edges = n_edges if n_src and n_dst else 0
    keep = []

    def buf(count, dtype=torch.int64):
        t = torch.zeros(max(count, 1), dtype=dtype)
        keep.append(t)
        return t.data_ptr()

    p = C.Params()
    p.num_src, p.num_dst, p.num_edges, p.index_bits = n_src, n_dst, n_edges, 64
    indptr = torch.zeros(n_dst + 1, dtype=torch.int64)
    indptr[-1] = n_edges
    keep.append(indptr)
    p.indptr = indptr.data_ptr()
    p.col, p.row = (buf(n_edges), buf(n_edges)) if n_edges else (0, 0)
    p.edge_op, p.gather_op, p.a_type, p.b_type = edge_op, gather, a_type, b_type
    p.c_type = 3 if gather == 0 else 2
    p.dtype, p.out_len, p.a_len, p.b_len, p.reduce_size = 0, out_len, out_len, out_len, reduce_size
    big = (n_src + n_dst + n_edges + 1) * max(out_len, 1) * reduce_size
    p.a = 0 if null_a else buf(big, torch.float32)
    p.b = 0 if null_b else buf(big, torch.float32)
    p.c = 0 if null_c else buf(big, torch.float32)
    p.a_row_stride = p.b_row_stride = out_len * reduce_size
    p.arg_a = buf(big) if arg_a else 0
    p.arg_b = buf(big) if arg_b else 0
    p.strategy, p.grouping, p.tiling = 0, 1, 1
    cpu, cuda = C.validate(p, "cpu"), C.validate(p, "cuda")
    assert cpu[0] == cuda[0], (cpu, cuda)


def test_python_names_are_the_cores_enums():
    caps = _ext.capabilities()
    assert tuple(caps["strategies"]) == abstraction.STRATEGIES
    assert tuple(caps["gather_ops"]) == abstraction.GATHER_OPS
    assert tuple(caps["dtypes"]) == tuple(abstraction.DTYPE_NAMES.values())
    assert [abstraction.DTYPE_CODES[d] for d in abstraction.DTYPE_NAMES] == list(range(len(caps["dtypes"])))


def test_capability_rules_arrive_as_data_and_drive_selection():
    rules = _ext.capabilities()["rules"]
    assert rules and all(set(r) == {"strategies", "gather_ops", "dtypes", "min_edges", "only_deterministic", "why"}
                         for r in rules)
    assert all(set(r["strategies"]) <= set(abstraction.STRATEGIES) for r in rules)
    assert capability.ATOMIC_STRATEGIES == ("thread_edge", "warp_edge")
    every = abstraction.EVERY_CUDA_KEY
    sig = abstraction.Signature("copy_lhs", "max", "src", "null", "dst", torch.float64, 8, 1, False, "cuda")
    for strategy in abstraction.STRATEGIES:
        hard = [r for r in rules if strategy in r["strategies"] and "max" in r["gather_ops"] and "f64" in r["dtypes"]
                and not r["only_deterministic"] and r["min_edges"] == 0]
        reason = capability.why_not(strategy, sig, 100, every)
        assert (reason is not None) == bool(hard), strategy
        if hard:
            assert reason == f"{strategy} {hard[0]['why']}"
