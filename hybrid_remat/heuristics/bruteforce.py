"""Exact optimum of tiny one-device problems by shortest path over states.

A state is ``(resident set, computed-at-least-once set)``; a compute step
costs the node's time, a free step costs nothing, and the budget is checked
after each allocation, exactly as :func:`hybrid_remat.simulate.simulate`
does.  Dijkstra finds the cheapest plan.  Exponential: for tests on graphs
of up to about 10 nodes.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> cost, plan = optimal_plan(Problem.single(chain(4, bytes=1), 2))
>>> cost
4.0
"""

from __future__ import annotations

import heapq

import numpy as np

from ..errors import HybridRematError
from ..plan import OP_COMPUTE, OP_FREE, Plan

__all__ = ["optimal_plan"]


def optimal_plan(problem, *, max_nodes: int = 12, max_states: int = 2_000_000):
    """``(cost, plan)`` of an optimal plan, or ``(inf, None)`` if none exists.

    Raises
    ------
    HybridRematError
        For graphs above ``max_nodes`` nodes or when the search exceeds
        ``max_states`` states.
    """
    g = problem.graph
    n = g.n
    if n > max_nodes:
        raise HybridRematError(f"brute force is limited to {max_nodes} nodes; graph has {n}")
    b = [int(x) for x in g.bytes]
    c = [float(x) for x in problem.cost_matrix[0]]
    budget = int(problem.budgets[0])
    pmask = [sum(1 << int(u) for u in g.preds(v)) for v in range(n)]
    full = (1 << n) - 1

    def mem(res):
        return sum(b[v] for v in range(n) if res >> v & 1)

    start = (0, 0)
    dist = {start: 0.0}
    prev: dict = {}
    heap = [(0.0, 0, 0)]
    while heap:
        d, res, done = heapq.heappop(heap)
        if d > dist.get((res, done), np.inf):
            continue
        if done == full:
            steps = []
            state = (res, done)
            while state in prev:
                state, step = prev[state]
                steps.append(step)
            steps.reverse()
            op = [s[0] for s in steps]
            node = [s[1] for s in steps]
            return d, Plan.single_device(op, node, problem.primary.name, {"solver": "bruteforce"})
        m = mem(res)
        for v in range(n):
            bit = 1 << v
            if res & bit:
                nxt = (res & ~bit, done)
                nd = d
                step = (OP_FREE, v)
            else:
                if res & pmask[v] != pmask[v] or m + b[v] > budget:
                    continue
                nxt = (res | bit, done | bit)
                nd = d + c[v]
                step = (OP_COMPUTE, v)
            if nd < dist.get(nxt, np.inf):
                dist[nxt] = nd
                prev[nxt] = ((res, done), step)
                heapq.heappush(heap, (nd, nxt[0], nxt[1]))
                if len(dist) > max_states:
                    raise HybridRematError("brute force search exceeded its state limit")
    return float("inf"), None
