"""Which side of the random_layered gap is loose at intermediate sizes:
the family's own generator (:func:`hybrid_remat.families.random_layered_training`,
default layer width) at 60-500 nodes, the plan of a long ``anytime_solve``
(one worker) beside the portfolio's bound and the frontier chain bound given
a long limit and many cuts (its MILP where the model is small enough), as
TDI %.

    python3 -m benchmarks.rl_diagnose --sizes 60,120 --seeds 0,1 --limit 60 --bound-s 60
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks._common import tdi_of
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.bounds.frontier_chain import frontier_chain_lower_bound
from hybrid_remat.errors import BudgetError
from hybrid_remat.families import random_layered_training
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem

__all__ = ["main"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="60,120,250,500")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--bound-s", type=float, default=60.0)
    ap.add_argument("--max-cuts", type=int, default=80)
    a = ap.parse_args()
    for size in [int(s) for s in a.sizes.split(",")]:
        for seed in [int(s) for s in a.seeds.split(",")]:
            g = random_layered_training(size, seed=seed)
            try:
                p = Problem.single(g, f"{a.budget}%")
            except BudgetError as exc:
                print(json.dumps({"nodes": g.n, "seed": seed, "skipped": str(exc)[:80]}), flush=True)
                continue
            t0 = time.perf_counter()
            res = anytime_solve(p, a.limit, workers=1)
            wall = time.perf_counter() - t0
            t1 = time.perf_counter()
            fc = frontier_chain_lower_bound(p, max_cuts=a.max_cuts, limits=Limits.seconds(a.bound_s))
            out = {"nodes": g.n, "seed": seed, "plan": tdi_of(p, res.objective), "solver": res.solver,
                   "anytime_bound": tdi_of(p, res.lower_bound), "wall": round(wall, 1),
                   "frontier_chain": tdi_of(p, fc.value), "fc_method": fc.method, "fc_cuts": len(fc.chain),
                   "fc_vars": fc.stats.get("vars"), "fc_s": round(time.perf_counter() - t1, 1)}
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
