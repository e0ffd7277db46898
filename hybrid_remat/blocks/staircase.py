"""The exact trade-off of one block between the memory it holds and the
time it recomputes (SCIP).

For a set of nodes (one block's forward part, or the ancestors of a cut
within one stage), a subset ``needed`` that a later part of the plan reads,
and inputs from outside the set taken as available, the *closure model*
chooses ``x_v`` (``v`` is held: resident from its first computation until
it is needed) and ``r_v`` (``v`` is computed again):

* ``x_v + r_v >= 1`` for every needed ``v``;
* ``r_v <= x_u + r_u`` for every input ``u`` of ``v`` inside the set (a
  recomputation needs its inputs);
* ``x_v = 1`` for the ``fixed`` nodes;
* memory held ``h = sum s_v x_v``, extra time ``e = sum c_v r_v``.

:func:`closure_staircase` returns its exact Pareto front of ``(h, e)`` by the
epsilon-constraint method: ``min e`` subject to ``h <= H``, then ``min h``
subject to that ``e``, then ``H = h - 1``, until no ``x`` fits.  Each point
carries its ``x``.  The models are tiny (two binaries per node of one
block) and solved to optimality; a point whose model stops at a limit ends
the front (``complete = False``).

Examples
--------
>>> import numpy as np
>>> # a chain a -> b -> c (sizes 4, 2, 1; costs 1, 2, 4), c needed later
>>> st = closure_staircase(np.array([0, 1, 2]), [[], [0], [1]], needed=np.array([False, False, True]),
...                        cost=np.array([1.0, 2.0, 4.0]), size=np.array([4, 2, 1]))
>>> [(p.held, p.extra) for p in st.points], st.complete
([(1, 0.0), (0, 7.0)], True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..limits import Limits

__all__ = ["StairPoint", "Staircase", "closure_staircase"]


@dataclass
class StairPoint:
    """One Pareto point: bytes held, extra time, and the held set (``x``, a
    bool mask over the block's nodes) with the recomputed set (``r``)."""

    held: int
    extra: float
    x: np.ndarray = field(repr=False)
    r: np.ndarray = field(repr=False)


@dataclass
class Staircase:
    """The Pareto front of a closure model, most memory first.

    ``complete``: every point was proved optimal and the front ends where no
    held set fits (below the last point's memory nothing is feasible)."""

    points: list
    complete: bool
    stats: dict = field(default_factory=dict)

    def extra_at(self, held: float) -> float:
        """Least extra time with at most ``held`` bytes held (``inf`` below the front)."""
        best = float("inf")
        for p in self.points:
            if p.held <= held:
                best = min(best, p.extra)
        return best


def _model(nodes, preds, needed, fixed, cost, size, limits, node_limit):
    from pyscipopt import Model, quicksum

    m = Model("closure_block")
    m.hideOutput()
    m.setParam("lp/threads", 1)
    m.setParam("limits/nodes", node_limit if limits.nodes is None else min(node_limit, limits.nodes))
    k = len(nodes)
    x = [m.addVar(vtype="B", lb=1.0 if fixed[i] else 0.0) for i in range(k)]
    r = [m.addVar(vtype="B") for _ in range(k)]
    for i in range(k):
        if needed[i]:
            m.addCons(x[i] + r[i] >= 1)
        for j in preds[i]:
            m.addCons(x[j] + r[j] - r[i] >= 0)
    held = quicksum(float(size[i]) * x[i] for i in range(k))
    extra = quicksum(float(cost[i]) * r[i] for i in range(k))
    return m, x, r, held, extra


def closure_staircase(nodes, preds, *, needed, cost, size, fixed=None, limits: Limits | None = None,
                      max_points: int = 64, node_limit: int = 10_000) -> Staircase:
    """The exact ``(held, extra)`` Pareto front of the closure model.

    Parameters
    ----------
    nodes : array of int
        The block's nodes (only their count matters here; ``cost``/``size``
        and the masks are indexed like ``nodes``).
    preds : list of list of int
        ``preds[i]``: local indices of ``nodes[i]``'s inputs inside the block.
    needed, fixed : bool arrays
        See the module docstring (``fixed`` default: none).
    cost, size : arrays
        Per local node.
    limits : Limits, optional
        Deadline and node limit; the front stops (incomplete) when reached.
    max_points : int
        Stop after this many points (incomplete).
    """
    limits = limits or Limits()
    k = len(nodes)
    fixed = np.zeros(k, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool)
    needed = np.asarray(needed, dtype=bool)
    cost = np.asarray(cost, dtype=np.float64)
    size = np.asarray(size, dtype=np.int64)
    scale = float(cost.max()) if k and cost.max() > 0 else 1.0
    points: list = []
    cap = int(size.sum())
    complete = True
    solves = 0
    while True:
        if len(points) >= max_points or limits.expired():
            complete = False
            break
        # min e  s.t.  h <= cap
        m, x, r, held, extra = _model(nodes, preds, needed, fixed, cost / scale, size, limits, node_limit)
        try:
            m.addCons(held <= cap)
            m.setObjective(extra, "minimize")
            _time_limit(m, limits)
            m.optimize()
            solves += 1
            status = m.getStatus()
            if status == "infeasible":
                break
            if status != "optimal":
                complete = False
                break
            e_best = m.getObjVal()
        finally:
            m.free()
        # min h  s.t.  e <= e_best
        m, x, r, held, extra = _model(nodes, preds, needed, fixed, cost / scale, size, limits, node_limit)
        try:
            m.addCons(extra <= e_best + 1e-9 * max(1.0, abs(e_best)))
            m.addCons(held <= cap)
            m.setObjective(held, "minimize")
            _time_limit(m, limits)
            m.optimize()
            solves += 1
            if m.getStatus() != "optimal":
                complete = False
                break
            sol = m.getBestSol()
            xv = np.array([m.getSolVal(sol, v) > 0.5 for v in x], dtype=bool)
            rv = np.array([m.getSolVal(sol, v) > 0.5 for v in r], dtype=bool)
        finally:
            m.free()
        h = int(size[xv].sum())
        points.append(StairPoint(h, float(cost[rv].sum()), xv, rv))
        cap = h - 1
        if cap < 0:
            break
    return Staircase(points, complete, {"solves": solves})


def _time_limit(m, limits) -> None:
    left = limits.left()
    if math.isfinite(left):
        m.setParam("limits/time", max(0.01, left))
