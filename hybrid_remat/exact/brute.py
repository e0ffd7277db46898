"""Brute-force optima for tiny single-device problems (ground truth for tests).

Both searches are Dijkstra over explicit states, with the simulator's
semantics: a compute needs its inputs resident and itself absent, adds its
bytes (the peak is counted after the allocation, against the budget), and
costs its time; a free costs nothing; the goal is every node computed at
least once.

* :func:`brute_force_optimum` searches **all** plans: states are
  ``(resident set, computed-at-least-once set)``.
* :func:`brute_force_staged_optimum` searches the **staged** plans the
  Checkmate model represents: stage ``s`` computes nodes in increasing index
  order, all of its block ``[starts[s], starts[s+1])`` and any earlier nodes,
  each at most once; the stage ends with its block's last node.  States are
  ``(resident set, stage, last index computed in the stage)``.

Exponential in ``n``: meant for ``n <= 8``.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> brute_force_optimum(Problem.single(chain(4, bytes=1), 2))
4.0
"""

from __future__ import annotations

import heapq

import numpy as np

from ..errors import SolverError
from .checkmate import stage_starts

__all__ = ["brute_force_optimum", "brute_force_staged_optimum"]

_MAX_N = 12


def _setup(problem):
    if not problem.is_single_device:
        raise SolverError("brute force handles one device only")
    g = problem.graph
    if g.n > _MAX_N:
        raise SolverError(f"brute force is for tiny graphs (n <= {_MAX_N}), got n = {g.n}")
    preds = [sum(1 << int(u) for u in g.preds(v)) for v in range(g.n)]
    return g, preds, [int(b) for b in g.bytes], [float(c) for c in problem.cost_matrix[0]], int(problem.budgets[0])


def _mem(mask, sizes):
    total = 0
    i = 0
    while mask:
        if mask & 1:
            total += sizes[i]
        mask >>= 1
        i += 1
    return total


def brute_force_optimum(problem) -> float:
    """The least total compute time over every valid plan (``inf`` if none)."""
    g, preds, sizes, cost, B = _setup(problem)
    n = g.n
    full = (1 << n) - 1
    start = (0, 0)
    dist = {start: 0.0}
    heap = [(0.0, 0, 0)]
    while heap:
        d, res, done = heapq.heappop(heap)
        if dist.get((res, done), np.inf) < d:
            continue
        if done == full:
            return d
        mem = _mem(res, sizes)
        for v in range(n):
            bit = 1 << v
            if not res & bit:
                if preds[v] & res == preds[v] and mem + sizes[v] <= B:
                    st = (res | bit, done | bit)
                    nd = d + cost[v]
                    if nd < dist.get(st, np.inf):
                        dist[st] = nd
                        heapq.heappush(heap, (nd, st[0], st[1]))
            else:
                st = (res & ~bit, done)
                if d < dist.get(st, np.inf):
                    dist[st] = d
                    heapq.heappush(heap, (d, st[0], st[1]))
    return float("inf")


def brute_force_staged_optimum(problem, starts=None) -> float:
    """The least total compute time over the staged plans of the Checkmate
    model with stage blocks ``starts`` (default one node per stage)."""
    g, preds, sizes, cost, B = _setup(problem)
    n = g.n
    starts = [int(x) for x in (starts if starts is not None else stage_starts(n, 1))]
    T = len(starts) - 1
    dist = {(0, 0, -1): 0.0}
    heap = [(0.0, 0, 0, -1)]
    while heap:
        d, res, s, last = heapq.heappop(heap)
        if dist.get((res, s, last), np.inf) < d:
            continue
        if s == T:
            return d
        lo, hi = starts[s], starts[s + 1]
        mem = _mem(res, sizes)
        nxt_block = max(last + 1, lo)  # the next block node that must not be skipped
        for v in range(last + 1, min(nxt_block, hi - 1) + 1):
            bit = 1 << v
            if res & bit or preds[v] & res != preds[v] or mem + sizes[v] > B:
                continue
            if v == hi - 1:
                st = (res | bit, s + 1, -1)
            else:
                st = (res | bit, s, v)
            nd = d + cost[v]
            if nd < dist.get(st, np.inf):
                dist[st] = nd
                heapq.heappush(heap, (nd,) + st)
        m = res
        while m:
            low = m & -m
            st = (res & ~low, s, last)
            if d < dist.get(st, np.inf):
                dist[st] = d
                heapq.heappush(heap, (d,) + st)
            m ^= low
    return float("inf")
