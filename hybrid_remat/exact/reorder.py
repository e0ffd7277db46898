"""Other reference orders: relabel a problem along a topological order and
map plans back, plus a memory-greedy topological order.

The staged models and the staged greedy fix the order of *first*
computations to the graph's numbering.  Relabelling the graph along another
topological order (for example the first-compute order of a heuristic plan)
makes that order's plans representable.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(3, bytes=1), 2)
>>> q, order = relabel(p, [0, 1, 2])
>>> q.graph.n
3
"""

from __future__ import annotations

import numpy as np

from ..errors import PlanError
from ..graph import Graph
from ..plan import OP_COMPUTE, Plan
from ..problem import Problem

__all__ = ["relabel", "plan_to_original", "plan_to_relabelled", "first_compute_order", "memory_greedy_order"]


def relabel(problem: Problem, order) -> tuple[Problem, np.ndarray]:
    """The same problem with node ``order[k]`` renumbered ``k``.

    Raises
    ------
    PlanError
        ``order`` is not a topological order of all nodes.
    """
    g = problem.graph
    order = np.asarray(order, dtype=np.int64)
    n = g.n
    if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
        raise PlanError("order must be a permutation of the nodes")
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    e = g.edges()
    if len(e) and np.any(pos[e[:, 0]] >= pos[e[:, 1]]):
        raise PlanError("order is not topological")
    if np.array_equal(order, np.arange(n)):
        return problem, order
    edges = [(int(pos[u]), int(pos[v])) for u, v in e]
    costs = {k: np.asarray(c)[order] for k, c in g.costs.items()}
    g2 = Graph.from_arrays(
        g.bytes[order], edges, costs, name=g.name, names=[g.names[i] for i in order],
        ids=[g.ids[i] for i in order], phase=g.phase[order], flops=g.flops[order],
        required=np.flatnonzero(g.required[order]).tolist(),
        meta=dict(g.meta),
    )
    return Problem(g2, problem.devices, problem.links, check=False), order


def plan_to_original(plan: Plan, order) -> Plan:
    """Map a plan on the relabelled problem back to the original numbering."""
    order = np.asarray(order, dtype=np.int64)
    return Plan(plan.op, order[plan.node], plan.device, plan.target, plan.devices, plan.meta)


def plan_to_relabelled(plan: Plan, order) -> Plan:
    """Map a plan on the original problem to the relabelled numbering."""
    order = np.asarray(order, dtype=np.int64)
    pos = np.empty(order.shape[0], dtype=np.int64)
    pos[order] = np.arange(order.shape[0])
    return Plan(plan.op, pos[plan.node], plan.device, plan.target, plan.devices, plan.meta)


def first_compute_order(plan: Plan, n: int) -> np.ndarray | None:
    """Nodes in the order the plan first computes them (``None`` if some
    node is never computed)."""
    seen = np.zeros(n, dtype=bool)
    out = []
    for o, v in zip(plan.op.tolist(), plan.node.tolist(), strict=True):
        if o == OP_COMPUTE and not seen[v]:
            seen[v] = True
            out.append(v)
    return np.array(out, dtype=np.int64) if len(out) == n else None


def memory_greedy_order(graph) -> np.ndarray:
    """A topological order that runs next the ready node with the smallest
    memory growth (its output minus the inputs it frees), ties by index."""
    n = graph.n
    b = graph.bytes
    preds = [graph.preds(v).tolist() for v in range(n)]
    succs = [graph.succs(v).tolist() for v in range(n)]
    indeg = np.array([len(p) for p in preds])
    remaining = np.array([len(s) for s in succs])
    ready = [v for v in range(n) if indeg[v] == 0]
    order = []
    while ready:
        best_key, best_v = None, -1
        for v in ready:
            freed = sum(int(b[u]) for u in preds[v] if remaining[u] == 1)
            key = ((int(b[v]) if succs[v] else 0) - freed, v)
            if best_key is None or key < best_key:
                best_key, best_v = key, v
        ready.remove(best_v)
        order.append(best_v)
        for u in preds[best_v]:
            remaining[u] -= 1
        for w in succs[best_v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return np.array(order, dtype=np.int64)
