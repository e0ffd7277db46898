"""Checkmate's LP relaxation + rounding (``reference/checkmate.md`` 1.8).

1. Solve the LP relaxation of the staged Checkmate model
   (:mod:`hybrid_remat.exact.checkmate`) at the full budget: its value is a
   lower bound over the staged plans (reported when memory units are exact
   and stages hold one node each).
2. Solve it again at 90 % of the budget (Checkmate's "hack to get values
   under the budget").
3. Deterministic sweep: for each LP solution and each threshold
   ``tau in {0.1, ..., 0.9}`` round ``S' = [S* >= tau]``, take the minimal
   ``R`` for it (:func:`~hybrid_remat.core.staged.solve_r_opt`), decode
   and simulate; keep the cheapest plan within the budget.

The LP is solved by SCIP (a model with no integer variables, through
:mod:`hybrid_remat.scip`).  Models too large for ``max_items``
(variables plus rows) use coarser stages; the bound is then not reported (it
would only cover the coarser class).  The bound's scope is the staged class
of the reference order (``bound_scope = "staged"``).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> out = LPRounding().run_detailed(Problem.single(chain(6, bytes=1), 3))
>>> out["plan"] is not None, out["lower_bound"] <= 6 + 1e-9
(True, True)
"""

from __future__ import annotations

import math

import numpy as np

from ..interfaces import Heuristic
from ..limits import Limits
from ..scip import check_bound, run
from ..simulate import simulate
from .checkmate import STAGED_SCOPE, BuildTimeout, CheckmateModel, estimate_size, stage_starts

__all__ = ["LPRounding"]

THRESHOLDS = tuple(round(0.1 * k, 1) for k in range(1, 10))


class LPRounding(Heuristic):
    """LP relaxation of the staged Checkmate model, rounded by threshold sweep.

    Parameters
    ----------
    max_items : int
        Largest model (variables + rows) built; beyond it stages are grouped.
    time_fraction : float
        Share of the remaining time (when the caller passes a deadline) the
        LPs may use.
    reduced_budget : float
        Budget factor of the second LP (Checkmate: 0.9).
    """

    name = "lp_rounding"
    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "serial", "needs_budget", "honours_limits"})
    rank = 50.0
    bound_scope = STAGED_SCOPE

    def __init__(self, max_items: int = 40_000, reduced_budget: float = 0.9, time_fraction: float = 0.05):
        self.max_items = int(max_items)
        self.reduced_budget = float(reduced_budget)
        self.time_fraction = float(time_fraction)

    #: above this many nodes the model build alone takes seconds (12 s at 100k nodes, past its limits) and no
    #: plan came on four families (``benchmarks/results/heuristic_scaling.md``): not admitted there
    max_nodes = 30_000

    def applicable(self, problem) -> tuple[bool, str]:
        if problem.graph.n > self.max_nodes:
            return False, f"above {self.max_nodes} nodes (its model build alone takes seconds)"
        return True, ""

    def run(self, problem, *, seed: int = 0, limits=None):
        return self.run_detailed(problem, seed=seed, limits=limits)["plan"]

    def predict_seconds(self, problem) -> float:
        """Seconds to build the LP (pyscipopt builds about 40k items/s)."""
        from .checkmate import BUILD_RATE

        return min(self.max_items, self._size(problem)[1]) / BUILD_RATE

    def _size(self, problem):
        g = problem.graph
        size = 1
        while True:
            starts = stage_starts(g.n, size)
            est = estimate_size(g, starts)
            if est["vars"] + est["rows"] <= self.max_items or size >= g.n:
                return starts, est["vars"] + est["rows"], size
            size = max(size + 1, int(size * 1.25))

    def run_detailed(self, problem, *, seed: int = 0, limits=None) -> dict:
        """``{"plan", "lower_bound", "objective", "stats"}``; ``plan`` is
        ``None`` when no rounding fits the budget (or the limits passed).
        The LPs take ``time_fraction`` of the time ``limits`` leave."""
        out = {"plan": None, "lower_bound": None, "objective": float("inf"), "stats": {}}
        if not problem.is_single_device:
            return out
        lim = limits if limits is not None else Limits()
        left = lim.left()
        if math.isfinite(left):  # take at most a share of what is left
            lim = lim.share(left * self.time_fraction)
        g = problem.graph
        starts, _, size = self._size(problem)
        out["stats"]["stage_size"] = size
        try:
            cm = CheckmateModel(problem, starts=starts, integral=False, limits=lim, seed=seed)
        except BuildTimeout:
            out["stats"]["skipped"] = "deadline"
            return out
        with cm:
            m = cm.model
            candidates = []
            full_budget_units = cm.scale.budget
            for factor in (1.0, self.reduced_budget):
                if lim.expired():
                    break
                if factor != 1.0:
                    m.freeTransform()
                    ub = float(int(full_budget_units * factor))
                    for u in cm.U.values():
                        m.chgVarUb(u, ub)
                res = run(m, limits=lim)
                res.reraise()
                if res.scip_status != "optimal":
                    out["stats"][f"lp_{factor}"] = res.scip_status
                    continue
                Sstar = np.zeros((cm.T, g.n))
                for (s, i), v in cm.S.items():
                    Sstar[s, i] = m.getVal(v)
                if factor == 1.0:
                    out["stats"]["lp_value"] = cm.objective_value(m.getObjVal())
                    if cm.scale.exact and size == 1 and res.dual is not None:
                        out["lower_bound"] = cm.objscale.bound(res.dual)
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
        if out["lower_bound"] is not None and best is not None:
            # a rounded plan is a staged plan of the same order: the bound may not exceed it
            lb, note = check_bound(out["lower_bound"], best[0], cm.objscale.tolerance(best[0]))
            out["lower_bound"] = lb if np.isfinite(lb) else None
            if note:
                out["stats"]["bound_note"] = note
        return out
