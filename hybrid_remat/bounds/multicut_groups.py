"""The chain-of-cuts bound at scale: the model of :mod:`~hybrid_remat.bounds.multicut`
relaxed group by group, identical groups solved once (a lower bound over
every single-device plan, in any order).

Statement.  Take the chain of cuts ``t_1, ..., t_k`` (each an ancestor of the
next) and the variables and rows 1-4 of :mod:`~hybrid_remat.bounds.multicut`.
Partition the nodes into groups (any partition: here the stages of
:func:`~hybrid_remat.blocks.structure.block_partition`, every node not in a
stage one group more).  Then the least value of the LP of rows 1-4 *without
the chain rows 4 whose edge joins two groups* is at most every plan's
recomputation cost, and it equals the least value of the *aggregated LP*:
one copy of each class of identical groups, its costs and its bytes in the
memory rows multiplied by the number of groups in the class.  Adding the
*summed chain rows 5* below keeps it a lower bound and the aggregation exact.

Rows 5 (the chains between groups).  Group the edges ``u -> v`` whose ends
lie in two groups by their *key*: the class ``K`` of ``v``'s group and
``v``'s place in it, the class ``K'`` of ``u``'s group and ``u``'s place
(a run of identical blocks: the edges from one block's output to the next
block's first node share one key).  For a key, at a cut ``i`` where ``v`` is
in ``A_i``: let ``e`` be the number of groups of ``K`` holding such a
``v``, ``d`` the most edges of the key out of one group of ``K'``, ``m_K``,
``m_K'`` the classes' sizes, and sums run over the groups of a class, each
at its node of that place.  Then ``sum_K z[v, i] - (m_K - e) <= d sum_K'
(x[u, i] + z[u, i])`` holds at every point of rows 1-4: ``z <= 1`` gives
``sum_K z[v, i] - (m_K - e) <=`` the sum over the ``e`` groups, which is at
most the sum of ``z[v, i]`` over the key's edges, each at most ``x[u, i] +
z[u, i]`` (row 4), and each group of ``K'`` is the tail of at most ``d``
edges (``x, z >= 0``).  (The ends agree on ``A_i``: an input of ``v`` is an
ancestor of ``t_i`` where ``v`` is, and the roles are part of the class.)
Each side of a row 5 is a whole class's sum of one variable, unchanged by
permuting the groups of a class, so the averaging of (3) keeps it; in the
aggregated LP it reads ``m_K z[v] - d m_K' (x[u] + z[u]) <= m_K - e``.  With
every group a class of its own (``m = e = d = 1``) rows 5 are rows 4 between
groups: the LP of :mod:`~hybrid_remat.bounds.multicut` itself.  On the 10k
U-Net at 30 % they lift the bound from 8.65 to 9.16 TDI % (that LP: 9.23).

Proof.  (1) Every plan gives a 0/1 point of rows 1-4 whose cost is at most
the plan's recomputation cost (:mod:`~hybrid_remat.bounds.multicut`), so the
LP of rows 1-4 is at most it; dropping rows only lowers the least value.
(2) Without the chain rows between groups, every row but the ``k`` memory
rows (and rows 5, below) holds variables of one group only (the need row 2 and the persistence
row 3 concern one node, a kept chain row one edge inside a group).  Two
groups are *identical* when, with their nodes listed in one order, they have
the same costs, bytes and edges among themselves, and every node has the same
role at every cut: outside ``A_i``, an input of ``t_i`` (``x = 1``), a value
of ``N`` whose need row ends at the same cut ``j``, or another ancestor (the
signature compared here, so nothing is assumed of the detector).  Identical
groups have the same rows up to renaming, and enter the memory rows with the
same coefficients.  (3) For a feasible point of the relaxed LP, averaging the
variables of the groups of one class (over the permutations of the class) is
again feasible (each group's rows are convex and the memory rows depend on
the class's sum only) and has the same cost (linear); so the least value is
reached where all groups of a class take one value, which is the aggregated
LP with the multiplicities.  (4) The aggregated LP's value is certified by
weak duality (the Lagrangian of its clipped duals, as in
:mod:`~hybrid_remat.bounds.multicut`), a lower bound whatever the LP
solver's tolerances.  So ``base + value`` bounds every plan's serial time.

The aggregated LP has a few copies of a block per run however many blocks
repeat (a run's blocks differ only in where their backward lies among the
cuts), so it stays small at 100k nodes: the cost is the graph searches of
the cuts (Numba) and the signatures (one pass over the stages).

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.oracle import brute_force
>>> from hybrid_remat.problem import Problem
>>> g = training_graph(nx.path_graph(5, create_using=nx.DiGraph))   # unit bytes and costs
>>> p = Problem.single(g, 6)
>>> r = grouped_multicut_lower_bound(p)
>>> p.base_cost <= r.value <= brute_force(p)[0]
True
"""

