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
epsilon-constraint method: ``min e`` subject to ``h <= H``, then ``H = h -
1`` with ``h`` the held bytes of the solution (a point that costs no more
than the previous one replaces it), until no ``x`` fits.  Each point
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

_FEASTOL = 1e-8


@dataclass
class StairPoint:
    """One Pareto point: bytes held, extra time, and the held set (``x``, a
    bool mask over the block's nodes) with the recomputed set (``r``).

    For bounds: ``extra_bound`` (the model's optimum, at most ``extra``)
    bounds the extra time of every held set of ``covers_from`` to ``query``
    bytes (the next point covers less memory)."""

    held: int
    extra: float
    x: np.ndarray = field(repr=False)
    r: np.ndarray = field(repr=False)
    query: int = 0
    extra_bound: float = 0.0
    covers_from: int = 0


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
    m.setParam("numerics/feastol", _FEASTOL)
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
                      max_points: int = 64, node_limit: int = 10_000, resolution: float = 1 / 256) -> Staircase:
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
    resolution : float
        Next point at least this fraction of the block's bytes below the
        last (points in between are skipped; the front stays a valid lower
        envelope through ``covers_from``).
    """
    limits = limits or Limits()
    k = len(nodes)
    fixed = np.zeros(k, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool)
    needed = np.asarray(needed, dtype=bool)
    cost = np.asarray(cost, dtype=np.float64)
    size = np.asarray(size, dtype=np.int64)
    scale = float(cost.max()) if k and cost.max() > 0 else 1.0
    unit = int(np.gcd.reduce(size[size > 0])) if (size > 0).any() else 1   # exact: sizes in units of their gcd
    units = size // unit
    points: list = []
    cap = int(units.sum())
    resolution_units = int(resolution * cap)
    complete = True
    solves = 0

    def solve():
        """min e  s.t.  h <= cap: (status, (e, x, r) or None)."""
        nonlocal solves
        m, x, r, held, extra = _model(nodes, preds, needed, fixed, cost / scale, units, limits, node_limit)
        try:
            m.addCons(held <= cap)
            m.setObjective(extra, "minimize")
            _time_limit(m, limits)
            m.optimize()
            solves += 1
            status = m.getStatus()
            if status != "optimal":
                return status, None
            sol = m.getBestSol()
            xv = np.array([m.getSolVal(sol, v) > 0.5 for v in x], dtype=bool)
            rv = np.array([m.getSolVal(sol, v) > 0.5 for v in r], dtype=bool)
            return status, (m.getObjVal(), xv, rv)
        finally:
            m.free()

    while True:
        if len(points) >= max_points or limits.expired():
            complete = False
            break
        status, got = solve()
        if status == "infeasible":
            break
        if got is None:
            complete = False
            break
        e_best, xv, rv = got
        h = int(units[xv].sum())
        if points and h * unit >= points[-1].held:     # no progress (numerics): stop, the front is a prefix
            complete = False
            break
        query = cap * unit
        if points and e_best * scale <= points[-1].extra_bound * (1 + 1e-9):
            query = points.pop().query       # as cheap with less memory: it replaces the last point
        # e_best bounds the cost of every held set up to the query (SCIP's tolerances only lower it)
        points.append(StairPoint(h * unit, float(cost[rv].sum()), xv, rv, query=query,
                                 extra_bound=float(e_best) * scale))
        cap = h - max(1, math.ceil(2 * _FEASTOL * h), resolution_units)
        if cap < 0:
            break
    if points:
        points[-1].covers_from = 0 if not complete else (cap + 1) * unit
    for a, b in zip(points[:-1], points[1:], strict=False):
        a.covers_from = b.query + unit
    return Staircase(points, complete, {"solves": solves})


def _time_limit(m, limits) -> None:
    left = limits.left()
    if math.isfinite(left):
        m.setParam("limits/time", max(0.01, left))
