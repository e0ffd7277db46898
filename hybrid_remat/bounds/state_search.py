"""The *state-search bound*: A* over (resident set, computed set), exact
where it finishes and a valid bound over every plan from its open frontier
when stopped.  Single device, serial time, any order.

States and moves follow the simulator: a ``compute`` of ``v`` needs
``v``'s inputs resident and ``v`` absent, adds ``bytes(v)`` (memory is
counted after the allocation, against the budget) and costs ``c_v``; a
``free`` costs nothing; the goal is every node computed at least once.

Proof that the search covers every plan.  Take any valid plan ``P``.

1. *Useless computations.*  Call a computation of ``v`` useless when it is
   not ``v``'s first and its value is freed (or the plan ends) before any
   step reads it.  Deleting it (and the free that followed) leaves a valid
   plan: ``v`` stays absent where nobody reads it, the next computation of
   ``v`` still finds it absent, memory only drops and the cost does not
   grow.  Repeat until none is left: ``P1``, no costlier than ``P``.  In
   ``P1`` every recomputation of ``v`` is read by a later computation
   that is itself a first computation or read again, and so on; the chain
   ends at a first computation of a descendant ``x`` of ``v`` that comes
   later, so ``x`` is not yet computed.  Hence the search only recomputes
   ``v`` while some descendant of ``v`` is uncomputed.
2. *Frees as early as possible.*  Move every free of ``v`` back to just
   after the last step before it that reads or computes ``v``; values
   resident at the end are freed after their last such step.  No step in
   between reads ``v``, so inputs stay resident; memory at every
   computation only drops; the cost is unchanged; usefulness (1) is
   unchanged (the reads are the same).  Now every free directly follows a
   computation of ``w`` and frees ``w`` or an input of ``w``.  In
   particular a value all of whose descendants are computed is never read
   again (by 1) and is freed at once: the search frees it automatically.

So the normalized plan, no costlier than ``P``, is a path of the search
graph whose moves are "compute ``v``, then free a subset of ``v`` and its
inputs" (and the automatic frees), from the empty state to a state with
every node computed.  Dijkstra/A* over that graph finds the cheapest such
path, a lower bound on every plan (equal to the optimum: the path is a
plan).

Heuristic.  ``h(R, C) = sum of c_v over v not in C + sum of c_v over v in C
\\ R with a consumer not in C``: every uncomputed node is computed later,
and every computed, non-resident value with an uncomputed consumer is
computed again before that consumer (its inputs must be resident); these
are distinct future computations, so ``h`` never overestimates.  It is
consistent: a move computing ``v`` lowers ``h`` by at most ``c_v`` (only
``v``'s own term can go; frees and new computations only add terms).  With
a consistent heuristic the least ``g + h`` on the open list never exceeds
the optimum (the first open state of an optimal path has its optimal
``g``), so when the search stops at a deadline or state limit that least
value is a valid bound; when the open list empties without a goal no plan
exists (``+inf``).  Float sums: the bound is compared with plans through
the library's relative tolerances.

Exponential: exact on 25-node training chains in seconds; on large graphs the
frontier bound is little above the base cost, so the registered bound
runs up to :data:`MAX_NODES` nodes only.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.oracle import brute_force
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(training_graph(nx.path_graph(4, create_using=nx.DiGraph)), 6)
>>> r = state_search_bound(p)
>>> r.exact, r.value == brute_force(p)[0]
(True, True)
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits, now

__all__ = ["StateSearchResult", "state_search_bound", "StateSearchBound", "MAX_NODES", "DEFAULT_MAX_STATES"]

#: the registered bound runs on graphs up to this many nodes
MAX_NODES = 40
#: states stored before the search stops (without a deadline: the deterministic limit)
DEFAULT_MAX_STATES = 200_000
#: pops between two deadline checks
_CHECK_EVERY = 64


@dataclass
class StateSearchResult:
    """``value`` bounds every plan's serial time; ``exact``: it is the optimum
    (``+inf``: no plan fits).  ``states``: states stored; ``stats``: seconds."""

    value: float
    exact: bool
    states: int
    stats: dict = field(default_factory=dict, repr=False)


def _subsets(bits: list[int]):
    """Every OR of a subset of ``bits`` (distinct single-bit masks)."""
    out = [0]
    for b in bits:
        out += [m | b for m in out]
    return out


def state_search_bound(problem, *, limits: Limits | None = None, max_states: int | None = None) -> StateSearchResult:
    """The state-search bound of a single-device problem (module docstring).

    Parameters
    ----------
    problem : Problem
        Single device, serial time.
    limits : Limits, optional
        Deadline, stop flag and ``work`` (states stored, the smaller of it and
        ``max_states``).  A stopped search returns its frontier bound.
    max_states : int, optional
        States stored before stopping (default :data:`DEFAULT_MAX_STATES`).

    Raises
    ------
    ValueError
        On a multi-device problem.
    """
    if not problem.is_single_device:
        raise ValueError("the state-search bound covers single-device problems only")
    limits = limits or Limits()
    cap = DEFAULT_MAX_STATES if max_states is None else int(max_states)
    if limits.work is not None:
        cap = min(cap, int(limits.work))
    t0 = now()
    g = problem.graph
    n = g.n
    cost = [float(c) for c in problem.cost_matrix[0]]
    size = [int(b) for b in g.bytes]
    B = int(problem.budgets[0])
    full = (1 << n) - 1
    pmask = [sum(1 << int(u) for u in g.preds(v)) for v in range(n)]
    smask = [sum(1 << int(w) for w in g.succs(v)) for v in range(n)]
    dmask = [0] * n  # descendants
    for v in range(n - 1, -1, -1):
        m = smask[v]
        for w in g.succs(v):
            m |= dmask[int(w)]
        dmask[v] = m
    pbits = [[1 << int(u) for u in g.preds(v)] for v in range(n)]
    frees = [_subsets(pbits[v] + [1 << v]) for v in range(n)]

    def mem(R):
        s = 0
        while R:
            low = R & -R
            s += size[low.bit_length() - 1]
            R ^= low
        return s

    def h(R, C):
        s = 0.0
        rest = full & ~C
        while rest:
            low = rest & -rest
            s += cost[low.bit_length() - 1]
            rest ^= low
        rest = C & ~R
        while rest:
            low = rest & -rest
            v = low.bit_length() - 1
            if smask[v] & ~C:
                s += cost[v]
            rest ^= low
        return s

    def dead(R, C):  # resident values never read again (every descendant computed)
        out = 0
        rest = R
        while rest:
            low = rest & -rest
            if dmask[low.bit_length() - 1] & ~C == 0:
                out |= low
            rest ^= low
        return out

    start = (0, 0)
    dist = {start: 0.0}
    heap = [(h(0, 0), 0.0, 0, start)]
    tick = 0
    pops = 0
    stopped = ""
    while heap:
        pops += 1
        if pops % _CHECK_EVERY == 1 and limits.expired():
            stopped = "deadline"
            break
        f, d, _, (R, C) = heapq.heappop(heap)
        if d > dist.get((R, C), math.inf):
            continue
        if C == full:
            return StateSearchResult(d, True, len(dist), {"seconds": now() - t0, "pops": pops})
        m = mem(R)
        for v in range(n):
            bit = 1 << v
            if R & bit or R & pmask[v] != pmask[v] or m + size[v] > B:
                continue
            if C & bit and dmask[v] & ~C == 0:
                continue  # a recomputation nothing uncomputed can use (proof, 1)
            C2 = C | bit
            R1 = R | bit
            R1 &= ~dead(R1, C2)
            nd = d + cost[v]
            for F in frees[v]:
                R2 = R1 & ~F
                key = (R2, C2)
                if nd < dist.get(key, math.inf):
                    dist[key] = nd
                    tick += 1
                    heapq.heappush(heap, (nd + h(R2, C2), nd, tick, key))
        if len(dist) > cap:
            stopped = "states"
            break
    stats = {"seconds": now() - t0, "pops": pops, "stopped": stopped}
    if not stopped or not heap:  # every state expanded: no plan fits
        return StateSearchResult(math.inf, True, len(dist), stats)
    return StateSearchResult(float(heap[0][0]), False, len(dist), stats)  # the open list's least g + h


class StateSearchBound(Bound):
    """The state-search bound as a registered bound (``state_search_bound``,
    scope: every plan; serial time, one device, up to :data:`MAX_NODES`
    nodes).  Exact (the optimum over every plan) where the search finishes.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = StateSearchBound().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value
    ('all plans', 6.0)
    """

    name = "state_search_bound"
    version = "1"
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 7.0
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        from .cut import serial_single_device

        return serial_single_device(problem, max_nodes=MAX_NODES, why_larger=" (the frontier bound is little above the base cost)")

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        r = state_search_bound(problem, limits=limits)
        return BoundResult(r.value, ALL_PLANS, {"exact": r.exact, "states": r.states, **r.stats})
