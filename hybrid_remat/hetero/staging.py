"""Staged plans: the grid of stages of the XEngine/Checkmate models.

Stage ``t`` of a grid ``ends`` runs slots ``0..ends[t]`` in index order and
first-computes the nodes ``ends[t-1]+1 .. ends[t]`` (one stage per node is
Checkmate's and XEngine's grid).  The conversions between plans and staged
``R``/``S``/``X`` arrays and the models' memory accounting are the shared
staged encoding (:mod:`hybrid_remat.core.staged`, re-exported here); this
module adds what the XEngine model needs on top: model sizes, the memory
unit, copy costs, coarse grids and windows cut for a given plan.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(4, bytes=1), "100%")
>>> model_size(p)["variables"] > model_size(p, ends=[1, 3])["variables"]
True
"""

from __future__ import annotations

import math

import numpy as np

from ..core.staged import decode, first_compute_order, stage_arrays, staged_memory
from ..plan import Plan
from ..problem import Problem

__all__ = ["model_size", "memory_scale", "copy_costs", "stage_arrays", "decode", "staged_memory", "coarse_ends",
           "first_compute_order", "binding_devices"]


def model_size(problem: Problem, ends=None) -> dict:
    """Estimated numbers of variables and constraints of the model (with
    the stage grid ``ends``; default: one stage per node)."""
    g = problem.graph
    n, m = g.n, g.m
    D = problem.n_devices
    Dc = int(problem.can_compute.sum())
    bw, _ = problem.link_arrays
    L = int((bw > 0).sum())
    ends = np.arange(n) if ends is None else np.asarray(ends)
    tri = int((ends + 1).sum())
    free = D * (tri + int(m * (ends + 1).sum() / max(n, 1)))
    nvars = Dc * tri + D * tri + L * tri + free + D * tri
    ncons = D * int(m * tri / max(n, 1)) + 2 * D * tri + L * tri + 3 * free + D * tri
    return {"variables": int(nvars), "constraints": int(ncons)}


def binding_devices(problem: Problem) -> np.ndarray:
    """Devices whose budget is below the sum of all sizes (bool mask): the
    others can hold everything at once and need no memory rows."""
    total = int(problem.graph.bytes.sum())
    return problem.budgets < total


#: memory units of the largest binding budget above which the unit is coarsened (SCIP's feasibility
#: tolerance is 1e-6 relative: at 1e6 units a row may be off by one unit, which the conservative margin absorbs)
MAX_MEMORY_UNITS = 1e6


def memory_scale(problem: Problem, relax: bool = False):
    """Memory unit (bytes) and budgets in that unit (``inf`` for devices
    that never bind, :func:`binding_devices`).

    The gcd of the sizes when the largest binding budget is at most
    :data:`MAX_MEMORY_UNITS` of it (exact: integer sizes, floored budgets);
    otherwise ``budget / 1e6`` with fractional sizes ``bytes / unit`` and
    budgets lowered by two units (conservative: SCIP's tolerance cannot
    admit a plan over budget) or, with ``relax=True``, not lowered (a
    relaxation up to SCIP's tolerance: the model's bound stays valid).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> unit, caps = memory_scale(Problem.single(chain(3, bytes=4), 8))
    >>> unit, caps.tolist()
    (4.0, [2.0])
    """
    g = problem.graph
    b = [int(x) for x in g.bytes if x > 0]
    unit = 1
    if b:
        unit = b[0]
        for x in b[1:]:
            unit = math.gcd(unit, x)
    budgets = problem.budgets.astype(np.float64)
    binding = binding_devices(problem)
    ref = float(budgets[binding].max()) if binding.any() else float(budgets.max())
    if ref / unit > MAX_MEMORY_UNITS:
        unit = ref / MAX_MEMORY_UNITS
        caps = budgets / unit if relax else np.floor(budgets / unit) - 2.0
    else:
        caps = np.floor(budgets / unit)
    return float(unit), np.where(binding, caps, np.inf)


