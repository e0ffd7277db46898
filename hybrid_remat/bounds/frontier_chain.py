"""The *frontier chain bound*: the chain-of-cuts model over every node, each
node's first computation placed before or after every cut.  Valid for
every single-device plan in any order; serial time.

The chain-of-cuts bound (:mod:`hybrid_remat.bounds.multicut`) counts, at
cut ``i`` (the first computation of ``t_i``, each ``t_i`` an ancestor of
``t_{i+1}``), only the memory of ``t_i``'s ancestors: a value off that
ancestry (on a training graph the gradient of a sibling branch, computed
just before ``t_i`` and read after it) is invisible there, and so is the
memory it holds.  The frontier cut bound (:mod:`.frontier_cuts`) sees
those values at one cut but forgets that a value dropped at one cut and a
value dropped at another are two recomputations.  Here every node ``v`` and
every cut ``i`` get three 0/1 variables:

* ``b[v, i]``: ``v``'s first computation precedes cut ``i`` (1 on the
  ancestors ``A_i`` of ``t_i``, 0 on ``t_i`` and its descendants ``D_i``);
* ``x[v, i]``: ``v`` is resident at cut ``i`` (1 on ``t_i``'s inputs);
* ``z[v, i]``: ``b[v, i] = 1`` and ``v`` is computed in interval ``i``
  (between cuts ``i`` and ``i + 1``; after cut ``k`` for the last).

Write ``b[v, k + 1] = 1`` (every node is computed).  Rows, for every cut
``i`` (and every node or edge ``u -> w`` named):

1. order: ``b[w, i] <= b[u, i]`` and ``b[v, i] <= b[v, i + 1]``;
2. ``x[v, i] <= b[v, i]``, ``z[v, i] <= b[v, i]``;
3. memory: ``bytes(t_i) + sum of bytes(v) x[v, i]`` over ``v != t_i`` is
   at most the budget;
4. need: ``x[u, i] + z[u, i] >= b[u, i] + b[w, i + 1] - b[w, i] - 1``
   for every edge ``u -> w`` with ``w != t_i``;
5. persistence: ``x[v, i + 1] <= x[v, i] + z[v, i] + b[v, i + 1] - b[v, i]``;
6. chains: ``z[w, i] <= x[u, i] + z[u, i]`` for every edge ``u -> w``.

Objective: ``sum of c_v z[v, i]``.

Proof.  Take any valid plan and set ``b``, ``x``, ``z`` as defined (``x``
at cut ``i``: resident right after ``t_i``'s allocation, which the
simulator checks against the budget).  The cuts happen in the chain's order
(a node is first computed after its inputs, hence after its ancestors).
Row 1: a first computation reads its inputs, computed before; a node
computed before cut ``i`` is computed before cut ``i + 1``.  Row 2: by
definition.  Row 3: the simulator's check at ``t_i``'s first computation
(values outside the model do not exist: every node is in it).  Row 4: the
right side is 1 only when ``u`` was computed before cut ``i`` and ``w``'s
first computation lies in interval ``i`` (after cut ``i``, before cut
``i + 1``; ``w = t_{i+1}`` has ``b[w, i + 1] = 0``); that computation reads
``u``, which is then resident at cut ``i`` or computed again in between.
Row 5: a value resident at cut ``i + 1`` was resident at cut ``i``, or
computed in interval ``i``, for the first time (``b[v, i + 1] - b[v, i] =
1``) or again (``z[v, i] = 1``).  Row 6: if ``z[w, i] = 1`` then ``b[w, i]
= 1``, so ``b[u, i] = 1`` (row 1): ``w``'s computation in interval ``i``
reads ``u``, which is resident at cut ``i`` or computed in interval ``i``
before it, not for the first time, so ``z[u, i] = 1``.  Each ``z[v, i] =
1`` stands for a computation of ``v`` in interval ``i`` after its first
one: a recomputation, distinct for distinct ``(v, i)`` (the intervals are
disjoint).  So the plan's serial time is at least ``base cost + sum of
c_v z[v, i]`` at a 0/1 point of rows 1-6, hence at least ``base cost``
plus the least value of that sum over the rows, or over their LP
relaxation.

Set cuts.  Two siblings ``a`` and ``b`` (neither an ancestor of the other,
both read later, e.g. two gradients a later node adds up) are held together
at the *later* of their first computations, a moment no single node's cut
names.  So a cut may be the ``j``-th first computation among the nodes of
an antichain ``T`` (``j = 1 .. |T|``; a single node is ``T = {t}``, ``j =
1``), with ``y[tau, i]``: ``tau`` of ``T`` is the node computed at that
moment.  Consecutive cuts either share ``T`` with ``j`` one larger, or every
node of ``T_{i+1}`` descends from every node of ``T_i``; in both cases cut
``i + 1`` comes strictly after cut ``i`` in every plan.  ``b`` is fixed to 1
on the common ancestors of ``T_i`` (for ``j = |T_i|``: on every ancestor of
``T_i``) and to 0 on the common descendants, and rows 1-6 hold with:

0. ``sum of y[tau, i] = 1``; ``b[tau, i] + y[tau, i] <= 1``; ``sum of
   b[tau, i]`` over ``T_i`` is ``j - 1``; ``x[tau, i] >= y[tau, i]`` and
   ``x[p, i] >= y[tau, i]`` for each input ``p`` of ``tau``; ``x[tau, i]
   <= b[tau, i] + y[tau, i]`` (in place of row 2's ``x <= b``);
   ``b[tau, i + 1] >= b[tau, i] + y[tau, i]``;
3'. memory: ``sum of bytes(v) x[v, i]`` over every node (the cut node
   included through its ``x``) is at most the budget;
4'. need for every edge ``u -> w`` (``w`` first computed at cut ``i``
   or in interval ``i``: at the cut, ``u`` is an input of the computed
   node, resident);
5'. persistence gains ``+ y[v, i + 1]`` on the right (the node computed at
   cut ``i + 1`` is resident then without having been before).

Proof of the additions: at the ``j``-th first computation among ``T_i``,
exactly ``j - 1`` of them came before and the one computed (``y = 1``) did
not; it and its inputs are resident after its allocation, which the
simulator checks against the budget; it is computed before the next cut;
a node resident at cut ``i + 1`` was resident at cut ``i``, computed in
between (first time or again), or is that cut's computed node.  Nodes
``surely computed before`` are: ancestors of every node of ``T_i`` (of the
computed one in particular), and for ``j = |T_i|`` ancestors of any (each
node of ``T_i`` is computed by then); the common descendants of ``T_i``
need every node of ``T_i``, not all computed before the cut.  The rest of
the proof above is unchanged.

Solving.  The LP is solved by HiGHS and certified (the Lagrangian of its
clipped dual multipliers, :func:`.multicut._certified_lp`: a lower bound on
the LP whatever the solver's tolerances); models up to
:data:`_MAX_MILP_VARS` variables then go to SCIP (its trusted dual bound,
valid at any node or time limit).  The larger is kept.  Any chain gives a
valid bound, so a chain shortened to fit the time only weakens it.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.oracle import brute_force
>>> from hybrid_remat.problem import Problem
>>> g = training_graph(nx.path_graph(5, create_using=nx.DiGraph))   # unit bytes and costs
>>> p = Problem.single(g, 6)
>>> round(frontier_chain_lower_bound(p).value, 4), brute_force(p)[0]
(20.0, 20.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits, now
from .cut import reach, serial_single_device
from .multicut import _certified_lp, _milp, _screen, cut_chain

__all__ = ["FrontierChainResult", "FrontierChainBound", "frontier_chain_lower_bound", "set_chain", "expand_chain",
           "MAX_NODES"]

#: graphs above this size are left to the other bounds (the model is built in Python)
MAX_NODES = 12_000
#: the registered bound declines larger graphs: at 2k nodes its LP (~15 s) already adds only ~0.1 TDI point
#: over the chain-of-cuts bound on random layered graphs, and its time share would be lost to the others
REGISTERED_MAX_NODES = 2_500
#: the LP up to this many variables (the chain is thinned until it fits)
_MAX_LP_VARS = 600_000
#: SCIP's MILP after the LP up to this many variables
_MAX_MILP_VARS = 20_000
#: seconds per variable and row of the LP (HiGHS; 14 s for 28k variables and 184k rows at 2k nodes, load ~8)
_LP_SECONDS_PER_ITEM = 7e-5
#: seconds per variable and row to build and start the MILP
_MILP_SECONDS_PER_ITEM = 3e-4


@dataclass
class FrontierChainResult:
    """``value = base + extra`` bounds every plan's serial time; ``method``
    is ``"lp"``, ``"milp"`` or ``"none"``."""

    value: float
    extra: float
    chain: list
    method: str
    stats: dict = field(default_factory=dict, repr=False)


def _model(problem, chain, limits):
    """Rows 1-6 of the module docstring, with set cuts, as ``(c, A, b, lb,
    ub, scale)`` (``A z <= b``, costs divided by ``scale``); ``None`` when
    the deadline passes while building.  ``chain``: a list of node sets."""
    g = problem.graph
    n, k = g.n, len(chain)
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.asarray(g.bytes, dtype=np.float64)
    B = float(problem.budgets[0])
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.succ_ptr))
    dst = np.asarray(g.succ_idx, dtype=np.int64)
    # variables per cut: b, x, z for the nodes outside the common descendants of T_i; -1: the constant 0
    live, anc = [], []
    for T, j in chain:
        dead = np.ones(n, dtype=bool)
        up_all = np.ones(n, dtype=bool)
        up_any = np.zeros(n, dtype=bool)
        for t in T:
            dead &= reach(g, t, up=False)
            a = reach(g, t, up=True)
            up_all &= a
            up_any |= a
        live.append(~dead)
        anc.append(up_any if j == len(T) else up_all)   # surely computed before the cut
    bi, xi, zi, yi = [], [], [], []
    nv = 0
    for i in range(k):
        nodes = np.flatnonzero(live[i])
        for lst in (bi, xi, zi):
            loc = np.full(n, -1, dtype=np.int64)
            loc[nodes] = nv + np.arange(nodes.size)
            nv += nodes.size
            lst.append(loc)
        loc = np.full(n, -1, dtype=np.int64)
        T = np.asarray(chain[i][0], dtype=np.int64)
        loc[T] = nv + np.arange(T.size)
        nv += T.size
        yi.append(loc)
    one = nv   # a column pinned to 1: b[., k + 1]
    nv += 1
    cscale = float(cost.max()) if cost.size and cost.max() > 0 else 1.0
    c = np.zeros(nv)
    lb = np.zeros(nv)
    ub = np.ones(nv)
    lb[one] = 1.0
    rows_r, rows_c, rows_v, rhs = [], [], [], []
    nrow = 0

    def add(cols, vals, b_):
        """Rows ``sum vals[j] * var[cols[j]] <= b_`` in bulk: ``cols``/``vals``
        of shape ``(rows, width)``; column ``-1`` entries are dropped."""
        nonlocal nrow
        cols = np.asarray(cols, dtype=np.int64)
        if cols.shape[0] == 0:
            return
        vals = np.broadcast_to(np.asarray(vals, dtype=np.float64), cols.shape)
        r = np.broadcast_to(np.arange(cols.shape[0])[:, None] + nrow, cols.shape)
        keep = cols >= 0
        rows_r.append(r[keep])
        rows_c.append(cols[keep])
        rows_v.append(vals[keep])
        rhs.append(np.broadcast_to(np.asarray(b_, dtype=np.float64), (cols.shape[0],)))
        nrow += cols.shape[0]

    for i in range(k):
        if limits.expired():
            return None
        b, x, z, y = bi[i], xi[i], zi[i], yi[i]
        T, jth = np.asarray(chain[i][0], dtype=np.int64), chain[i][1]
        nodes = np.flatnonzero(live[i])
        lb[b[anc[i] & ~np.isin(np.arange(n), T)]] = 1.0
        c[z[nodes]] = cost[nodes] / cscale
        # the cut node: one of T; b[tau] + y[tau] = 1; it and its inputs are resident when it is
        add(y[T][None, :], 1.0, 1.0)
        add(y[T][None, :], -1.0, -1.0)
        # the j-th first computation of T: j - 1 of them came before, the cut node not
        add(np.stack([b[T], y[T]], 1), [1.0, 1.0], 1.0)
        add(b[T][None, :], 1.0, jth - 1.0)
        add(b[T][None, :], -1.0, 1.0 - jth)
        add(np.stack([y[T], x[T]], 1), [1.0, -1.0], 0.0)
        for tau in T.tolist():
            p = g.preds(tau)
            add(np.stack([np.full(p.size, y[tau]), x[p]], 1), [1.0, -1.0], 0.0)
        if T.size == 1:
            lb[y[T]] = 1.0
            lb[x[T]] = 1.0
            lb[x[g.preds(int(T[0]))]] = 1.0
        bn = b[nodes]
        notT = nodes[~np.isin(nodes, T)]
        # 2. x <= b (the cut node excepted), z <= b
        add(np.stack([x[notT], b[notT]], 1), [1.0, -1.0], 0.0)
        add(np.stack([x[T], b[T], y[T]], 1), [1.0, -1.0, -1.0], 0.0)
        add(np.stack([z[nodes], bn], 1), [1.0, -1.0], 0.0)
        # 1. order within the cut, and b[v, i] <= b[v, i + 1]
        e = live[i][dst]
        add(np.stack([b[dst[e]], b[src[e]]], 1), [1.0, -1.0], 0.0)
        if i + 1 < k:
            add(np.stack([bn, bi[i + 1][nodes]], 1), [1.0, -1.0], 0.0)
            add(np.stack([b[T], y[T], bi[i + 1][T]], 1), [1.0, 1.0, -1.0], 0.0)   # the cut node comes before
        # 3. memory (scaled by the budget)
        add(x[nodes][None, :], (size[nodes] / B)[None, :], 1.0)
        # 4. need: x[u] + z[u] - b[u] - b'[w] + b[w] >= -1  for edges u -> w
        e4 = live[i][src]
        u, w = src[e4], dst[e4]
        bw_next = bi[i + 1][w] if i + 1 < k else np.full(w.size, one)
        add(np.stack([x[u], z[u], b[u], bw_next, b[w]], 1), [-1.0, -1.0, 1.0, 1.0, -1.0], 1.0)
        # 6. chains: z[w] <= x[u] + z[u] for edges u -> w (w in the model)
        u, w = src[e], dst[e]
        add(np.stack([z[w], x[u], z[u]], 1), [1.0, -1.0, -1.0], 0.0)
        # 5. persistence: x[v, i+1] - x[v, i] - z[v, i] - b[v, i+1] + b[v, i] - y[v, i+1] <= 0
        if i + 1 < k:
            add(np.stack([xi[i + 1][nodes], x[nodes], z[nodes], bi[i + 1][nodes], bn, yi[i + 1][nodes]], 1),
                [1.0, -1.0, -1.0, -1.0, 1.0, -1.0], 0.0)
    import scipy.sparse as sp

    A = sp.csr_matrix((np.concatenate(rows_v), (np.concatenate(rows_r), np.concatenate(rows_c))),
                      shape=(nrow, nv))
    return c, A, np.concatenate(rhs), lb, ub, cscale


def set_chain(graph, path, max_set: int = 3) -> list:
    """Widen a path of cut nodes (each an ancestor of the next) into a chain
    of node sets: beside ``t_i``, the heaviest nodes (greedily, pairwise
    incomparable, at most ``max_set`` in all) that descend from every node
    of the previous set, are ancestors of ``t_{i+1}`` and are incomparable
    with ``t_i``: the siblings whose values a plan holds at the later of
    their first computations.

    Examples
    --------
    >>> from hybrid_remat.graph import Graph
    >>> g = Graph.from_arrays([1, 2, 3, 1], [(0, 1), (0, 2), (1, 3), (2, 3)], {"cost": [1.0] * 4})
    >>> set_chain(g, [0, 1, 3])
    [(0,), (1, 2), (3,)]
    """
    path = [int(t) for t in path]
    n = graph.n
    size = np.asarray(graph.bytes, dtype=np.float64)
    out = []
    common = np.ones(n, dtype=bool)     # descendants of every node of the previous set
    for i, t in enumerate(path):
        T = [t]
        if 0 < i < len(path) - 1 and max_set > 1:
            nxt_anc = reach(graph, path[i + 1], up=True)
            cand = common & nxt_anc & ~reach(graph, t, up=True) & ~reach(graph, t, up=False)
            cand[t] = False
            picked_up, picked_down = reach(graph, t, up=True), reach(graph, t, up=False)
            for s in np.flatnonzero(cand)[np.argsort(-size[cand], kind="stable")].tolist():
                if len(T) >= max_set:
                    break
                if picked_up[s] or picked_down[s]:
                    continue
                T.append(s)
                picked_up |= reach(graph, s, up=True)
                picked_down |= reach(graph, s, up=False)
        common = np.ones(n, dtype=bool)
        for u in T:
            common &= reach(graph, u, up=False)
        out.append(tuple(sorted(T)))
    return out


def expand_chain(chain) -> list:
    """Cuts ``(T, j)`` (the ``j``-th first computation among the nodes of
    ``T``, ``j = 1 .. |T|``) from a chain of nodes and node sets: a node
    ``t`` gives ``((t,), 1)``, a set ``T`` its ``|T|`` moments in order.

    Examples
    --------
    >>> expand_chain([0, (3, 2), 5])
    [((0,), 1), ((2, 3), 1), ((2, 3), 2), ((5,), 1)]
    """
    out = []
    for T in chain:
        if isinstance(T, tuple) and len(T) == 2 and isinstance(T[0], tuple):
            out.append((tuple(int(t) for t in T[0]), int(T[1])))
            continue
        T = tuple(sorted(int(t) for t in T)) if hasattr(T, "__iter__") else (int(T),)
        out.extend((T, j) for j in range(1, len(T) + 1))
    return out


def frontier_chain_lower_bound(problem, *, chain=None, max_cuts: int = 40, max_set: int = 3, milp: bool = True,
                               limits: Limits | None = None) -> FrontierChainResult:
    """The frontier chain bound of a single-device problem (module docstring).

    Parameters
    ----------
    problem : Problem
        Single device, serial time.
    chain : list of int, optional
        The cut nodes (each an ancestor of the next); by default the chain
        of heaviest cuts (:func:`.multicut.cut_chain` on the cut screening).
    max_set : int
        Nodes per set of the default chain (:func:`set_chain`); 1: a chain
        of single nodes.
    max_cuts : int
        Longest chain (thinned further to fit the time and the LP size).
    milp : bool
        Solve models of at most ``20_000`` variables as a MILP after the LP.
    limits : Limits, optional
        Deadline and SCIP node limit; a stopped solve gives the trivial
        bound, never an invalid one.

    Returns
    -------
    FrontierChainResult
    """
    from .cut import _STEPS_PER_SECOND

    if not problem.is_single_device:
        raise ValueError("the frontier chain bound covers single-device problems only")
    limits = limits or Limits()
    t0 = now()
    g = problem.graph
    base = float(problem.base_cost)
    if g.n > MAX_NODES:
        return FrontierChainResult(base, 0.0, [], "none", {"skipped": f"more than {MAX_NODES} nodes"})
    if chain is None:
        screen = limits.share(0.2 * limits.left() if math.isfinite(limits.left()) else None)
        weight = _screen(problem, screen.work_for(_STEPS_PER_SECOND))
        chain = set_chain(g, cut_chain(g, weight, max_cuts), max_set)
    else:
        weight = np.ones(g.n)
    chain = expand_chain(chain)
    stats = {"screen_s": now() - t0}
    per_cut = [int((~reach(g, T[0], up=False)).sum()) for T, _ in chain]
    budget = _MAX_LP_VARS
    if math.isfinite(limits.left()):  # about 6-7 rows per variable; the LP in half the time left
        budget = min(budget, int(0.5 * limits.left() / (7.5 * _LP_SECONDS_PER_ITEM)))
    while len(chain) > 1 and 3 * sum(per_cut) > budget:
        drop = int(np.argmin([weight[list(T)].max() for T, _ in chain]))
        del chain[drop], per_cut[drop]
    if not chain or limits.expired():
        return FrontierChainResult(base, 0.0, chain, "none", stats)
    built = _model(problem, chain, limits)
    if built is None:
        return FrontierChainResult(base, 0.0, chain, "none", {**stats, "skipped": "time limit while building"})
    c, A, b, lb, ub, cscale = built
    stats.update(vars=int(c.size), rows=int(A.shape[0]), cuts=len(chain), build_s=now() - t0)
    if limits.left() < _LP_SECONDS_PER_ITEM * (c.size + A.shape[0]):
        return FrontierChainResult(base, 0.0, chain, "none", {**stats, "skipped": "LP predicted beyond the time"})
    val, method = _certified_lp(c, A, b, lb, ub, limits), "lp"
    stats["lp_s"] = now() - t0
    if milp and c.size <= _MAX_MILP_VARS and limits.left() > _MILP_SECONDS_PER_ITEM * (c.size + A.shape[0]):
        exact = _milp(c, A, b, lb, ub, limits)
        if exact is not None and (val is None or exact > val):
            val, method = exact, "milp"
    stats["seconds"] = now() - t0
    if val is None:
        return FrontierChainResult(base, 0.0, chain, "none", stats)
    extra = val * cscale
    return FrontierChainResult(base + extra, extra, chain, method, stats)


class FrontierChainBound(Bound):
    """The frontier chain bound as a registered bound (``frontier_chain_bound``,
    scope: every plan; serial time, one device, up to 2.5k nodes).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = FrontierChainBound().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value >= 6.0
    ('all plans', True)
    """

    name = "frontier_chain_bound"
    version = "1"
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 6.5
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        return serial_single_device(problem, max_nodes=REGISTERED_MAX_NODES,
                                    why_larger=" (its LP gains little there; frontier_chain_lower_bound runs to 12k)")

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        r = frontier_chain_lower_bound(problem, limits=limits)
        return BoundResult(r.value, ALL_PLANS, {"extra": r.extra, "cuts": len(r.chain), "method": r.method,
                                                **r.stats})