from __future__ import annotations

import math

import numpy as np

from ..limits import Limits, now
from .cut import cut_items, reach
from .cut_chains import MultiCutBound, SparseRows, _certified_lp, cut_chain, spread_cuts

__all__ = ["grouped_multicut_lower_bound", "grouped_model", "unique_nodes", "too_few_alike", "node_roles", "HUB_STAGES", "JOIN_STAGES", "sampled_screen"]

#: the grouped model (chosen chains) up to this many variables: the 12-cut U-Net model has 20k at any size;
#: where few groups are alike (random layered, varied decoders: 130k at 10k nodes) the LP outlasts its share
MAX_GROUPED_VARS = 60_000
#: seconds per variable to build and solve the grouped model (2.9 s for 20k on the shared 2-core machine at load 9)
SECONDS_PER_VAR = 1.5e-4
#: seconds per node and edge to choose the cuts (screen and path: 1.3 s at 100k nodes, 346k items, at load 9)
SECONDS_PER_ITEM = 5e-6
#: a chain shortened for size keeps at least this many cuts (fewer add little to the cut bound)
MIN_CUTS = 4
#: variables per node outside every run and per cut, at least (1.1 measured at 100k nodes on random layered
#: graphs and varied decoders): a partition with that many such nodes is skipped before the screen
VARS_PER_UNIQUE_NODE_CUT = 0.5
#: cuts screened to choose the chain (the cut screen's knapsack LP, linear in the graph each)
SCREEN_SAMPLES = 256
#: at most this many stages joined into one group (a zigzag of skips would join a whole run)
JOIN_STAGES = 4
#: a stage linked to more than this many non-neighbouring stages is not joined with them (a hub)
HUB_STAGES = 8


def node_roles(graph, chain, limits: Limits | None = None) -> np.ndarray | None:
    """``(n, k)`` roles of the nodes at the cuts ``chain``: 0 outside ``A_i``,
    1 an input of ``t_i``, ``2 + j`` a value of ``N(t_i)`` whose need row ends
    at cut ``j`` (``j = k``: the last interval), ``3 + k`` another ancestor
    (``None`` when ``limits`` expire on the way).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> node_roles(chain(4), [2]).tolist()     # a chain without backward: no value is needed later
    [[4], [1], [0], [0]]
    """
    g = graph
    n, k = g.n, len(chain)
    anc = [reach(g, t, up=True) for t in chain]
    first = np.full(n, k, dtype=np.int64)   # the first cut that a node's first computation precedes
    for j in range(k - 1, -1, -1):
        first[anc[j]] = j
        first[chain[j]] = j
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.succ_ptr))
    dst = np.asarray(g.succ_idx, dtype=np.int64)
    roles = np.zeros((n, k), dtype=np.int64)
    for i, t in enumerate(chain):
        if limits is not None and limits.expired():
            return None
        items = cut_items(g, t)[1]
        desc = reach(g, t, up=False)
        col = np.where(anc[i], 3 + k, 0)
        sel = items[src] & desc[dst]
        end = np.full(n, k, dtype=np.int64)
        np.minimum.at(end, src[sel], first[dst[sel]])
        col[items] = 2 + end[items]
        col[np.unique(g.preds(t))] = 1
        roles[:, i] = col
    return roles


