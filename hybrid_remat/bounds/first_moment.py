"""The *first heavy moment bound*: every plan has a first moment at which
it computes a node of a chosen set ``H`` (the heavy nodes: on a training
chain, the weight gradients), and at that moment nothing of ``H`` has
been computed yet.  Valid for every single-device plan in any order, with
any recomputation; serial time.

The cut bound asks, for one node ``v``, what must be resident when ``v``
is first computed, and lets the plan choose which other nodes came before
(the set ``S``).  On a training chain that choice is too generous: at the
first computation of one weight gradient the plan may have finished the
other layers' weight gradients already, so their inputs look free; but
then *their* first computations were earlier moments with the memory
load.  Taking the earliest computation of any node of ``H`` removes that
freedom: ``S`` holds no node of ``H``.

Proof
-----
Fix a valid single-device plan (a sequence of computes and frees, memory
counted after each allocation, every node computed at least once) and a
non-empty set ``H`` of nodes.  Let ``T`` be the first compute step of any
node of ``H``, ``v`` the node it computes, ``S`` the nodes with a compute
step before ``T`` and ``R`` the nodes resident right after ``v``'s
allocation.  Then:

a. ``S`` is closed under predecessors (a compute reads its inputs, which
   were computed before), ``S`` holds no node of ``H`` (``T`` is the
   first), ``preds(v) <= S`` and ``v`` is not in ``S``;
b. ``preds(v) + {v} <= R <= S + {v}`` and ``bytes(R) <= budget``;
c. *need*: a node ``u`` of ``S`` with a successor ``w`` outside ``S +
   {v}`` is resident at ``T`` or computed again after ``T``: ``w``'s first
   computation comes after ``T`` and reads ``u``;
d. *chains*: a node ``u`` of ``S`` computed after ``T`` reads each input
   ``p`` (in ``S`` by a.) at that later step, so ``p`` is resident at
   ``T`` or computed after ``T`` too (if it was freed in between it was
   computed again);
e. every node ``u`` of ``S`` computed after ``T`` has been computed twice:
   distinct nodes are distinct steps, so ``sum of cost(u)`` over them is
   at most the plan's recomputation cost.

So with 0/1 variables ``z[v]`` (``v`` in ``H`` is the first), ``s[u]``
(in ``S``), ``r[u]`` (resident at ``T``) and ``d[u]`` (computed after
``T``), the plan gives a point of

1. ``sum z = 1``; ``s[u] <= s[p]`` for ``p`` in ``preds(u)``; ``s = 0``
   on ``H``; ``s[p] >= z[v]`` and ``r[p] >= z[v]`` for ``p`` in
   ``preds(v)``;
2. ``r[u] <= s[u]``, ``d[u] <= s[u]``;
3. ``r[u] + d[u] >= s[u] - s[w]`` for every edge ``u -> w`` with ``w`` not
   in ``H``, ``r[u] + d[u] >= s[u] - z[w]`` for ``w`` in ``H`` (c.);
4. ``d[u] <= r[p] + d[p]`` for ``p`` in ``preds(u)`` (d.);
5. ``sum bytes(u) r[u] + sum bytes(v) z[v] <= budget`` (b.);

whose objective ``sum cost(u) d[u]`` is at most its recomputation cost
(e.).  ``base cost`` plus SCIP's dual bound of the minimum (valid at any
node or time limit; its feasibility tolerance only enlarges the region)
bounds every plan; an infeasible model means no plan fits.  Every ``H``
gives a valid bound: :func:`first_moment_lower_bound` tries the nodes whose
allocation (bytes plus inputs' bytes) is the largest, then those within
90 % and 75 % of it, and keeps the best.  Costs are scaled
(``ObjectiveScale``), memory rows divided by the budget.

Examples
--------
>>> from hybrid_remat.graph import Graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.bounds.state_search import state_search_bound
>>> # a 3-layer MLP in miniature (the one of placed_cuts.py): 4-byte weight gradients 9, 13
>>> e = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (4, 7), (6, 7), (7, 8), (3, 9), (7, 9), (7, 10),
...      (2, 11), (8, 11), (11, 12), (1, 13), (11, 13), (11, 14), (0, 15), (12, 15), (15, 16)]
>>> nbytes = [1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 0, 1, 1, 4, 0, 1, 0]
>>> cost = [3, 1, 3, 1, 3, 1, 1, 2, 3, 3, 0.5, 2, 3, 3, 0.5, 2, 0.5]
>>> p = Problem.single(Graph.from_arrays(nbytes, e, {"cost": [float(c) for c in cost]}), 7)
>>> first_moment_lower_bound(p).value <= state_search_bound(p).value
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits, now

__all__ = ["FirstMomentBound", "FirstMomentResult", "first_moment_lower_bound", "first_moment_extra",
           "heavy_sets", "MAX_NODES"]

#: graphs above this size are left to the other bounds (the model is built in Python)
MAX_NODES = 1_500
#: SCIP node limit per model
_NODE_LIMIT = 5_000
#: shares of the largest allocation that define the heavy sets tried, in order
HEAVY_SHARES = (1.0, 0.9, 0.75)
#: seconds per edge to build and start one model (conservative, shared 2-core machine)
_SECONDS_PER_EDGE = 2e-4


@dataclass
class FirstMomentResult:
    """``value = base + extra`` bounds every plan's serial time."""

    value: float
    extra: float
    heavy: list
    stats: dict = field(default_factory=dict, repr=False)


