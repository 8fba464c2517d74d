"""The pieces of benchmarks/bench_kernels.py that run without a GPU: which configurations are timed
again after the search, and the grid's tiling limits; benchmarks/replay_selector.py's choice; and the
cases benchmarks/ab_cores.py times."""
import gzip
import os
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import ab_cores  # noqa: E402
import bench_kernels as bk  # noqa: E402
import replay_selector as rs  # noqa: E402
import summarize_kernels as sk  # noqa: E402
from dgl_ugraph.core import _ext, ops  # noqa: E402
from dgl_ugraph.core.abstraction import OpInfo, ParallelInfo  # noqa: E402
from dgl_ugraph.core.capability import candidates  # noqa: E402
from dgl_ugraph.core.graph import UGraph  # noqa: E402
from dgl_ugraph.selection import predictor  # noqa: E402


def P(s):
    return ParallelInfo.parse(s)


def test_finalists_are_the_best_each_strategys_best_and_the_choice_once():
    searched = {P("warp_edge:4:1"): 0.010, P("warp_edge:8:2"): 0.012, P("thread_edge:1:4"): 0.011,
                P("warp_vertex:1:1"): 0.030, P("warp_vertex:4:1"): 0.020}
    assert bk.finalists(searched, P("warp_edge:8:2")) == [
        P("warp_edge:4:1"), P("thread_edge:1:4"), P("warp_vertex:4:1"), P("warp_edge:8:2")]
    # the choice is the best: timed once, not twice
    assert bk.finalists(searched, P("warp_edge:4:1")) == [P("warp_edge:4:1"), P("thread_edge:1:4"), P("warp_vertex:4:1")]


def test_grid_stops_tiling_where_a_worker_would_own_nothing(monkeypatch):
    """F=16 float32: a thread tiles up to 16 elements; a warp team owns 32 lanes x 16 bytes, so one
    tile; a dot's warp team a slab of heads."""
    monkeypatch.setattr(bk, "why_not", lambda *a: None)
    src, dst = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])
    graph = UGraph.from_coo(src, dst, 3, 3, torch.int32)
    x = torch.rand(3, 16)
    grid = ((1, 4), (1, 2, 16, 32))
    configs = bk.grid_configs(OpInfo("copy_lhs", "sum", x, "src", None, "null", "dst"), graph, grid)
    tilings = {s: sorted({c.tiling for c in configs if c.strategy == s}) for s in ("thread_edge", "warp_edge")}
    assert tilings == {"thread_edge": [1, 2, 16], "warp_edge": [1]}
    assert len(configs) == 2 * (3 + 3 + 1 + 1)
    dot = bk.grid_configs(OpInfo("dot", "none", x, "src", x, "dst", "edge"), graph, grid, ["warp_edge"])
    assert {c.tiling for c in dot} == {1}
    # 8 heads of 64: 16 lanes of float4 a head, 2 heads a team, 4 slabs; of 8: 2 lanes, 1 slab
    heads = torch.rand(3, 8, 64)
    dot = bk.grid_configs(OpInfo("dot", "none", heads, "src", heads, "dst", "edge"), graph, grid, ["warp_edge"])
    assert sorted({c.tiling for c in dot}) == [1, 2]
    heads = torch.rand(3, 8, 8)
    dot = bk.grid_configs(OpInfo("dot", "none", heads, "src", heads, "dst", "edge"), graph, grid, ["warp_edge"])
    assert {c.tiling for c in dot} == {1}



