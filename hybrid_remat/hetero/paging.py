"""POET-style paging: the GPU computes, the other devices only store.

:func:`paging_problem` turns every device but the primary into a
storage-only one (``Device(..., can_compute=False)``); on such a problem
the staged MILP of :mod:`hybrid_remat.hetero.xengine` is POET's model
(``S_ram``/``S_host`` are ``S`` on the two devices, page-out/page-in are the
copies ``X``) and the HEFT kernel becomes a remat-or-offload planner.  Plans
found this way are valid for the original problem too (they compute on the
primary device only).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(3, bytes=1).with_costs({"gpu": [1.0] * 3, "cpu": [1.0] * 3})
>>> p = Problem(g, [Device("gpu", "gpu", 2), Device("cpu", "cpu", 9)], [Link("gpu", "cpu", 1.0)])
>>> [d.can_compute for d in paging_problem(p).devices]
[True, False]
"""

from __future__ import annotations

from ..core.devices import Paging, paging_problem
from ..errors import BudgetError
from ..interfaces import Formulation, FormulationResult, Heuristic
from ..problem import Problem
from .heft import HeftScheduler
from .xengine import MAX_VARIABLES, XEngineMILP

__all__ = ["paging_problem", "PagingMILP", "HeftOffload"]


class PagingMILP(Formulation):
    """:class:`~hybrid_remat.hetero.xengine.XEngineMILP` on
    :func:`paging_problem`, through the :class:`~hybrid_remat.core.devices.Paging`
    reduction (POET's remat + paging model, serial time).

    Its scope is declared: its plans are plans of the full problem, its
    bounds and its ``optimal`` hold for the paging plans only (``bound_scope``
    is the reduction's scope, every computation on the primary device), so
    the portfolio keeps them as a class bound, never as a bound over every
    plan.  The reduction's ``carry`` maps the result (``stats["carried"]``:
    what it proves over every plan).
    """

    name = "hetero_paging"
    version = "3"
    capabilities = frozenset({"dag", "chain", "multi_device", "serial", "exact", "scoped_bound", "honours_limits"})
    bound_scope = Paging.name

    def __init__(self, max_variables: int = MAX_VARIABLES):
        self.inner = XEngineMILP(max_variables)

    def predict_seconds(self, problem: Problem) -> float:
        """As the XEngine model's (same size)."""
        return self.inner.predict_seconds(problem)

    def solve(self, problem: Problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent=None,
              on_bound=None) -> FormulationResult:
        red = Paging()
        try:
            pp = red.apply(problem)
        except BudgetError as e:
            # paging is impossible, which says nothing about co-execution
            return FormulationResult("no_solution", None, float("inf"), float("-inf"),
                                     {"reason": str(e), "skipped": str(e)})
        # only a paging plan warm-starts it; plans reported on the way are plans of the original problem
        offer = None if on_incumbent is None else (lambda plan, *a, **k: on_incumbent(red.invert(plan), *a, **k))
        res = self.inner.solve(pp, incumbent=red.forward(incumbent), limits=limits, seed=seed,
                               on_incumbent=offer, on_bound=on_bound)
        plan = red.invert(res.plan)
        if plan is not None:
            plan.meta["solver"] = self.name
        carried = red.carry(res.lower_bound, res.status)
        stats = dict(res.stats or {})
        stats["carried"] = {"status": carried.status, "scope": carried.scope}
        # a scoped formulation reports its bound and status within its scope (the hookspec's contract)
        return FormulationResult(carried.scope_status, plan, res.objective, carried.bound, stats)


class HeftOffload(Heuristic):
    """Memory-aware HEFT computing on the primary device only, the other
    devices used as offload memory (remat versus offload, no co-execution);
    best by the problem's objective (or ``objective``), within ``limits``."""

    name = "hetero_heft_offload"
    version = "2"
    capabilities = frozenset({"dag", "chain", "multi_device", "needs_budget", "serial", "makespan",
                              "honours_limits", "deterministic"})
    rank = 3.0

    def __init__(self, objective: str | None = None):
        self.inner = HeftScheduler(objective)

    def run(self, problem: Problem, *, seed: int = 0, limits=None):
        red = Paging()
        try:
            pp = red.apply(problem).with_objective(problem.objective)
        except BudgetError:  # the primary device alone cannot hold some node
            return None
        plan = red.invert(self.inner.run(pp, seed=seed, limits=limits))
        if plan is not None:
            plan.meta["solver"] = self.name
        return plan
