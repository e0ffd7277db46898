"""The lifted single-device heuristic: the best plans of the one-device
portfolio on the GPU alone, lifted with host offload
(:func:`~hybrid_remat.core.lift.lift_plan`), through the one-device
reduction (:class:`~hybrid_remat.core.devices.OneDevice`: ``apply`` ->
solve -> ``inverts``).

It runs the portfolio (:func:`~hybrid_remat.portfolio.run_portfolio`), so
it lives above it; the reduction and the lifting itself
(:mod:`hybrid_remat.core.devices`, :mod:`hybrid_remat.core.lift`, which the
portfolio's reductions use) stay below.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core.devices import OneDevice
from ..errors import HybridRematError
from ..interfaces import Heuristic
from ..limits import NO_LIMITS, Limits
from ..plan import Plan
from ..problem import Problem
from ..simulate import simulate

__all__ = ["single_device_portfolio", "LiftedSingleDevice"]


def single_device_portfolio(sub: Problem, *, exclude=(), seed: int = 0, limits: Limits | None = None,
                            top: int = 4) -> list[tuple[str, Plan, float]]:
    """The best plans of every registered heuristic that accepts ``sub`` (a
    one-device problem), run by the portfolio runner
    (:func:`~hybrid_remat.portfolio.run_portfolio`, in this process) within
    ``limits``: ``[(name, plan, value)]``, best first, at most ``top``.  Our
    own HEFT restricted to the device is always included."""
    from .. import plugins
    from ..portfolio import Ledger, run_portfolio
    from .heft import HeftScheduler

    heurs = {}
    try:
        heurs.update(plugins.heuristics())
    except HybridRematError as e:  # a broken plugin must not break planning
        warnings.warn(f"plugin heuristics unavailable: {e}", stacklevel=2)
    heurs.setdefault("hetero_heft", HeftScheduler())
    chosen = [h for name, h in heurs.items()
              if name not in exclude and "bound_only" not in set(getattr(h, "capabilities", ()))]
    limits = limits or NO_LIMITS
    ledger = Ledger(sub, pool_size=top)
    run_portfolio(sub, deadline=limits.deadline, heuristics=chosen, workers=1, seed=seed, node_limit=limits.nodes,
                  work_limit=limits.work, stop=limits.stop, signals=(), ledger=ledger)
    return [(source, plan, value) for value, source, plan in ledger.best_plans(top)]


class LiftedSingleDevice(Heuristic):
    """The best single-device (GPU) plans of the portfolio, lifted with host
    offload (:func:`lift_plan`, both policies); best by ``problem.objective``.

    Not run by default: ``anytime_solve`` reduces a multi-device problem to
    each device alone and lifts the whole one-device portfolio's plans
    (:mod:`hybrid_remat.portfolio.reduce`), which includes what this does."""

    name = "hetero_lift"
    version = "3"
    capabilities = frozenset({"dag", "chain", "multi_device", "needs_budget", "honours_limits", "serial", "makespan"})
    rank = 5.0
    run_by_default = False

    #: share of the limits that the single-device portfolio may use (the rest lifts and simulates)
    PORTFOLIO_SHARE = 0.8

    def __init__(self, top: int = 3):
        self.top = top

    def warmup(self) -> None:
        """Nothing of its own to compile: its heuristics are warmed with the rest."""

    def run(self, problem: Problem, *, seed: int = 0, limits: Limits | None = None):
        limits = limits or NO_LIMITS
        if problem.is_single_device:
            return None
        red = OneDevice(problem.primary.name)
        sub = red.apply(problem)
        if sub is None:
            return None
        left = limits.left()
        inner = limits.share(self.PORTFOLIO_SHARE * left) if np.isfinite(left) else limits
        best, best_val = None, np.inf
        for name, plan, _ in single_device_portfolio(sub, exclude=(self.name,), seed=seed, limits=inner)[: self.top]:
            if limits.expired() and best is not None:
                break
            for _, lifted in red.inverts(plan, ("serial", "all")):
                r = simulate(problem, lifted)
                if not r.valid:
                    continue
                val = problem.objective.value(r)
                if val < best_val - 1e-15:
                    lifted.meta["source"] = name
                    best, best_val = lifted, val
        return best