def test_the_replay_picks_the_timed_configuration_the_model_ranks_first(tmp_path):
    """benchmarks/replay_selector.py on a search file of one case: its choice is the first of the
    model's ranking that the search timed, flagged off the grid when the model's first lies
    elsewhere, and its ratio is that time over the best. The file holds two parts, each with its
    header line, as a suite run's parts concatenated; a CPU-only build ranks the GPU build's keys."""
    if _ext._C is None:
        pytest.skip("needs the compiled core's capability rules")
    model = predictor.Predictor.from_files(rs.ROOT / "dgl_ugraph" / "predictor_models" / "sm90.json")
    (name, src, dst, n), = rs.graphs(rs.SimpleNamespace(no_standins=False, no_large=True, no_datasets=True,
                                                        scale=1.0, only="cora", skip=""))
    graph = UGraph.from_coo(src, dst, n, n, torch.int32)
    sig, _ = ops.signature(graph, rs.operands("copy_u-sum", graph, 16, torch.float32))
    ranked = model.rank(predictor.CaseInfo.from_graph(graph), sig, rs.H100,
                        candidates(sig, graph.num_edges, rs.compiled_keys()))
    timed = {ranked[2]: 0.02, ranked[5]: 0.01}  # the model's third and sixth
    path = tmp_path / "search.csv.gz"
    with gzip.open(path, "wt") as fh:
        for c, ms in timed.items():
            fh.write(f"graph,op,F,dtype,config,ms\ncora,copy_u-sum,16,float32,{c},{ms}\n")
    (row,) = rs.replay(model, rs.load_search(path), rs.H100)
    assert (row["choice"], row["on_grid"], row["best"], row["ratio"]) == (str(ranked[2]), 0, str(ranked[5]), 2.0)


def test_summary_half_line_pairs_each_half_case_with_its_float32_case_only(tmp_path):
    """The fp16 line holds fp16 cases only (not the fp32 cases paired with themselves, nor bf16),
    each over the float32 case of the same graph, op and F."""
    path = tmp_path / "k.csv"
    rows = [("g", "copy_u-sum", 64, "float32", 1.0), ("g", "copy_u-sum", 64, "float16", 0.5),
            ("g", "copy_u-sum", 64, "bfloat16", 0.25), ("g", "copy_u-sum", 16, "float16", 0.1)]
    with open(path, "w") as fh:
        fh.write(",".join(bk.COLUMNS) + "\n")
        for g, op, f, dt, ms in rows:
            fh.write(f"H100,{g},10,100,1.0,{op},{f},{dt},ugraph,warp_vertex:1:1,{ms},1,1,3000,core_loop\n")
    cases, _ = sk.load([str(path)])
    half = [r for r in sk.paired(cases, "copy_u-sum", lambda g, f: (g, "copy_u-sum", f), lambda a, b: b / a,
                                 lambda dt: "float32", dtype="float16") if r[3] >= 64]
    assert half == [(2.0, "g", "copy_u-sum", 64)]


def test_each_graphs_run_starts_with_an_empty_launch_row_the_summary_reads(tmp_path, monkeypatch):
    """impl=empty_launch, op empty_launch, F 0, timed as the baselines are; the summary divides the
    small graphs' kernel times by it."""
    src, dst = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])
    graph = UGraph.from_coo(src, dst, 3, 3, torch.int32)
    monkeypatch.setattr(bk, "replay_ms", lambda fn: (0.004, "graph_replay"))
    cpu_zeros = torch.zeros
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: cpu_zeros(*a))  # no GPU here
    row = bk.empty_launch_row(graph, "g", "H100", 3000.0)
    assert list(row) == bk.COLUMNS
    assert (row["impl"], row["op"], row["F"], row["ms"], row["E"]) == ("empty_launch", "empty_launch", 0, 0.004, 4)
    path = tmp_path / "k.csv"
    with open(path, "w") as fh:
        fh.write(",".join(bk.COLUMNS) + "\n" + ",".join(str(row[c]) for c in bk.COLUMNS) + "\n")
        fh.write("H100,g,3,4,1.0,copy_u-sum,16,float32,ugraph,warp_vertex:1:1,0.01,1,1,3000,core_loop\n")
    out = tmp_path / "k.md"
    monkeypatch.setattr("sys.argv", ["summarize_kernels.py", str(path), "--out", str(out)])
    sk.main()
    assert "| small graphs (E <= 20K): ugraph time / an empty torch launch's | 2.50 | 2.50 (g, F=16) |" in out.read_text()


