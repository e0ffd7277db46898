"""The closure model's Lagrangian by a minimum cut: a lower bound on the
least recomputation time of many stages whose costs all differ, without one
SCIP model per stage.

For the closure model of :mod:`hybrid_remat.blocks.staircase` (``x_v`` held,
``r_v`` computed again; ``x_v + r_v >= 1`` for needed ``v``, ``r_v <= x_u +
r_u`` for inputs ``u`` inside the set, ``x_v = 1`` for fixed ``v``) and a
price ``lam >= 0`` per byte held, :meth:`ClosureLagrangian.value` returns a
lower bound on::

    L(lam) = min { c . r + lam * s . x : (x, r) feasible }

so that every feasible ``(x, r)`` holding ``h`` bytes has ``c . r >= L(lam)
- lam * h`` (for every ``lam``: a line below the model's whole Pareto front).

Proof that it is a minimum cut.  Costs and sizes are nonnegative, so some
optimum has ``x_v + r_v <= 1``; write ``A`` for the available nodes
(``x_v + r_v = 1``) and ``R`` for the recomputed ones.  The cost is ``lam *
s(A) + sum_{v in R} (c_v - lam s_v)``; ``A`` contains the forced nodes ``F``
(needed or fixed); a fixed node is held (``R`` avoids it) and ``v in R``
needs ``v`` and its inputs inside the set in ``A``.  A node of ``R`` with
``c_v >= lam s_v`` may be held instead at no greater cost (its successors
see it available either way), so ``R`` lies within ``W = {v not fixed:
w_v = lam s_v - c_v > 0}`` and::

    L(lam) = lam s(F) - max_{R within W} [ w(R) - lam s(T(R) - F) ]

with ``T(R)`` the nodes ``R`` needs (themselves and their inputs inside the
set).  The maximum is a project selection (maximum-weight closure): arcs
source -> ``v`` of capacity ``w_v`` (``v in W``), ``v`` -> tool ``u`` of
infinite capacity for ``u in T(v) - F``, tool ``u`` -> sink of capacity ``lam
s_u``; the maximum is ``w(W) - mincut``, so ``L(lam) = lam s(F) - w(W) +
mincut``.  The cut is computed by :func:`scipy.sparse.csgraph.maximum_flow`
on integer capacities, each the real one divided by a unit and rounded
*down*: every cut's capacity can only drop, so ``unit * maxflow`` is at most
the real minimum cut and the returned value at most ``L(lam)`` (lowered
further by a relative ``1e-12`` for the float sums).  The "infinite" arcs get
more than the whole source capacity, so no minimum cut uses them.

Examples
--------
>>> import numpy as np
>>> # a chain a -> b -> c (sizes 4, 2, 1; costs 1, 2, 4), c needed later
>>> lg = ClosureLagrangian([[], [0], [1]], needed=np.array([False, False, True]),
...                        cost=np.array([1.0, 2.0, 4.0]), size=np.array([4, 2, 1]))
>>> [round(lg.value(lam)[0], 6) for lam in (0.0, 1.0, 10.0)]   # min(4 + lam*0, 0 + lam*1) = (0, 1, 7)
[0.0, 1.0, 7.0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["ClosureLagrangian"]

#: the source arcs' capacities sum to at most this (integers; scipy's flows are int32)
_SOURCE_TOTAL = 2 ** 29
#: capacity of the arcs no minimum cut uses (more than every source arc together)
_INF = 2 ** 30


class ClosureLagrangian:
    """The closure model of one set of nodes (``preds[i]``: local inputs of
    node ``i`` inside the set; ``needed``/``fixed`` bool masks; ``cost``,
    ``size`` per node), ready for :meth:`value` at any price."""

    def __init__(self, preds, *, needed, cost, size, fixed=None):
        needed = np.asarray(needed, dtype=bool)
        k = needed.size
        fixed = np.zeros(k, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool)
        self.cost = np.asarray(cost, dtype=np.float64)
        self.size = np.asarray(size, dtype=np.int64)
        forced = needed | fixed
        self.forced_bytes = int(self.size[forced].sum())
        # projects: nodes that may be recomputed at a gain for some price; tools: nodes not forced
        self.cand = np.flatnonzero(~fixed & (self.size > 0))
        self.tools = np.flatnonzero(~forced)
        tool_id = np.full(k, -1, dtype=np.int64)
        tool_id[self.tools] = np.arange(self.tools.size)
        src, dst = [], []
        for j, v in enumerate(self.cand.tolist()):
            for u in [v, *preds[v]]:
                if tool_id[u] >= 0:
                    src.append(j)
                    dst.append(int(tool_id[u]))
        self.arc_src = np.asarray(src, dtype=np.int64)
        self.arc_dst = np.asarray(dst, dtype=np.int64)
        self.evaluations = 0

    @property
    def n_nodes(self) -> int:
        return int(self.size.size)

    def value(self, lam: float) -> tuple[float, int, float]:
        """``(lower, held, extra)``: a lower bound on ``L(lam)`` (module
        docstring) and the held bytes and extra time of the held set the cut
        chose (a feasible point of the model, for choosing the next price)."""
        from scipy.sparse import csr_array
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow

        self.evaluations += 1
        lam = float(lam)
        w = lam * self.size[self.cand] - self.cost[self.cand]
        pos = w > 0
        total = float(w[pos].sum())
        base = lam * self.forced_bytes
        if total <= 0.0:                        # nothing gains from recomputation: hold the forced nodes
            return base * (1 - 1e-12), self.forced_bytes, 0.0
        unit = total / _SOURCE_TOTAL
        nc, nt = self.cand.size, self.tools.size
        proj = np.flatnonzero(pos)
        src_cap = np.floor(w[proj] / unit).astype(np.int64)
        live = pos[self.arc_src]
        a_src, a_dst = self.arc_src[live], self.arc_dst[live]
        sink_cap = np.minimum(np.floor(lam * self.size[self.tools] / unit), _INF).astype(np.int64)
        # network: 0 source, 1 sink, 2 + j project j, 2 + nc + i tool i
        rows = np.concatenate([np.zeros(proj.size, dtype=np.int64), 2 + a_src, 2 + nc + np.arange(nt)])
        cols = np.concatenate([2 + proj, 2 + nc + a_dst, np.ones(nt, dtype=np.int64)])
        caps = np.concatenate([src_cap, np.full(a_src.size, _INF, dtype=np.int64), sink_cap])
        n_net = 2 + nc + nt
        net = csr_array((caps.astype(np.int32), (rows.astype(np.int32), cols.astype(np.int32))),
                        shape=(n_net, n_net))
        net.sum_duplicates()
        res = maximum_flow(net, 0, 1)
        cut = unit * float(res.flow_value)
        lower = base - total + cut - 1e-12 * (base + total + cut)
        # the source side of a minimum cut: the selected projects and the tools they pay for
        resid = (net - res.flow).tocsr()
        resid.data[resid.data < 0] = 0
        resid.eliminate_zeros()
        side = np.zeros(n_net, dtype=bool)
        side[breadth_first_order(resid, 0, directed=True, return_predecessors=False)] = True
        rec = self.cand[side[2:2 + nc]]
        held = self.forced_bytes + int(self.size[self.tools[side[2 + nc:]]].sum()) - int(self.size[rec].sum())
        return max(lower, 0.0), held, float(self.cost[rec].sum())
