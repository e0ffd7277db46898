"""Which components delivered, per worker count, on one instance (llama x18 @30%).

The report rows behind ``benchmarks/workers.py``'s objective figures: where
the block solver, the cut bound and LNS ran, and what each gave.  Used on
the 16-core device to find why 16 workers ended worse than one (the block
solver started cold beside the heuristics and was never run again).

Usage::

    python3 -m benchmarks.workers_report                 # W = 16, 1, 16
    python3 -m benchmarks.workers_report --workers 1,2

Prints; figures recorded in ``benchmarks/results/workers_h200.md``.
"""

import argparse
import collections
import time

from benchmarks._common import LLAMA
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.generators import repeat_layers
from hybrid_remat.loaders import load_graph
from hybrid_remat.problem import Problem


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="16,1,16")
    ap.add_argument("--limit", type=float, default=10.0)
    args = ap.parse_args(argv)
    p = Problem.single(repeat_layers(load_graph(LLAMA), 18), "30%", kind="gpu")
    anytime_solve(p, 1, workers=1)  # compile outside the figures
    for W in [int(w) for w in args.workers.split(",")]:
        t = time.perf_counter()
        r = anytime_solve(p, args.limit, workers=W)
        print(f"W={W} {r.status} obj={r.objective:.6f} lb={r.lower_bound:.6f} wall={time.perf_counter() - t:.1f}s",
              flush=True)
        for x in r.report:
            if x.source in ("blocks", "cut_bound", "block_bound"):
                print(f"   {x.source} {x.status} {x.objective:.6f} {x.seconds:.2f}s w{x.worker} {x.note[:60]}")
        cnt = collections.Counter((x.source, x.status) for x in r.report)
        print("   ", {f"{a}:{b}": c for (a, b), c in cnt.items() if a in ("lns", "local_search", "blocks")},
              flush=True)


if __name__ == "__main__":
    main()