def heavy_sets(graph) -> list[list[int]]:
    """The heavy sets tried (distinct, in :data:`HEAVY_SHARES` order): the
    nodes whose allocation (own bytes plus inputs' bytes) is at least a
    share of the largest."""
    alloc = np.array([int(graph.bytes[v]) + int(graph.bytes[graph.preds(v)].sum()) for v in range(graph.n)],
                     dtype=np.float64)
    top = float(alloc.max()) if graph.n else 0.0
    out: list[list[int]] = []
    for share in HEAVY_SHARES:
        h = np.flatnonzero(alloc >= share * top).tolist()
        if h and h not in out:
            out.append(h)
    return out


def first_moment_extra(problem, heavy, limits: Limits | None = None) -> float | None:
    """SCIP's dual bound on the recomputation cost (real units) for the
    heavy set ``heavy`` (rows 1-5 of the module docstring), ``inf`` when
    the model is infeasible, ``None`` when stopped before a bound."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model

    limits = limits or Limits()
    g = problem.graph
    n = g.n
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = [int(b) for b in g.bytes]
    B = float(problem.budgets[0])
    H = sorted({int(v) for v in heavy})
    if not H:
        raise ValueError("the heavy set is empty")
    in_h = np.zeros(n, dtype=bool)
    in_h[H] = True
    sc = ObjectiveScale.of(cost)
    with scip_model("first_moment") as m:
        z = {v: m.addVar(f"z_{v}", vtype="B") for v in H}
        s, r, d = {}, {}, {}
        for u in range(n):
            if in_h[u]:
                continue
            s[u] = m.addVar(f"s_{u}", vtype="B")
            r[u] = m.addVar(f"r_{u}", vtype="B")
            d[u] = m.addVar(f"d_{u}", vtype="B", obj=sc.coef(float(cost[u])))
        m.addCons(quicksum(z.values()) == 1)
        for v in H:  # 1. the first heavy node: its inputs came before and are resident
            for p in g.preds(v).tolist():
                if in_h[p]:
                    m.addCons(z[v] == 0)
                else:
                    m.addCons(s[p] >= z[v])
                    m.addCons(r[p] >= z[v])
        for u in range(n):
            if limits.expired():
                return None
            if in_h[u]:
                continue
            m.addCons(r[u] <= s[u])  # 2.
            m.addCons(d[u] <= s[u])
            for p in g.preds(u).tolist():
                if in_h[p]:
                    m.addCons(s[u] == 0)
                else:
                    m.addCons(s[u] <= s[p])  # 1. closed under predecessors
                    m.addCons(d[u] <= r[p] + d[p])  # 4. chains
            for w in g.succs(u).tolist():  # 3. need
                m.addCons(r[u] + d[u] >= s[u] - (z[w] if in_h[w] else s[w]))
        m.addCons(quicksum((size[u] / B) * r[u] for u in r if size[u])  # 5. memory at the first heavy moment
                  + quicksum((size[v] / B) * z[v] for v in H if size[v]) <= 1.0)
        res = run(m, limits=cap_nodes(limits, limits.nodes or _NODE_LIMIT))
        res.reraise()
        if res.status == "infeasible":
            return math.inf
        if res.dual is None or abs(res.dual) >= 1e19:
            return None
        return max(0.0, sc.bound(res.dual))


def first_moment_lower_bound(problem, *, heavy=None, limits: Limits | None = None) -> FirstMomentResult:
    """The first heavy moment bound (module docstring): the best over
    ``heavy`` (one heavy set) or over :func:`heavy_sets`, within ``limits``.

    Raises
    ------
    ValueError
        On a multi-device problem.
    """
    if not problem.is_single_device:
        raise ValueError("the first heavy moment bound covers single-device problems only")
    limits = limits or Limits()
    t0 = now()
    base = float(problem.base_cost)
    g = problem.graph
    if g.n > MAX_NODES:
        return FirstMomentResult(base, 0.0, [], {"skipped": f"more than {MAX_NODES} nodes"})
    sets = [sorted(int(v) for v in heavy)] if heavy is not None else heavy_sets(g)
    best, best_h, tried, finished = 0.0, [], 0, 0
    for h in sets:
        if limits.expired() or (tried and math.isfinite(limits.left())
                                and limits.left() < _SECONDS_PER_EDGE * (g.m + g.n)):
            break
        val = first_moment_extra(problem, h, limits)
        tried += 1
        if val is None:
            continue
        finished += 1
        if val > best:
            best, best_h = val, h
        if val == math.inf:
            break
    stats = {"seconds": now() - t0, "heavy_sets": tried, "heavy": len(best_h), "finished": finished}
    return FirstMomentResult(base + best, best, best_h, stats)


class FirstMomentBound(Bound):
    """The first heavy moment bound as a registered bound
    (``first_moment_bound``, scope: every plan; serial time, one device, up
    to :data:`MAX_NODES` nodes).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = FirstMomentBound().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value >= 6.0
    ('all plans', True)
    """

    name = "first_moment_bound"
    version = "1"
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 6.6
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        from .cut import serial_single_device

        return serial_single_device(problem, max_nodes=MAX_NODES)

    def predict_seconds(self, problem) -> float:
        """Seconds worth giving it (twice that is its first share): one model on ``mlp_chain_b256``
        (150 nodes) takes 1-8 s on the shared 2-core machine, growing with the edges; at most 5 s."""
        return min(5.0, 0.5 + 0.012 * (problem.graph.n + problem.graph.m))

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        r = first_moment_lower_bound(problem, limits=limits)
        if not r.stats.get("finished") and "skipped" not in r.stats:  # stopped before any bound: a later round
            return BoundResult(-math.inf, ALL_PLANS, {"reason": "stopped before a bound", **r.stats})
        return BoundResult(r.value, ALL_PLANS, {"extra": r.extra, **r.stats})
