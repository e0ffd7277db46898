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
* ``r_v = 0`` for the ``frozen`` nodes (optional: values that may not be
  computed again, e.g. those that read another block's value the plan
  does not promise to hold);
* ``x_v = 0`` for the ``dropped`` nodes (optional: values the plan does not
  hold, e.g. a block output it recomputes);
* memory held ``h = sum s_v x_v``, extra time ``e = sum c_v r_v``.

:func:`closure_staircase` returns its exact Pareto front of ``(h, e)`` by the
epsilon-constraint method: ``min e`` subject to ``h <= H``, then ``H = h -
1`` with ``h`` the held bytes of the solution (a point that costs no more
than the previous one replaces it), until no ``x`` fits.  Each point
carries its ``x``.  The models are tiny (two binaries per node of one
block) and solved to optimality on the SCIP layer
(:mod:`hybrid_remat.scip`: scaled objective, trusted dual bounds,
the model always freed); a point whose model stops at a limit ends the
front (``complete = False``).

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
from ..scip import ObjectiveScale, OwnsModel

__all__ = ["StairPoint", "Staircase", "closure_staircase"]

_FEASTOL = 1e-7   # SCIP re-solves an unstable LP at 1e-3 x this; below 1e-7 SoPlex (no GMP) prints a warning per LP


@dataclass
class StairPoint:
    """One Pareto point: bytes held, extra time, and the held set (``x``, a
    bool mask over the block's nodes) with the recomputed set (``r``).

    For bounds: ``extra_bound`` (the model's optimum, at most ``extra``)
    bounds the extra time of every held set of ``covers_from`` to ``query``
    bytes (the next point covers less memory); it lies at most ``slack``
    below the model's optimum (SCIP's tolerance, in seconds)."""

    held: int
    extra: float
    x: np.ndarray = field(repr=False)
    r: np.ndarray = field(repr=False)
    query: int = 0
    extra_bound: float = 0.0
    covers_from: int = 0
    slack: float = 0.0


@dataclass
class Staircase:
    """The Pareto front of a closure model, most memory first.

    ``complete``: every point was proved optimal and the front ends where no
    held set fits.  Points skipped by a coarse resolution leave *gaps*
    (``covers_from < held``); :meth:`refine` fills a gap exactly."""

    points: list
    complete: bool
    stats: dict = field(default_factory=dict)
    builder: object = field(default=None, repr=False)

    def extra_at(self, held: float) -> float:
        """Least extra time with at most ``held`` bytes held (``inf`` below the front)."""
        best = float("inf")
        for p in self.points:
            if p.held <= held:
                best = min(best, p.extra)
        return best

    def bound_items(self) -> list:
        """``[(memory, extra)]``: every held set of the model has, for some
        item, at least ``memory`` bytes and at least ``extra`` time."""
        return [(p.covers_from, p.extra_bound) for p in self.points]

    @property
    def slack(self) -> float:
        """The most any point's ``extra_bound`` lies below its model's optimum."""
        return max((p.slack for p in self.points), default=0.0)

    def refine(self, i: int, limits: Limits | None = None) -> bool:
        """Points in the gap below point ``i``, at a sixteenth of the gap
        (smaller gaps remain; refine them again to reach the exact front);
        False when stopped by ``limits``.  Needs ``keep_open=True``, then
        :meth:`close`."""
        return self.builder.refine(self, i, limits or Limits())

    def close(self) -> None:
        """Free the SCIP model kept for :meth:`refine`."""
        if self.builder is not None:
            self.builder.close()


