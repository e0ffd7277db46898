"""The *chain-of-cuts* bound: several memory constraints at once, valid for
every single-device plan in any order.

The cut bound (:mod:`hybrid_remat.bounds.cut`) looks at one moment: the
first computation of one node ``t``.  Here a chain of nodes ``t_1, ..., t_k``
is taken, each an ancestor of the next, so that in **every** plan their
first computations happen in that order (a node is computed after its
inputs).  Call the first computation of ``t_i`` *cut i*; the time between
cut ``i`` and cut ``i + 1`` (after cut ``k``: to the end) is *interval i*.

For an ancestor ``v`` of ``t_i`` (written ``v in A_i``; ``A_i`` grows with
``i``) every computation of ``v`` after cut ``i`` is a recomputation: its
first came before ``t_i``'s.  Variables, for ``v in A_i``:

* ``x[v, i]``: ``v`` is resident at cut ``i`` (1 for ``t_i``'s inputs);
* ``z[v, i]``: ``v`` is computed at least once in interval ``i``.

Every plan gives a 0/1 point that satisfies:

1. memory at cut ``i``: ``sum of bytes(v) x[v, i]`` over ``A_i`` minus
   ``t_i``'s inputs, plus ``bytes(t_i)`` and its inputs', is at most the
   budget (the simulator counts memory after the allocation; values outside
   ``A_i`` only add to it);
2. need: for ``v in A_i`` (not an input of ``t_i``) read by a descendant
   ``w`` of ``t_i``: ``w``'s first computation comes after cut ``i`` and
   needs ``v`` resident, so ``v`` is resident at cut ``i`` or computed after
   it and before ``w``.  When ``w`` is an ancestor of ``t_j`` (or is
   ``t_j``), ``w``'s first computation precedes cut ``j``:
   ``x[v, i] + sum_{i <= l < j} z[v, l] >= 1`` (``j = k``: every later
   interval), the smallest such ``j`` over ``v``'s readers;
3. persistence: for ``v in A_{i-1}``, ``v`` resident at cut ``i`` was
   resident at cut ``i - 1`` or computed in between:
   ``x[v, i] <= x[v, i-1] + z[v, i-1]``;
4. chains: a computation of ``v in A_i`` in interval ``i`` needs each input
   ``u`` resident then, so ``u`` was resident at cut ``i`` or computed in
   interval ``i`` before it: ``z[v, i] <= x[u, i] + z[u, i]``.

The plan's recomputation cost is at least ``sum c_v z[v, i]`` (each
interval's computations of ``v in A_i`` are recomputations, and distinct
intervals are disjoint), so the least value of that sum over the
constraints, or of its LP relaxation, plus one computation per node bounds
every plan's serial time.  With ``k = 1`` it is the cut bound's chains
model; a longer chain adds that a value recomputed for one cut has to be
kept (and take memory) until the next one, or be recomputed again.

The LP is solved by HiGHS (scipy) and *certified*: the value returned is
the Lagrangian of the LP's dual multipliers, clipped to the right sign,
which is a lower bound of the LP whatever the solver's tolerances (weak
duality).  Then models up to 60k variables are solved as MILPs by SCIP with
the time left (its trusted dual bound, valid at any node or time limit);
the larger value is kept.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.oracle import brute_force
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.bounds.cut import cut_lower_bound
>>> g = training_graph(nx.path_graph(5, create_using=nx.DiGraph))   # unit bytes and costs
>>> p = Problem.single(g, 6)
>>> cut_lower_bound(p).value, round(multicut_lower_bound(p).value, 4), brute_force(p)[0]
(19.0, 20.0, 20.0)
"""

from __future__ import annotations

import math

import numpy as np

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits, now
from .cut import _cut_lp_kernel, _reference_memory, cut_items, reach, serial_single_device
from .cut_chains import MultiCutBound, SparseRows, _certified_lp, cut_chain, spread_cuts

__all__ = ["MultiCutBound", "MultiCutBoundSource", "multicut_lower_bound", "cut_chain", "spread_cuts", "MAX_NODES"]

