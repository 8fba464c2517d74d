"""End-to-end model benchmark: the models/ networks with dgl_ugraph on and off.

CPU mode (default), on real DGL 2.1.0:
    PYTHONPATH=. .venv/bin/python benchmarks/bench_models.py              # all models x graphs x modes
    PYTHONPATH=. .venv/bin/python benchmarks/bench_models.py --record-traces   # op-sequence traces only

  Times inference (eval, no_grad) and one training step (train mode, forward + cross-entropy +
  backward; no optimizer step) of GCN, GAT, GIN, SAGE-mean, SAGE-gcn and SAGE-pool with the
  plugin on (`ugraph`) and off (`dgl`, inside `dgl_ugraph.disabled()`: DGL's own CPU kernels).
  Both implementations run the very same model object on the very same DGL graph; their repeats
  are interleaved (dgl, ugraph, dgl, ugraph, ...) so that load from other processes hits both
  alike, and each reports the median. A case's speedup is the median over its rounds of
  dgl / ugraph within the round (`paired_x`): on 2 shared cores a long training step swings by 2x
  between slow and fast spells of the machine, which a round's pair shares, while the medians
  of the two sides can fall in different spells. Every case is also checked for parity: eval outputs, and
  training outputs plus every parameter gradient (same dropout seed), equal within rtol 1e-4.

GPU mode under real DGL (`--device cuda`, on the GPU machine with the CUDA DGL build loaded; see
scripts/gpu_check.sh, stage `dgl`):
    python benchmarks/bench_models.py --device cuda --sparse-free --out $OUT/models_gpu.csv
    python benchmarks/bench_models.py --summarize --device cuda --out $OUT/models_gpu.csv
    python benchmarks/bench_models.py --merge $OUT/models_gpu.csv        # its rows into benchmarks/results/models.csv

  The same dgl.nn models (GCN, GAT, GIN, SAGE-mean, SAGE-pool) on cuda with the plugin on and off,
  beside the same models written in PyG 2.8 (`pyg`, when torch_geometric imports; pyg_model says
  how they differ) on the same graphs, features and widths, and the bound (`--sparse-free`), all
  interleaved in one run; inference and training; parity on vs off. Each call is timed to
  torch.cuda.synchronize() after one untimed warm-up call; the median of at least 3 calls, and of
  more until each implementation ran 50 ms (TIMING). Graphs: the shared datasets
  ($DGL_UGRAPH_DATASETS, else ../shared/datasets), graph_suite.LARGE (two 40M-edge graphs), the
  arxiv-like citation graph (graph_suite.ARXIV_LIKE: 169K nodes, 1.2M edges, 128 features) and
  the Table 3 stand-ins at full size, largest first; `--budget-s` (300 s) stops
  starting cases, and every finished case's rows are already in the CSV. An implementation that
  runs out of device memory on a case is left out of it, with a note. Rows carry the device's
  name; CPU and GPU rows share benchmarks/results/models.csv, and --summarize/plots.py take one device kind.

GPU replay mode (`--gpu`, on the device machine; needs no DGL): replays the operator sequences recorded
in benchmarks/results/traces/ (the exact gspmm/gsddmm calls, dense ops, activations and edge_softmax DGL issues
for each model, recorded from the CPU DGL run) through our kernels (`dgl_ugraph.ugrapher`,
impl `ugraph_replay`), through cuSPARSE/torch paths in place of ours (`torch_replay`), and
compares both with PyG 2.8's GCNConv/GATConv/GINConv/SAGEConv models of the same sizes (`pyg`).
Inference only (the trace records the forward pass).

The parts live in benchmarks/harness/ (graphs, models, timing, parity, report, traces, replay and
the two runs, dgl_mode and replay_mode); this file is the command, and re-exports them for
`import bench_models as bm`.

Layer sizes follow the uGrapher paper: GCN 2 layers, hidden 16; SAGE 2 layers, hidden 16; GIN 5
GINConv layers of hidden 64 (MLP of 2 linears each) + a linear classifier; GAT 8 heads x hidden 8,
then one head to the classes.
"""
from __future__ import annotations

import argparse
import os
import sys

# Before torch or DGL start their OpenMP pools (harness/__init__.py says why).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the harness package

import torch  # noqa: E402

from harness import RESULTS, ROOT  # noqa: E402,F401
# The harness's pieces, under the names tests and other benchmarks use (`import bench_models as bm`).
from harness.dgl_mode import (OPTIONAL_IMPLS, TIMING, bench_case, print_profiles, profile_ops,  # noqa: E402,F401
                              recheck_parity, run_dgl, timed_impls)
from harness.graphs import (DEFAULT_CLASSES, DEFAULT_FEAT, DEFAULT_STANDINS, STANDIN_SCALE,  # noqa: E402,F401
                            SYNTHETIC_LARGE, features, gpu_graph_cases, graph_cases, graph_set, gs,
                            prepare_inputs, standin_name)
from harness.models import (GPU_MODELS, MODELS, MODES, build_model, inference_fn, make_dgl_graph,  # noqa: E402,F401
                            pyg_fns, pyg_model, training_fn)
