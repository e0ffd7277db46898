"""The *placed chain-of-cuts bound*: the chain-of-cuts model with every
other node's first computation placed in one of the chain's intervals (a
0/1 choice), so that the memory of nodes off the chain (a 4 MB weight
gradient, a sink) counts too.  Valid for every single-device plan in any
order; serial time.

The chain-of-cuts bound (:mod:`hybrid_remat.bounds.multicut`) takes
a chain ``t_1, ..., t_k`` (each an ancestor of the next) and, for ``v`` in
``A_i`` (the ancestors of ``t_i``), ``x[v, i]`` (resident at cut ``i``,
the first computation of ``t_i``) and ``z[v, i]`` (computed in interval
``i``, between cut ``i`` and cut ``i + 1``; after cut ``k`` for ``i =
k``).  Its constraints (1. memory at each cut, 2. need, 3. persistence, 4.
chains) are rebuilt here as written in that module's docstring, 3 and 4
split at the sub-moment below.  A sink off the chain
is never an ancestor of a cut, so there its allocation is invisible: a plan
could compute it at any time, and at every single moment it looks free.

Added here.  Every interval ``i`` gets a *sub-moment*: the first
computation of the earliest *heavy* node off the chain (one whose
allocation, its bytes and its inputs', is at least half the largest such
allocation) lying in that interval, if any (else any moment of it).  The
interval's computations are split at it: ``z1[v, i]`` before, ``z2[v, i]``
after (each a distinct recomputation; ``t_i`` gets both too: its
computations after cut ``i`` are recomputations), and ``xs[v, i]``: ``v``
(in ``A_i`` or ``t_i``) resident at the sub-moment.  For a node ``s`` off
the chain, ``lo(s)``: one past the last cut ``t_j`` that is an ancestor of
``s`` (``s`` is skipped when none: it may come before cut 1); ``hi(s)``:
the first ``j`` with ``s`` an ancestor of ``t_j`` (``k`` if none).

3'. persistence through the sub-moment: ``xs[v, i] <= x[v, i] + z1[v,
    i]`` and ``x[v, i + 1] <= xs[v, i] + z2[v, i]``; chains: a computation
    before the sub-moment reads inputs resident at cut ``i`` or computed
    before it (``z1[v] <= x[u] + z1[u]``), one after it inputs resident at
    the sub-moment or computed after it (``z2[v] <= xs[u] + z2[u]``).
5. placement: ``y[s, i] = 1`` iff ``s``'s first computation lies in
   interval ``i``, ``sum over lo(s) <= i <= hi(s)`` of ``y[s, i]`` is 1
   (first computations follow the DAG: exactly one such ``i``).
6. the sub-moment's node: ``u[s, i] <= y[s, i]`` for heavy ``s``, ``sum_s
   u[s, i] <= 1`` and ``sum_s u[s, i] >= y[s', i]`` for every heavy ``s'``
   (the plan's point: ``u = 1`` for the earliest heavy node of the
   interval); the earliest has no heavy ancestor in the interval (an
   ancestor is first computed before it): ``h u[s, i] + sum of y[a, i]``
   over its ``h`` heavy ancestors ``a`` off the chain is at most ``h``.
7. memory at the sub-moment: ``sum of bytes(v) xs[v, i]`` over ``A_i``
   and ``t_i`` minus the inputs of ``s``, plus ``bytes(s) + bytes(inputs of
   s)``, is at most the budget when ``u[s, i] = 1`` (relaxed by ``M (1 -
   u[s, i])``, ``M`` the largest value the left side takes); its inputs
   are resident then: ``xs[p, i] >= u[s, i]``.
8. inputs: a heavy ``s`` in interval ``i`` comes at or after the
   sub-moment, so each input ``p`` (in ``A_i`` or ``t_i``) is resident at
   the sub-moment or computed after it: ``xs[p, i] + z2[p, i] >= y[s,
   i]``; for another ``s``, ``x[p, i] + z1[p, i] + z2[p, i] >= y[s, i]``.

Each plan gives a 0/1 point of rows 1-8 whose objective (the ``z1`` and
``z2`` costs) is at most its recomputation cost (the chain-of-cuts
argument: they count distinct recomputations), so ``base cost`` plus
SCIP's dual bound of the minimum (valid at any node or time limit; its
feasibility tolerance only enlarges the region) bounds every plan.  Costs
are scaled (``ObjectiveScale``), memory rows divided by the budget.

On MLP training graphs in miniature (17-23 nodes, 4-byte weight gradients;
``benchmarks/results/bounds_mini_mlp.md``) it proves 86-100 % of the
all-plans optimum's recomputation cost where the cut and chain-of-cuts
bounds prove 0-22 %; on ``mlp_chain_b256`` (150 nodes) it stays at the cut
bound within a minute.

Examples
--------
>>> from hybrid_remat.graph import Graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.bounds.state_search import state_search_bound
>>> from hybrid_remat.bounds.multicut import multicut_lower_bound
>>> # a 3-layer MLP in miniature: forward 0-5, loss 6, per layer a gradient, its product and the
>>> # 4-byte weight gradient (sinks 9, 13) and a 0-byte bias gradient (sinks 10, 14, 16)
>>> e = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (4, 7), (6, 7), (7, 8), (3, 9), (7, 9), (7, 10),
...      (2, 11), (8, 11), (11, 12), (1, 13), (11, 13), (11, 14), (0, 15), (12, 15), (15, 16)]
>>> nbytes = [1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 0, 1, 1, 4, 0, 1, 0]
>>> cost = [3, 1, 3, 1, 3, 1, 1, 2, 3, 3, 0.5, 2, 3, 3, 0.5, 2, 0.5]
>>> p = Problem.single(Graph.from_arrays(nbytes, e, {"cost": [float(c) for c in cost]}), 7)
>>> multicut_lower_bound(p).value, round(placed_cuts_lower_bound(p).value, 4), state_search_bound(p).value
(32.5, 36.5, 36.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits, now

__all__ = ["PlacedCutsBound", "PlacedCutsResult", "placed_cuts_lower_bound", "MAX_NODES"]

#: graphs above this size are left to the other bounds (the model is built in Python)
MAX_NODES = 2_000
#: variables at most (the chain is shortened until the model fits)
_MAX_VARS = 60_000
#: SCIP node limit
_NODE_LIMIT = 2_000
#: a node off the chain takes part in sub-moments when its allocation is at least this share of the largest
HEAVY_SHARE = 0.5
#: seconds per variable to build and start the MILP (measured ~1e-4 on the shared 2-core machine; conservative)
_SECONDS_PER_VAR = 3e-4


@dataclass
class PlacedCutsResult:
    """``value = base + extra`` bounds every plan's serial time."""

    value: float
    extra: float
    chain: list
    stats: dict = field(default_factory=dict, repr=False)


