"""The ``lns`` improver offered through the formulation hook, for runners
that call formulations only (``anytime_solve`` before it runs improvers).

The search itself is :class:`~hybrid_remat.heuristics.local_search.LNS`
(the improver ``lns``); :class:`LNSFormulation` hands it the incumbent and
the limits and wraps its plan in a
:class:`~hybrid_remat.interfaces.FormulationResult`.  It proves nothing (no
bound); every plan it returns passed the simulator.  ``node_limit`` bounds
the number of moves (deterministic for a seed).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> from hybrid_remat.heuristics.lifetime_split import LifetimeSplit
>>> p = Problem.single(random_layered(60, seed=3), "90%")
>>> start = LifetimeSplit().run(p)
>>> r = LNSFormulation().solve(p, incumbent=start, node_limit=50)
>>> r.status, simulate(p, r.plan).valid, r.objective <= simulate(p, start).total_time
('feasible', True, True)
"""

from __future__ import annotations

import math

from ..interfaces import Formulation, FormulationResult
from ..limits import now
from ..simulate import simulate
from .local_search import LNS

__all__ = ["LNSFormulation"]


class LNSFormulation(Formulation):
    """The improver :class:`~hybrid_remat.heuristics.local_search.LNS` as a
    formulation: ruin and recreate on the incumbent until the limits."""

    name = "lns"
    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})
    rank = 20.0  # after the exact models: it takes what they leave

    def solve(self, problem, *, incumbent=None, time_limit: float | None = 60.0, node_limit=None, seed: int = 0,
              threads: int = 1, on_incumbent=None, on_bound=None, stop=None, limits=None) -> FormulationResult:
        t0 = now()
        stats: dict = {"formulation": self.name}
        if not problem.is_single_device:
            return FormulationResult("error", stats={**stats, "error": "lns handles one device only"})
        lim = self.limits_of(limits, time_limit=time_limit, stop=stop)
        start_obj = math.inf
        if incumbent is not None:
            sim = simulate(problem, incumbent)
            if sim.valid:
                start_obj = sim.total_time
            else:
                incumbent = None
        reports = []

        def progress(plan, source):
            reports.append(plan)
            if on_incumbent is not None:
                on_incumbent(plan, source)

        moves = None if node_limit is None else int(node_limit)
        plan = LNS(max_iters=moves).improve(problem, incumbent, seed=seed, limits=lim, on_incumbent=progress)
        stats["seconds"] = round(now() - t0, 3)
        stats["reports"] = len(reports)
        if plan is None:
            return FormulationResult("no_solution", stats=stats)
        sim = simulate(problem, plan)
        if not sim.valid:  # never hand out an invalid plan
            stats["rejected"] = sim.error
            if incumbent is None:
                return FormulationResult("no_solution", stats=stats)
            plan, sim = incumbent, simulate(problem, incumbent)
        stats["improved_by"] = start_obj - sim.total_time if math.isfinite(start_obj) else None
        return FormulationResult("feasible", plan, sim.total_time, float("-inf"), stats)
