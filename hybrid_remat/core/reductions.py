"""Reductions: solve a changed problem, map its plans back (apply -> solve
-> invert, as cvxpy's reductions do).

A :class:`NodeMap` keeps the nodes ``nodes[0], nodes[1], ...`` of a problem
and renumbers them ``0, 1, ...``.  Two uses, one mechanism:

* **relabel** (:func:`relabel`): every node, in another topological order.
  The staged models and the staged greedy fix the order of *first*
  computations to the graph's numbering; relabelling along another order
  (for example the first-compute order of a heuristic plan) makes that
  order's plans representable.
* **induced sub-problem** (:func:`induced`): some nodes and the edges among
  them (inputs from outside the set are free), e.g. one block of a layered
  graph or one part of a partition bound.

A :class:`NodeMap` is a :class:`~hybrid_remat.core.reduction.Reduction`:
``apply(problem)`` gives the new problem, ``invert(plan)`` maps one of its
plans back to the original numbering, ``forward(plan)`` maps an original
plan (on the kept nodes) to the new numbering, and ``carry`` keeps a bound
over every plan for a relabelling and names the class ``"induced on k of n
nodes"`` for a sub-problem.  :func:`solve_reduced` chains reductions.  The orders used with
relabelling live here too: :func:`first_compute_order`,
:func:`memory_greedy_order`; :class:`InOrder` relabels a problem along a
plan's own order (the staged models use it to represent their incumbent).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.plan import keep_all_plan
>>> p = Problem.single(chain(3, bytes=1), 2)
>>> q, order = relabel(p, [0, 1, 2])
>>> q.graph.n
3
>>> sub = NodeMap([1, 2])
>>> sp = sub.apply(p)
>>> sp.graph.n, sub.invert(keep_all_plan(sp.graph, "cost")).node.tolist()
(2, [1, 2, 1, 2])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import PlanError
from ..graph import Graph
from ..problem import Problem
from .plans import Plan
from .reduction import ALL_PLANS, Reduction
from .staged import first_compute_order

__all__ = [
    "NodeMap", "relabel", "induced", "solve_reduced", "plan_to_original", "plan_to_relabelled", "relabel_plan",
    "first_compute_order", "memory_greedy_order", "InOrder",
]


class NodeMap(Reduction):
    """Keep ``nodes`` (in this order) and number them ``0..k-1`` (a
    :class:`~hybrid_remat.core.reduction.Reduction`).

    Parameters
    ----------
    nodes : sequence of int
        Distinct node indices of the original graph; the edges among them
        must go forward in this order (a topological order of the kept
        nodes).

    Attributes
    ----------
    old_of_new : ndarray of int64
        ``old_of_new[k]`` is the original index of new node ``k``.
    """

    name = "node map"

    def __init__(self, nodes):
        super().__init__()
        self.old_of_new = np.asarray(nodes, dtype=np.int64).reshape(-1)

    def new_of_old(self, n: int) -> np.ndarray:
        """``(n,)`` array: each original node's new index (-1: not kept)."""
        out = np.full(n, -1, dtype=np.int64)
        out[self.old_of_new] = np.arange(self.old_of_new.shape[0])
        return out

    def is_identity(self, n: int) -> bool:
        return self.old_of_new.shape[0] == n and bool(np.array_equal(self.old_of_new, np.arange(n)))

    def graph(self, g: Graph) -> Graph:
        """The graph on the kept nodes, every per-node attribute carried over.

        Raises
        ------
        PlanError
            Repeated or unknown nodes, or an edge among them that goes
            backwards in the given order.
        """
        nodes = self.old_of_new
        if nodes.size == 0 or nodes.min() < 0 or nodes.max() >= g.n:
            raise PlanError(f"a node map needs node indices in 0..{g.n - 1}")
        if np.unique(nodes).size != nodes.size:
            raise PlanError("a node map lists a node twice")
        new = self.new_of_old(g.n)
        e = g.edges()
        inside = (new[e[:, 0]] >= 0) & (new[e[:, 1]] >= 0) if len(e) else np.zeros(0, dtype=bool)
        ne = new[e[inside]] if len(e) else np.zeros((0, 2), dtype=np.int64)
        if len(ne) and np.any(ne[:, 0] >= ne[:, 1]):
            raise PlanError("order is not topological")
        return Graph.from_arrays(
            g.bytes[nodes], [tuple(x) for x in ne.tolist()], {k: np.asarray(c)[nodes] for k, c in g.costs.items()},
            estimated={k: np.asarray(v)[nodes] for k, v in g.estimated.items()}, name=g.name,
            names=[g.names[i] for i in nodes], ids=[g.ids[i] for i in nodes], phase=g.phase[nodes],
            flops=g.flops[nodes], required=np.flatnonzero(g.required[nodes]).tolist(), meta=dict(g.meta),
        )

    def apply(self, problem: Problem) -> Problem:
        """The problem on the kept nodes (same devices, links, objective)."""
        self.original = problem
        if self.is_identity(problem.graph.n):
            return problem
        return Problem(self.graph(problem.graph), problem.devices, problem.links, check=False,
                       objective=problem.objective)

    def invert(self, plan: Plan | None) -> Plan | None:
        """A plan of the reduced problem in the original numbering."""
        if plan is None:
            return None
        return Plan(plan.op, self.old_of_new[plan.node], plan.device, plan.target, plan.devices, dict(plan.meta))

    def forward(self, plan: Plan, n: int | None = None) -> Plan:
        """An original plan (``n`` nodes; default: the original problem's) in
        the reduced numbering.

        Raises
        ------
        PlanError
            The plan touches a node that is not kept.
        """
        if n is None:
            n = self._original().graph.n
        new = self.new_of_old(n)[plan.node]
        if (new < 0).any():
            raise PlanError(f"the plan uses node {int(plan.node[new < 0][0])}, which the reduction drops")
        return Plan(plan.op, new, plan.device, plan.target, plan.devices, dict(plan.meta))

    def scope_of(self) -> str:
        """:data:`~hybrid_remat.core.reduction.ALL_PLANS` when every node is
        kept (a relabelling: the same plans), else the induced class."""
        n = self._original().graph.n
        k = self.old_of_new.shape[0]
        return ALL_PLANS if k == n else f"induced on {k} of {n} nodes"


