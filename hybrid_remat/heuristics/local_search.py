"""Local search on a plan: ruin-and-recreate, randomized re-planning and
recomputation pruning.

:meth:`LocalSearch.improve` takes any one-device plan (a heuristic's or the
exact engine's incumbent), drops the recomputations the budget does not
need (:func:`~hybrid_remat.heuristics.executor.prune_kernel`), then, until
its time limit, mostly applies *ruin and recreate* moves to the best
compute sequence (drop a random share of its recomputations, repair the
budget violations by lifetime splitting, prune; keep the result when it is
no more costly), interleaved with fresh randomized plans (lifetime
splitting with seeded score noise; DTR eviction with random per-value score
weights).  When nothing fits at first, a budget continuation (plans for
slightly larger budgets repaired step by step) provides a start.  Every
returned plan passed the simulator.

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(random_layered(60, seed=3), "90%")
>>> plan = LocalSearch(time_limit=0.05).run(p)
>>> plan is None or simulate(p, plan).valid
True
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import PlanError
from ..interfaces import Heuristic
from ..simulate import simulate
from .common import GraphArrays, finish, prune_sequence, run_executor, sequence_of_plan
from .splitting import ruin_and_recreate, split_continuation, split_sequence

__all__ = ["LocalSearch"]

_SCORES = ("next_use_full", "dtr_eq", "next_use_eq", "dtr", "msps")


class LocalSearch(Heuristic):
    """Improve plans for a given time.

    Parameters
    ----------
    time_limit : float
        Seconds :meth:`run` spends improving at most (default 1 s).
    max_iters : int or None
        Moves of the improvement loop (default 300).  With a move budget the
        result is deterministic for a seed as long as the time limit does not
        bind first; ``None`` improves until the time limit.
    """

    name = "local_search"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget"})
    rank = 50.0

    def __init__(self, time_limit: float = 1.0, *, max_iters: int | None = 300, name: str | None = None):
        self.time_limit = float(time_limit)
        self.max_iters = max_iters
        if name:
            self.name = name

    def run(self, problem, *, seed: int = 0):
        return self.improve(problem, None, time_limit=self.time_limit, seed=seed)

    def improve(self, problem, plan=None, *, time_limit: float | None = None, seed: int = 0,
                max_iters: int | None = -1, stop=None, on_improve=None, report_every: float = 1.0):
        """Return a plan at most as costly as ``plan`` (``plan`` itself when
        nothing better was found; ``None`` only if ``plan`` is ``None`` and no
        feasible plan was found).  ``stop`` (a ``threading.Event``) ends the
        improvement loop early; ``on_improve(plan)`` receives the best plan
        so far when it improved, at most every ``report_every`` seconds."""
        deadline = time.perf_counter() + (self.time_limit if time_limit is None else float(time_limit))
        if max_iters == -1:
            max_iters = self.max_iters
        a = GraphArrays.from_problem(problem)
        best_seq, best_cost = None, np.inf
        base_plan, base_cost = None, np.inf
        if plan is not None:
            res = simulate(problem, plan)
            if res.valid:
                base_plan, base_cost = plan, res.total_time
                try:
                    seq = prune_sequence(a, sequence_of_plan(plan))
                    best_seq, best_cost = seq, float(a.cost[seq].sum())
                except PlanError:
                    pass

        def consider(seq):
            nonlocal best_seq, best_cost
            if seq is None:
                return
            c = float(a.cost[seq].sum())
            if c < best_cost - 1e-12:
                best_seq, best_cost = seq, c

        # deterministic starts first (the first one even past the deadline)
        for pick in (0, 1, 2):
            consider(split_sequence(a, seed=seed, pick=pick))
            if time.perf_counter() >= deadline:
                break
        for sc in _SCORES[:2]:
            if time.perf_counter() >= deadline and best_seq is not None:
                break
            r = run_executor(a, score=sc, seed=seed)
            if r.ok:
                consider(prune_sequence(a, r.seq))
        for pick in (0, 1, 2):
            if time.perf_counter() >= deadline and (best_seq is not None or pick > 0):
                break
            seq = split_continuation(a, seed=seed, pick=pick)
            consider(seq)
            if seq is None:
                break
        rng = np.random.default_rng(seed)
        # nothing fits yet: finer continuations while time remains
        for n_steps, pick in ((16, 0), (16, 1), (16, 2), (32, 0), (32, 1), (32, 2), (64, 0)):
            if best_seq is not None or time.perf_counter() >= deadline:
                break
            consider(split_continuation(a, n_steps=n_steps, seed=seed, pick=pick))
        it = 0
        reported = {"cost": min(best_cost, base_cost), "at": time.perf_counter()}

        def report():
            if on_improve is None or best_seq is None or best_cost >= reported["cost"] - 1e-12:
                return
            if time.perf_counter() - reported["at"] < report_every:
                return
            out = finish(problem, a, best_seq, self.name, seed=seed, iterations=it)
            reported["at"] = time.perf_counter()
            if out is not None:
                reported["cost"] = best_cost
                on_improve(out)

        while time.perf_counter() < deadline and (max_iters is None or it < max_iters) and \
                not (stop is not None and stop.is_set()):
            it += 1
            report()
            if best_seq is not None and it % 5:
                # ruin and recreate: drop some recomputations, repair by splitting;
                # equal-cost moves are accepted to walk plateaus
                cand = ruin_and_recreate(a, best_seq, rng, frac=float(rng.uniform(0.05, 0.5)),
                                         pick=int(rng.integers(3)), noise=float(rng.uniform(0.0, 0.5)))
                if cand is not None and float(a.cost[cand].sum()) <= best_cost + 1e-12:
                    best_seq, best_cost = cand, float(a.cost[cand].sum())
            elif it % 3:
                consider(split_sequence(a, noise=float(rng.uniform(0.1, 0.8)), seed=int(rng.integers(1 << 30)),
                                        pick=int(rng.integers(3)), max_splits=int(rng.integers(2, 6))))
            else:
                w = np.exp(rng.normal(0.0, float(rng.uniform(0.2, 1.5)), a.n))
                sc = _SCORES[int(rng.integers(len(_SCORES)))]
                r = run_executor(a, score=sc, weights=w, seed=int(rng.integers(1 << 30)))
                if r.ok:
                    consider(prune_sequence(a, r.seq))
        if best_seq is None or best_cost >= base_cost - 1e-12:
            return base_plan
        out = finish(problem, a, best_seq, self.name, seed=seed, iterations=it)
        return out if out is not None else base_plan