def _model(preds, needed, fixed, cost, size, frozen=None, dropped=None):
    """The closure model on the SCIP layer (quiet, one thread, seeded):
    ``(model, x, r, held, extra)``; the caller frees the model."""
    from pyscipopt import quicksum

    from ..scip import new_model

    # SCIP runs past its time limit where it does not look at the clock: copying every solution back to
    # the original space after a solve (misc/transsolsorig), sub-MIP heuristics (RENS: 1.2 s on a
    # 48-variable closure model re-solved after freeTransform, 0.01 s without) and the knapsack row's dual
    # presolving (1.4 s on the same model): all off on these small models (a 20 s portfolio's segments
    # probe overran its limits by 12 s at 2k nodes)
    m = new_model("closure_block", params={"numerics/feastol": _FEASTOL, "misc/transsolsorig": False,
                                           "heuristics": "FAST", "constraints/knapsack/dualpresolving": False})
    try:
        k = len(needed)
        x = [m.addVar(vtype="B", lb=1.0 if fixed[i] else 0.0,
                      ub=0.0 if dropped is not None and dropped[i] and not fixed[i] else 1.0) for i in range(k)]
        r = [m.addVar(vtype="B", ub=0.0 if frozen is not None and frozen[i] else 1.0) for i in range(k)]
        for i in range(k):
            if needed[i]:
                m.addCons(x[i] + r[i] >= 1)
            for j in preds[i]:
                m.addCons(x[j] + r[j] - r[i] >= 0)
        held = quicksum(float(size[i]) * x[i] for i in range(k))
        extra = quicksum(float(cost[i]) * r[i] for i in range(k))
    except BaseException:
        m.free()
        raise
    return m, x, r, held, extra


