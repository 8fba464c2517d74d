"""scripts/bench_models.py with int64 DGL graphs kept at int64 in the graph cache
(cache.NARROW_DEVICES emptied): the other side of session 34's A/B of narrowing them to int32."""
import pathlib
import runpy
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from dgl_ugraph.dgl import cache  # noqa: E402

cache.NARROW_DEVICES = ()
sys.argv = [str(ROOT / "scripts" / "bench_models.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