def _groups(graph, part, hub: int = HUB_STAGES, join: int = JOIN_STAGES):
    """Node lists of the groups: the stages of ``part`` joined where an edge
    links two stages that are not neighbours (a U-Net's skip: an encoder
    block and the decoder block reading it), except through a stage linked
    so to more than ``hub`` others (a time embedding read by every block);
    each group's nodes in stage order, then ``stage_nodes`` order.  The
    nodes in no stage form one group more."""
    if part is None:
        return [np.arange(graph.n, dtype=np.int64)]
    stage = np.asarray(part.stage, dtype=np.int64)
    n_st = part.n_stages if hasattr(part, "n_stages") else part.n_blocks
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr))
    a, b = stage[src], stage[np.asarray(graph.succ_idx, dtype=np.int64)]
    far = (a >= 0) & (b >= 0) & (np.abs(a - b) > 1)
    links = np.unique(np.stack([np.minimum(a[far], b[far]), np.maximum(a[far], b[far])], 1), axis=0)
    deg = np.bincount(links.ravel(), minlength=n_st) if links.size else np.zeros(n_st, dtype=np.int64)
    parent = np.arange(n_st)

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    count = np.ones(n_st, dtype=np.int64)
    for u, v in links.tolist():
        ru, rv = root(u), root(v)
        if ru != rv and deg[u] <= hub and deg[v] <= hub and count[ru] + count[rv] <= join:
            parent[ru] = rv
            count[rv] += count[ru]
    members: dict = {}
    for s in range(n_st):
        members.setdefault(root(s), []).append(s)
    seen = np.zeros(graph.n, dtype=bool)
    out = []
    for stages in members.values():
        nodes = np.concatenate([np.asarray(part.stage_nodes(s), dtype=np.int64) for s in stages])
        _, first = np.unique(nodes, return_index=True)
        nodes = nodes[np.sort(first)]
        nodes = nodes[~seen[nodes]]         # a partition: each node in one group only (else counted twice)
        seen[nodes] = True
        if nodes.size:
            out.append(nodes)
    rest = np.flatnonzero(~seen)
    if rest.size:
        out.append(rest.astype(np.int64))
    return out


def grouped_model(problem, chain, part, limits: Limits | None = None, aggregate: bool = True,
                  max_vars: int | None = None, cross: bool = True):
    """The aggregated LP of the module docstring as ``(c, A, b, lb, ub,
    cost scale, classes)`` (rows ``A z <= b``, costs divided by the scale;
    ``classes``: how many classes of identical groups), or ``None`` when the
    deadline passes while building.  ``aggregate=False``: every group a
    class of its own (the relaxed LP itself, same value; for tests).  With
    ``max_vars``, a model of more variables is not built: the number of its
    variables (an ``int``) is returned instead.  ``cross=False``: without
    the summed chain rows 5 between groups (weaker; for tests)."""
    limits = limits or Limits()
    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.asarray(g.bytes, dtype=np.int64)
    B = float(problem.budgets[0])
    k = len(chain)
    roles = node_roles(g, chain, limits)
    if roles is None or limits.expired():
        return None
    groups = _groups(g, part)
    loc = np.full(g.n, -1, dtype=np.int64)
    gid = np.full(g.n, -1, dtype=np.int64)
    for q, nodes in enumerate(groups):
        loc[nodes] = np.arange(nodes.size)
        gid[nodes] = q
    src = np.repeat(np.arange(g.n, dtype=np.int64), np.diff(g.succ_ptr))
    dst = np.asarray(g.succ_idx, dtype=np.int64)
    inner = gid[src] == gid[dst]
    e_g, e_u, e_v = gid[dst[inner]], loc[src[inner]], loc[dst[inner]]
    o = np.lexsort((e_u, e_v, e_g))
    e_g, e_u, e_v = e_g[o], e_u[o], e_v[o]
    e_ptr = np.searchsorted(e_g, np.arange(len(groups) + 1))
    classes: dict = {}
    cls_of = np.full(len(groups), -1, dtype=np.int64)     # each group's class (-1: no variable)
    for q, nodes in enumerate(groups):
        r = roles[nodes]
        if not r.any():
            continue                    # no ancestor of any cut: no variable
        eu, ev = e_u[e_ptr[q]:e_ptr[q + 1]], e_v[e_ptr[q]:e_ptr[q + 1]]
        key = b"|".join((np.int64(nodes.size).tobytes(), size[nodes].tobytes(), cost[nodes].tobytes(),
                         r.tobytes(), eu.tobytes(), ev.tobytes())) + (b"" if aggregate else np.int64(q).tobytes())
        if key in classes:
            classes[key][1] += 1
        else:
            classes[key] = [q, 1, len(classes)]
        cls_of[q] = classes[key][2]
    if limits.expired():
        return None
    if max_vars is not None:
        nv = 2 * sum(int((roles[groups[q]] > 0).sum()) for q, _, _ in classes.values())
        if nv > max_vars:
            return nv
    # variables: x[v, i], z[v, i] for the classes' representatives, v in A_i
    reps = [(groups[q], m, e_u[e_ptr[q]:e_ptr[q + 1]], e_v[e_ptr[q]:e_ptr[q + 1]]) for q, m, _ in classes.values()]
    cscale = float(cost.max()) if cost.size and cost.max() > 0 else 1.0
    xs, zs = [], []
    nv = 0
    for nodes, _, _, _ in reps:
        inA = roles[nodes] > 0
        xi = np.full(inA.shape, -1, dtype=np.int64)
        xi[inA] = nv + np.arange(int(inA.sum()))
        nv += int(inA.sum())
        zi = np.full(inA.shape, -1, dtype=np.int64)
        zi[inA] = nv + np.arange(int(inA.sum()))
        nv += int(inA.sum())
        xs.append(xi)
        zs.append(zi)
    c = np.zeros(nv)
    lb = np.zeros(nv)
    ub = np.ones(nv)
    rows = SparseRows()
    mem_cols = [[] for _ in range(k)]
    mem_vals = [[] for _ in range(k)]
    for (nodes, m, eu, ev), xi, zi in zip(reps, xs, zs, strict=True):
        if limits.expired():
            return None
        r = roles[nodes]
        for i in range(k):
            a = np.flatnonzero(r[:, i] > 0)
            c[zi[a, i]] = m * cost[nodes[a]] / cscale
            fixed = a[r[a, i] == 1]
            lb[xi[fixed, i]] = 1.0
            free = a[r[a, i] != 1]
            mem_cols[i].extend(xi[free, i].tolist())          # 1. memory (scaled by the budget)
            mem_vals[i].extend((m * size[nodes[free]] / B).tolist())
            for v in a[(r[a, i] >= 2) & (r[a, i] <= 2 + k)].tolist():   # 2. need, up to the reader's cut
                end = int(r[v, i]) - 2
                rows.add([int(xi[v, i])] + [int(zi[v, j]) for j in range(i, end)], [-1.0] * (1 + end - i), -1.0)
            if i > 0:                                         # 3. persistence
                for v in np.flatnonzero(r[:, i - 1] > 0).tolist():
                    rows.add([int(xi[v, i]), int(xi[v, i - 1]), int(zi[v, i - 1])], [1.0, -1.0, -1.0], 0.0)
            for u, v in zip(eu.tolist(), ev.tolist(), strict=True):   # 4. chains inside the group
                if r[v, i] > 0:
                    rows.add([int(zi[v, i]), int(xi[u, i]), int(zi[u, i])], [1.0, -1.0, -1.0], 0.0)
    if cross:                                                 # 5. chains between groups, summed by class
        _cross_rows(rows, reps, xs, zs, roles, cls_of, gid, loc, src[~inner], dst[~inner], k)
    for i, t in enumerate(chain):
        preds = np.unique(g.preds(t))
        room = B - float(size[t]) - float(size[preds].sum())
        if mem_cols[i]:
            rows.add(mem_cols[i], mem_vals[i], room / B)
        elif room < 0:
            rows.add([], [], room / B)          # nothing can be dropped: infeasible, no plan
    A, b = rows.matrix(nv)
    return c, A, b, lb, ub, cscale, len(classes)


