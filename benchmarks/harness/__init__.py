"""The benchmarks' shared harness: what bench_models.py is made of, for any benchmark to use.

- graphs: the benchmark graphs (the shared datasets, uGrapher's Table 3 stand-ins at a scale,
  the synthetic large graphs), their features and labels;
- models: the DGL models of benchmarks/models/ at the paper's sizes, PyG's twins, the
  inference and training steps;
- timing: interleaved timing with paired speedups, the state each implementation runs in
  (the plugin off, on, kernels-only, the sparse-free bound) entered outside the timed region;
- parity: outputs and gradients against DGL's;
- report: the rows' CSV, markdown summaries and merging runs;
- traces, replay: op-sequence traces recorded from DGL and replayed without it;
- dgl_mode, replay_mode: bench_models.py's runs (DGL on and off; the traces' GPU replay).

Modules import flat from benchmarks/ (`from harness import timing`); importing the package puts
the repository root on sys.path (after PYTHONPATH) and sets OMP_WAIT_POLICY=PASSIVE unless set.
"""
import os
import pathlib
import sys

# torch and DGL each bring an OpenMP pool; with the default (spinning) wait policy the two pools
# fight for the 2 cores, and on a loaded machine a 1 ms model takes 300 ms (measured here).
# Must be set before either library starts its threads; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: a snapshot of the package there wins