def test_compulsory_bytes_count_every_output_max_args_included():
    """bytes_compulsory and bytes_noreuse write C and, for max/min, an arg of the graph's index type
    per operand the op reads: the floor a max must pay beside a sum."""
    src, dst = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])
    graph = UGraph.from_coo(src, dst, 3, 3, torch.int32)
    x = torch.ones(3, 8)
    out = torch.empty(3, 8)
    idx = 4 * 4 + 4 * 4  # col, then indptr
    for gather, args in (("sum", 0), ("max", 1)):
        bc, bn = bk.byte_counts(OpInfo("copy_lhs", gather, x, "src", None, "null", "dst"), graph, out)
        assert bc == 3 * 8 * 4 + 3 * 8 * (4 + 4 * args) + idx
        assert bn == 3 * 8 * (4 + 4 * args) + 4 * 8 * 4 + idx


def test_floor_rows_say_how_close_a_bar_can_come(tmp_path):
    """A case's compulsory bytes at the copy bandwidth over its partner's time: a max whose 3 GB
    take 1 ms at 3000 GB/s, beside a 0.5 ms sum, can come no closer than 2x."""
    path = tmp_path / "k.csv"
    with open(path, "w") as fh:
        fh.write(",".join(bk.COLUMNS) + "\n")
        fh.write("H100,g,10,100,1.0,copy_u-max,64,float32,ugraph,warp_vertex:1:1,1.5,3000000000,1,3000,core_loop\n")
        fh.write("H100,g,10,100,1.0,copy_u-sum,64,float32,ugraph,warp_vertex:1:1,0.5,2000000000,1,3000,core_loop\n")
    cases, meta = sk.load([str(path)])
    rows = sk.floor_rows(cases, meta, "copy_u-max", lambda g, f: (g, "copy_u-sum", f), 3000.0)
    assert rows == [(pytest.approx(2.0), "g", "copy_u-max", 64)]
    assert sk.floor_line("max", rows, 1.25, False).endswith("| 1 | 1 cases cannot meet 1.25x |")


