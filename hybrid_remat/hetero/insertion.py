"""HEFT's insertion step for plans: run a computation in an earlier idle gap.

In the simulator each device (and each copy direction) is a stream that runs
its steps in plan order, so a computation can start only after every earlier
step of its device.  HEFT's *insertion* places a task into an idle gap of its
processor's schedule; here that means moving a ``compute`` step earlier in
the plan, past steps it does not depend on.  Moving it changes the memory of
every step in between, so each move is checked by the simulator and kept only
when the plan stays valid and its makespan drops.

:class:`InsertionImprover` is the registered improver ``insertion`` (for
makespan problems; it cannot change the serial time);
:class:`~hybrid_remat.hetero.heft.HeftScheduler` applies it to its best plan
when the objective is the makespan.  :func:`insert_earlier` is the same pass
as a function.  One unit of work is one tried move (one simulation).

Examples
--------
Node 1 on the GPU waits for node 0 from the CPU; independent node 2 can run
on the GPU in that gap:

>>> from hybrid_remat.graph import Graph
>>> from hybrid_remat.plan import Plan
>>> from hybrid_remat.problem import Device, Link, Problem
>>> from hybrid_remat.simulate import simulate
>>> g = Graph.from_arrays([1, 1, 1], [(0, 1)], {"gpu": [9.0, 1.0, 3.0], "cpu": [5.0, 9.0, 9.0]})
>>> p = Problem(g, [Device("gpu", "gpu", 10), Device("cpu", "cpu", 10)],
...             [Link("cpu", "gpu", 1.0), Link("gpu", "cpu", 1.0)])
>>> plan = Plan.from_steps([("compute", 0, "cpu"), ("copy", 0, "cpu", "gpu"),
...                         ("compute", 1, "gpu"), ("compute", 2, "gpu")], ["gpu", "cpu"])
>>> simulate(p, plan).makespan, simulate(p, insert_earlier(p, plan)).makespan
(10.0, 7.0)
>>> better = InsertionImprover().improve(p.with_objective("makespan"), plan)
>>> simulate(p, better).makespan
7.0
"""

from __future__ import annotations

import numpy as np

from ..interfaces import Improver
from ..limits import Limits
from ..plan import OP_COMPUTE, OP_COPY, OP_FREE, Plan
from ..simulate import simulate

__all__ = ["insert_earlier", "earliest_position", "InsertionImprover", "DEFAULT_SECONDS"]

#: the time :func:`insert_earlier` spends at most when called without ``limits``
DEFAULT_SECONDS = 0.25


def earliest_position(plan: Plan, k: int, preds: np.ndarray) -> int:
    """Earliest index a ``compute`` step ``k`` can move to: just after the
    last earlier step that makes one of its inputs (or the node itself)
    resident on its device, or frees the node there."""
    v, d = int(plan.node[k]), int(plan.device[k])
    inputs = set(int(u) for u in preds)
    for s in range(k - 1, -1, -1):
        o, x = int(plan.op[s]), int(plan.node[s])
        if o == OP_COMPUTE and int(plan.device[s]) == d and (x in inputs or x == v):
            return s + 1
        if o == OP_COPY and int(plan.target[s]) == d and (x in inputs or x == v):
            return s + 1
        if o == OP_FREE and int(plan.device[s]) == d and x == v:
            return s + 1
    return 0


def _moved(plan: Plan, k: int, j: int) -> Plan:
    idx = np.concatenate([np.arange(j), [k], np.arange(j, k), np.arange(k + 1, len(plan))]).astype(np.int64)
    return Plan(plan.op[idx], plan.node[idx], plan.device[idx], plan.target[idx], plan.devices, dict(plan.meta))


def insert_earlier(problem, plan: Plan, *, limits: Limits | None = None, on_incumbent=None) -> Plan:
    """Move computations into earlier gaps while that lowers the makespan.

    Parameters
    ----------
    problem : Problem
    plan : Plan
        A valid plan.
    limits : Limits, optional
        Deadline, work (tried moves) and stop flag (one simulation per
        tried move); default: :data:`DEFAULT_SECONDS` seconds.
    on_incumbent : callable, optional
        ``on_incumbent(plan, "insertion")`` with each improvement.

    Returns
    -------
    Plan
        A valid plan whose makespan is at most ``plan``'s (``plan`` itself
        when no move helps or it is invalid).
    """
    lim = limits if limits is not None else Limits.seconds(DEFAULT_SECONDS)
    work = lim.work if lim.work is not None else -1
    base = simulate(problem, plan)
    if not base.valid:
        return plan
    best, best_val = plan, base.makespan
    g = problem.graph
    k = 0
    tried = 0
    while k < len(best) and not lim.expired() and tried != work:
        if int(best.op[k]) == OP_COMPUTE:
            j = earliest_position(best, k, g.preds(int(best.node[k])))
            if j < k:
                cand = _moved(best, k, j)
                r = simulate(problem, cand)
                tried += 1
                if r.valid and r.makespan < best_val - 1e-12 * max(1.0, best_val):
                    best, best_val = cand, r.makespan
                    best.meta["insertion"] = True
                    if on_incumbent is not None:
                        on_incumbent(best, "insertion")
        k += 1
    return best


class InsertionImprover(Improver):
    """HEFT's insertion as an improver: move computations into earlier idle
    gaps of their device while the simulated makespan drops
    (:func:`insert_earlier`).  Only for the makespan objective."""

    name = "insertion"
    version = "1"
    capabilities = frozenset({"dag", "chain", "multi_device", "makespan", "honours_limits", "deterministic"})
    rank = 4.0

    def applicable(self, problem):
        if getattr(problem.objective, "name", "serial") != "makespan":
            return False, "insertion only changes the makespan (the objective is serial time)"
        return True, ""

    def improve(self, problem, plan, *, seed: int = 0, limits: Limits | None = None, on_incumbent=None,
                shared=None):
        """The best plan found from ``plan`` (``None``: nothing better)."""
        out = insert_earlier(problem, plan, limits=limits if limits is not None else Limits(),
                             on_incumbent=on_incumbent)
        return None if out is plan else out
