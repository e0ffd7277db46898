"""The order search projected on a window of nodes: a proof that every plan
recomputes some node, where the search over every node's order is too
large to finish.

:mod:`hybrid_remat.bounds.order_search` searches the ideals of the whole
graph; on Moccasin's RLG3 at 80 % and RLG4 it stops without an answer (the
ideals of 500-1000 nodes).  Here the states are the ideals of the order
restricted to a *window* ``W`` (a set of nodes; in practice 20-40
consecutive nodes of the reference order), the nodes outside ``W`` are
not searched, and each move is checked against a lower bound on the
memory of every concrete state that projects on it.

The projected search.  Fix ``Z`` (nodes allowed to be recomputed; the
sinks always in it), the budget ``B`` and ``W``.  A state is a set ``A``
of nodes of ``W`` closed under the ancestors in ``W``.  From ``A`` a node
``t`` of ``W \\ A`` whose ancestors in ``W`` are in ``A`` can be added
when ``lb(A, t) <= B``, where, with ``cl(X)`` the nodes of ``X`` and their
ancestors and ``F(A)`` the nodes of ``W \\ A`` and their descendants,

    lb(A, t) = bytes(t) + bytes(t's inputs in Z)
               + sum of bytes(v) over v in cl(A + t) - t - Z with a reader in F(A).

The search visits every state reachable from the empty set (depth first,
visited set); it answers ``found`` when ``W`` is reached, ``none`` when
the reachable states are exhausted without it, ``stopped`` at its limits.

Validity.  Take any valid single-device plan ``P`` that computes each node
outside ``Z`` exactly once.  List the nodes of ``W`` by first computation,
``w_1 .. w_k``, and let ``A_i = {w_1 .. w_{i-1}}``; ``A_i`` is closed under
ancestors in ``W`` (a node's inputs, hence its ancestors, are computed
before it).  Let ``S`` be the set of nodes computed before ``w_i``'s first
computation.  Then ``S`` holds ``cl(A_i + w_i) - w_i`` (every ancestor of a
computed node, and of ``w_i``, was computed), and no node of ``F(A_i)`` is
in ``S`` (a node's first computation follows those of its ancestors, and
the nodes of ``W \\ A_i`` are not computed yet).  Each ``v`` of ``S`` outside
``Z`` with a reader ``x`` in ``F(A_i)`` is resident at that moment: ``x``'s
first computation comes later and reads ``v``, and ``v``, computed once,
was computed before, so it stays resident until then.  ``w_i`` (not in
``S``) and its inputs in ``Z`` are resident too, and these three sets are
disjoint; the simulator counts memory after the allocation against
``B``.  So ``lb(A_i, w_i) <= B`` for every ``i``: the ``A_i`` are a path of
the projected search from the empty set to ``W``.  If the search exhausts
its states without ``W``, no such ``P`` exists: every valid plan computes
some node outside ``Z`` at least twice, and its serial time is at least
``sum of costs + min_{v not in Z} c_v``.  With ``Z = sinks + {v: c_v < c}``
for a cost level ``c`` at which the search is exhausted the bound is the
base cost plus ``c`` (the nodes outside ``Z`` cost at least ``c``); the
search space only grows with ``Z``, so the largest such level is found by
bisection.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> projected_search(Problem.single(chain(4, bytes=1), 2), range(4)).status
'found'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..limits import Limits, now
from .window_cuts import MinLive

__all__ = ["ProjectedSearch", "Tables", "projected_search", "projected_recompute_level", "WINDOWS", "CUT_WINDOWS", "MAX_NODES"]

#: graphs above this many nodes are not searched (the ancestor matrix has n * n entries)
MAX_NODES = 1_500
#: window sizes tried, in this order (RLG3 @80 % and RLG4 @80 %: exhausted with 20 consecutive nodes)
WINDOWS = (20, 30, 40)
#: window sizes searched with the minimum-cut test after the first plain size (RLG4 @90 %: 730-749 exhausted up
#: to level 16, 0.1-0.3 s a search at 1000 nodes with the residual flows of window_cuts; load ~3)
CUT_WINDOWS: tuple = (20,)
#: states each projected search may visit
WINDOW_STATES = 3_000


@dataclass
class ProjectedSearch:
    """``status``: ``"found"`` (``W`` reached: nothing proved), ``"none"``
    (exhausted: every plan computes some node outside ``Z`` twice) or
    ``"stopped"`` (limits)."""

    status: str
    states: int = 0


class Tables:
    """Ancestors (``anc[v, u]``: ``u`` is an ancestor of ``v``), descendants
    or self (``desc[t, w]``) and the edge arrays of a graph, shared by the
    searches of one bound."""

    def __init__(self, graph):
        n = graph.n
        self.preds = [sorted(set(graph.preds(v).tolist())) for v in range(n)]
        anc = np.zeros((n, n), dtype=bool)
        for v in range(n):  # node ids are a topological order
            for u in self.preds[v]:
                anc[v] |= anc[u]
                anc[v, u] = True
        self.anc = anc
        self.desc = anc.T.copy()
        np.fill_diagonal(self.desc, True)
        self.src = np.asarray([u for v in range(n) for u in self.preds[v]], dtype=np.int64)
        self.dst = np.asarray([v for v in range(n) for _ in self.preds[v]], dtype=np.int64)
        self.size = np.asarray(graph.bytes, dtype=np.int64)
        self.sink = np.diff(graph.succ_ptr) == 0


def projected_search(problem, window, free=None, *, limits: Limits | None = None, max_states: int = WINDOW_STATES,
                     tables: Tables | None = None, budget: int | None = None, cuts: bool = False) -> ProjectedSearch:
    """The projected search of the module docstring on ``window`` (node
    ids) with ``Z = free`` (a boolean mask; the sinks are always added)
    against ``budget`` (default: the problem's).  With ``cuts`` each move
    that passes is checked again against the least live memory of any
    ideal between ``cl(A + t) - t`` and ``F(A)`` (a minimum cut,
    :mod:`.window_cuts`, whose docstring proves it a lower bound on every
    concrete state's memory): a stronger test.  One maximum flow per state,
    ``m(cl(A), F(A))`` (at most each move's ``m``: a first filter), kept as
    a residual network and augmented for each move with infinite edges to
    ``t``'s inputs (:class:`.window_cuts.Residual`): ~0.2 ms a state on RLG4.
    Honours ``limits``."""
    limits = limits or Limits()
    g = problem.graph
    n = g.n
    tb = tables or Tables(g)
    B = int(problem.budgets[0]) if budget is None else int(budget)
    inZ = tb.sink.copy()
    if free is not None:
        inZ |= np.asarray(free, dtype=bool)
    size = tb.size
    keep = np.where(inZ, 0, size)
    W = sorted({int(v) for v in window})
    k = len(W)
    if k == 0:
        return ProjectedSearch("found", 0)
    zin = [int(sum(int(size[u]) for u in tb.preds[t] if inZ[u])) for t in W]
    wanc = [sum(1 << j for j in range(k) if tb.anc[W[i], W[j]]) for i in range(k)]
    dw = tb.desc[np.asarray(W)]
    full = (1 << k) - 1
    live = MinLive(g, inZ) if cuts else None
    preds = [np.asarray(tb.preds[t], dtype=np.int64) for t in W]  # I of move t: cl(A) + t's inputs, closed
    spare = max((x.size for x in preds), default=0)
    check = 4 if cuts else 32  # states between looks at the clock (a cut state costs up to ~1 ms at 1000 nodes)
    seen = {0}
    stack = [(0, np.zeros(n, dtype=bool))]
    steps = 0
    while stack:
        A, cl = stack.pop()
        rest = [i for i in range(k) if not A >> i & 1]
        forced = dw[rest].any(axis=0)  # F(A): not computed yet in any plan projecting on A
        read = np.zeros(n, dtype=bool)
        read[tb.src[forced[tb.dst]]] = True  # nodes with a reader in F(A)
        floor = None  # the flow of m(cl(A), F(A)), augmented for each move t (window_cuts.Residual)
        for i in rest:
            A2 = A | (1 << i)
            if wanc[i] & A != wanc[i] or A2 in seen:
                continue
            t = W[i]
            c = cl | tb.anc[t]
            held = c & read
            held[t] = False
            if int(keep[held].sum()) + int(size[t]) + zin[i] > B:
                continue
            if live is not None:
                if floor is None:
                    floor = live.residual(cl, forced, spare)
                if floor.exceeds(preds[i], B - int(size[t]) - zin[i]):
                    continue
            if A2 == full:
                return ProjectedSearch("found", len(seen))
            c[t] = True
            seen.add(A2)
            stack.append((A2, c))
        steps += 1
        if len(seen) > max_states or (steps % check == 0 and limits.expired()):
            return ProjectedSearch("stopped", len(seen))
    return ProjectedSearch("none", len(seen))


def projected_recompute_level(problem, *, limits: Limits | None = None, windows=WINDOWS,
                              max_states: int = WINDOW_STATES, cut_windows=CUT_WINDOWS) -> tuple[float, dict]:
    """``(level, stats)``: the largest cost level ``c`` found at which some
    window's projected search is exhausted with ``Z = sinks + {c_v < c}``
    (every plan then costs at least the base cost plus ``c``), or ``0.0``.
    Windows: consecutive nodes of the reference order, each size of
    ``windows``, stepping half a window, those where the reference order's
    memory peaks first (RLG3 @80 %: the 6th of 49); after the first size,
    the same with the minimum-cut test (``cuts``) on windows of each size
    of ``cut_windows`` (RLG4 @90 %: only these prove anything), then the
    other sizes; once a window is exhausted, each later phase tries the
    windows nearest to the best one first.  Honours ``limits``."""
    limits = limits or Limits()
    t0 = now()
    g = problem.graph
    stats: dict = {"windows_tried": 0, "windows_exhausted": 0}
    if g.n > MAX_NODES or g.n == 0:
        return 0.0, {**stats, "note": f"above {MAX_NODES} nodes" if g.n else "empty"}
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    tb = Tables(g)
    levels = np.unique(cost[~tb.sink])
    if levels.size == 0:
        return 0.0, {**stats, "note": "every node is a sink"}
    from .cut import _reference_memory

    ref = _reference_memory(tb.size, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx)
    best = -1  # index into levels of the best exhausted level
    done = set()
    phases = [(w, False) for w in windows[:1]] + [(w, True) for w in cut_windows] + [(w, False) for w in windows[1:]]
    for k, cuts in phases:
        k = min(k, g.n)
        if (k, cuts) in done:
            continue
        done.add((k, cuts))
        starts = np.arange(0, g.n - k + 1, max(1, k // 2))
        peak = np.array([ref[a:a + k].max() for a in starts.tolist()])
        order = np.argsort(-peak, kind="stable")  # the reference order's tightest first
        if "window" in stats:  # after an exhausted window: its neighbours first (RLG3, RLG4 @80 %: the cut test's
            a0, k0 = stats["window"][:2]  # best window is 10-20 nodes from the plain test's)
            order = np.lexsort((-peak, np.abs(starts + k / 2 - (a0 + k0 / 2))))
        for a in starts[order].tolist():
            if limits.expired():
                stats["stopped"] = "limits"
                break
            win = range(a, a + k)
            stats["windows_tried"] += 1

            def exhausted(j, win=win, cuts=cuts) -> bool:
                return projected_search(problem, win, cost < levels[j], limits=limits, max_states=max_states,
                                        tables=tb, cuts=cuts).status == "none"

            start = best + 1  # only a higher level than the best so far helps
            if not exhausted(start):
                continue
            stats["windows_exhausted"] += 1
            lo, hi = start, levels.size  # exhausted at lo
            while hi - lo > 1 and not limits.expired():
                mid = (lo + hi) // 2
                if exhausted(mid):
                    lo = mid
                else:
                    hi = mid
            if lo > best:
                best = lo
                stats["window"] = (a, k, "cuts" if cuts else "plain")
            if best == levels.size - 1:
                break
        if best == levels.size - 1:
            break
    stats["seconds"] = round(now() - t0, 3)
    if best < 0:
        return 0.0, stats
    stats["threshold"] = float(levels[best])
    return float(levels[best]), stats
