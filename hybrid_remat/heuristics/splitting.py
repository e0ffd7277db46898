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
from .executor import sequence_peak_kernel
from .split import split_kernel

__all__ = ["LifetimeSplit", "split_sequence", "split_continuation", "ruin_and_recreate"]


def split_sequence(a: GraphArrays, *, noise: float = 0.0, seed: int = 0, max_iter: int | None = None,
                   max_splits: int = 3, pick: int = 0, init=None, budget=None):
    """Run the splitting kernel from ``init`` (default keep-all); the pruned
    compute sequence or ``None``."""
    it = a.n + 100 if max_iter is None else int(max_iter)
    b = a.budget if budget is None else int(budget)
    start = np.arange(a.n, dtype=np.int64) if init is None else np.ascontiguousarray(init, dtype=np.int64)
    ok, seq = split_kernel(a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(b),
                           float(noise), int(seed), it, int(max_splits), int(pick), start)
    if not ok:
        return None
    return prune_sequence(a, seq, budget=b)


def split_continuation(a: GraphArrays, *, n_steps: int = 8, seed: int = 0, pick: int = 0, noise: float = 0.0):
    """Budget continuation: lower the budget from the keep-all peak to the
    target in ``n_steps`` equal steps, repairing the previous plan by
    splitting at each step; the final sequence or ``None``."""
    seq = np.arange(a.n, dtype=np.int64)
    peak = int(sequence_peak_kernel(seq, np.ones(a.n, dtype=np.bool_), a.bytes, a.pred_ptr, a.pred_idx))
    if peak <= a.budget:
        return seq
    for k in range(1, n_steps + 1):
        b = a.budget + (peak - a.budget) * (n_steps - k) // n_steps
        seq = split_sequence(a, init=seq, budget=b, seed=seed + k, pick=pick, noise=noise)
        if seq is None:
            return None
    return seq


def ruin_and_recreate(a: GraphArrays, seq, rng, *, frac: float = 0.2, pick: int = 0, noise: float = 0.3):
    """Drop a random share of ``seq``'s recomputations and repair with the
    splitting kernel; the new pruned sequence or ``None``."""
    seq = np.asarray(seq, dtype=np.int64)
    seen = np.zeros(a.n, dtype=bool)
    rec = []
    for pos, v in enumerate(seq.tolist()):
        if seen[v]:
            rec.append(pos)
        seen[v] = True
    if not rec:
        return None
    k = max(1, int(round(frac * len(rec))))
    drop = rng.choice(np.asarray(rec), size=min(k, len(rec)), replace=False)
    keep = np.ones(seq.size, dtype=bool)
    keep[drop] = False
    return split_sequence(a, init=seq[keep], seed=int(rng.integers(1 << 30)), pick=pick, noise=noise)


class LifetimeSplit(Heuristic):
    """Split live ranges of keep-all until the plan fits.

    Parameters
    ----------
    restarts : int
        Extra runs with seeded noise on the split scores and another choice
        of the relieved position (the best plan is kept).
    noise : float
        Log-normal noise scale of those runs.
    continuation_runs : int
        Runs of the budget continuation (keep-all repaired at budgets
        stepping down to the target), one per choice of relieved position.
        When the first direct run and the first continuation both fail, the
        heuristic gives up (this bounds the work on hopeless budgets).
    """

    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget"})

    def __init__(self, *, restarts: int = 2, noise: float = 0.3, continuation_runs: int = 2, name: str = "split",
                 rank: float = 3.0):
        self.restarts = int(restarts)
        self.continuation_runs = int(continuation_runs)
        self.noise = float(noise)
        self.name = name
        self.rank = rank

    def run(self, problem, *, seed: int = 0):
        a = GraphArrays.from_problem(problem)
        best, best_cost = None, np.inf

        def keep(seq):
            nonlocal best, best_cost
            if seq is not None and float(a.cost[seq].sum()) < best_cost:
                best, best_cost = seq, float(a.cost[seq].sum())

        # one direct run and one continuation; more runs only if one of them fits
        keep(split_sequence(a, seed=seed * 1000, pick=0))
        if self.continuation_runs > 0:
            keep(split_continuation(a, seed=seed, pick=0))
        if best is None:
            return None
        for r in range(1, self.restarts + 1):
            keep(split_sequence(a, noise=self.noise, seed=seed * 1000 + r, pick=r % 3))
        for pick in range(1, self.continuation_runs):
            keep(split_continuation(a, seed=seed, pick=pick % 3))
        return finish(problem, a, best, self.name, seed=seed)