from harness.parity import RTOL, parity, results_on_and_off, training_result  # noqa: E402,F401
from harness.replay import (Replayer, ReplayGraph, TorchSparse, UGraphSparse,  # noqa: E402,F401
                            init_params)
from harness.replay_mode import record_all, run_gpu  # noqa: E402,F401
from harness.report import (COLUMNS, GROUPS, device_kind, merge, pyg_gap, read_rows,  # noqa: E402,F401
                            summarize, summarize_gpu, write_rows)
from harness.timing import (KERNELS_ONLY, SPARSE_FREE, SparseFree, cpu_device_name, cuda_ms,  # noqa: E402,F401
                            interleaved_ms, paired_speedup, state, tier_up_now, ugraph_share)
from harness.traces import (TRACE_VERSION, TraceError, fn_name, load_traces, record_trace,  # noqa: E402,F401
                            resolve_fn, save_traces, trace_path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: the models under real DGL on the GPU")
    ap.add_argument("--gpu", action="store_true", help="replay the traces on the GPU against PyG and cuSPARSE (no DGL)")
    ap.add_argument("--record-traces", action="store_true", help="only record the op-sequence traces")
    ap.add_argument("--recheck-parity", action="store_true", help="re-check failed parity cases in float64")
    ap.add_argument("--summarize", action="store_true",
                    help="print the markdown summary of --out's rows of --device (cuda: every non-CPU row)")
    ap.add_argument("--merge", default="", help="CSV of a run: replace --out's rows of its devices with its rows")
    ap.add_argument("--profile", default="", help="MODEL:GRAPH[:training],...: time per gspmm/gsddmm pattern, plugin off/on")
    ap.add_argument("--impl", default=None, help="--summarize: the implementation (default ugraph)")
    ap.add_argument("--baseline", default=None,
                    help="--summarize: the baseline (default dgl; on cuda, either one gives that table alone)")
    ap.add_argument("--out", default=None,
                    help="CSV (default benchmarks/results/models.csv; --device cuda: benchmarks/results/models_gpu.csv; --gpu: "
                         "benchmarks/results/models_gpu_replay.csv)")
    ap.add_argument("--append", action="store_true", help="append to --out instead of rewriting it")
    ap.add_argument("--models", default=None, help=f"default: all on CPU, {','.join(GPU_MODELS)} on cuda")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--only", default="", help="comma-separated graph names (default: all)")
    ap.add_argument("--standins", default=None,
                    help="comma-separated graph_suite.PAPER_STANDINS names ('' for none; default all: scaled "
                         "to STANDIN_SCALE on CPU, full size on cuda)")
    ap.add_argument("--large", default=None,
                    help="comma-separated graph_suite.LARGE names and arxiv-like (default: none on CPU, all on cuda)")
    ap.add_argument("--no-datasets", action="store_true")
    ap.add_argument("--pyg", action=argparse.BooleanOptionalAction, default=None,
                    help="time PyG 2.8's models too (default: on cuda when torch_geometric imports)")
    ap.add_argument("--kernels-only", action="store_true",
                    help=f"also time the plugin with DGL's module forwards ({KERNELS_ONLY}: the module patterns off)")
    ap.add_argument("--sparse-free", action="store_true",
                    help=f"also time {SPARSE_FREE}: DGL with every gspmm/gsddmm answered by a copy of its "
                         "recorded result (the most any kernel replacement could gain)")
    ap.add_argument("--reps", type=int, default=None, help="default per device: TIMING")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--min-s", type=float, default=None, help="repeat each impl of a case until it ran this long")
    ap.add_argument("--max-reps", type=int, default=None)
    ap.add_argument("--case-max-s", type=float, default=None, help="stop repeating a case (after --reps) past this")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no new case after this; the rows so far are in --out (default per device: TIMING)")
    ap.add_argument("--traces", default=str(RESULTS / "traces"))
    ap.add_argument("--gpu-reps", type=int, default=20)
    ap.add_argument("--gpu-device", default="cuda", help="--gpu: the device (cpu only to test the path)")
    ap.add_argument("--gpu-scaled", action="store_true", help="--gpu: the stand-ins at their CPU scale, not full size")
    args = ap.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    kind = "cuda" if torch.device(args.device).type == "cuda" else "cpu"
    for key, value in TIMING[kind].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.models = args.models or ",".join(GPU_MODELS if kind == "cuda" else MODELS)
    if args.gpu:
        args.out = args.out or str(RESULTS / "models_gpu_replay.csv")
        return run_gpu(args)
    if args.record_traces:
        return record_all(args)
    if args.recheck_parity:
        return recheck_parity(args)
    if args.profile:
        return print_profiles(args.profile.split(","))
    if args.merge:
        return merge(args.merge, args.out or RESULTS / "models.csv")
    if args.summarize:
        path = args.out or RESULTS / "models.csv"
        if kind == "cuda" and args.impl is None and args.baseline is None:
            print(summarize_gpu(path))
        else:
            print(summarize(path, args.impl or "ugraph", args.baseline or "dgl", kind))
        return None
    args.out = args.out or str(ROOT / ("benchmarks/results/models_gpu.csv" if kind == "cuda" else "benchmarks/results/models.csv"))
    return run_dgl(args)


if __name__ == "__main__":
    main()
