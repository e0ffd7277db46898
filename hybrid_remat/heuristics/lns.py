"""Large-neighbourhood search as a formulation: ruin and recreate for as long
as it is given.

The ``local_search`` heuristic stops after about a second so that every
heuristic runs early; on graphs where no exact model fits the time limit the
rest of the time is better spent on the same moves (drop a random share of
the incumbent's recomputations, repair the budget by lifetime splitting,
prune; randomized restarts), which is what this formulation does with the
incumbent ``anytime_solve`` hands it.  It proves nothing (no bound); every
plan it returns passed the simulator.

Measured (``python benchmarks/moccasin_protocol.py``): see the README.

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> from hybrid_remat.heuristics.splitting import LifetimeSplit
>>> p = Problem.single(random_layered(60, seed=3), "90%")
>>> start = LifetimeSplit().run(p)
>>> r = LNSFormulation().solve(p, incumbent=start, node_limit=50)
>>> r.status, simulate(p, r.plan).valid, r.objective <= simulate(p, start).total_time
('feasible', True, True)
"""

from __future__ import annotations

import math
import time

from ..interfaces import Formulation, FormulationResult
from ..simulate import simulate

__all__ = ["LNSFormulation"]


class LNSFormulation(Formulation):
    """Ruin-and-recreate local search on the incumbent until the time limit.

    ``node_limit`` (tests) bounds the number of moves, which makes the
    result deterministic for a seed.
    """

    name = "lns"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget"})
    rank = 20.0  # after the exact models: it takes what they leave

    def solve(self, problem, *, incumbent=None, time_limit: float = 60.0, node_limit=None, seed: int = 0,
              threads: int = 1, on_incumbent=None, on_bound=None, stop=None) -> FormulationResult:
        from .local_search import LocalSearch

        t0 = time.perf_counter()
        stats: dict = {"formulation": self.name}
        if not problem.is_single_device:
            return FormulationResult("error", stats={**stats, "error": "lns handles one device only"})
        start_obj = math.inf
        if incumbent is not None:
            sim = simulate(problem, incumbent)
            if sim.valid:
                start_obj = sim.total_time
            else:
                incumbent = None
        limit = float(time_limit) if time_limit is not None else 60.0
        if stop is not None and stop.is_set():
            limit = 0.0
        best = {"obj": start_obj, "reports": 0}

        def progress(plan):  # report improvements while searching (each checked by the simulator)
            sim = simulate(problem, plan)
            if sim.valid and sim.total_time < best["obj"] - 1e-12 * max(1.0, sim.total_time):
                best["obj"] = sim.total_time
                best["reports"] += 1
                if on_incumbent is not None:
                    on_incumbent(plan, self.name)

        plan = LocalSearch().improve(problem, incumbent, time_limit=limit, seed=seed,
                                     max_iters=None if node_limit is None else int(node_limit), stop=stop,
                                     on_improve=progress)
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        stats["reports"] = best["reports"]
        if plan is None:
            return FormulationResult("no_solution", stats=stats)
        sim = simulate(problem, plan)
        if not sim.valid:  # never hand out an invalid plan
            stats["rejected"] = sim.error
            if incumbent is None:
                return FormulationResult("no_solution", stats=stats)
            plan, sim = incumbent, simulate(problem, incumbent)
        stats["improved_by"] = start_obj - sim.total_time if math.isfinite(start_obj) else None
        if sim.total_time < best["obj"] - 1e-12 * max(1.0, sim.total_time) and on_incumbent is not None:
            on_incumbent(plan, self.name)
        return FormulationResult("feasible", plan, sim.total_time, float("-inf"), stats)