def _size_of(g, chain) -> int:
    from .cut import reach

    a = sum(int(reach(g, t, up=True).sum()) for t in chain)
    return 3 * a + g.n * 2


def _extra(problem, chain, limits) -> float | None:
    """SCIP's dual bound on the recomputation cost (real units), ``inf`` when
    the model is infeasible, ``None`` when stopped before a bound."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model
    from .cut import reach

    g = problem.graph
    n = g.n
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = [int(b) for b in g.bytes]
    B = float(problem.budgets[0])
    k = len(chain)
    anc = [reach(g, t, up=True) for t in chain]
    desc = [reach(g, t, up=False) for t in chain]
    A = [np.flatnonzero(a).tolist() for a in anc]
    on_chain = set(chain)
    first = np.full(n, k, dtype=np.int64)  # index of the first cut a node's first computation precedes
    for j in range(k - 1, -1, -1):
        first[anc[j]] = j
        first[chain[j]] = j
    sc = ObjectiveScale.of(cost)
    with scip_model("placed_cuts") as m:
        x, z1, z2, xs = ([dict() for _ in range(k)] for _ in range(4))
        for i, t in enumerate(chain):
            preds = set(g.preds(t).tolist())
            for v in A[i]:
                x[i][v] = m.addVar(f"x_{i}_{v}", vtype="B", lb=1.0 if v in preds else 0.0, ub=1.0)
            for v in A[i] + [t]:  # t_i too: its computations after cut i are recomputations
                z1[i][v] = m.addVar(f"z1_{i}_{v}", vtype="B", obj=sc.coef(float(cost[v])))
                z2[i][v] = m.addVar(f"z2_{i}_{v}", vtype="B", obj=sc.coef(float(cost[v])))
                xs[i][v] = m.addVar(f"xs_{i}_{v}", vtype="B")
        for i, t in enumerate(chain):
            if limits.expired():
                return None
            preds = set(g.preds(t).tolist())
            need_t = size[t] + sum(size[u] for u in preds)
            free = [v for v in A[i] if v not in preds]
            if free:  # 1. memory at cut i
                m.addCons(quicksum((size[v] / B) * x[i][v] for v in free) <= (B - need_t) / B)
            for v in free:  # 2. need: read by a descendant of t_i
                readers = [w for w in g.succs(v).tolist() if desc[i][w]]
                if not readers:
                    continue
                end = int(min(first[w] for w in readers))
                m.addCons(x[i][v] + quicksum(z1[j][v] + z2[j][v] for j in range(i, end)) >= 1)
            if i > 0:  # 3. persistence: cut i-1 -> sub-moment i-1 -> cut i
                for v in A[i - 1] + [chain[i - 1]]:
                    m.addCons(x[i][v] <= xs[i - 1][v] + z2[i - 1][v])
            for v in A[i]:
                m.addCons(xs[i][v] <= x[i][v] + z1[i][v])
            for v in A[i] + [t]:  # 4. chains, before and after the sub-moment
                for u in g.preds(v).tolist():
                    if v != t:
                        m.addCons(z1[i][v] <= x[i][u] + z1[i][u])
                    m.addCons(z2[i][v] <= xs[i][u] + z2[i][u])
        subs = [[] for _ in range(k)]
        off = [s for s in range(n) if s not in on_chain]
        alloc_of = {s: size[s] + int(sum(size[u] for u in g.preds(s).tolist())) for s in off}
        heavy = HEAVY_SHARE * max(alloc_of.values(), default=0)  # the nodes that take part in sub-moments
        for s in range(n):
            if s in on_chain:
                continue
            if limits.expired():
                return None
            lo = max([i + 1 for i in range(k) if desc[i][s]], default=0)
            hi = int(first[s])  # s's first computation precedes cut hi (k: none)
            span = list(range(max(lo, 1), hi + 1))
            if lo > 0 and span:
                pass
            elif lo == 0:
                continue  # it may come before cut 1: nothing said
            if not span:
                continue
            ps = g.preds(s).tolist()
            alloc = size[s] + sum(size[u] for u in ps)
            y = {i: m.addVar(f"y_{s}_{i}", vtype="B") for i in span}
            m.addCons(quicksum(y.values()) == 1)  # 5. placement
            for i in span:
                ii = i - 1  # interval: after cut ii (0-based), before cut ii + 1
                here = A[ii] + [chain[ii]]
                rest = [v for v in here if v not in ps]
                big = sum(size[v] for v in rest) + alloc - B if alloc >= heavy else 0
                for u in ps:  # 8. inputs resident at s (at or after the sub-moment when s takes part)
                    if u in xs[ii]:
                        if big > 0:
                            m.addCons(xs[ii][u] + z2[ii][u] >= y[i])
                        elif u in x[ii]:
                            m.addCons(x[ii][u] + z1[ii][u] + z2[ii][u] >= y[i])
                if big <= 0:
                    continue
                u_s = m.addVar(f"u_{s}_{i}", vtype="B")  # s is the interval's sub-moment
                m.addCons(u_s <= y[i])
                subs[ii].append((s, u_s, y[i]))
                m.addCons(quicksum((size[v] / B) * xs[ii][v] for v in rest)  # 7. memory at the sub-moment
                          <= (B - alloc) / B + (big / B) * (1 - u_s))
                for u in ps:
                    if u in xs[ii]:
                        m.addCons(xs[ii][u] >= u_s)
        above = {}
        for ii in range(k):  # 6. one sub-moment per interval, taken when any such node lies there
            if not subs[ii]:
                continue
            if limits.expired():
                return None
            tot = quicksum(u for _, u, _ in subs[ii])
            m.addCons(tot <= 1)
            for _, _, yv in subs[ii]:
                m.addCons(tot >= yv)
            for s, u_s, _ in subs[ii]:  # the earliest: no heavy ancestor of s lies in the interval
                if s not in above:
                    above[s] = reach(g, s, up=True)
                ys = [yv for a, _, yv in subs[ii] if above[s][a]]
                if ys:
                    m.addCons(len(ys) * u_s + quicksum(ys) <= len(ys))
        res = run(m, limits=cap_nodes(limits, limits.nodes or _NODE_LIMIT))
        res.reraise()
        if res.status == "infeasible":
            return math.inf
        if res.dual is None or abs(res.dual) >= 1e19:
            return None
        return max(0.0, sc.bound(res.dual))


def placed_cuts_lower_bound(problem, *, chain=None, max_cuts: int = 40, limits: Limits | None = None
                            ) -> PlacedCutsResult:
    """The placed chain-of-cuts bound (module docstring) on ``chain``
    (default: the chain-of-cuts bound's own choice, shortened until the
    model has at most 60k variables and fits the time left).

    Raises
    ------
    ValueError
        On a multi-device problem.
    """
    from .cut import _STEPS_PER_SECOND
    from .multicut import _screen, cut_chain

    if not problem.is_single_device:
        raise ValueError("the placed chain-of-cuts bound covers single-device problems only")
    limits = limits or Limits()
    t0 = now()
    base = float(problem.base_cost)
    g = problem.graph
    if g.n > MAX_NODES:
        return PlacedCutsResult(base, 0.0, [], {"skipped": f"more than {MAX_NODES} nodes"})
    if chain is None:
        screen = limits.share(0.2 * limits.left() if math.isfinite(limits.left()) else None)
        weight = _screen(problem, screen.work_for(_STEPS_PER_SECOND))
        chain = cut_chain(g, weight, max_cuts) or cut_chain(g, np.ones(g.n), max_cuts)  # no cut binds: the longest
        cap = _MAX_VARS
        if math.isfinite(limits.left()):
            cap = min(cap, int(0.4 * limits.left() / _SECONDS_PER_VAR))
        while chain and _size_of(g, chain) > cap:
            del chain[int(np.argmin(weight[chain]))]
    chain = [int(t) for t in chain]
    if not chain or limits.expired():
        return PlacedCutsResult(base, 0.0, chain, {"skipped": "no chain fits"})
    val = _extra(problem, chain, limits)
    stats = {"seconds": now() - t0, "cuts": len(chain)}
    if val is None:
        return PlacedCutsResult(base, 0.0, chain, stats)
    return PlacedCutsResult(base + val, val, chain, stats)


class PlacedCutsBound(Bound):
    """The placed chain-of-cuts bound as a registered bound
    (``placed_cuts_bound``, scope: every plan; serial time, one device, up
    to :data:`MAX_NODES` nodes).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = PlacedCutsBound().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value >= 6.0
    ('all plans', True)
    """

    name = "placed_cuts_bound"
    version = "1"
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 6.5
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        from .cut import serial_single_device

        return serial_single_device(problem, max_nodes=MAX_NODES)

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        r = placed_cuts_lower_bound(problem, limits=limits)
        return BoundResult(r.value, ALL_PLANS, {"extra": r.extra, "cuts": len(r.chain), **r.stats})