def relabel(problem: Problem, order) -> tuple[Problem, np.ndarray]:
    """The same problem with node ``order[k]`` renumbered ``k``; returns it
    and ``order`` (as an array).

    Raises
    ------
    PlanError
        ``order`` is not a topological order of all nodes.
    """
    n = problem.graph.n
    order = np.asarray(order, dtype=np.int64)
    if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
        raise PlanError("order must be a permutation of the nodes")
    return NodeMap(order).apply(problem), order


def induced(problem: Problem, nodes) -> tuple[Problem, NodeMap]:
    """The sub-problem on ``nodes`` (sorted; the edges among them, inputs
    from outside free) and the map back."""
    m = NodeMap(np.unique(np.asarray(nodes, dtype=np.int64)))
    return m.apply(problem), m


def solve_reduced(problem: Problem, reductions: Sequence, solve: Callable):
    """Apply ``reductions`` in order, ``solve`` the last problem (a callable
    returning a plan or ``None``) and invert the plan back through them."""
    probs = [problem]
    for r in reductions:
        probs.append(r.apply(probs[-1]))
    plan = solve(probs[-1])
    for r in reversed(reductions):
        plan = r.invert(plan)
    return plan


def plan_to_original(plan: Plan, order) -> Plan:
    """Map a plan on the relabelled problem back to the original numbering."""
    return NodeMap(order).invert(plan)


def plan_to_relabelled(plan: Plan, order) -> Plan:
    """Map a plan on the original problem to the relabelled numbering."""
    order = np.asarray(order, dtype=np.int64)
    return NodeMap(order).forward(plan, order.shape[0])


def relabel_plan(plan: Plan | None, mapping) -> Plan | None:
    """``plan`` with every node ``v`` renamed ``mapping[v]``."""
    return NodeMap(mapping).invert(plan)


def memory_greedy_order(graph) -> np.ndarray:
    """A topological order that runs next the ready node with the smallest
    memory growth (its output minus the inputs it frees), ties by index."""
    import heapq

    n = graph.n
    b = graph.bytes
    pp, pi, sp, si = graph.pred_ptr, graph.pred_idx, graph.succ_ptr, graph.succ_idx
    indeg = np.diff(pp).copy()
    remaining = np.diff(sp).copy()

    def key(v):
        freed = sum(int(b[u]) for u in pi[pp[v]:pp[v + 1]] if remaining[u] == 1)
        return ((int(b[v]) if sp[v + 1] > sp[v] else 0) - freed, v)

    # keys change when an input's remaining readers drop to one: re-push then (lazy deletion)
    heap = [key(v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    ready = np.zeros(n, dtype=bool)
    ready[[v for _, v in heap]] = True
    done = np.zeros(n, dtype=bool)
    order = []
    while heap:
        item = heapq.heappop(heap)
        v = item[1]
        if done[v] or item != key(v):
            continue
        done[v] = True
        order.append(v)
        for u in pi[pp[v]:pp[v + 1]]:
            remaining[u] -= 1
            if remaining[u] == 1:  # its last reader now frees it: that reader's key fell
                for w in si[sp[u]:sp[u + 1]]:
                    if ready[w] and not done[w]:
                        heapq.heappush(heap, key(w))
        for w in si[sp[v]:sp[v + 1]]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready[w] = True
                heapq.heappush(heap, key(w))
    return np.array(order, dtype=np.int64)


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
