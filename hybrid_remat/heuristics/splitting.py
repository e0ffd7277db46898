"""The lifetime-splitting heuristic as a registered planner (see
:mod:`hybrid_remat.heuristics.split` for the kernel).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(random_layered(60, seed=3), "90%")
>>> plan = LifetimeSplit().run(p)
>>> plan is None or simulate(p, plan).valid
True
"""

from __future__ import annotations

import numpy as np

from ..interfaces import Heuristic
from .common import GraphArrays, finish, prune_sequence
from .split import split_kernel

__all__ = ["LifetimeSplit", "split_sequence"]


def split_sequence(a: GraphArrays, *, noise: float = 0.0, seed: int = 0, max_iter: int | None = None,
                   max_splits: int = 3, pick: int = 0):
    """Run the splitting kernel; the pruned compute sequence or ``None``."""
    it = a.n + 100 if max_iter is None else int(max_iter)
    ok, seq = split_kernel(a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget),
                           float(noise), int(seed), it, int(max_splits), int(pick))
    if not ok:
        return None
    return prune_sequence(a, seq)


class LifetimeSplit(Heuristic):
    """Split live ranges of keep-all until the plan fits.

    Parameters
    ----------
    restarts : int
        Extra runs with seeded noise on the split scores and another choice
        of the relieved position (the best plan is kept).
    noise : float
        Log-normal noise scale of those runs.
    """

    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget"})

    def __init__(self, *, restarts: int = 3, noise: float = 0.3, name: str = "split", rank: float = 3.0):
        self.restarts = int(restarts)
        self.noise = float(noise)
        self.name = name
        self.rank = rank

    def run(self, problem, *, seed: int = 0):
        a = GraphArrays.from_problem(problem)
        best, best_cost = None, np.inf
        for r in range(self.restarts + 1):
            seq = split_sequence(a, noise=0.0 if r == 0 else self.noise, seed=seed * 1000 + r, pick=r % 3)
            if seq is None:
                continue
            c = float(a.cost[seq].sum())
            if c < best_cost:
                best, best_cost = seq, c
        if best is None:
            return None
        return finish(problem, a, best, self.name, seed=seed)
