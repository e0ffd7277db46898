"""A bound of the *fixed-order* class: plans whose first computations follow
the graph's own (reference) order -- Moccasin's class, which contains
Checkmate's staged plans (scope ``"staged"``).

Why a separate model.  The staged Checkmate MILP has ``~n^2`` binaries
(500k at 1000 nodes): on the random layered graphs RLG3/RLG4 it is not even
built within a minute.  Its class is small enough for a much smaller
relaxation: in the reference order every value's first computation is
known, so at the first computation of a node ``t`` (*cut* ``t``) the values
computed before ``t`` that are read after ``t`` are known exactly (the
reference order's live set, not just ``t``'s ancestors as in the cut bound
over every plan).

Model.  Cuts ``t_1 < ... < t_k`` (nodes whose reference-order memory exceeds
the budget); *interval* ``i`` runs from cut ``i`` to cut ``i + 1`` (the last:
to the end).  For a node ``v < t_i`` (its first computation precedes cut
``i``) in the model's set ``V_i``:

* ``x[v, i]``: ``v`` is resident at cut ``i`` (1 for ``t_i``'s inputs);
* ``z[v, i]``: ``v`` is computed at least once in interval ``i`` (each such
  computation is a recomputation).

Every plan of the class gives a 0/1 point satisfying:

1. memory at cut ``i``: ``sum bytes(v) x[v, i]`` over ``V_i`` without
   ``t_i``'s inputs ``<= B - bytes(t_i) - bytes(inputs of t_i)`` (the
   simulator counts memory after the allocation; other values only add);
2. need: an *item* ``v`` of cut ``i`` (``v < t_i``, not an input of
   ``t_i``, with a reader ``w > t_i``; the first such reader ``w``) is
   resident at cut ``i`` or computed after it and before ``w``'s first
   computation, which precedes cut ``j``, the first cut with ``t_j >= w``
   (``k``: none): ``x[v, i] + sum_{i <= l < j} z[v, l] >= 1``.  For
   ``i <= l < j``, ``v`` is an item of cut ``l`` too (its reader ``w`` comes
   after ``t_l``; it is not an input of ``t_l < w``), so those variables
   exist;
3. persistence: ``x[v, i] <= x[v, i-1] + z[v, i-1]`` when ``v`` is in
   ``V_{i-1}`` (resident at cut ``i`` means resident at cut ``i - 1`` or
   computed in between);
4. chains: for ``v`` in ``V_i`` whose inputs are all in ``V_i``:
   ``z[v, i] <= x[u, i] + z[u, i]`` for each input ``u`` (a computation of
   ``v`` in interval ``i`` needs ``u`` resident then: kept since cut ``i``
   or computed in the interval before it).

``V_i`` holds cut ``i``'s items, its inputs and ``depth`` levels of their
inputs (earlier than ``t_i``); dropping the chain rows of the deepest level
and the persistence rows of values outside ``V_{i-1}`` only relaxes the
model.  The plan's recomputation cost is at least ``sum c_v z[v, i]``
(distinct intervals are disjoint), so the model's optimum, its certified LP
value, or SCIP's trusted dual bound, plus one computation per node, bounds
every plan of the class.  Any subset of the cuts gives a valid bound too
(fewer rows), which is how the model is sized for the time left.

The bound is *of the class only*: a plan in another order can be cheaper
(on RLG2 at 90 % a plan in another order needs no recomputation at all), so
it is reported as ``scope = "staged"``'s bound (a bound of a larger class
bounds the smaller), never as a bound over every plan.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.oracle import brute_force
>>> g = training_graph(nx.path_graph(4, create_using=nx.DiGraph))
>>> p = Problem.single(g, 6)
>>> fixed_order_lower_bound(p).value <= brute_force(p, "frontier")[0]
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...interfaces import Bound, BoundResult
from ...limits import Limits, now

__all__ = ["FixedOrderBound", "FixedOrderBoundSource", "fixed_order_lower_bound", "fixed_order_cuts"]

#: variables (x and z) of the model beyond which cuts are dropped (the smallest excess first).  Measured on
#: RLG3/RLG4 at 80 %, 20 s: 6 cuts (4-8k variables, SCIP's dual bound) gave 2.2-2.35 TDI %, 13 cuts 2.35,
#: 27 cuts 1.9-2.3, 61 cuts (the LP alone) 1.6-1.9: a small model that SCIP solves beats a large LP
MAX_VARS = 8_000
#: MILP (SCIP) up to this many variables, after the LP
MAX_MILP_VARS = 60_000
#: seconds per variable and row of the LP (HiGHS through scipy, loaded 2-core machine), growing with the
#: model: ``_LP_SECONDS_PER_ITEM * items * (1 + items / _LP_ITEMS_DOUBLING)`` (measured 4e-5 s per item at 60k
#: items, 7e-5 at 160k, 1.3e-4 at 450k)
_LP_SECONDS_PER_ITEM = 4e-5
_LP_ITEMS_DOUBLING = 2e5
#: rows per variable of the model (measured 2-2.7 on the random layered graphs)
_ROWS_PER_VAR = 2.7


def _lp_seconds(items: float) -> float:
    return _LP_SECONDS_PER_ITEM * items * (1.0 + items / _LP_ITEMS_DOUBLING)


def _vars_for(seconds: float) -> int:
    """The most variables whose LP is predicted to take ``seconds``."""
    a, d = _LP_SECONDS_PER_ITEM, _LP_ITEMS_DOUBLING
    items = d / 2.0 * (math.sqrt(1.0 + 4.0 * max(seconds, 0.0) / (a * d)) - 1.0)
    return int(items / (1.0 + _ROWS_PER_VAR))


@dataclass
class FixedOrderBound:
    """``value`` bounds every plan whose first computations follow the
    graph's order (``scope``); ``extra`` is the recomputation no such plan
    avoids; ``method``: ``"lp"``, ``"milp"`` or ``"none"``."""

    value: float
    extra: float
    cuts: list
    method: str
    scope: str = "staged"
    stats: dict = field(default_factory=dict, repr=False)


def _live_items(graph):
    """Per node ``t``: ``last[v]`` (the last reader of ``v``, or ``v``) and
    ``first_after``: for the reference order, the live set at ``t`` is
    ``{v < t: last[v] > t}`` plus ``t``'s inputs."""
    n = graph.n
    last = np.arange(n, dtype=np.int64)
    for v in range(n):
        s = graph.succs(v)
        if s.size:
            last[v] = int(s.max())
    return last


