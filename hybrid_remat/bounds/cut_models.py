"""The models behind the cut bound (:mod:`hybrid_remat.bounds.cut`) at one
cut: the covering knapsack (its LP value and its optimum) and the cut with
recomputation chains (its MILP on SCIP and its LP relaxation on HiGHS with
a dual certificate).

Examples
--------
>>> import numpy as np
>>> _cover_lp(np.array([1.0, 4.0]), np.array([1, 2]), 2)   # the cheaper item per byte, then half the other
3.0
"""

from __future__ import annotations

import math

import numpy as np

from ..limits import Limits

__all__: list[str] = []  # helpers of hybrid_remat.bounds.cut


def _cover_lp(cost, size, need) -> float:
    """Least fractional cost of items whose sizes add up to ``need``."""
    if need <= 0:
        return 0.0
    ok = size > 0
    c, s = cost[ok], np.asarray(size[ok], dtype=np.int64)
    order = np.argsort(c / s, kind="stable")
    cum = np.cumsum(s[order])  # int64: exact (bytes sum to at most 2**62), a float sum loses bytes above 2**53
    k = int(np.searchsorted(cum, int(need)))
    if k >= len(order):
        return float("inf")
    before = int(cum[k - 1]) if k else 0
    return float(c[order[:k]].sum() + c[order[k]] * (float(int(need) - before) / float(s[order[k]])))


def _cover_exact(cost, size, need, node_limit: int = 2_000, limits=None) -> float | None:
    """Least cost of whole items covering ``need`` (SCIP, objective scaled so
    its tolerance is relative to the data), or ``None`` when not proven."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model

    if need <= 0:
        return 0.0
    ok = np.flatnonzero(size > 0)
    sc = ObjectiveScale.of(cost[ok])
    with scip_model("cover") as m:
        x = [m.addVar(vtype="B", obj=sc.coef(cost[i])) for i in ok]
        m.addCons(quicksum(float(size[i]) * xi for i, xi in zip(ok, x, strict=True)) >= float(need))
        res = run(m, limits=cap_nodes(limits, node_limit))
        if res.status != "optimal" or res.dual is None:
            res.reraise()
            return None
        res.reraise()
        return max(0.0, sc.bound(res.dual))


def _closure_bound(graph, t, anc, needed, cost, size, budget, node_limit: int = 2_000, limits=None) -> float | None:
    """The cut at ``t`` with recomputation chains (SCIP): a value computed
    after the cut needs its inputs then, so each input is resident at the cut
    or computed after it too.  ``x_v``: ``v`` resident at the cut, ``r_v``:
    computed after it, over ``t``'s ancestors; ``t``'s inputs are resident.
    Returns the trusted dual bound in real units (valid at a node or time
    limit too; the objective is scaled so its tolerance is relative to the
    data), or ``None``."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model

    nodes = np.flatnonzero(anc).tolist()
    sc = ObjectiveScale.of(cost[nodes]) if nodes else ObjectiveScale()
    with scip_model("closure") as m:
        preds_t = set(graph.preds(t).tolist())
        x = {v: m.addVar(vtype="B", lb=1.0 if v in preds_t else 0.0) for v in nodes}
        r = {v: m.addVar(vtype="B", obj=sc.coef(cost[v])) for v in nodes}
        for v in nodes:
            if needed[v]:
                m.addCons(x[v] + r[v] >= 1)
            for u in graph.preds(v).tolist():
                m.addCons(x[u] + r[u] - r[v] >= 0)
        m.addCons(quicksum(float(size[v]) * x[v] for v in nodes) <= float(budget - size[t]))
        res = run(m, limits=cap_nodes(limits, node_limit))
        res.reraise()
        if res.status == "infeasible" or res.dual is None or abs(res.dual) >= 1e19:
            return None
        return max(0.0, sc.bound(res.dual))


def _closure_lp_bound(graph, t, anc, needed, cost, size, budget, limits=None) -> float | None:
    """The LP relaxation of :func:`_closure_bound` (HiGHS through scipy),
    certified: the value returned is the Lagrangian of the LP's dual
    multipliers (clipped to the right sign), which bounds the LP and hence
    the cut by weak duality whatever the solver's tolerances.  ``None`` when
    the LP did not finish (time limit) or is infeasible.

    For the cut constraints ``x_v + r_v >= 1`` (needed), ``r_v <= x_u +
    r_u`` (edges) and the fixed inputs the relaxation is integral, so only
    the knapsack row separates it from the MILP (measured: within 0.5 % of
    the MILP's value on the llama graphs)."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    limits = limits or Limits()
    nodes = np.flatnonzero(anc)
    k = nodes.size
    if k == 0:
        return None
    loc = np.full(graph.n, -1, dtype=np.int64)
    loc[nodes] = np.arange(k)
    cscale = float(cost[nodes].max()) if cost[nodes].max() > 0 else 1.0
    c = np.concatenate([np.zeros(k), cost[nodes] / cscale])
    need = np.flatnonzero(needed[nodes])
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr))
    dst = graph.succ_idx
    inside = anc[dst]                      # v an ancestor => its inputs are ancestors too
    eu, ev = loc[src[inside]], loc[dst[inside]]
    ne, nm = need.size, eu.size
    # rows: -x_v - r_v <= -1 ; r_v - x_u - r_u <= 0 ; sum s x / B <= (B - s_t) / B
    rows = np.concatenate([np.repeat(np.arange(ne), 2), ne + np.repeat(np.arange(nm), 3), np.full(k, ne + nm)])
    cols = np.concatenate([np.stack([need, k + need], 1).ravel(), np.stack([k + ev, eu, k + eu], 1).ravel(),
                           np.arange(k)])
    vals = np.concatenate([np.full(2 * ne, -1.0), np.tile([1.0, -1.0, -1.0], nm), size[nodes] / float(budget)])
    A = sp.csr_matrix((vals, (rows, cols)), shape=(ne + nm + 1, 2 * k))
    b = np.concatenate([np.full(ne, -1.0), np.zeros(nm), [(budget - size[t]) / float(budget)]])
    lb = np.zeros(2 * k)
    lb[loc[graph.preds(t)]] = 1.0
    ub = np.ones(2 * k)
    opts = {"presolve": True}
    left = limits.left()
    if math.isfinite(left):
        opts["time_limit"] = max(0.01, left)
    res = linprog(c, A_ub=A, b_ub=b, bounds=np.stack([lb, ub], 1), method="highs", options=opts)
    if res.status != 0 or getattr(res, "ineqlin", None) is None:
        return None
    mu = np.maximum(0.0, -np.asarray(res.ineqlin.marginals))   # multipliers of A z <= b
    d = c + A.T @ mu
    value = -float(mu @ b) + float(np.where(d > 0, d * lb, d * ub).sum())
    return max(0.0, value * cscale)