class _Builder(OwnsModel):
    """The epsilon-constraint loop over one closure model, resumable (one
    SCIP model serves every cap; :meth:`close` frees it)."""

    def __init__(self, nodes, preds, needed, fixed, cost, size, node_limit, max_points, frozen=None, dropped=None):
        k = len(nodes)
        self.nodes, self.preds = nodes, preds
        self.fixed = np.zeros(k, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool)
        self.frozen = None if frozen is None else np.asarray(frozen, dtype=bool)
        self.dropped = None if dropped is None else np.asarray(dropped, dtype=bool)
        self.needed = np.asarray(needed, dtype=bool)
        self.cost = np.asarray(cost, dtype=np.float64)
        size = np.asarray(size, dtype=np.int64)
        self.objscale = ObjectiveScale.of(self.cost)   # coefficients <= 1: SCIP's tolerances are relative
        self.unit = int(np.gcd.reduce(size[size > 0])) if (size > 0).any() else 1   # exact: units of the gcd
        self.units = size // self.unit
        self.node_limit, self.max_points = node_limit, max_points
        self.solves = 0

    def solve(self, cap, limits):
        """min e  s.t.  h <= cap (units): ``(status, (e_bound, x, r, slack)
        or None)`` with ``e_bound`` the trusted dual bound in real units (at
        most the optimum, whatever SCIP's tolerances) and ``slack`` how far
        below the model's value it was lowered."""
        from ..scip import cap_nodes, run

        if self.model is None:
            sc = self.objscale
            m, x, r, held, extra = _model(self.preds, self.needed, self.fixed, [sc.coef(c) for c in self.cost],
                                          self.units, self.frozen, self.dropped)
            self.model, self.x, self.r = m, x, r
            self.cap_row = m.addCons(held <= cap)
            m.setObjective(extra, "minimize")
        m = self.model
        m.freeTransform()
        m.chgRhs(self.cap_row, float(cap))
        res = run(m, limits=cap_nodes(limits, self.node_limit))
        self.solves += 1
        if res.status != "optimal" or res.dual is None:
            res.reraise()
            return res.scip_status, None
        sol = m.getBestSol()
        xv = np.array([m.getSolVal(sol, v) > 0.5 for v in self.x], dtype=bool)
        rv = np.array([m.getSolVal(sol, v) > 0.5 for v in self.r], dtype=bool)
        res.reraise()
        sc = self.objscale
        return res.scip_status, (max(0.0, sc.bound(res.dual)), xv, rv, sc.real(res.dual) - sc.bound(res.dual))

    close = OwnsModel.free

    def walk(self, cap, stop_below, step, limits, budget):
        """Points from ``cap`` down (units) until ``stop_below``: ``(points,
        ended)`` with ``ended`` "infeasible" (nothing fits at the last cap),
        "reached" or "stopped" (limits, point budget, numerics)."""
        unit = self.unit
        pts: list = []
        while True:
            if cap < stop_below:
                return pts, "reached", cap
            if len(pts) >= budget or limits.expired():
                return pts, "stopped", cap
            status, got = self.solve(cap, limits)
            if status == "infeasible":
                return pts, "infeasible", cap
            if got is None:
                return pts, "stopped", cap
            e_bound, xv, rv, slack = got
            h = int(self.units[xv].sum())
            if pts and h * unit >= pts[-1].held:   # no progress (numerics)
                return pts, "stopped", cap
            query = cap * unit
            if pts and e_bound <= pts[-1].extra_bound * (1 + 1e-9):
                query = pts.pop().query            # as cheap with less memory: it replaces the last point
            # e_bound: at most the least extra time of every held set up to the query (a trusted dual bound)
            pts.append(StairPoint(h * unit, float(self.cost[rv].sum()), xv, rv, query=query,
                                  extra_bound=float(e_bound), slack=float(slack)))
            cap = h - max(1, math.ceil(2 * _FEASTOL * h), step)

    def covers(self, st: Staircase, floor_units) -> None:
        unit = self.unit
        for a, b in zip(st.points[:-1], st.points[1:], strict=False):
            a.covers_from = b.query + unit
        if st.points:
            st.points[-1].covers_from = 0 if floor_units is None else (floor_units + 1) * unit

    def refine(self, st: Staircase, i: int, limits, parts: int = 16) -> bool:
        p = st.points[i]
        lo = p.covers_from // self.unit
        hi = p.held // self.unit - 1
        if hi < lo:
            return True
        # a finer staircase over the gap (a sixteenth of it per step): gaps left are refined on demand
        pts, ended, cap = self.walk(hi, lo, (hi - lo + 1) // parts, limits, self.max_points)
        if i + 1 == len(st.points):            # below the last point: the floor may move
            floor = cap if ended == "infeasible" else (None if ended == "stopped" else st.stats.get("floor"))
            st.stats["floor"] = floor
            if ended == "stopped":
                st.complete = False
        else:
            floor = st.stats.get("floor")
        st.points[i + 1:i + 1] = [q for q in pts if q.held < p.held]
        self.covers(st, floor)
        st.stats["solves"] = self.solves
        return ended != "stopped"


def closure_staircase(nodes, preds, *, needed, cost, size, fixed=None, limits: Limits | None = None,
                      max_points: int = 64, node_limit: int = 10_000, resolution: float = 1 / 256,
                      keep_open: bool = False, frozen=None, dropped=None) -> Staircase:
    """The exact ``(held, extra)`` Pareto front of the closure model.

    Parameters
    ----------
    nodes : array of int
        The block's nodes (only their count matters here; ``cost``/``size``
        and the masks are indexed like ``nodes``).
    preds : list of list of int
        ``preds[i]``: local indices of ``nodes[i]``'s inputs inside the block.
    needed, fixed, frozen, dropped : bool arrays
        See the module docstring (``fixed``, ``frozen``, ``dropped``
        default: none).
    cost, size : arrays
        Per local node.
    limits : Limits, optional
        Deadline and node limit; the front stops (incomplete) when reached.
    max_points : int
        Stop after this many points (incomplete).
    resolution : float
        Next point at least this fraction of the block's bytes below the
        last (points in between are skipped: *gaps*, which the front covers
        with the cost of the point above, a valid lower envelope; see
        :meth:`Staircase.refine`).
    keep_open : bool
        Keep the SCIP model for :meth:`Staircase.refine` (then call
        :meth:`Staircase.close`); default: freed before returning.
    """
    limits = limits or Limits()
    b = _Builder(nodes, preds, needed, fixed, cost, size, node_limit, max_points, frozen, dropped)
    try:
        total = int(b.units.sum())
        pts, ended, cap = b.walk(total, 0, int(resolution * total), limits, max_points)
        floor = cap if ended == "infeasible" else None
        st = Staircase(pts, ended != "stopped", {"solves": b.solves, "floor": floor}, b)
        b.covers(st, floor)
    except BaseException:
        b.close()
        raise
    if not keep_open:
        b.close()
    return st