def fixed_order_cuts(problem, ref=None) -> np.ndarray:
    """The nodes whose reference-order memory (every value kept from its
    computation to its last reader) exceeds the budget, by excess (largest
    first).

    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> fixed_order_cuts(Problem.single(chain(4, bytes=1), 2)).tolist()
    []
    """
    from ...bounds.cut import _reference_memory

    g = problem.graph
    size = np.ascontiguousarray(g.bytes, dtype=np.int64)
    if ref is None:
        ref = _reference_memory(size, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx)
    B = float(problem.budgets[0])
    ts = np.flatnonzero(ref > B)
    return ts[np.argsort(-ref[ts], kind="stable")]


def _cut_sets(graph, t, last, depth):
    """``(items, inputs, V, chained)`` of cut ``t`` as sorted int arrays:
    ``V`` = items, inputs and ``depth`` levels of inputs (all ``< t``);
    ``chained``: the members of ``V`` whose inputs are all in ``V``."""
    preds = np.unique(graph.preds(t))
    before = np.arange(t)
    items = before[last[:t] > t]
    items = np.setdiff1d(items, preds)
    V = set(items.tolist()) | set(preds.tolist())
    frontier = list(V)
    for _ in range(depth):
        nxt = []
        for v in frontier:
            for u in graph.preds(v).tolist():
                if u not in V:
                    V.add(u)
                    nxt.append(u)
        frontier = nxt
    Va = np.array(sorted(V), dtype=np.int64)
    inV = set(Va.tolist())
    chained = np.array([v for v in Va.tolist() if all(u in inV for u in graph.preds(v).tolist())], dtype=np.int64)
    return items, preds, Va, chained


