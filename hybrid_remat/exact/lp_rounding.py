"""Checkmate's LP relaxation + rounding (``reference/checkmate.md`` 1.8).

1. Solve the LP relaxation of the staged Checkmate model
   (:mod:`hybrid_remat.exact.checkmate`) at the full budget: its value is a
   lower bound over the staged plans (reported when memory units are exact
   and stages hold one node each).
2. Solve it again at 90 % of the budget (Checkmate's "hack to get values
   under the budget").
3. Deterministic sweep: for each LP solution and each threshold
   ``tau in {0.1, ..., 0.9}`` round ``S' = [S* >= tau]``, take the minimal
   ``R`` for it (:func:`~hybrid_remat.exact.checkmate.solve_r_opt`), decode
   and simulate; keep the cheapest plan within the budget.

The LP is solved by SCIP (a model with no integer variables).  Models too
large for ``max_items`` (variables plus rows) use coarser stages; the bound
is then not reported (it would only cover the coarser class).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> out = LPRounding().run_detailed(Problem.single(chain(6, bytes=1), 3))
>>> out["plan"] is not None, out["lower_bound"] <= 6 + 1e-9
(True, True)
"""

from __future__ import annotations

import time

import numpy as np

from ..interfaces import Heuristic
from ..simulate import simulate

__all__ = ["LPRounding"]

THRESHOLDS = tuple(round(0.1 * k, 1) for k in range(1, 10))


class LPRounding(Heuristic):
    """LP relaxation of the staged Checkmate model, rounded by threshold sweep.

    Parameters
    ----------
    max_items : int
        Largest model (variables + rows) built; beyond it stages are grouped.
    time_fraction : float
        Share of the remaining time (when ``anytime_solve`` passes a
        deadline) the LPs may use.
    reduced_budget : float
        Budget factor of the second LP (Checkmate: 0.9).
    """

    name = "lp_rounding"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget"})
    rank = 50.0

    def __init__(self, max_items: int = 40_000, reduced_budget: float = 0.9, time_fraction: float = 0.05):
        self.max_items = int(max_items)
        self.reduced_budget = float(reduced_budget)
        self.time_fraction = float(time_fraction)

    def run(self, problem, *, seed: int = 0):
        return self.run_detailed(problem, seed=seed)["plan"]

    def run_detailed(self, problem, *, seed: int = 0, deadline: float | None = None) -> dict:
        """``{"plan", "lower_bound", "objective", "stats"}``; ``plan`` is
        ``None`` when no rounding fits the budget (or the deadline passed)."""
        from ..exact.checkmate import BuildTimeout, CheckmateModel, estimate_size, stage_starts

        out = {"plan": None, "lower_bound": None, "objective": float("inf"), "stats": {}}
        if not problem.is_single_device:
            return out
        if deadline is not None:  # take at most a share of what is left
            now = time.perf_counter()
            deadline = now + max(0.0, deadline - now) * self.time_fraction
        g = problem.graph
        size = 1
        while True:
            starts = stage_starts(g.n, size)
            est = estimate_size(g, starts)
            if est["vars"] + est["rows"] <= self.max_items or size >= g.n:
                break
            size = max(size + 1, int(size * 1.25))
        out["stats"]["stage_size"] = size
        cm = None
        try:
            try:
                cm = CheckmateModel(problem, starts=starts, integral=False, deadline=deadline)
            except BuildTimeout:
                out["stats"]["skipped"] = "deadline"
                return out
            m = cm.model
            m.setParam("randomization/randomseedshift", int(seed) % 2**31)
            m.setParam("lp/threads", 1)
            candidates = []
            full_budget_units = cm.scale.budget
            for factor in (1.0, self.reduced_budget):
                if deadline is not None:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        break
                    m.setParam("limits/time", left)
                if factor != 1.0:
                    m.freeTransform()
                    ub = float(int(full_budget_units * factor))
                    for u in cm.U.values():
                        m.chgVarUb(u, ub)
                m.optimize()
                if m.getStatus() != "optimal":
                    out["stats"][f"lp_{factor}"] = m.getStatus()
                    continue
                Sstar = np.zeros((cm.T, g.n))
                for (s, i), v in cm.S.items():
                    Sstar[s, i] = m.getVal(v)
                if factor == 1.0:
                    lp_value = cm.objective_value(m.getObjVal())
                    out["stats"]["lp_value"] = lp_value
                    if cm.scale.exact and size == 1:
                        out["lower_bound"] = lp_value
                candidates.append(Sstar)
            best = None
            seen = set()
            for Sstar in candidates:
                for tau in THRESHOLDS:
                    S = Sstar >= tau - 1e-9
                    key = S.tobytes()
                    if key in seen:
                        continue
                    seen.add(key)
                    try:
                        plan = cm.plan_from_s(S, {"solver": self.name, "threshold": tau})
                    except Exception:
                        continue
                    sim = simulate(problem, plan)
                    if sim.valid and (best is None or sim.total_time < best[0]):
                        best = (sim.total_time, plan)
            if best is not None:
                out["objective"], out["plan"] = best
            return out
        finally:
            if cm is not None:
                cm.free()
