"""The oracle: exact optima of tiny problems by exhaustive search (ground
truth for tests), one device or several.

:func:`brute_force` runs Dijkstra over explicit states with the simulator's
semantics: a ``compute`` needs its inputs resident on its device and itself
absent, adds its bytes there (memory is counted after the allocation,
against the device's budget) and costs its time; a ``copy`` needs the value
on the source, not on the target, a link, and room on the target, and costs
``latency + bytes / bandwidth``; a ``free`` costs nothing.  The goal is
every node computed at least once; the value is the least **serial** time
(sum of compute and copy times).

Scopes (``scope=``):

* ``"all"``: every valid plan.
* ``"frontier"``: plans whose *first* computations follow the node
  numbering (recomputations and copies anywhere).
* ``"staged"``: the plans the library's staged model of the problem
  represents.  One device: Checkmate's stages (stage ``s`` computes, in
  increasing index order and each at most once, all of its block
  ``[starts[s], starts[s+1])`` and any earlier nodes; the stage ends with
  its block's last node; one node per stage by default).  Several devices:
  the frontier plans (XEngine's staged restriction).

Exponential: meant for ``n <= 8`` (at most 12 nodes, and ``D * n + n <=
40``).  A problem over those sizes, a search over ``max_states`` states or
an objective other than serial time raises :class:`BruteForceError`; a
problem without a valid plan in the scope gives ``(inf, None)``.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> value, plan = brute_force(Problem.single(chain(4, bytes=1), 2))
>>> value, plan.n_computes()
(4.0, 4)
>>> brute_force(Problem.single(chain(4, bytes=1), 2), scope="staged")[0]
4.0
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from .errors import HybridRematError
from .plan import Plan

__all__ = ["brute_force", "BruteForceError", "SCOPES", "MAX_NODES"]

#: the scopes :func:`brute_force` searches
SCOPES = ("all", "frontier", "staged")
#: the largest graph it accepts
MAX_NODES = 12


class BruteForceError(HybridRematError):
    """The brute force cannot answer: the problem is too large, the search
    passed its state limit, or the objective is not serial time."""


def brute_force(problem, scope: str = "all", *, starts=None, max_states: int = 2_000_000):
    """``(value, plan)``: the least serial time over the plans of ``scope``
    and a plan reaching it, or ``(inf, None)`` when the scope has no valid
    plan.

    Parameters
    ----------
    problem : Problem
    scope : {"all", "frontier", "staged"}
    starts : sequence of int, optional
        Stage blocks of the one-device staged scope (default one node per
        stage: ``0, 1, ..., n``).
    max_states : int
        States the search may visit.

    Raises
    ------
    BruteForceError
        See the module docstring.
    """
    if scope not in SCOPES:
        raise BruteForceError(f"unknown brute-force scope {scope!r}: use one of {', '.join(SCOPES)}")
    if getattr(getattr(problem, "objective", None), "name", "serial") != "serial":
        raise BruteForceError("brute force searches serial time only; use problem.with_objective('serial')")
    g = problem.graph
    n, D = g.n, problem.n_devices
    if n > MAX_NODES or D * n + n > 40:
        raise BruteForceError(f"brute force is for tiny problems (n <= {MAX_NODES}, devices * n + n <= 40); "
                              f"got n = {n} on {D} device(s)")
    if scope == "staged" and D == 1:
        return _staged(problem, starts, max_states)
    return _plans(problem, frontier=scope != "all", max_states=max_states)


def _search(start, is_goal, moves, max_states):
    """Dijkstra; ``(value, steps)`` of the cheapest goal or ``(inf, None)``."""
    dist = {start: 0.0}
    prev: dict = {}
    heap = [(0.0, 0, start)]
    tick = 0
    while heap:
        d, _, state = heapq.heappop(heap)
        if d > dist.get(state, math.inf):
            continue
        if is_goal(state):
            steps = []
            while state in prev:
                state, step = prev[state]
                steps.append(step)
            return d, steps[::-1]
        for w, nxt, step in moves(state):
            nd = d + w
            if nd < dist.get(nxt, math.inf):
                dist[nxt] = nd
                prev[nxt] = (state, step)
                tick += 1
                heapq.heappush(heap, (nd, tick, nxt))
                if len(dist) > max_states:
                    raise BruteForceError(f"brute force passed its limit of {max_states} states")
    return math.inf, None


def _tables(problem):
    g = problem.graph
    n = g.n
    nbytes = [int(b) for b in g.bytes]
    pmask = [sum(1 << int(u) for u in g.preds(v)) for v in range(n)]
    mem = [0] * (1 << n)  # bytes of every resident set
    for mask in range(1, 1 << n):
        low = mask & -mask
        mem[mask] = mem[mask ^ low] + nbytes[low.bit_length() - 1]
    return n, nbytes, pmask, mem


def _plans(problem, *, frontier: bool, max_states: int):
    """Every plan (``frontier``: first computations in index order)."""
    n, nbytes, pmask, mem = _tables(problem)
    D = problem.n_devices
    names = [d.name for d in problem.devices]
    cost = np.asarray(problem.cost_matrix, dtype=np.float64).tolist()
    can = [bool(x) for x in problem.can_compute]
    bud = [int(x) for x in problem.budgets]
    bw, lat = (a.tolist() for a in problem.link_arrays)
    full = (1 << n) - 1

    def moves(state):
        res, done = state
        for d in range(D):
            rd = res[d]
            md = mem[rd]
            for v in range(n):
                bit = 1 << v
                if rd & bit:
                    yield 0.0, (res[:d] + (rd & ~bit,) + res[d + 1:], done), ("free", v, names[d])
                    for e in range(D):
                        if e != d and bw[d][e] > 0 and not res[e] & bit and mem[res[e]] + nbytes[v] <= bud[e]:
                            yield (lat[d][e] + nbytes[v] / bw[d][e], (res[:e] + (res[e] | bit,) + res[e + 1:], done),
                                   ("copy", v, names[d], names[e]))
                elif can[d] and rd & pmask[v] == pmask[v] and md + nbytes[v] <= bud[d]:
                    if frontier and not done & bit and done != bit - 1:
                        continue
                    yield cost[d][v], (res[:d] + (rd | bit,) + res[d + 1:], done | bit), ("compute", v, names[d])

    value, steps = _search((tuple([0] * D), 0), lambda s: s[1] == full, moves, max_states)
    if steps is None:
        return math.inf, None
    return float(value), Plan.from_steps(steps, names, {"solver": "brute_force"})


def _staged(problem, starts, max_states: int):
    """Checkmate's staged plans on one device (see the module docstring)."""
    n, nbytes, pmask, mem = _tables(problem)
    cost = [float(c) for c in problem.cost_matrix[0]]
    budget = int(problem.budgets[0])
    name = problem.primary.name
    starts = [int(x) for x in (starts if starts is not None else range(n + 1))]
    T = len(starts) - 1

    def moves(state):
        res, s, last = state
        lo, hi = starts[s], starts[s + 1]
        m = mem[res]
        nxt_block = max(last + 1, lo)  # the next block node, which must not be skipped
        for v in range(last + 1, min(nxt_block, hi - 1) + 1):
            bit = 1 << v
            if res & bit or pmask[v] & res != pmask[v] or m + nbytes[v] > budget:
                continue
            yield cost[v], ((res | bit, s + 1, -1) if v == hi - 1 else (res | bit, s, v)), ("compute", v, name)
        rest = res
        while rest:
            low = rest & -rest
            yield 0.0, (res & ~low, s, last), ("free", low.bit_length() - 1, name)
            rest ^= low

    value, steps = _search((0, 0, -1), lambda st: st[1] == T, moves, max_states)
    if steps is None:
        return math.inf, None
    return float(value), Plan.from_steps(steps, [name], {"solver": "brute_force", "scope": "staged"})