def _model(problem, cuts, depth, limits):
    """The LP of the module docstring: ``(c, A, b, lb, ub, cost scale)`` with
    rows ``A y <= b``; ``None`` when the deadline passes while building."""

    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.asarray(g.bytes, dtype=np.int64)
    B = int(problem.budgets[0])
    last = _live_items(g)
    k = len(cuts)
    sets = []
    for t in cuts:
        if limits.expired():
            return None
        sets.append(_cut_sets(g, int(t), last, depth))
    xi, zi = [], []
    nv = 0
    for (_, _, V, _) in sets:
        loc = np.full(g.n, -1, dtype=np.int64)
        loc[V] = np.arange(V.size) + nv
        nv += V.size
        xi.append(loc)
    for (_, _, V, _) in sets:
        loc = np.full(g.n, -1, dtype=np.int64)
        loc[V] = np.arange(V.size) + nv
        nv += V.size
        zi.append(loc)
    cscale = float(cost.max()) if cost.size and cost.max() > 0 else 1.0
    c = np.zeros(nv)
    lb = np.zeros(nv)
    ub = np.ones(nv)
    from ...bounds.multicut import SparseRows

    rows = SparseRows()
    row = rows.add

    for i, t in enumerate(cuts):
        if limits.expired():
            return None
        items, preds, V, chained = sets[i]
        c[zi[i][V]] = cost[V] / cscale
        lb[xi[i][preds]] = 1.0
        free = np.setdiff1d(V, preds)
        room = B - int(size[t]) - int(size[preds].sum())
        if free.size:  # 1. memory, scaled by the budget, with a relative slack against round-off (a relaxation)
            row(xi[i][free].tolist(), (size[free] / float(B)).tolist(), room / float(B) + 1e-9)
        nxt_t = int(cuts[i + 1]) if i + 1 < k else g.n
        for v in items.tolist():  # 2. need: a reader first computed within interval i
            s = g.succs(v)
            if np.any((s > t) & (s < nxt_t)):
                row([int(xi[i][v]), int(zi[i][v])], [-1.0, -1.0], -1.0)
        if i > 0:  # 3. persistence
            prev = xi[i - 1]
            for v in V.tolist():
                if prev[v] >= 0:
                    row([int(xi[i][v]), int(prev[v]), int(zi[i - 1][v])], [1.0, -1.0, -1.0], 0.0)
        for v in chained.tolist():  # 4. chains
            for u in np.unique(g.preds(v)).tolist():
                row([int(zi[i][v]), int(xi[i][u]), int(zi[i][u])], [1.0, -1.0, -1.0], 0.0)
    A, b = rows.matrix(nv)
    return c, A, b, lb, ub, cscale


def fixed_order_lower_bound(problem, *, depth: int = 1, milp: bool = True, max_cuts: int | None = None,
                            node_limit: int | None = None, limits: Limits | None = None) -> FixedOrderBound:
    """The fixed-order class bound (module docstring) of a single-device
    problem.

    Parameters
    ----------
    depth : int
        Levels of inputs below each cut's items with their own variables
        (deeper: stronger chains, a larger model).
    milp : bool
        After the certified LP, solve the 0/1 model with SCIP (models of at
        most ``60_000`` variables) with the time left; the larger is kept.
    max_cuts : int, optional
        At most this many cuts (the largest excess first).
    node_limit : int, optional
        SCIP's node limit (tests).
    limits : Limits, optional
        Deadline; a stopped solve gives the trivial bound, never an invalid one.
    """
    from ...bounds.multicut import _certified_lp

    limits = limits or Limits()
    t0 = now()
    base = float(problem.base_cost)
    if not problem.is_single_device:
        raise ValueError("the fixed-order bound covers single-device problems only")
    by_excess = fixed_order_cuts(problem)
    keep = by_excess.size if max_cuts is None else min(by_excess.size, int(max_cuts))
    stats: dict = {"binding": int(by_excess.size)}
    if keep == 0:
        return FixedOrderBound(base, 0.0, [], "none", stats={**stats, "note": "no cut exceeds the budget"})
    budget_vars = MAX_VARS
    if math.isfinite(limits.left()):
        budget_vars = min(budget_vars, _vars_for(0.4 * limits.left()))
    g = problem.graph
    last = _live_items(g)
    chosen, nvars = [], 0
    for t in by_excess[:keep].tolist():  # the largest excess first, while the model fits the time
        if limits.expired():
            break
        grow = 2 * _cut_sets(g, int(t), last, depth)[2].size
        if chosen and nvars + grow > budget_vars:
            continue
        chosen.append(int(t))
        nvars += grow
    cuts = sorted(chosen)
    built = _model(problem, cuts, depth, limits) if cuts else None
    if built is None:
        return FixedOrderBound(base, 0.0, cuts, "none", stats={**stats, "skipped": "time limit while building"})
    c, A, b, lb, ub, cscale = built
    stats.update(cuts=len(cuts), vars=int(c.size), rows=int(A.shape[0]), build_s=now() - t0)
    val, method = None, "none"
    if limits.left() >= 0.5 * _lp_seconds(c.size + A.shape[0]):
        val, method = _certified_lp(c, A, b, lb, ub, limits), "lp"
    stats["lp_s"] = now() - t0
    stats["lp_extra"] = None if val is None else val * cscale
    if milp and c.size <= MAX_MILP_VARS and not limits.expired():
        exact = _milp(c, A, b, lb, ub, limits, node_limit)
        if exact is not None and (val is None or exact > val):
            val, method = exact, "milp"
    stats["seconds"] = now() - t0
    if val is None:
        return FixedOrderBound(base, 0.0, cuts, "none", stats=stats)
    extra = val * cscale
    return FixedOrderBound(base + extra, extra, cuts, method, stats=stats)


