"""Local search on single-device plans: drop recomputations while the plan
stays within budget.

A plan's compute sequence determines its best frees (each value freed after
its last read before its next computation: :func:`~hybrid_remat.plan.plan_from_order`).
Deleting a recomputation of ``v`` keeps ``v``'s previous instance alive
until the deleted copy's readers are done, so dependencies stay satisfied;
only the memory may grow, and the simulator decides.  After each accepted
move, computations whose result is never read (other than first
computations) are removed too.  Moves are tried by decreasing cost, first
improvement, until none applies or the deadline passes.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.plan import plan_from_order
>>> g = chain(3, bytes=1)
>>> p = Problem.single(g, "100%")
>>> better = drop_recomputations(p, plan_from_order(g, [0, 1, 0, 1, 2], "cost"))
>>> better.n_computes()
3
"""

from __future__ import annotations

import time

import numpy as np

from ..plan import OP_COMPUTE, plan_from_order
from ..simulate import simulate

__all__ = ["drop_recomputations", "remove_unread"]


def remove_unread(graph, seq: list[int]) -> list[int]:
    """Drop computations (not first ones) whose value is never read before
    the node's next computation; repeat until none is left."""
    n = graph.n
    preds = [graph.preds(v).tolist() for v in range(n)]
    has_succ = [graph.succ_ptr[v + 1] > graph.succ_ptr[v] for v in range(n)]
    while True:
        read = [False] * len(seq)
        inst = [-1] * n
        first = [True] * len(seq)
        seen = [False] * n
        for q, v in enumerate(seq):
            for u in preds[v]:
                if inst[u] >= 0:
                    read[inst[u]] = True
            inst[v] = q
            first[q] = not seen[v]
            seen[v] = True
        keep = [first[q] or read[q] or not has_succ[v] for q, v in enumerate(seq)]
        if all(keep):
            return seq
        seq = [v for v, k in zip(seq, keep, strict=True) if k]


def drop_recomputations(problem, plan, *, deadline: float | None = None, max_moves: int = 10_000):
    """A plan at most as costly as ``plan`` (``plan`` itself when nothing
    improves).  Single-device plans only; anything else is returned as is."""
    if not problem.is_single_device or len(set(plan.device.tolist())) > 1:
        return plan
    g = problem.graph
    dev = problem.primary.name
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    seq = [int(v) for o, v in zip(plan.op.tolist(), plan.node.tolist(), strict=True) if o == OP_COMPUTE]
    seq = remove_unread(g, seq)
    best_plan = plan_from_order(g, seq, dev, dict(plan.meta))
    sim = simulate(problem, best_plan)
    base = simulate(problem, plan)
    if not sim.valid or sim.total_time > base.total_time:
        seq, best_plan, sim = None, plan, base
        if not base.valid:
            return plan
        seq = [int(v) for o, v in zip(plan.op.tolist(), plan.node.tolist(), strict=True) if o == OP_COMPUTE]
    moves = 0
    improved = True
    while improved and moves < max_moves:
        improved = False
        seen = set()
        recomputes = []
        for p, v in enumerate(seq):
            if v in seen:
                recomputes.append(p)
            seen.add(v)
        recomputes.sort(key=lambda p: (-cost[seq[p]], p))
        for p in recomputes:
            if deadline is not None and time.perf_counter() > deadline:
                return best_plan
            cand = remove_unread(g, seq[:p] + seq[p + 1:])
            cplan = plan_from_order(g, cand, dev, dict(plan.meta))
            csim = simulate(problem, cplan)
            moves += 1
            if csim.valid and csim.total_time < sim.total_time - 1e-12 * max(1.0, abs(sim.total_time)):
                seq, best_plan, sim = cand, cplan, csim
                improved = True
                break
    return best_plan
