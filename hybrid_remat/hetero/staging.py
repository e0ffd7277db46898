"""Staged plans: the grid of stages of the XEngine/Checkmate models.

Stage ``t`` of a grid ``ends`` runs slots ``0..ends[t]`` in index order and
first-computes the nodes ``ends[t-1]+1 .. ends[t]`` (one stage per node is
Checkmate's and XEngine's grid).  This module converts plans to and from
staged ``R``/``S``/``X`` arrays, computes the models' memory accounting,
estimates model sizes, relabels a problem into another topological order
and cuts coarse grids for a given plan.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.plan import keep_all_plan
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(4, bytes=1), "100%")
>>> R, S, X = stage_arrays(p, keep_all_plan(p.graph, "cost"))
>>> R[0].sum(), decode(p, R, S, X).n_computes()
(np.int64(4), 4)
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import Graph
from ..plan import OP_COMPUTE, OP_COPY, Plan
from ..problem import Problem

__all__ = ["model_size", "memory_scale", "copy_costs", "stage_arrays", "decode", "staged_memory", "coarse_ends",
           "first_compute_order", "relabel", "relabel_plan"]


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


def memory_scale(problem: Problem):
    """Memory unit (bytes) and effective budgets in that unit."""
    g = problem.graph
    b = [int(x) for x in g.bytes if x > 0]
    unit = 1
    if b:
        unit = b[0]
        for x in b[1:]:
            unit = math.gcd(unit, x)
    budgets = problem.budgets.astype(np.float64)
    if budgets.max() / unit > 1e8:
        unit = float(budgets.max()) / 1e6
        return unit, np.floor(budgets / unit) - 2.0
    return float(unit), np.floor(budgets / unit)


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


def stage_arrays(problem: Problem, plan: Plan, ends=None):
    """``(R, S, X)`` boolean arrays of a frontier-ordered plan, or ``None``.

    ``R[d,t,i]``/``X[d,e,t,i]``: computed / copied in stage ``t``;
    ``S[d,t,i]``: resident on ``d`` when stage ``t`` starts.  Stage ``t``
    ends with the first computation of ``ends[t]`` (default ``t``) and the
    copies of it that directly follow.  Returns ``None`` when first
    computations are not in index order or a stage computes or receives a
    value twice on one device (the plan then has no staged form).
    """
    g = problem.graph
    n, D = g.n, problem.n_devices
    ends = np.arange(n) if ends is None else np.asarray(ends, dtype=np.int64)
    T = len(ends)
    names = [d.name for d in problem.devices]
    try:
        dmap = np.array([names.index(x) for x in plan.devices], dtype=np.int64)
    except ValueError:
        return None
    R = np.zeros((D, T, n), dtype=bool)
    S = np.zeros((D, T, n), dtype=bool)
    X = np.zeros((D, D, T, n), dtype=bool)
    resident = np.zeros((D, n), dtype=bool)
    t = 0  # current stage
    closing = -1  # just computed the last frontier node of stage `closing`
    for o, v, a, b in zip(plan.op.tolist(), plan.node.tolist(), plan.device.tolist(), plan.target.tolist(), strict=False):
        d = int(dmap[a])
        if closing >= 0 and not (o != OP_COMPUTE and (o == 1 or v == ends[closing])):
            # the stage is over: open the next one
            t = closing + 1
            closing = -1
            if t >= T:
                return None
            S[:, t, :] = resident
        st = closing if closing >= 0 else t
        if o == OP_COMPUTE:
            if v > ends[st]:
                return None
            if R[d, st, v] or X[:, d, st, v].any() or S[d, st, v]:
                return None
            R[d, st, v] = True
            resident[d, v] = True
            if v == ends[st] and closing < 0:
                closing = st
        elif o == OP_COPY:
            e = int(dmap[b])
            if v > ends[st] or R[e, st, v] or X[:, e, st, v].any() or S[e, st, v]:
                return None
            if not (S[d, st, v] or R[d, st, v]):  # relayed within a stage
                return None
            X[d, e, st, v] = True
            resident[e, v] = True
        else:
            resident[d, v] = False
    if closing != T - 1:
        return None
    return R, S, X


def decode(problem: Problem, R, S, X, meta: dict | None = None, ends=None) -> Plan:
    """The plan of a (rounded) solution: per stage and slot, compute, copy,
    then free every value no longer needed on that device."""
    g = problem.graph
    n, D = g.n, problem.n_devices
    ends = np.arange(n) if ends is None else np.asarray(ends, dtype=np.int64)
    T = len(ends)
    names = [d.name for d in problem.devices]
    steps = []
    resident = np.zeros((D, n), dtype=bool)
    for st in range(T):
        t = int(ends[st])
        Rt, Xt = R[:, st, : t + 1], X[:, :, st, : t + 1]
        keep = S[:, st + 1, :] if st + 1 < T else np.zeros((D, n), dtype=bool)
        last = np.full((D, n), -1, dtype=np.int64)  # last slot at which (d, i) is needed
        last[keep] = n + 1
        out = Xt.any(axis=1)  # (D, t+1): copies out of d at slot i
        arrive = Rt | Xt.any(axis=0)
        for d in range(D):
            pres = np.flatnonzero(arrive[d])
            last[d, pres] = np.maximum(last[d, pres], pres)
            src = np.flatnonzero(out[d])
            last[d, src] = np.maximum(last[d, src], src)
            for j in np.flatnonzero(Rt[d]):
                pj = g.preds(int(j))
                last[d, pj] = np.maximum(last[d, pj], j)
        # start of the stage: drop what the stage does not need
        for d in range(D):
            for i in np.flatnonzero(resident[d] & (last[d] < 0)):
                steps.append(("free", int(i), names[d]))
                resident[d, i] = False
        for k in range(t + 1):
            for d in range(D):
                if Rt[d, k]:
                    steps.append(("compute", k, names[d]))
                    resident[d, k] = True
            for d in range(D):
                for e in range(D):
                    if Xt[d, e, k]:
                        steps.append(("copy", k, names[d], names[e]))
                        resident[e, k] = True
            for d in range(D):
                for i in np.flatnonzero(resident[d] & (last[d] == k)):
                    steps.append(("free", int(i), names[d]))
                    resident[d, i] = False
    return Plan.from_steps(steps, names, meta or {"solver": "xengine_milp"})


def first_compute_order(plan: Plan, n: int) -> np.ndarray | None:
    """Nodes in the order of their first computation (``None`` unless all
    ``n`` nodes are computed)."""
    seen = np.zeros(n, dtype=bool)
    out = []
    for o, v in zip(plan.op.tolist(), plan.node.tolist(), strict=False):
        if o == OP_COMPUTE and not seen[v]:
            seen[v] = True
            out.append(v)
    return np.array(out, dtype=np.int64) if len(out) == n else None


def relabel(problem: Problem, order) -> tuple[Problem, np.ndarray]:
    """The problem with node ``order[k]`` renamed ``k`` (``order`` must be a
    topological order); returns it and ``new_of_old``."""
    g = problem.graph
    order = np.asarray(order, dtype=np.int64)
    new_of_old = np.empty(g.n, dtype=np.int64)
    new_of_old[order] = np.arange(g.n)
    edges = new_of_old[g.edges()] if g.m else np.zeros((0, 2), dtype=np.int64)
    g2 = Graph.from_arrays(g.bytes[order], [tuple(e) for e in edges.tolist()],
                           {k: g.cost(k)[order] for k in g.cost_kinds}, name=g.name)
    return Problem(g2, problem.devices, problem.links, check=False), new_of_old


def relabel_plan(plan: Plan | None, mapping) -> Plan | None:
    """``plan`` with every node ``v`` renamed ``mapping[v]``."""
    if plan is None:
        return None
    mapping = np.asarray(mapping, dtype=np.int64)
    return Plan(plan.op, mapping[plan.node], plan.device, plan.target, plan.devices, dict(plan.meta))



def staged_memory(problem: Problem, R, S, X, ends, mb):
    """FREE and U of staged arrays by their definitions:
    ``({(d,t,i,k): 0/1}, {(d,t,k): memory in units of mb})``."""
    g = problem.graph
    n, D = g.n, problem.n_devices
    T = len(ends)
    fval, uval = {}, {}
    preds = [list(g.preds(i)) for i in range(n)]
    for t in range(T):
        e_t = int(ends[t])
        for d in range(D):
            arrive = R[d, t] | X[:, d, t].any(axis=0)
            pres = S[d, t] | arrive
            keep = S[d, t + 1] if t + 1 < T else np.zeros(n, dtype=bool)
            cons = np.flatnonzero(R[d, t, : e_t + 1])
            # the last consumer slot of each value on d in this stage (-1: none)
            last = np.full(n, -1, dtype=np.int64)
            for j in cons:
                for u in preds[j]:
                    last[u] = max(last[u], j)
            for i in np.flatnonzero(pres[: e_t + 1]):
                if keep[i]:
                    continue
                k = int(last[i]) if last[i] >= 0 else int(i)
                fval[d, t, int(i), k] = 1.0
            mem = float(mb[S[d, t]].sum())
            for k in range(e_t + 1):
                if k > 0:
                    for i in preds[k - 1] + [k - 1]:
                        mem -= mb[i] * fval.get((d, t, i, k - 1), 0.0)
                mem += mb[k] * float(arrive[k])
                uval[d, t, k] = mem
    return fval, uval


def coarse_ends(problem: Problem, plan: Plan, max_variables: int, refine_variables: int | None = None):
    """A stage grid as coarse as the plan allows (``None`` when none fits
    under ``max_variables``).

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
    while True:
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
