"""HEFT's insertion step for plans: run a computation in an earlier idle gap.

In the simulator each device (and each copy direction) is a stream that runs
its steps in plan order, so a computation can start only after every earlier
step of its device.  HEFT's *insertion* places a task into an idle gap of its
processor's schedule; here that means moving a ``compute`` step earlier in
the plan, past steps it does not depend on.  Moving it changes the memory of
every step in between, so each move is checked by the simulator and kept only
when the plan stays valid and its makespan drops.

:func:`insert_earlier` is the post-pass; :class:`~hybrid_remat.hetero.heft.HeftScheduler`
applies it to its plans when its objective is the makespan.

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
"""

from __future__ import annotations

import time

import numpy as np

from ..plan import OP_COMPUTE, OP_COPY, OP_FREE, Plan
from ..simulate import simulate

__all__ = ["insert_earlier", "earliest_position"]


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


def insert_earlier(problem, plan: Plan, *, time_limit: float = 0.25) -> Plan:
    """Move computations into earlier gaps while that lowers the makespan.

    Parameters
    ----------
    problem : Problem
    plan : Plan
        A valid plan.
    time_limit : float
        Seconds to spend at most (one simulation per tried move).

    Returns
    -------
    Plan
        A valid plan whose makespan is at most ``plan``'s (``plan`` itself
        when no move helps or it is invalid).
    """
    deadline = time.perf_counter() + time_limit
    base = simulate(problem, plan)
    if not base.valid:
        return plan
    best, best_val = plan, base.makespan
    g = problem.graph
    k = 0
    while k < len(best) and time.perf_counter() < deadline:
        if int(best.op[k]) == OP_COMPUTE:
            j = earliest_position(best, k, g.preds(int(best.node[k])))
            if j < k:
                cand = _moved(best, k, j)
                r = simulate(problem, cand)
                if r.valid and r.makespan < best_val - 1e-12 * max(1.0, best_val):
                    best, best_val = cand, r.makespan
        k += 1
    if best is not plan:
        best.meta["insertion"] = True
    return best