def _cross_rows(rows, reps, xs, zs, roles, cls_of, gid, loc, src, dst, k) -> None:
    """Rows 5 of the module docstring: the chain rows of the edges ``u -> v``
    that join two groups, summed over the edges of one *key* (the class
    ``K`` of ``v``'s group, ``v``'s place in it, the class ``K'`` of ``u``'s
    group, ``u``'s place): ``m_K z[v] - d m_K' (x[u] + z[u]) <= m_K - e``
    at every cut where ``v`` is an ancestor, in the representatives'
    variables (``e``: the groups of ``K`` that hold such a ``v``, ``d``: the
    most edges of the key out of one group of ``K'``)."""
    q_v, q_u = gid[dst], gid[src]
    ok = (cls_of[q_v] >= 0) & (cls_of[q_u] >= 0)
    q_v, q_u, lv, lu = q_v[ok], q_u[ok], loc[dst[ok]], loc[src[ok]]
    if q_v.size == 0:
        return
    kv, ku = cls_of[q_v], cls_of[q_u]
    keys = np.stack([kv, lv, ku, lu], 1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    for j, (a, pv, b, pu) in enumerate(uniq.tolist()):
        sel = inv == j
        e = int(np.unique(q_v[sel]).size)
        d = int(np.unique(q_u[sel], return_counts=True)[1].max())
        m_v, m_u = reps[a][1], reps[b][1]
        rv, ru = roles[reps[a][0][pv]], roles[reps[b][0][pu]]
        for i in range(k):
            if rv[i] > 0 and ru[i] > 0:        # u is an ancestor of t_i where v is (an input of v)
                rows.add([int(zs[a][pv, i]), int(xs[b][pu, i]), int(zs[b][pu, i])],
                         [float(m_v), -float(d * m_u), -float(d * m_u)], float(m_v - e))


def sampled_screen(problem, samples: int = SCREEN_SAMPLES, work: int = 2**62) -> np.ndarray:
    """The cut screen of :mod:`~hybrid_remat.bounds.multicut` (each cut's
    knapsack LP value) at ``samples`` cuts only: the quarter of them highest
    in the reference order's memory, the rest spread evenly over the nodes
    where it exceeds the budget (every other node weighs 0).  Linear in the
    graph per cut, so it takes a fraction of a second at 100k nodes where
    screening every cut takes minutes.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> w = sampled_screen(Problem.single(chain(6, bytes=1), 3), samples=2)
    >>> w.shape, int((w > 0).sum()) <= 2
    ((6,), True)
    """
    from .cut import _cut_lp_kernel, _reference_memory

    g = problem.graph
    cost = np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.ascontiguousarray(g.bytes, dtype=np.int64)
    B = int(problem.budgets[0])
    ref = _reference_memory(size, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx)
    over = np.flatnonzero(ref > B)
    if over.size > samples:
        top = over[np.argsort(-ref[over], kind="stable")[:samples // 4]]
        even = over[np.unique(np.linspace(0, over.size - 1, samples - top.size).round().astype(np.int64))]
        over = np.union1d(top, even)
    ts = over[np.argsort(-ref[over], kind="stable")].astype(np.int64)
    pos = np.flatnonzero(size > 0)
    order = pos[np.argsort(cost[pos] / size[pos], kind="stable")]
    value, _, _, _ = _cut_lp_kernel(ts, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx, order, cost, size, B,
                                    np.int64(work))
    return np.where(np.isfinite(value), value, 0.0)


def unique_nodes(part, n: int) -> int:
    """How many of the ``n`` nodes lie outside every run of repeated stages
    of ``part`` (a segment chain: stages whose kind is negative, and nodes
    in no stage); ``0`` for a partition that is all repeated blocks.

    Examples
    --------
    >>> from hybrid_remat.generators import training_graph
    >>> import networkx as nx
    >>> from hybrid_remat.segments.chain import segment_chain
    >>> g = training_graph(nx.path_graph(6, create_using=nx.DiGraph))
    >>> unique_nodes(segment_chain(g, segment_size=2), g.n) == g.n
    True
    """
    if not hasattr(part, "kind") or not hasattr(part, "stage_nodes"):
        return 0
    inside = sum(part.stage_nodes(s).size for s in range(part.n_stages) if int(part.kind[s]) >= 0)
    return int(n - inside)


def too_few_alike(part, n: int, max_vars: float | None = None) -> str:
    """Why the grouped model on ``part`` is not worth building (``""``: it
    may be): the nodes outside every run (:func:`unique_nodes`) alone would
    give more than ``max_vars`` (default :data:`MAX_GROUPED_VARS`) variables at :data:`MIN_CUTS` cuts (at
    :data:`VARS_PER_UNIQUE_NODE_CUT` each).  A skip only costs bound
    strength, never validity."""
    max_vars = MAX_GROUPED_VARS if max_vars is None else max_vars
    unique = unique_nodes(part, n)
    if VARS_PER_UNIQUE_NODE_CUT * MIN_CUTS * unique > max_vars:
        return (f"{unique} of {n} nodes lie outside every run of repeated stages: the grouped model of {MIN_CUTS} "
                f"cuts would outgrow {int(max_vars)} variables (few groups alike)")
    return ""


def grouped_multicut_lower_bound(problem, *, chain=None, part=None, cuts=(12,), limits: Limits | None = None):
    """The grouped chain-of-cuts bound (module docstring) as a
    :class:`~hybrid_remat.bounds.cut_chains.MultiCutBound` (``method``:
    ``"grouped_lp"``, or ``"none"`` when nothing was proved in time).

    Parameters
    ----------
    problem : Problem
        Single device, serial time.
    chain : list of int, optional
        The cuts (each an ancestor of the next); by default the heaviest path
        of :func:`sampled_screen`, thinned by
        :func:`~hybrid_remat.bounds.cut_chains.spread_cuts` to each count of
        ``cuts`` in turn while the time left is predicted to suffice (from
        the previous model's size); the best value is kept (every chain
        gives a bound over every plan).
    part : optional
        The partition into stages (``stage`` per node, ``stage_nodes(s)``);
        by default :func:`~hybrid_remat.blocks.structure.block_partition`.
    limits : Limits, optional
        Deadline: a stopped build or LP gives the trivial bound.
    """
    from .cut import _STEPS_PER_SECOND

    if not problem.is_single_device:
        raise ValueError("the chain-of-cuts bound covers single-device problems only")
    limits = limits or Limits()
    t0 = now()
    base = float(problem.base_cost)
    stats: dict = {"chains": []}
    g = problem.graph
    if chain is not None:
        chains, weight, path = [list(chain)], None, []
    else:
        left = limits.left()
        if left < SECONDS_PER_ITEM * (g.n + g.m):   # the screen and the path alone would outlast it
            stats["skipped"] = f"{left:.2g} s left: too little to choose the cuts"
            return MultiCutBound(base, 0.0, [], "none", stats)
        if part is None:
            from ..blocks.structure import block_partition

            part = block_partition(g)
        why = too_few_alike(part, g.n, min(MAX_GROUPED_VARS, left / SECONDS_PER_VAR) if math.isfinite(left)
                            else MAX_GROUPED_VARS)
        if why:
            stats["skipped"] = why
            return MultiCutBound(base, 0.0, [], "none", stats)
        weight = sampled_screen(problem, work=limits.share(0.2 * left if math.isfinite(left) else None)
                                .work_for(_STEPS_PER_SECOND))
        path = cut_chain(g, weight, g.n + 1)
        chains = [[path[i] for i in spread_cuts(weight[path] if path else np.zeros(0), c).tolist()] for c in cuts]
        stats["screen_s"] = now() - t0
    if part is None and chains[0]:
        from ..blocks.structure import block_partition

        part = block_partition(g)
    best, best_chain = None, []
    per_cut = None          # seconds per cut of the last chain solved
    for ch in chains:
        if not ch or limits.expired() or (best_chain and len(ch) <= len(best_chain)):
            break
        if per_cut is not None and limits.left() < 1.5 * per_cut * len(ch):
            stats["skipped"] = f"{len(ch)} cuts predicted beyond the time left"
            break
        t1 = now()
        got = _solve(problem, ch, part, limits, stats, sized=weight is not None)
        while got == "large" and len(ch) // 2 >= MIN_CUTS:     # few groups alike: a shorter chain
            ch = [path[i] for i in spread_cuts(weight[path], len(ch) // 2).tolist()]
            got = _solve(problem, ch, part, limits, stats, sized=True)
        if got == "large":
            stats["skipped"] = "the grouped model is predicted beyond the time left (few groups alike)"
            break
        per_cut = (now() - t1) / len(ch)
        if got is not None and (best is None or got > best):
            best, best_chain = got, ch
    stats["seconds"] = now() - t0
    if best is None:
        return MultiCutBound(base, 0.0, best_chain, "none", stats)
    return MultiCutBound(base + best, best, best_chain, "grouped_lp", stats)


def _solve(problem, chain, part, limits, stats, sized: bool = False):
    """The certified value of the aggregated LP on ``chain`` (``None``:
    stopped or failed; ``"large"``: with ``sized``, a model of more than
    :data:`MAX_GROUPED_VARS` variables or than the time left allows at
    :data:`SECONDS_PER_VAR`, not built)."""
    t0 = now()
    max_vars = None
    if sized:
        left = limits.left()
        max_vars = int(min(MAX_GROUPED_VARS, left / SECONDS_PER_VAR if math.isfinite(left) else MAX_GROUPED_VARS))
    built = grouped_model(problem, list(chain), part, limits, max_vars=max_vars)
    if isinstance(built, int):
        stats["chains"].append({"cuts": len(chain), "vars": built, "skipped": f"more than {max_vars} variables"})
        return "large"
    if built is None:
        stats["chains"].append({"cuts": len(chain), "skipped": "time limit while building"})
        return None
    c, A, b, lb, ub, cscale, n_classes = built
    row = {"cuts": len(chain), "classes": n_classes, "vars": int(c.size), "rows": int(A.shape[0]),
           "build_s": now() - t0}
    stats["chains"].append(row)
    if c.size == 0:             # no ancestor of any cut: nothing to recompute (an infeasible row: left alone)
        return 0.0 if (b >= 0).all() else None
    val = _certified_lp(c, A, b, lb, ub, limits) if not limits.expired() else None
    row["seconds"] = now() - t0
    if val is None:
        return None
    row["extra"] = val * cscale
    return val * cscale