#: graphs above this size get the grouped model (:mod:`~hybrid_remat.bounds.multicut_groups`) from the
#: registered bound; :func:`multicut_lower_bound` leaves them (its model is built in Python)
MAX_NODES = 5_000
#: the LP up to this many variables (beyond: a shorter chain)
_MAX_LP_VARS = 400_000
#: SCIP's MILP after the LP up to this many variables
_MAX_MILP_VARS = 60_000
#: seconds per variable and row of the LP (measured 4-5 s at 35-80k on the shared 2-core machine; conservative)
_LP_SECONDS_PER_ITEM = 6e-5
#: seconds per variable and row to build and start the MILP (measured ~1e-4 on the shared 2-core machine)
_MILP_SECONDS_PER_ITEM = 3e-4
#: the Python loops that build the models look at the clock every this many rows or variables
_CHECK_EVERY = 2048


def _screen(problem, work: int):
    """Per-node knapsack LP value of each cut (the cut bound's screening;
    cuts beyond ``work`` kernel steps are left at 0)."""
    g = problem.graph
    cost = np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.ascontiguousarray(g.bytes, dtype=np.int64)
    B = int(problem.budgets[0])
    ref = _reference_memory(size, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx)
    ts = np.flatnonzero(ref > B)
    pos = np.flatnonzero(size > 0)
    order = pos[np.argsort(cost[pos] / size[pos], kind="stable")]
    ts = ts[np.argsort(-ref[ts], kind="stable")]
    value, _, _, _ = _cut_lp_kernel(ts, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx, order, cost, size, B,
                                    np.int64(work))
    return np.where(np.isfinite(value), value, 0.0)


def _model(problem, chain, limits):
    """The LP of the module docstring as ``(c, A, b, lb, ub, cost scale)``
    (rows ``A z <= b``, costs divided by the scale); ``None`` when the
    deadline passes while building."""

    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.asarray(g.bytes, dtype=np.int64)
    B = int(problem.budgets[0])
    k = len(chain)
    anc = [reach(g, t, up=True) for t in chain]
    items = [cut_items(g, t)[1] for t in chain]
    nodes = [np.flatnonzero(a) for a in anc]
    # variable index of x[v, i] and z[v, i]
    xi, zi = [], []
    nv = 0
    for i in range(k):
        loc = np.full(g.n, -1, dtype=np.int64)
        loc[nodes[i]] = np.arange(nodes[i].size) + nv
        nv += nodes[i].size
        xi.append(loc)
    for i in range(k):
        loc = np.full(g.n, -1, dtype=np.int64)
        loc[nodes[i]] = np.arange(nodes[i].size) + nv
        nv += nodes[i].size
        zi.append(loc)
    cscale = float(cost.max()) if cost.size and cost.max() > 0 else 1.0
    c = np.zeros(nv)
    lb = np.zeros(nv)
    ub = np.ones(nv)
    rows = SparseRows()
    row = rows.add

    src_all = np.repeat(np.arange(g.n, dtype=np.int64), np.diff(g.succ_ptr))
    first = np.full(g.n, k, dtype=np.int64)  # the first cut that a node's first computation precedes
    for j in range(k - 1, -1, -1):
        first[anc[j]] = j
        first[chain[j]] = j
    for i, t in enumerate(chain):
        if limits.expired():
            return None
        nd = nodes[i]
        c[zi[i][nd]] = cost[nd] / cscale
        preds = g.preds(t)
        lb[xi[i][preds]] = 1.0
        free = np.setdiff1d(nd, preds)
        need_t = int(size[t]) + int(size[preds].sum())
        room = B - need_t
        if free.size:  # 1. memory (scaled by the budget)
            row(xi[i][free].tolist(), (size[free] / float(B)).tolist(), room / float(B))
        desc = reach(g, t, up=False)
        for q, v in enumerate(np.flatnonzero(items[i]).tolist()):  # 2. need, up to the first reader's next cut
            if q % _CHECK_EVERY == 0 and limits.expired():
                return None
            readers = g.succs(v)
            end = int(first[readers[desc[readers]]].min())
            row([xi[i][v]] + [zi[j][v] for j in range(i, end)], [-1.0] * (1 + end - i), -1.0)
        if i > 0:  # 3. persistence
            if limits.expired():
                return None
            for v in nodes[i - 1].tolist():
                row([xi[i][v], xi[i - 1][v], zi[i - 1][v]], [1.0, -1.0, -1.0], 0.0)
        inside = anc[i][g.succ_idx]  # 4. chains: edges u -> v with v in A_i
        for q, (u, v) in enumerate(zip(src_all[inside].tolist(), g.succ_idx[inside].tolist(), strict=True)):
            if q % _CHECK_EVERY == 0 and limits.expired():   # a cut's edges: 100k rows and more at 2k nodes
                return None
            row([zi[i][v], xi[i][u], zi[i][u]], [1.0, -1.0, -1.0], 0.0)
    if limits.expired():
        return None
    A, b = rows.matrix(nv)
    return c, A, b, lb, ub, cscale


