"""The frontier chain bound on rl_small's instances (small random layered
graphs, narrow layers): its value with set cuts and with single-node cuts
beside the cut bound, as TDI %.  The exact optima and plans of the same
instances are in ``benchmarks/results/rl_small_tiny.md``.

    python3 -m benchmarks.rl_small_chain
"""

from __future__ import annotations

import math
import time

from hybrid_remat.bounds.cut import cut_lower_bound
from hybrid_remat.bounds.frontier_chain import frontier_chain_lower_bound
from hybrid_remat.errors import BudgetError
from hybrid_remat.families import random_layered_training
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem

__all__ = ["main"]


def _tdi(v: float, base: float) -> str:
    return "inf" if not math.isfinite(v) else f"{100 * (v - base) / base:.3f}"


def main() -> None:
    print("| nodes | seed | budget | cut_bound | frontier_chain (sets) | frontier_chain (single) | method | s |")
    print("|---|---|---|---|---|---|---|---|")
    for size in (24, 30, 36):
        for seed in (0, 1, 2):
            g = random_layered_training(size, seed=seed, layer_width=2)
            for b in (70, 60, 50):
                try:
                    p = Problem.single(g, f"{b}%")
                except BudgetError:
                    continue
                base = p.base_cost
                t = time.time()
                r = frontier_chain_lower_bound(p, limits=Limits.seconds(10))
                s1 = frontier_chain_lower_bound(p, max_set=1, limits=Limits.seconds(10))
                cb = cut_lower_bound(p, limits=Limits.seconds(3))
                print(f"| {g.n} | {seed} | {b}% | {_tdi(cb.value, base)} | {_tdi(r.value, base)} "
                      f"| {_tdi(s1.value, base)} | {r.method} "
                      f"| {time.time() - t:.1f} |", flush=True)


if __name__ == "__main__":
    main()