@pytest.mark.parametrize("heads, op", sk.GAT_OPS)
def test_gat_operators_spread_width_f_over_their_heads(heads, op):
    """Each GAT operator aggregates (N, H, F/H) features by an (E, H, 1) attention, H as the
    summary names it, so its time pairs with copy_u-sum at width F."""
    src, dst = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])
    graph = UGraph.from_coo(src, dst, 3, 3, torch.int32)
    call = bk.operator_call(op, graph, 16, torch.ones)
    assert (call.edge_op, call.gather_op, call.A_type, call.B_type) == ("mul", "sum", "src", "edge")
    assert tuple(call.A.shape) == (3, heads, 16 // heads) and tuple(call.B.shape) == (4, heads, 1)


def test_summary_has_a_gat_line_per_head_count_and_one_over_all(tmp_path, monkeypatch):
    """GAT over our copy_u-sum at the same F: one line per H (1, 4, 8) and one over all of them."""
    path, out = tmp_path / "k.csv", tmp_path / "k.md"
    with open(path, "w") as fh:
        fh.write(",".join(bk.COLUMNS) + "\n")
        for op, ms in (("copy_u-sum", 1.0), ("gat1_u_mul_e-sum", 1.1), ("gat_u_mul_e-sum", 1.3),
                       ("gat8_u_mul_e-sum", 1.6)):
            fh.write(f"H100,g,10,100,1.0,{op},16,float32,ugraph,warp_vertex:1:1,{ms},1,1,3000,core_loop\n")
    monkeypatch.setattr("sys.argv", ["summarize_kernels.py", str(path), "--out", str(out)])
    sk.main()
    text = out.read_text()
    assert "| GAT (N,1,F/1)x(E,1,1) time / our copy_u-sum at width F | 1.10 | 1.10 (g, F=16) |" in text
    assert "| GAT (N,8,F/8)x(E,8,1) time / our copy_u-sum at width F | 1.60 | 1.60 (g, F=16) |" in text
    # (1.1 * 1.3 * 1.6) ** (1 / 3) = 1.32; the worst case is H = 8's.
    assert "| GAT, H in {1, 4, 8} together | 1.32 | 1.60 (g, F=16) | 1.10 | 3 |" in text


def test_ab_cases_filter_by_op_and_width_and_add_dtypes(tmp_path):
    """ab_cores.read_cases: impl=ugraph rows only, --ops and --widths keep theirs, every kept case
    is timed in each --also-dtypes dtype under its own configuration, and a case given twice is
    timed once."""
    path = tmp_path / "kernels.csv"
    header = "device,graph,V,E,op,F,dtype,impl,config,ms\n"
    rows = ["h100,cora,1,1,gat8_u_mul_e-sum,16,float32,ugraph,warp_edge:4:1,0.1",
            "h100,cora,1,1,gat8_u_mul_e-sum,16,float32,cusparse,,0.1",
            "h100,cora,1,1,gat8_u_mul_e-sum,64,float32,ugraph,warp_edge:8:1,0.1",
            "h100,cora,1,1,copy_u-sum,16,float32,ugraph,warp_vertex:1:1,0.1",
            "h100,ppi,1,1,gat8_u_mul_e-sum,16,float16,ugraph,warp_vertex:4:1,0.1",
            "h100,ppi,1,1,gat8_u_mul_e-sum,16,float32,ugraph,warp_vertex:4:1,0.1"]
    path.write_text(header + "\n".join(rows) + "\n")
    cases = ab_cores.read_cases([path], set(), {"float32", "float16"}, {"gat8_u_mul_e-sum"}, {16}, ["float16"])
    assert cases == [("cora", "gat8_u_mul_e-sum", 16, "float32", "warp_edge:4:1"),
                     ("cora", "gat8_u_mul_e-sum", 16, "float16", "warp_edge:4:1"),
                     ("ppi", "gat8_u_mul_e-sum", 16, "float16", "warp_vertex:4:1"),
                     ("ppi", "gat8_u_mul_e-sum", 16, "float32", "warp_vertex:4:1")]
    assert len(ab_cores.read_cases([path], {"ppi"}, {"float32"})) == 3


def test_ab_summary_compares_each_core_with_the_first_per_strategy_kind():
    """ab_cores.summary: the first core's median time over each other core's, per (op, F, dtype,
    strategy kind), over the cases both timed; a case only one core timed is left out."""
    def row(core, graph, cfg, ms, rnd=0):
        return dict(round=rnd, core=core, graph=graph, op="copy_u-sum", F="64", dtype="float16", config=cfg,
                    ms=str(ms))
    rows = [row("a", "g1", "warp_edge:32:1", 2.0), row("a", "g1", "warp_edge:32:1", 4.0, 1),
            row("b", "g1", "warp_edge:32:1", 1.5), row("b", "g1", "warp_edge:32:1", 1.5, 1),
            row("a", "g2", "warp_edge:8:1", 1.0), row("b", "g2", "warp_edge:8:1", 2.0),
            row("a", "g3", "warp_vertex:4:1", 1.0), row("b", "g3", "warp_vertex:4:1", 1.0),
            row("a", "g4", "warp_vertex:1:1", 1.0)]
    lines = ab_cores.summary(rows, ["a", "b"])
    # g1: median(2, 4) = 3 over 1.5 = 2.0; g2: 0.5; geomean 1.0.
    assert lines == ["copy_u-sum F=64 float16 edge: a/b geomean 1.000x over 2, min 0.500 (g2), max 2.000 (g1)",
                     "copy_u-sum F=64 float16 vertex: a/b geomean 1.000x over 1, min 1.000 (g3), max 1.000 (g3)"]


@pytest.mark.parametrize("red", ["sum", "max"])
def test_nnconv_operators_broadcast_node_rows_against_edge_matrices(red):
    """NNConv's aggregation at width F = k * k: node rows (k, 1) times per-edge (k, k) matrices,
    k outputs of each node feature; outside the default suite."""
    src, dst = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])
    graph = UGraph.from_coo(src, dst, 3, 3, torch.int32)
    call = bk.operator_call(f"nnconv_u_mul_e-{red}", graph, 64, torch.ones)
    assert (call.edge_op, call.gather_op, call.A_type, call.B_type) == ("mul", red, "src", "edge")
    assert tuple(call.A.shape) == (3, 8, 1) and tuple(call.B.shape) == (4, 8, 8)
    assert f"nnconv_u_mul_e-{red}" not in bk.SUITE_OPS