def _milp(c, A, b, lb, ub, limits) -> float | None:
    """SCIP's trusted dual bound of the 0/1 model (model units), or ``None``."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model

    sc = ObjectiveScale.of(c)
    A = A.tocsr()
    with scip_model("multicut") as m:
        z = []
        for j in range(c.size):
            if j % _CHECK_EVERY == 0 and limits.expired():
                return None
            z.append(m.addVar(vtype="B", lb=float(lb[j]), ub=float(ub[j]), obj=sc.coef(c[j])))
        for r in range(A.shape[0]):
            if r % 500 == 0 and limits.expired():  # the build honours the deadline too
                return None
            s, e = A.indptr[r], A.indptr[r + 1]
            m.addCons(quicksum(float(a) * z[j] for j, a in zip(A.indices[s:e].tolist(), A.data[s:e].tolist(),
                                                                 strict=True)) <= float(b[r]))
        if limits.expired():
            return None
        res = run(m, limits=cap_nodes(limits, 2_000))
        res.reraise()
        if res.status == "infeasible" or res.dual is None or abs(res.dual) >= 1e19:
            return None
        return max(0.0, sc.bound(res.dual))


def multicut_lower_bound(problem, *, max_cuts: int = 40, milp: bool = True, limits: Limits | None = None
                         ) -> MultiCutBound:
    """The chain-of-cuts bound of a single-device problem (module docstring).

    Parameters
    ----------
    problem : Problem
        Single device, serial time.
    max_cuts : int
        Longest chain (shortened further while the LP has more than
        ``400_000`` variables or does not fit the time left).  The cuts lie
        on the heaviest path of the cut screen, chosen by
        :func:`spread_cuts`; a chain of ``max_cuts // 3`` cuts is solved
        first, then the longest that fits, and the better value is kept
        (every chain gives a bound over every plan).
    milp : bool
        After the LP, solve models of at most ``60_000`` variables as a
        MILP (SCIP) with the time left; the larger of the two is returned.
    limits : Limits, optional
        Deadline (the LP's time limit) and node limit (SCIP).  A stopped
        solve gives the trivial bound, never an invalid one.

    Returns
    -------
    MultiCutBound
    """
    from .cut import _STEPS_PER_SECOND

    if not problem.is_single_device:
        raise ValueError("the chain-of-cuts bound covers single-device problems only")
    limits = limits or Limits()
    t0 = now()
    base = float(problem.base_cost)
    if problem.graph.n > MAX_NODES:
        return MultiCutBound(base, 0.0, [], "none", {"skipped": f"more than {MAX_NODES} nodes"})
    if limits.expired():
        return MultiCutBound(base, 0.0, [], "none", {"skipped": "no time left"})
    screen = limits.share(0.3 * limits.left() if math.isfinite(limits.left()) else None)
    weight = _screen(problem, screen.work_for(_STEPS_PER_SECOND))
    path = cut_chain(problem.graph, weight, problem.graph.n + 1)
    stats = {"screen_s": now() - t0}
    sizes: dict = {}

    def ancestors(keep) -> int:     # the LP's size: its ancestor counts (computed for the cuts asked only)
        for i in keep.tolist():
            if i not in sizes:
                sizes[i] = int(reach(problem.graph, path[i], up=True).sum())
        return sum(sizes[i] for i in keep.tolist())

    best, best_chain, best_method, models = None, [], "none", []
    # a short spread chain first (cheap), then the longest that fits: their certified LPs, then SCIP on the
    # best one whose MILP fits the time left; any chain is valid, the best value is kept
    for count, use in dict.fromkeys([(max(4, max_cuts // 3), 0.7), (max_cuts, 0.5)]):
        if limits.expired():
            break
        budget_vars = _MAX_LP_VARS
        if math.isfinite(limits.left()):  # a chain whose LP fits the time left (about 2.5 rows per variable)
            budget_vars = min(budget_vars, int(use * limits.left() / (3.5 * _LP_SECONDS_PER_ITEM)))
        keep = spread_cuts(weight[path] if path else np.zeros(0), count)
        while keep.size and not limits.expired() and 2 * ancestors(keep) > budget_vars:  # fewer cuts: the LP fits
            keep = spread_cuts(weight[path], keep.size - 1)
        chain = [path[i] for i in keep.tolist()]
        if models and len(chain) <= len(models[-1][1]):   # no longer than the chain solved already
            break
        got = _chain_lp(problem, chain, limits, stats)
        if got is not None:
            models.append((got[0], chain, got[1]))
            if best is None or got[0] > best:
                best, best_chain, best_method = got[0], chain, "lp"
    for _, chain, (c, A, b, lb, ub, cscale) in sorted(models, key=lambda m: -m[0]):
        if limits.expired():
            break
        if milp and c.size <= _MAX_MILP_VARS and limits.left() > _MILP_SECONDS_PER_ITEM * (c.size + A.shape[0]):
            exact = _milp(c, A, b, lb, ub, limits)
            if exact is not None and exact * cscale > best:
                best, best_chain, best_method = exact * cscale, chain, "milp"
            break
    stats["seconds"] = now() - t0
    if best is None:
        return MultiCutBound(base, 0.0, best_chain, "none", stats)
    return MultiCutBound(base + best, best, best_chain, best_method, stats)


def _chain_lp(problem, chain, limits, stats):
    """``(extra, model)``: the certified LP value of the chain-of-cuts model
    on ``chain`` and the model (``_model``'s tuple), ``None`` when nothing
    was proved in time."""
    if not chain or limits.expired():
        return None
    built = _model(problem, chain, limits)
    if built is None:
        stats["skipped"] = "time limit while building"
        return None
    c, A, b, lb, ub, cscale = built
    stats.setdefault("chains", []).append({"cuts": len(chain), "vars": int(c.size), "rows": int(A.shape[0])})
    if limits.left() < _LP_SECONDS_PER_ITEM * (c.size + A.shape[0]):
        stats["skipped"] = "LP predicted beyond the time left"
        return None
    val = _certified_lp(c, A, b, lb, ub, limits)
    if val is None:
        return None
    stats["chains"][-1]["lp"] = float(val * cscale)
    return val * cscale, built


class MultiCutBoundSource(Bound):
    """The chain-of-cuts bound as a registered bound (``multicut_bound``,
    scope: every plan; serial time, one device): :func:`multicut_lower_bound`
    up to :data:`MAX_NODES` nodes, above it the model grouped by stages with
    identical groups solved once
    (:func:`~hybrid_remat.bounds.multicut_groups.grouped_multicut_lower_bound`:
    the U-Net at 10k-100k nodes from 3.78 to 4.08-4.10 TDI %).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = MultiCutBoundSource().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value >= 6.0
    ('all plans', True)
    """

    name = "multicut_bound"
    version = "1"
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 6.0
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        ok, why = serial_single_device(problem)
        if ok and problem.graph.n > MAX_NODES:   # the grouped model: only where groups repeat
            from ..blocks.structure import block_partition
            from .multicut_groups import too_few_alike

            why = too_few_alike(block_partition(problem.graph), problem.graph.n)
            ok = not why
        return ok, why

    def predict_seconds(self, problem) -> float:
        """Seconds worth giving it (twice that is its first share, :mod:`~hybrid_remat.portfolio.scheduler`):
        a chain of 5-7 spread cuts on the 2k-node U-Net (16k variables) takes 2-3 s at load 5 on the shared
        2-core machine, with the edges; at most 3 s (without it, a probe's 5 % of the time left was too
        short for more than the one-cut bound).  Above :data:`MAX_NODES` nodes the grouped model
        (:mod:`~hybrid_remat.bounds.multicut_groups`): its 12-cut LP took 2-3 s on the 10k-node U-Net and
        5 s at 100k nodes at load 9 on that machine (the model's size does not grow with the repeats)."""
        g = problem.graph
        if g.n > MAX_NODES:
            return min(4.0, 1.5 + 1e-5 * (g.n + g.m))
        return min(3.0, 0.5 + 4e-4 * (g.n + g.m))

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        if problem.graph.n > MAX_NODES:   # the model grouped by stages, identical groups solved once
            from .multicut_groups import grouped_multicut_lower_bound

            mb = grouped_multicut_lower_bound(problem, limits=limits)
        else:
            mb = multicut_lower_bound(problem, limits=limits)
        return BoundResult(mb.value, ALL_PLANS, {"extra": mb.extra, "cuts": len(mb.chain), "method": mb.method,
                                                 **mb.stats})
