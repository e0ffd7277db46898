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

from ..core.staged import first_compute_order
from ..errors import PlanError
from ..graph import Graph
from ..plan import Plan
from ..problem import Problem

__all__ = ["relabel", "plan_to_original", "plan_to_relabelled", "first_compute_order", "memory_greedy_order",
           "InOrder"]


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


class InOrder:
    """``problem`` relabelled along ``plan``'s order of first computations,
    with the plan, an ``on_incumbent`` callback and :meth:`back` mapping
    plans to the original numbering.  The identity (``order`` is ``None``)
    when ``plan`` is ``None``, already in index order, does not compute every
    node, or ``follow`` is false.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.plan import keep_all_plan
    >>> p = Problem.single(chain(3, bytes=1), "100%")
    >>> io = InOrder(p, keep_all_plan(p.graph, "cost"))
    >>> io.order is None and io.problem is p
    True
    """

    def __init__(self, problem: Problem, plan: Plan | None, on_incumbent=None, follow: bool = True):
        self.order = None
        fo = first_compute_order(plan, problem.graph.n) if plan is not None and follow else None
        if fo is not None and not np.array_equal(fo, np.arange(problem.graph.n)):
            self.order = fo
        if self.order is None:
            self.problem, self.plan, self.on_incumbent = problem, plan, on_incumbent
            return
        self.problem, self.order = relabel(problem, self.order)
        self.plan = plan_to_relabelled(plan, self.order)
        self.on_incumbent = None
        if on_incumbent is not None:
            order = self.order
            self.on_incumbent = lambda p, source=None: on_incumbent(plan_to_original(p, order), source)

    def back(self, plan: Plan | None) -> Plan | None:
        """A plan of the relabelled problem in the original numbering."""
        return plan if plan is None or self.order is None else plan_to_original(plan, self.order)


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
