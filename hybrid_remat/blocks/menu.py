"""Helpers of the block menus shared by the block solver
(:mod:`hybrid_remat.blocks.solver`) and the stream class
(:mod:`hybrid_remat.blocks.stream`): a stage's closure staircase with the
coarse-then-refined walk, and the choice of a few points of it.

Examples
--------
>>> [round(x, 1) for x in _spread([0.0, 0.5, 1.0, 1.5, 2.0], 3)]
[0.0, 1.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from .staircase import closure_staircase

__all__ = ["stage_preds", "least_extra"]


def _local(graph, nodes):
    loc = np.full(graph.n, -1, dtype=np.int64)
    loc[nodes] = np.arange(nodes.size)
    preds = [[int(loc[u]) for u in graph.preds(v).tolist() if loc[u] >= 0] for v in nodes.tolist()]
    return loc, preds


def _closure_masks(problem, nodes, others_fwd):
    """``(preds, needed, fixed)`` of a stage's closure model (see
    :func:`_staircase_of`)."""
    g = problem.graph
    _, preds = _local(g, nodes)
    needed = np.zeros(nodes.size, dtype=bool)
    fixed = np.zeros(nodes.size, dtype=bool)
    for i, v in enumerate(nodes.tolist()):
        s = g.succs(v)
        needed[i] = bool((g.phase[s] != 0).any())
        fixed[i] = bool(others_fwd[s].any())
    return preds, needed, fixed


def least_extra(problem, nodes, others_fwd, held: int, limits, dropped=None):
    """The least recomputation time of a stage's closure model (as in
    :func:`_staircase_of`) holding at most ``held`` bytes: one SCIP solve;
    ``None`` when nothing fits or the limits stopped it."""
    from .staircase import _Builder

    g = problem.graph
    preds, needed, fixed = _closure_masks(problem, nodes, others_fwd)
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)[nodes]
    b = _Builder(nodes, preds, needed, fixed, cost, g.bytes[nodes], 10_000, 1, None, dropped)
    try:
        status, got = b.solve(int(held) // b.unit, limits)
    finally:
        b.close()
    if got is None:
        return None
    return float(cost[got[2]].sum())


def _staircase_of(problem, nodes, others_fwd, limits, dropped=None):
    """The staircase of a stage's forward part: needed = read by a backward
    node; held for sure = read by another stage's forward nodes; never
    held: ``dropped`` (a mask over ``nodes``, default none)."""
    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    preds, needed, fixed = _closure_masks(problem, nodes, others_fwd)
    # coarse first (the whole range of memory in few solves: a truncated fine walk held only the top of it,
    # and nothing fit at 50 % on a loaded machine), then the gaps refined while time and points allow
    st = closure_staircase(nodes, preds, needed=needed, fixed=fixed, cost=cost[nodes], size=g.bytes[nodes],
                           limits=limits, resolution=1 / 24, keep_open=True, dropped=dropped)
    try:
        for _ in range(8):
            gaps = [i for i, p in enumerate(st.points) if p.covers_from < p.held]
            if not gaps or limits.expired() or len(st.points) >= 64:
                break
            for i in sorted(gaps, reverse=True):          # from the back: indices stay valid
                if limits.expired() or not st.refine(i, limits):
                    break
    finally:
        st.close()
    return st


def _spread(points, k):
    """At most ``k`` points, spread over the held range (extremes kept)."""
    if len(points) <= k:
        return list(points)
    idx = np.unique(np.round(np.linspace(0, len(points) - 1, k)).astype(int))
    return [points[i] for i in idx]


def _least_first(points):
    """The points least memory first, then most, then the rest spread
    (bisecting the range)."""
    if len(points) <= 2:
        return list(points)[::-1]
    order, seen = [len(points) - 1, 0], {len(points) - 1, 0}
    spans = [(0, len(points) - 1)]
    while spans:
        a, b = spans.pop(0)
        m = (a + b) // 2
        if m not in seen and a < m < b:
            seen.add(m)
            order.append(m)
        if m - a > 1:
            spans.append((a, m))
        if b - m > 1:
            spans.append((m, b))
    order += [i for i in range(len(points)) if i not in seen]
    return [points[i] for i in order]


#: the local inputs of a stage's nodes (public name of :func:`_local`)
stage_preds = _local
