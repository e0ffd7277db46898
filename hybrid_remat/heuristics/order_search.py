"""Heuristics built on the order search of :mod:`hybrid_remat.bounds.order_search`
(whose module docstring states the search and why a plan found with no
recomputation is optimal over every plan): ``no_recompute_order`` (a plan with
one computation per node in a searched order) and ``searched_order`` (fast
heuristics in orders of low peak found against a budget a few per cent above
the problem's).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> NoRecomputeOrder().run(Problem.single(chain(6, bytes=1), 6)) is not None
True
"""

from __future__ import annotations

import math

import numpy as np

from ..bounds.order_search import PLAN_STATES, _single, search_orders
from ..interfaces import Heuristic
from ..limits import Limits

__all__ = ["NoRecomputeOrder", "SearchedOrder", "no_recompute_plan", "searched_orders", "SLACKS"]


def no_recompute_plan(problem, *, limits: Limits | None = None, name: str = "no_recompute_order"):
    """A plan computing every node once in an order whose peak fits, or
    ``None`` (none found within the limits)."""
    from ..plan import plan_from_order

    ok, _ = _single(problem)
    if not ok:
        return None
    res = search_orders(problem, limits=limits, max_states=PLAN_STATES)
    if res.status != "found":
        return None
    return plan_from_order(problem.graph, res.order, problem.primary.name, {"solver": name})


class NoRecomputeOrder(Heuristic):
    """A plan with no recomputation in an order searched for memory
    (``no_recompute_order``; module docstring): when one is found it is
    optimal over every plan (one computation per node).  Single device, up
    to 1500 nodes; honours its limits."""

    name = "no_recompute_order"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})
    rank = 4.0

    def applicable(self, problem) -> tuple[bool, str]:
        return _single(problem)

    def predict_seconds(self, problem) -> float:
        """Seconds of search worth giving it (twice that is its share): RLG1-RLG3 found within 1 s."""
        return 0.3 + 0.002 * problem.graph.n

    def run(self, problem, *, seed: int = 0, limits: Limits | None = None):
        return no_recompute_plan(problem, limits=limits, name=self.name)


#: budgets (1 + eps) x B of the orders :class:`SearchedOrder` looks for, in the order tried (a middle slack
#: first: on RLG3 @80 % 2-6 % found nothing in 5 s each, 10 % an order in 0.8 s)
SLACKS = (0.1, 0.05, 0.03, 0.15, 0.25)


def searched_orders(problem, *, limits: Limits | None = None) -> list:
    """Orders of low peak: for the slacks of :data:`SLACKS` in turn, the
    order the search finds against ``(1 + slack) x`` the budget (each search
    with a share of the time), until two are found; lowest slack first."""
    limits = limits or Limits()
    B = int(problem.budgets[0])
    out: list = []
    for k, eps in enumerate(SLACKS):
        if out and eps > 0.1 and len(out) >= 1 and min(e for e, _ in out) <= 0.1:
            break
        if limits.expired():
            break
        left = limits.left()
        # the first search half of the time (a found order takes ~1.3 s at 1000 nodes under load), then equal shares
        lim = limits.share(left / (2 if k == 0 else len(SLACKS) - k)) if math.isfinite(left) else limits
        r = search_orders(problem, limits=lim, budget=int(B * (1.0 + eps)), max_states=200_000)
        if r.status == "found" and r.order != list(range(problem.graph.n)):
            order = np.asarray(r.order, dtype=np.int64)
            if not any(np.array_equal(order, o) for _, o in out):
                out.append((eps, order))
            if len(out) >= 2:
                break
    return [o for _, o in sorted(out, key=lambda x: x[0])]


class SearchedOrder(Heuristic):
    """Fast heuristics (``sinks_last``'s inner ones) in orders of low peak
    found by the search of the module docstring against a budget a few per
    cent above the problem's (``searched_order``): the order leaves little
    to recompute.  Measured on RLG3 @80 %: 1.32 TDI % (the reference order's
    best: 3.1); RLG4 @90 %: 0.28 (0.43).  Single device, up to 1500 nodes;
    honours its limits (the searches take 60 % of the time)."""

    name = "searched_order"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})
    rank = 4.5

    def applicable(self, problem) -> tuple[bool, str]:
        return _single(problem)

    def predict_seconds(self, problem) -> float:
        """Seconds it needs (the scheduler gives twice that): the searches and four fast heuristics, measured
        5-7 s at 500-1000 nodes on the loaded 2-core machine."""
        return 0.5 + 0.008 * problem.graph.n

    def run(self, problem, *, seed: int = 0, limits: Limits | None = None):
        from ..heuristics.reorder import SinksLast

        limits = limits or Limits()
        if not _single(problem)[0]:
            return None
        left = limits.left()
        orders = searched_orders(problem, limits=limits.share(0.6 * left) if math.isfinite(left) else limits)
        if not orders:          # no other order of low peak: the graph's own (a plan wherever that order fits)
            orders = [np.arange(problem.graph.n, dtype=np.int64)]

        class _Given(SinksLast):
            def orders(self, graph, limits=None):
                return orders

        plan = _Given().run(problem, seed=seed, limits=limits)
        if plan is not None:
            plan.meta.update(solver=self.name)
        return plan