def _milp(c, A, b, lb, ub, limits, node_limit) -> float | None:
    """SCIP's trusted dual bound of the 0/1 model (model units), or ``None``."""
    from pyscipopt import quicksum

    from ...scip import ObjectiveScale, cap_nodes, run, scip_model

    sc = ObjectiveScale.of(c)
    A = A.tocsr()
    with scip_model("fixed_order") as m:
        y = [m.addVar(vtype="B", lb=float(lb[j]), ub=float(ub[j]), obj=sc.coef(c[j])) for j in range(c.size)]
        for r in range(A.shape[0]):
            if r % 500 == 0 and limits.expired():
                return None
            s, e = A.indptr[r], A.indptr[r + 1]
            m.addCons(quicksum(float(a) * y[j] for j, a in zip(A.indices[s:e].tolist(), A.data[s:e].tolist(),
                                                                 strict=True)) <= float(b[r]))
        res = run(m, limits=cap_nodes(limits, node_limit) if node_limit else limits)
        res.reraise()
        if res.status == "infeasible" or res.dual is None or abs(res.dual) >= 1e19:
            return None
        return max(0.0, sc.bound(res.dual))


class FixedOrderBoundSource(Bound):
    """The fixed-order class bound as a registered bound (``fixed_order_bound``,
    scope ``"staged"``: it bounds every plan whose first computations follow
    the graph's order, hence the staged plans; never a bound over every
    plan).  Serial time, one device, up to 1500 nodes.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = FixedOrderBoundSource().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value
    ('staged', 6.0)
    """

    name = "fixed_order_bound"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "serial", "honours_limits"})
    rank = 7.0
    bound_scope = "staged"
    #: above this many nodes it is not admitted (8.6 s of a 20 s solve on 2k-node ResNet stages: families table)
    max_nodes = 1_500

    def applicable(self, problem) -> tuple[bool, str]:
        from ...bounds.cut import serial_single_device

        ok, why = serial_single_device(problem)
        if not ok:
            return ok, why
        if problem.graph.n > self.max_nodes:
            return False, f"above {self.max_nodes} nodes"
        return True, ""

    def predict_seconds(self, problem) -> float:
        """Seconds for a useful model (the scheduler gives a bound twice its
        prediction): the LP of a few dozen cuts takes 2 s at 100 nodes and
        10-20 s at 1000 on the loaded 2-core machine; 0.1 s without a
        binding cut."""
        if fixed_order_cuts(problem).size == 0:
            return 0.1
        return min(12.0, 1.0 + 0.011 * problem.graph.n)

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        fb = fixed_order_lower_bound(problem, limits=limits)
        return BoundResult(fb.value, self.bound_scope, {"extra": fb.extra, "cuts": len(fb.cuts), "method": fb.method,
                                                        **fb.stats})