def copy_costs(problem: Problem):
    """``(D, D, n)`` copy times (``nan`` where there is no link)."""
    g = problem.graph
    bw, lat = problem.link_arrays
    D = problem.n_devices
    cc = np.full((D, D, g.n), np.nan)
    for a in range(D):
        for b in range(D):
            if a != b and bw[a, b] > 0:
                cc[a, b] = lat[a, b] + g.bytes / bw[a, b]
    return cc


def coarse_ends(problem: Problem, plan: Plan, max_variables: int, refine_variables: int | None = None,
                limits=None):
    """A stage grid as coarse as the plan allows (``None`` when none fits
    under ``max_variables``, or ``limits`` expire before one is found;
    refining stops when they expire).

    Consecutive per-node stages of ``plan`` (frontier-ordered) are merged
    while no value arrives twice on a device within the merged stage and no
    copy relays a value received in it; a merged stage whose memory (by the
    model's accounting) exceeds a budget is split again.  Then the longest
    stages are halved while the model stays under ``refine_variables``
    (default a third of ``max_variables``: SCIP closes small coarse models
    far faster than large fine ones).
    """
    fine = stage_arrays(problem, plan)
    if fine is None:
        return None
    R, S, X = fine
    g = problem.graph
    n, _D = g.n, problem.n_devices
    arrive = R | X.any(axis=0)  # (D, n, n)
    groups = []  # (first fine stage, last fine stage)
    a = 0
    count = arrive[:, 0].copy()
    for t in range(1, n):
        clash = (count & arrive[:, t]).any() or (S[:, a] & arrive[:, t]).any()
        if not clash:
            # copy sources must be resident at the group's start or computed in it
            src = X[:, :, t].any(axis=1)  # (D, n)
            computed = R[:, a : t + 1].any(axis=1)
            clash = (src & ~(S[:, a] | computed)).any()
        if clash:
            groups.append((a, t - 1))
            a = t
            count = arrive[:, t].copy()
        else:
            count |= arrive[:, t]
    groups.append((a, n - 1))
    unit, cap = memory_scale(problem)
    mb = g.bytes / unit

    def ok(grps):
        ends = np.array([b for _, b in grps], dtype=np.int64)
        arrs = stage_arrays(problem, plan, ends)
        if arrs is None:
            return None, ends
        _, uval = staged_memory(problem, *arrs, ends, mb)
        bad = set()
        for (d, t, _k), u in uval.items():
            if u > cap[d] + 1e-9:
                bad.add(t)
        return bad, ends

    for _ in range(64):
        if limits is not None and limits.expired():
            return None
        bad, ends = ok(groups)
        if bad is None:
            return None
        if not bad:
            break
        new = []
        for t, (a0, b0) in enumerate(groups):
            if t in bad and b0 > a0:
                mid = (a0 + b0) // 2
                new += [(a0, mid), (mid + 1, b0)]
            else:
                new.append((a0, b0))
        if new == groups:
            break
        groups = new
    ends = np.array([b for _, b in groups], dtype=np.int64)
    if model_size(problem, ends)["variables"] > max_variables:
        return None
    # refine: split the longest stages while the model stays under the limit
    # (more stages = more freedom to recompute, offload and switch devices)
    while limits is None or not limits.expired():
        t = max(range(len(groups)), key=lambda i: groups[i][1] - groups[i][0])
        a0, b0 = groups[t]
        if b0 == a0:
            break
        mid = (a0 + b0) // 2
        trial = groups[:t] + [(a0, mid), (mid + 1, b0)] + groups[t + 1:]
        tends = np.array([b for _, b in trial], dtype=np.int64)
        if model_size(problem, tends)["variables"] > (refine_variables or max_variables // 3):
            break
        bad, _ = ok(trial)
        if bad is None or bad:
            break
        groups, ends = trial, tends
    return ends
