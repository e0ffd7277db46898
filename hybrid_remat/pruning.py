"""Pruning a plan's recomputations: the ``drop_recomputations`` improver's
work, on top of the sequence kernels of :mod:`hybrid_remat.core.sequence`
(which stay below the simulator: this module is above it)."""

from __future__ import annotations

import numpy as np

from .core.sequence import PRUNE_RATE, _arrays, minimal_plan, prune_kernel, sequence_of_plan, unread_kernel
from .errors import PlanError
from .limits import Limits
from .simulate import simulate

__all__ = ["drop_recomputations"]


def drop_recomputations(problem, plan, *, limits: Limits | None = None):
    """A plan at most as costly as ``plan``: its compute sequence without
    unread recomputations, then without every recomputation the budget does
    not need (most expensive first), repeated until nothing changes or the
    work budget (``limits.work_for(PRUNE_RATE)``) is spent.  ``plan``
    itself when it is not a valid single-device plan without copies or
    nothing improves; the result passed the simulator.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> from hybrid_remat.plan import plan_from_order
    >>> g = chain(3, bytes=1)
    >>> p = Problem.single(g, "100%")
    >>> drop_recomputations(p, plan_from_order(g, [0, 1, 0, 1, 2], "cost")).n_computes()
    3
    """
    if not problem.is_single_device:
        return plan
    try:
        seq = sequence_of_plan(plan)
    except PlanError:
        return plan
    base = simulate(problem, plan)
    if not base.valid:
        return plan
    lim = limits if limits is not None else Limits()
    work = lim.work_for(PRUNE_RATE)
    g = problem.graph
    b, pp, pi = _arrays(g)
    cost = np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64)
    active = np.ones(seq.shape[0], dtype=np.bool_)
    unread_kernel(seq, active, pp, pi, g.succ_ptr)
    while work > 0:
        active, dropped, used = prune_kernel(seq, active, b, cost, pp, pi, np.int64(problem.budgets[0]),
                                             np.int64(work))
        work -= used
        if dropped == 0:
            break
        unread_kernel(seq, active, pp, pi, g.succ_ptr)
    out, _ = minimal_plan(g, seq[active], problem.primary.name, dict(plan.meta))
    sim = simulate(problem, out)
    if sim.valid and sim.total_time <= base.total_time:
        return out
    return plan
