"""Plans without recomputation in any order, and the bound when there is none.

Many graphs fit the budget with no recomputation at all once the order is
chosen for memory: on Moccasin's random layered graphs RLG1 and RLG2 at 90
and 80 % and RLG3 at 90 % of the reference order's peak an order exists
whose peak fits, so the optimum over every plan is one computation per node
(TDI 0), although every plan in the reference order recomputes.  This module
searches the orders for one (:func:`search_orders`), gives it as a plan
(:class:`NoRecomputeOrder`, a heuristic) and, when the search proves that
no plan avoids recomputing some node outside a cheap set ``Z``, bounds every
plan (:class:`RecomputeBound`, scope: every plan).

The search.  States are the *ideals* ``S`` of the graph (sets closed under
inputs): the nodes whose first computation has happened.  ``live_Z(S)`` is
the bytes of the nodes of ``S`` outside ``Z`` with a reader outside ``S``.
From ``S`` a node ``t`` outside ``S`` whose inputs are in ``S`` can be added
when ``live_Z(S) + bytes(t) + bytes(t's inputs in Z) <= B``.  A depth-first
search (lowest ``live_Z`` first) with a visited set either reaches the set
of all nodes (an order), or exhausts the reachable ideals (a proof), or
stops at its limits (nothing proved).

Greedy moves lose nothing.  When a node ``t`` that can be added to ``S``
keeps no more than it frees (``live_Z(S + t) <= live_Z(S)``), the search
adds it at once without branching.  If a path of the search leads from
``S`` to the full set, ``t`` is added on it at some later ideal ``S_j``;
moving ``t`` to the front replaces each ideal ``S_i`` before that point by
``S_i + t``.  ``t``'s change of ``live_Z`` is ``keep(t)`` minus the bytes of
its inputs (outside ``Z``) whose readers are all in the set, which can only
shrink as the set grows, so ``live_Z(S_i + t) <= live_Z(S_i)``: every step
of the moved path fits when the original one did (the step adding ``t``
fits at ``S`` by assumption), and from ``S_j + t`` on the paths agree.  So
the full set is reachable from ``S + t`` whenever it is from ``S``.

When the search stops at its limits, the bound comes from the same search
projected on windows of consecutive nodes (:mod:`.projected_order`, whose
docstring proves it: exhausted there, every plan recomputes a node outside
``Z``), with the same cost levels.

Validity of the bound.  Take any valid single-device plan ``P`` that
computes each node outside ``Z`` exactly once.  Order the nodes by first
computation; the prefix before ``t``'s first computation is an ideal ``S``
(a node's inputs are computed before it).  At that moment, each ``v`` in
``S \\ Z`` with a reader ``w`` outside ``S`` is resident: ``w`` (``t`` or a
later node) needs ``v`` when first computed and ``v``, computed once, was
computed before; so resident from then until ``w``.  ``t`` and its inputs
are resident too (the inputs outside ``Z`` are among the former, ``t`` is
not in ``S``: the three sets are disjoint), and the simulator counts memory
after the allocation against ``B``.  So ``P``'s first computations are a
path of the search from the empty set to the full one.  If the search
exhausts the reachable ideals without the full set, no such ``P`` exists:
every plan computes some ``v`` outside ``Z`` twice, and its serial time is
at least ``sum of costs + min_{v not in Z} c_v``.  ``Z`` always holds the
nodes without readers (their recomputation never helps, and they are never
in ``live_Z``); the bound takes ``Z = {sinks} + {v: c_v <= c}`` for the
largest cost threshold ``c`` at which the search is exhausted (the search
space only grows with ``Z``, so it is a binary search over the costs).
With ``Z`` the sinks alone a reached full set is a plan: every value kept
from its computation to its last reader in that order (the simulator
checks it).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> search_orders(Problem.single(chain(4, bytes=1), 2)).status
'found'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits, now

__all__ = ["OrderSearch", "search_orders", "recompute_lower_bound", "RecomputeBound", "MAX_NODES", "PLAN_STATES"]

#: graphs above this many nodes are not searched (the states are bit sets of n bits; at 2k nodes, U-Nets and
#: random layered graphs, the search spent 6-9 s of a 20 s solve and found nothing: families table, 2026-12-02)
MAX_NODES = 1_500
#: states the search may visit by default
MAX_STATES = 2_000_000
#: states of the heuristic's search (RLG1-RLG3 found within 8k; a longer search rarely finds one and would
#: use its whole slot, which earns it a second one)
PLAN_STATES = 50_000


@dataclass
class OrderSearch:
    """``status``: ``"found"`` (``order`` reaches every node), ``"none"``
    (the reachable ideals are exhausted: no plan computes the nodes outside
    ``Z`` once each) or ``"stopped"`` (limits; nothing proved)."""

    status: str
    order: list | None = None
    states: int = 0
    seconds: float = 0.0


def _single(problem) -> tuple[bool, str]:
    if not problem.is_single_device:
        return False, "single device only"
    if problem.graph.n > MAX_NODES:
        return False, f"above {MAX_NODES} nodes"
    return True, ""


def search_orders(problem, free=None, *, limits: Limits | None = None, max_states: int = MAX_STATES,
                  budget: int | None = None) -> OrderSearch:
    """The search of the module docstring with ``Z = free`` (a boolean mask;
    the sinks are always added) against ``budget`` (default: the problem's).
    Honours ``limits`` (deadline, stop flag) and ``max_states``."""
    limits = limits or Limits()
    if limits.work is not None:
        max_states = min(max_states, int(limits.work))
    t0 = now()
    g = problem.graph
    n = g.n
    B = int(problem.budgets[0]) if budget is None else int(budget)
    size = [int(b) for b in g.bytes]
    succs = [g.succs(v).tolist() for v in range(n)]
    preds = [sorted(set(g.preds(v).tolist())) for v in range(n)]
    inZ = [not succs[v] for v in range(n)]
    if free is not None:
        inZ = [a or bool(b) for a, b in zip(inZ, np.asarray(free, dtype=bool).tolist(), strict=True)]
    pm = [sum(1 << u for u in preds[v]) for v in range(n)]
    sm = [sum(1 << w for w in set(succs[v])) for v in range(n)]
    zin = [sum(size[u] for u in preds[v] if inZ[u]) for v in range(n)]
    keep = [size[v] if not inZ[v] else 0 for v in range(n)]
    full = (1 << n) - 1
    if n == 0:
        return OrderSearch("found", [], 0, now() - t0)
    parent = {0: (None, -1)}

    def add(S, live, ready, t):
        """``(S + t, its live bytes, its ready nodes)``."""
        S2 = S | (1 << t)
        l2 = live + keep[t]
        for u in preds[t]:
            if not inZ[u] and sm[u] & S2 == sm[u]:
                l2 -= keep[u]
        return S2, l2, [v for v in ready if v != t] + [w for w in sorted(set(succs[t])) if pm[w] & S2 == pm[w]]

    def close(S, live, ready):
        """Take every node that fits and frees at least what it keeps (no loss: see the docstring)."""
        changed = True
        while changed:
            changed = False
            for t in ready:
                if live + size[t] + zin[t] > B:
                    continue
                S2, l2, r2 = add(S, live, ready, t)
                if l2 <= live:
                    if S2 not in parent:
                        parent[S2] = (S, t)
                    S, live, ready = S2, l2, r2
                    changed = True
                    break
        return S, live, ready

    def path(S2):
        order = []
        while S2:
            S2, tt = parent[S2]
            order.append(tt)
        return order[::-1]

    S, live, ready = close(0, 0, [v for v in range(n) if not preds[v]])
    if S == full:
        return OrderSearch("found", path(S), len(parent), now() - t0)
    seen = {S}
    stack = [(S, live, ready)]
    steps = 0
    while stack:
        S, live, ready = stack.pop()
        cands = []
        for t in ready:
            if live + size[t] + zin[t] > B:
                continue
            S2, l2, r2 = add(S, live, ready, t)
            if S2 not in parent:
                parent[S2] = (S, t)
            S3, l3, r3 = close(S2, l2, r2)
            if S3 == full:
                return OrderSearch("found", path(S3), len(parent), now() - t0)
            if S3 in seen:
                continue
            seen.add(S3)
            cands.append((l3, t, S3, r3))
        cands.sort(key=lambda c: (-c[0], -c[1]))  # the lowest memory is popped first
        stack.extend((S3, l3, r3) for l3, _, S3, r3 in cands)
        steps += 1
        if len(parent) > max_states or (steps % 64 == 0 and limits.expired()):
            return OrderSearch("stopped", None, len(parent), now() - t0)
    return OrderSearch("none", None, len(parent), now() - t0)


def recompute_lower_bound(problem, *, limits: Limits | None = None, max_states: int = MAX_STATES) -> tuple[float, dict]:
    """``(value, stats)``: ``value`` bounds every plan's serial time (module
    docstring); ``base cost`` when nothing is proved (or a plan without
    recomputation exists)."""
    limits = limits or Limits()
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    base = float(cost.sum())
    g = problem.graph
    sink = np.diff(g.succ_ptr) == 0
    levels = np.unique(cost[~sink])
    stats: dict = {"searches": []}
    if levels.size == 0:
        return base, {**stats, "note": "every node is a sink"}

    def exhausted(k) -> bool | None:
        """Search with Z = sinks + costs below ``levels[k]``: True when exhausted."""
        free = cost < levels[k]
        r = search_orders(problem, free, limits=limits.share(0.3 * limits.left())
                          if math.isfinite(limits.left()) else limits, max_states=max_states)
        stats["searches"].append((float(levels[k]), r.status, r.states, round(r.seconds, 3)))
        return {"none": True, "found": False}.get(r.status)

    first = exhausted(0)
    if first is False:
        stats["zero_recompute_plan"] = True
        return base, stats
    if first is None:  # the whole search stopped: the projected searches on windows (projected_order)
        from .projected_order import projected_recompute_level

        level, stats["projected"] = projected_recompute_level(problem, limits=limits)
        return base + level, stats
    lo, hi = 0, levels.size  # exhausted at lo; hi: not known to be exhausted (levels.size: beyond every cost)
    while hi - lo > 1 and not limits.expired():
        mid = (lo + hi) // 2
        r = exhausted(mid)
        if r is True:
            lo = mid
        else:
            hi = mid
            if r is None:
                break
    stats["threshold"] = float(levels[lo])
    return base + float(levels[lo]), stats


class RecomputeBound(Bound):
    """The bound of the module docstring as a registered bound
    (``recompute_bound``, scope: every plan; serial time, one device, up to
    1500 nodes).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = RecomputeBound().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value
    ('all plans', 6.0)
    """

    name = "recompute_bound"
    version = "2"
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 6.5
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        ok, why = _single(problem)
        if ok and problem.objective.name != "serial":
            return False, "serial time only"
        return ok, why

    def predict_seconds(self, problem) -> float:
        """Seconds worth giving it (the scheduler gives a bound twice this): the whole search's share, then
        the windows where the reference order's memory peaks, plain and with the minimum-cut test (RLG4 at
        80 %: the whole pass, 312 windows, 8.2 s at load ~4.8, its first proof in the first seconds; RLG4 at 90 %:
        2.2 s at load ~3)."""
        return 0.5 + 0.003 * problem.graph.n

    def warmup(self) -> None:
        """Compile (or load) the minimum-cut kernels of the window search (:mod:`.window_cuts`)."""
        from ..generators import chain
        from ..problem import Problem
        from .projected_order import projected_search

        projected_search(Problem.single(chain(4, bytes=1), 2), range(4), cuts=True)

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        value, stats = recompute_lower_bound(problem, limits=limits)
        return BoundResult(value, ALL_PLANS, stats)
