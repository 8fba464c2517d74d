"""Prints the graph suite with the statistics each generated graph really has."""
import argparse
import time

from dgl_ugraph.tuning import graph_suite as gs


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--family", choices=["paper", "large", "grid", "datasets", "all"], default="paper")
    ap.add_argument("--max-edges", type=int, default=5_000_000, help="skip generating larger graphs")
    args = ap.parse_args()
    specs = {"paper": gs.PAPER_STANDINS, "large": gs.LARGE, "grid": gs.synthetic_grid()}
    chosen = [s for k, v in specs.items() if args.family in (k, "all") for s in v]
    print(f"{'name':34} {'V':>9} {'E':>10} {'std(target)':>11} {'std':>8} {'max':>7} {'locality':>9}  s")
    for spec in chosen:
        if spec.num_edges > args.max_edges:
            print(f"{spec.name:34} {spec.num_nodes:9d} {spec.num_edges:10d} {spec.std:11.2f}  (not generated)")
            continue
        t = time.perf_counter()
        d = gs.describe(*gs.make(spec))
        print(f"{spec.name:34} {d['V']:9d} {d['E']:10d} {spec.std:11.2f} {d['std_deg']:8.2f} {d['max_deg']:7d} "
              f"{spec.locality:>9}  {time.perf_counter() - t:.1f}")
    if args.family in ("datasets", "all"):
        for name, src, dst, n in gs.shared_datasets():
            d = gs.describe(src, dst, n)
            print(f"{name:34} {d['V']:9d} {d['E']:10d} {'':>11} {d['std_deg']:8.2f} {d['max_deg']:7d}")


if __name__ == "__main__":
    main()
