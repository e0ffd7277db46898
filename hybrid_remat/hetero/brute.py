"""Exhaustive search over plans of tiny multi-device problems (for tests).

Dijkstra over simulator states ``(resident bits per device, computed
bits)`` with the simulator's moves (``compute``, ``free``, ``copy``) and
their serial times as edge weights: the true minimum serial time of any
valid plan.  With ``frontier=True`` first computations must follow index
order (the staged models' restriction).  Feasible for ``D * n`` up to
about 12.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> float(brute_force(Problem.single(chain(3, bytes=1), 2))[0])
3.0
"""

from __future__ import annotations

import heapq

import numpy as np

from ..errors import PlanError
from ..plan import Plan
from ..problem import Problem

__all__ = ["brute_force"]


def brute_force(problem: Problem, *, frontier: bool = False, max_states: int = 2_000_000):
    """Minimum serial time over all valid plans: ``(time, plan)``.

    Raises
    ------
    PlanError
        If the state space exceeds ``max_states`` or no plan exists.
    """
    g = problem.graph
    n, D = g.n, problem.n_devices
    if D * n + n > 40:
        raise PlanError(f"brute_force is for tiny problems (n={n}, devices={D})")
    cost = problem.cost_matrix
    can = problem.can_compute
    bud = problem.budgets
    bw, lat = problem.link_arrays
    nbytes = [int(b) for b in g.bytes]
    pmask = [sum(1 << int(u) for u in g.preds(v)) for v in range(n)]
    full = (1 << n) - 1

    def mem(bits):
        return sum(nbytes[i] for i in range(n) if bits >> i & 1)

    start = (tuple([0] * D), 0)
    dist = {start: 0.0}
    prev = {}
    heap = [(0.0, 0, start)]
    tick = 0
    while heap:
        c, _, state = heapq.heappop(heap)
        if c > dist.get(state, np.inf):
            continue
        res, comp = state
        if comp == full:
            steps = []
            while state in prev:
                state, step = prev[state]
                steps.append(step)
            names = [d.name for d in problem.devices]
            return float(c), Plan.from_steps(steps[::-1], names, {"solver": "brute_force"})
        if len(dist) > max_states:
            raise PlanError(f"brute_force: more than {max_states} states")
        moves = []
        for d in range(D):
            rd = res[d]
            md = mem(rd)
            for v in range(n):
                bit = 1 << v
                if rd & bit:
                    moves.append((0.0, d, rd & ~bit, ("free", v, problem.devices[d].name), comp))
                    for e in range(D):
                        if e != d and bw[d, e] > 0 and not res[e] & bit and mem(res[e]) + nbytes[v] <= bud[e]:
                            t = lat[d, e] + nbytes[v] / bw[d, e]
                            moves.append((t, e, res[e] | bit,
                                          ("copy", v, problem.devices[d].name, problem.devices[e].name), comp))
                elif can[d] and (rd & pmask[v]) == pmask[v] and md + nbytes[v] <= bud[d]:
                    if frontier and not comp & bit and comp != (1 << v) - 1:
                        continue
                    moves.append((cost[d, v], d, rd | bit, ("compute", v, problem.devices[d].name), comp | bit))
        for t, dd, newbits, step, ncomp in moves:
            nres = list(res)
            nres[dd] = newbits
            ns = (tuple(nres), ncomp)
            nc = c + t
            if nc < dist.get(ns, np.inf) - 1e-12:
                dist[ns] = nc
                prev[ns] = (state, step)
                tick += 1
                heapq.heappush(heap, (nc, tick, ns))
    raise PlanError("brute_force: no valid plan exists")
