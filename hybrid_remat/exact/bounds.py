"""Lower bounds that hold for every plan (any order, any schedule).

The staged MILP's bound covers staged plans only (see
:mod:`hybrid_remat.exact.checkmate`).  The *cut bound* here covers every
single-device plan the simulator accepts, and costs a few matrix products:

Take any node ``t`` and the moment ``t`` is computed for the first time.
Let ``N(t)`` be its ancestors that have a consumer among ``t``'s
descendants.  Every descendant runs after that moment, so every ``v`` in
``N(t)`` is either resident then or computed again afterwards (its first
computation came before: it is an ancestor of ``t``).  While ``t`` is
computed, its inputs and its output are resident too, so the resident part
``X`` of ``N(t)`` satisfies ``bytes(X) + bytes(inputs of t and t) <= B``
and the plan pays at least ``sum of c_v over N(t) \\ X`` on top of one
computation per node.  The least such sum is a covering knapsack; its LP
value (greedy by cost per byte) bounds it from below, and the exact value is
computed for the most promising nodes, together with a stronger version
that follows recomputation chains: a value computed after the cut needs its
own inputs then, so each of them is resident at the cut or computed after
it too (a small MILP over ``t``'s ancestors; its dual bound is used).  The
bound is the best over ``t``.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.exact.brute import brute_force_optimum
>>> p = Problem.single(chain(6, bytes=1), 3)
>>> lb = cut_lower_bound(p)
>>> p.base_cost <= lb.value <= brute_force_optimum(p)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["CutBound", "CutBoundSource", "cut_lower_bound", "partition_lower_bound", "ancestor_matrix"]


@dataclass
class CutBound:
    """A cut bound: ``value`` bounds every plan's total compute time.

    Attributes
    ----------
    value : float
        ``base cost + extra``.
    extra : float
        The recomputation cost that no plan avoids.
    node : int
        The node ``t`` whose cut gives the bound (-1 when none is binding).
    method : str
        How ``extra`` was obtained at ``node``: ``"lp"`` (the knapsack's LP
        value), ``"knapsack"`` (its optimum) or ``"chains"`` (the dual bound
        of the cut with recomputation chains, :func:`_closure_bound`).
    per_node : ndarray
        The LP value of every node's cut.
    """

    value: float
    extra: float
    node: int
    method: str
    per_node: np.ndarray = field(repr=False)


def ancestor_matrix(graph) -> np.ndarray:
    """``A[v, u]``: ``u`` is a (strict) ancestor of ``v`` (nodes are in topological order).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> ancestor_matrix(chain(3)).astype(int).tolist()
    [[0, 0, 0], [1, 0, 0], [1, 1, 0]]
    """
    n = graph.n
    A = np.zeros((n, n), dtype=bool)
    for v in range(n):
        p = graph.preds(v)
        if p.size:
            A[v, p] = True
            A[v] |= A[p].any(axis=0)
    return A


def _cover_lp(cost, size, need) -> float:
    """Least fractional cost of items whose sizes add up to ``need``."""
    if need <= 0:
        return 0.0
    ok = size > 0
    c, s = cost[ok], size[ok].astype(np.float64)
    order = np.argsort(c / s, kind="stable")
    cum = np.cumsum(s[order])
    k = int(np.searchsorted(cum, need))
    if k >= len(order):
        return float("inf")
    before = float(cum[k - 1]) if k else 0.0
    return float(c[order[:k]].sum() + c[order[k]] * (need - before) / s[order[k]])


def _cover_exact(cost, size, need, node_limit: int = 2_000) -> float | None:
    """Least cost of whole items covering ``need`` (SCIP), or ``None`` when not proven."""
    from pyscipopt import Model, quicksum

    if need <= 0:
        return 0.0
    ok = np.flatnonzero(size > 0)
    m = Model("cover")
    try:
        m.hideOutput()
        m.setParam("limits/nodes", node_limit)
        m.setParam("lp/threads", 1)
        x = [m.addVar(vtype="B", obj=float(cost[i])) for i in ok]
        m.addCons(quicksum(float(size[i]) * xi for i, xi in zip(ok, x, strict=True)) >= float(need))
        m.optimize()
        if m.getStatus() != "optimal":
            return None
        return float(m.getDualbound())
    finally:
        m.free()


def _closure_bound(graph, t, anc, needed, cost, size, budget, node_limit: int = 2_000) -> float | None:
    """The cut at ``t`` with recomputation chains (SCIP): a value computed
    after the cut needs its inputs then, so each input is resident at the cut
    or computed after it too.  ``x_v``: ``v`` resident at the cut, ``r_v``:
    computed after it, over ``t``'s ancestors; ``t``'s inputs are resident.
    Returns the dual bound (valid at a node limit too), or ``None``."""
    from pyscipopt import Model, quicksum

    nodes = np.flatnonzero(anc).tolist()
    m = Model("closure")
    try:
        m.hideOutput()
        m.setParam("limits/nodes", node_limit)
        m.setParam("lp/threads", 1)
        preds_t = set(graph.preds(t).tolist())
        x = {v: m.addVar(vtype="B", lb=1.0 if v in preds_t else 0.0) for v in nodes}
        r = {v: m.addVar(vtype="B", obj=float(cost[v])) for v in nodes}
        for v in nodes:
            if needed[v]:
                m.addCons(x[v] + r[v] >= 1)
            for u in graph.preds(v).tolist():
                m.addCons(x[u] + r[u] - r[v] >= 0)
        m.addCons(quicksum(float(size[v]) * x[v] for v in nodes) <= float(budget - size[t]))
        m.optimize()
        if m.getStatus() == "infeasible":
            return None
        db = m.getDualbound()
        return max(0.0, float(db)) if abs(db) < 1e19 else None
    finally:
        m.free()


def cut_lower_bound(problem, *, exact_nodes: int = 5, closure: bool = True) -> CutBound:
    """The cut bound of a single-device problem (see the module docstring).

    Parameters
    ----------
    problem : Problem
        Single device (a second memory could hold what the bound drops).
    exact_nodes : int
        Solve the knapsack exactly for this many nodes with the best LP values.
    closure : bool
        For those nodes, solve the cut with recomputation chains
        (:func:`_closure_bound`, which contains the knapsack); ``False``:
        the knapsack alone.

    Returns
    -------
    CutBound

    Raises
    ------
    ValueError
        On a multi-device problem.
    """
    if not problem.is_single_device:
        raise ValueError("the cut bound covers single-device problems only")
    g = problem.graph
    n = g.n
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.asarray(g.bytes, dtype=np.int64)
    B = int(problem.budgets[0])
    base = float(cost.sum())
    A = ancestor_matrix(g)                       # A[v, u]: u ancestor of v
    D = A.T                                      # D[t, w]: w descendant of t
    adj = np.zeros((n, n), dtype=np.float32)     # adj[v, w]: edge v -> w
    e = g.edges()
    if len(e):
        adj[e[:, 0], e[:, 1]] = 1.0
    # reads[v, t]: v has a consumer among t's descendants
    reads = (adj @ D.T.astype(np.float32)) > 0
    per_node = np.zeros(n, dtype=np.float64)
    needs = np.zeros(n, dtype=np.float64)
    items = {}
    for t in range(n):
        preds = g.preds(t)
        cand = A[t] & reads[:, t]
        cand[preds] = False
        idx = np.flatnonzero(cand)
        need = float(size[idx].sum() + size[preds].sum() + size[t] - B)
        if need <= 0 or idx.size == 0:
            continue
        per_node[t] = _cover_lp(cost[idx], size[idx], need)
        needs[t] = need
        items[t] = idx
    best_t = int(per_node.argmax()) if n and per_node.max() > 0 else -1
    extra, method = (float(per_node[best_t]), "lp") if best_t >= 0 else (0.0, "knapsack")
    if best_t >= 0 and exact_nodes > 0:
        for t in np.argsort(-per_node)[:exact_nodes].tolist():
            if per_node[t] <= 0:
                break
            if not closure:  # the chains model contains the knapsack: solve one or the other
                val = _cover_exact(cost[items[t]], size[items[t]], needs[t])
                if val is not None and val >= extra - 1e-12 * max(1.0, abs(extra)):
                    extra, best_t, method = max(val, extra), int(t), "knapsack"
                continue
            if closure:
                needed = np.zeros(n, dtype=bool)
                needed[items[t]] = True
                cval = _closure_bound(g, t, A[t], needed, cost, size, B)
                if cval is not None and cval >= extra - 1e-12 * max(1.0, abs(extra)):
                    extra, best_t, method = max(cval, extra), int(t), "chains"
    return CutBound(base + extra, extra, best_t, method, per_node)


def partition_lower_bound(problem, parts, *, exact_nodes: int = 2) -> tuple[float, list[float]]:
    """A bound for the whole from the parts of a partition of the nodes.

    Each part's *induced* problem (its nodes and the edges among them; inputs
    from other parts are free and take no memory; the same budget) is a
    relaxation of the whole restricted to the part: projecting any valid plan
    on a part gives a valid plan of the part's problem, no costlier than the
    plan's own computations of the part's nodes.  So the parts' cut bounds
    add up: ``base + sum of the parts' extras`` bounds every plan.  It is weak
    when every part fits the budget on its own (then it is the trivial bound),
    which is why the whole graph's cut bound is computed as well.

    Returns
    -------
    (value, extras)
        The bound and each part's extra cost.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> p = Problem.single(chain(6, bytes=1), 2)
    >>> partition_lower_bound(p, [[0, 1, 2], [3, 4, 5]])[0] == p.base_cost
    True
    """
    from ..graph import Graph
    from ..problem import Problem

    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    kind = problem.primary.kind
    B = int(problem.budgets[0])
    seen = np.zeros(g.n, dtype=bool)
    extras = []
    e = g.edges()
    for part in parts:
        nodes = np.unique(np.asarray(part, dtype=np.int64))
        if seen[nodes].any():
            raise ValueError("the parts overlap")
        seen[nodes] = True
        local = np.full(g.n, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        inside = (local[e[:, 0]] >= 0) & (local[e[:, 1]] >= 0) if len(e) else np.zeros(0, bool)
        sub = Graph.from_arrays(g.bytes[nodes], [(int(local[u]), int(local[v])) for u, v in e[inside]],
                                {kind: cost[nodes]}, name=f"{g.name}[part]")
        sp = Problem.single(sub, B, kind=kind)
        extras.append(cut_lower_bound(sp, exact_nodes=exact_nodes).extra)
    return float(cost.sum() + sum(extras)), extras


class CutBoundSource:
    """The cut bound as a registered bounding source (it plans nothing).

    ``anytime_solve`` calls :meth:`run_detailed` like any heuristic and
    takes its ``lower_bound``; ``bound_scope = "all plans"`` tells it the
    bound covers every plan, so a plan that reaches it is proven optimal.
    Graphs over ``max_nodes`` are skipped (the bound uses ``n x n`` matrices).
    """

    name = "cut_bound"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "bound_only"})
    rank = 5.0
    bound_scope = "all plans"

    def __init__(self, max_nodes: int = 5000):
        self.max_nodes = int(max_nodes)

    def run(self, problem, *, seed: int = 0):
        return None

    def run_detailed(self, problem, *, seed: int = 0, deadline: float | None = None) -> dict:
        """``{"plan": None, "lower_bound", "stats"}`` (``lower_bound`` is ``None`` when skipped)."""
        if not problem.is_single_device or problem.graph.n > self.max_nodes:
            return {"plan": None, "lower_bound": None, "stats": {"skipped": "single device, at most "
                                                                            f"{self.max_nodes} nodes"}}
        cb = cut_lower_bound(problem)
        return {"plan": None, "lower_bound": cb.value,
                "stats": {"extra": cb.extra, "node": cb.node, "method": cb.method}}

    def __repr__(self) -> str:
        return f"<bound {self.name}@{self.version}>"
