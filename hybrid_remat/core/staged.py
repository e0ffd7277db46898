"""The staged encoding of plans, shared by the Checkmate and XEngine models.

A *stage grid* cuts a topological order (the node numbering) into stages:
stage ``t`` first-computes the nodes ``starts[t] .. starts[t+1]-1``
(equivalently ``ends[t-1]+1 .. ends[t]``, ``ends = starts[1:] - 1``) and
may recompute or receive any earlier node, each at most once per device, in
index order.  One node per stage is Checkmate's and XEngine's grid.

Per device ``d``: ``R[d,t,i]`` (``i`` computed on ``d`` in stage ``t``),
``X[d,e,t,i]`` (copied ``d -> e`` right after slot ``i``), ``S[d,t,i]``
(resident on ``d`` when stage ``t`` starts).  Checkmate's single-device
``R``/``S`` (``T x n``) are the ``d = 0`` slices.

* :func:`encode` / :func:`stage_arrays` / :func:`staged_rs`: plan -> arrays
  (``None`` or :class:`~hybrid_remat.errors.PlanError` when the plan has no
  staged form).
* :func:`decode` / :func:`plan_from_staged`: arrays -> plan (per stage and
  slot: compute, copy, then free every value no longer needed on that
  device).
* :func:`solve_r_opt`: the minimal ``R`` for a single-device ``S``.
* :func:`staged_memory`: the models' memory accounting of given arrays.
* :func:`first_compute_order`: the order a plan first computes the nodes in
  (a relabelling along it makes the plan frontier-ordered).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.plan import keep_all_plan
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(4, bytes=1), "100%")
>>> R, S, X = stage_arrays(p, keep_all_plan(p.graph, "cost"))
>>> int(R[0].sum()), decode(p, R, S, X).n_computes()
(4, 4)
>>> stage_starts(5, 2).tolist(), ends_of(stage_starts(5, 2)).tolist()
([0, 2, 4, 5], [1, 3, 4])
"""

from __future__ import annotations

import numpy as np

from ..errors import PlanError
from .plans import OP_COMPUTE, OP_COPY, OP_FREE, Plan

__all__ = [
    "stage_starts", "ends_of", "starts_of", "sinks", "encode", "stage_arrays", "staged_rs", "decode",
    "plan_from_staged", "solve_r_opt", "staged_memory", "first_compute_order",
]


# ---------------------------------------------------------------- the grid
def stage_starts(n: int, stage_size: int = 1) -> np.ndarray:
    """Block boundaries ``[0, g, 2g, ..., n]`` for ``ceil(n / g)`` stages.

    >>> stage_starts(5, 2).tolist()
    [0, 2, 4, 5]
    """
    g = max(1, int(stage_size))
    return np.array(list(range(0, n, g)) + [n], dtype=np.int64)


def ends_of(starts) -> np.ndarray:
    """The last node of each stage: ``starts[1:] - 1``."""
    return np.asarray(starts, dtype=np.int64)[1:] - 1


def starts_of(ends) -> np.ndarray:
    """Stage boundaries from the last node of each stage."""
    return np.concatenate([[0], np.asarray(ends, dtype=np.int64) + 1]).astype(np.int64)


def sinks(graph) -> np.ndarray:
    """Nodes nobody reads (bool mask)."""
    return np.diff(graph.succ_ptr) == 0


def first_compute_order(plan: Plan, n: int) -> np.ndarray | None:
    """Nodes in the order the plan first computes them (``None`` if some
    node of ``0..n-1`` is never computed, or the plan names another).

    >>> from hybrid_remat.plan import Plan
    >>> first_compute_order(Plan.from_steps([("compute", 1, "d"), ("compute", 0, "d")]), 2).tolist()
    [1, 0]
    """
    comp = plan.node[plan.op == OP_COMPUTE]
    if comp.size and (comp.min() < 0 or comp.max() >= n):
        return None                       # a plan of another graph
    _, first = np.unique(comp, return_index=True)
    if first.shape[0] != n:
        return None
    return comp[np.sort(first)].astype(np.int64)


# ---------------------------------------------------------------- encoding
def encode(n: int, D: int, op, node, dev, tgt, ends, *, strict: bool = True):
    """``(R, S, X)`` of a plan given as arrays with device *indices*, or the
    reason it has no staged form (a string).

    Stage ``t`` ends with the first computation of ``ends[t]`` and the
    copies and frees that directly follow it.  ``strict``: a value computed
    or received twice in one stage on one device has no staged form (the
    multi-device model's rule); otherwise the stage's ``R`` just says
    "computed in the stage" (Checkmate's encoder, whose decoder then takes
    the minimal ``R``).
    """
    ends = np.asarray(ends, dtype=np.int64)
    T = len(ends)
    R = np.zeros((D, T, n), dtype=bool)
    S = np.zeros((D, T, n), dtype=bool)
    X = np.zeros((D, D, T, n), dtype=bool)
    resident = np.zeros((D, n), dtype=bool)
    t = 0  # current stage
    closing = -1  # just first-computed the last node of stage `closing`
    for o, v, d, e in zip(op, node, dev, tgt, strict=True):
        if closing >= 0 and not (o != OP_COMPUTE and (o == OP_FREE or v == ends[closing])):
            t = closing + 1  # the stage is over: open the next one
            closing = -1
            if t >= T:
                return f"node {v} is computed or copied after the last node's first computation: no staged form"
            S[:, t, :] = resident
        st = closing if closing >= 0 else t
        if o == OP_COMPUTE:
            if v > ends[st]:
                first = int(ends[st - 1]) + 1 if st else 0
                return f"node {v} is computed before node {first}: the plan is not frontier-ordered"
            if strict and (R[d, st, v] or X[:, d, st, v].any() or S[d, st, v]):
                return f"node {v} arrives twice on device {d} in stage {st}"
            R[d, st, v] = True
            resident[d, v] = True
            if v == ends[st] and closing < 0:
                closing = st
        elif o == OP_COPY:
            if v > ends[st] or R[e, st, v] or X[:, e, st, v].any() or S[e, st, v]:
                return f"copy of node {v} to device {e} in stage {st} has no staged form"
            if not (S[d, st, v] or R[d, st, v]):
                return f"copy of node {v} relays a value received in stage {st}"
            X[d, e, st, v] = True
            resident[e, v] = True
        else:
            resident[d, v] = False
    if closing != T - 1:
        first = int(ends[closing]) + 1 if closing >= 0 else int(ends[t - 1]) + 1 if t else 0
        return f"node {min(first, n - 1)} is never computed in its stage"
    return R, S, X


def _device_indices(names, plan: Plan):
    try:
        dmap = np.array([list(names).index(x) for x in plan.devices], dtype=np.int64)
    except ValueError:
        if len(names) == 1 and len(plan.devices) == 1:
            dmap = np.zeros(1, dtype=np.int64)  # a one-device plan fits any one-device problem
        else:
            return None
    dev = dmap[plan.device] if len(plan) else plan.device.astype(np.int64)
    tgt = np.where(plan.target >= 0, dmap[np.maximum(plan.target, 0)], -1) if len(plan) else plan.target
    return dev, tgt


def stage_arrays(problem, plan: Plan, ends=None):
    """``(R, S, X)`` boolean arrays of a frontier-ordered plan, or ``None``
    when it has no staged form (strict: see :func:`encode`).

    ``R[d,t,i]``/``X[d,e,t,i]``: computed / copied in stage ``t``;
    ``S[d,t,i]``: resident on ``d`` when stage ``t`` starts; stage ``t``
    ends with the first computation of ``ends[t]`` (default ``t``).
    """
    g = problem.graph
    ends = np.arange(g.n) if ends is None else np.asarray(ends, dtype=np.int64)
    idx = _device_indices([d.name for d in problem.devices], plan)
    if idx is None:
        return None
    out = encode(g.n, problem.n_devices, plan.op.tolist(), plan.node.tolist(), idx[0].tolist(), idx[1].tolist(),
                 ends)
    return None if isinstance(out, str) else out


def staged_rs(graph, plan: Plan, starts) -> tuple[np.ndarray, np.ndarray]:
    """Block-staged ``R``/``S`` of a single-device plan (``T x n`` bool) for
    stage ``starts``, cleaned of sinks' useless entries (Checkmate's form:
    a value computed twice in a stage is simply "computed").

    Raises
    ------
    PlanError
        The plan has no staged form (not frontier-ordered, copies, several
        devices, ...).
    """
    if (plan.op == OP_COPY).any() or len(set(plan.device.tolist())) > 1:
        raise PlanError("only single-device plans without copies have a staged R/S form")
    zeros = [0] * len(plan)
    out = encode(graph.n, 1, plan.op.tolist(), plan.node.tolist(), zeros, [-1] * len(plan), ends_of(starts),
                 strict=False)
    if isinstance(out, str):
        raise PlanError(out)
    R, S = out[0][0], out[1][0]
    st = np.asarray(starts)
    sink = sinks(graph)
    S[:, sink] = False
    for s in range(len(st) - 1):
        rec_sink = sink.copy()
        rec_sink[st[s]:st[s + 1]] = False
        R[s, rec_sink] = False
    return R, S


# ---------------------------------------------------------------- decoding
def decode(problem, R, S, X, meta: dict | None = None, ends=None) -> Plan:
    """The plan of (rounded) staged arrays: per stage and slot, compute,
    copy, then free every value no longer needed on that device; at the
    start of a stage drop what it does not need."""
    names = [d.name for d in problem.devices]
    return _decode(problem.graph, names, R, S, X, meta or {"solver": "xengine_milp"}, ends)


def plan_from_staged(graph, R, S, device: str, meta: dict | None = None, starts=None) -> Plan:
    """Single-device ``R``/``S`` (``T x n``) as a plan (see :func:`decode`).

    Raises
    ------
    PlanError
        A computed node's input is neither resident nor computed earlier in
        its stage.
    """
    R = np.asarray(R) > 0.5
    S = np.asarray(S) > 0.5
    T, n = R.shape
    ends = np.arange(n) if starts is None else ends_of(starts)
    X = np.zeros((1, 1) + R.shape, dtype=bool)
    return _decode(graph, [device], R[None], S[None], X, meta, ends, check=True)


def _decode(g, names, R, S, X, meta, ends, check: bool = False) -> Plan:
    n, D = g.n, len(names)
    ends = np.arange(n) if ends is None else np.asarray(ends, dtype=np.int64)
    T = len(ends)
    steps = []
    resident = np.zeros((D, n), dtype=bool)
    pp, pi = g.pred_ptr, g.pred_idx
    for st in range(T):
        t = int(ends[st])
        Rt, Xt = R[:, st, : t + 1], X[:, :, st, : t + 1]
        keep = S[:, st + 1, :] if st + 1 < T else np.zeros((D, n), dtype=bool)
        last = np.full((D, n), -1, dtype=np.int64)  # last slot at which (d, i) is needed
        last[keep] = n + 1
        out = Xt.any(axis=1)  # (D, t+1): copies out of d at slot i
        arrive = Rt | Xt.any(axis=0)
        slots = np.arange(t + 1)
        for d in range(D):
            last[d, : t + 1] = np.maximum(last[d, : t + 1], np.where(arrive[d] | out[d], slots, -1))
            for j in np.flatnonzero(Rt[d]).tolist():
                pj = pi[pp[j]:pp[j + 1]]
                last[d, pj] = np.maximum(last[d, pj], j)
        for d in range(D):  # start of the stage: drop what the stage does not need
            for i in np.flatnonzero(resident[d] & (last[d] < 0)).tolist():
                steps.append(("free", i, names[d]))
            resident[d] &= last[d] >= 0
        # only slots where something arrives or is freed produce steps
        events = np.flatnonzero(arrive.any(axis=0))
        freed = last[(last >= 0) & (last <= t)]
        for k in np.union1d(events, freed).tolist():
            for d in range(D):
                if Rt[d, k]:
                    if check:
                        for u in pi[pp[k]:pp[k + 1]].tolist():
                            if not resident[d, u]:
                                raise PlanError(f"stage {st}: node {k} needs node {u}, which is neither kept "
                                                f"nor computed")
                    if not resident[d, k]:
                        steps.append(("compute", k, names[d]))
                        resident[d, k] = True
            for d in range(D):
                for e in range(D):
                    if Xt[d, e, k]:
                        steps.append(("copy", k, names[d], names[e]))
                        resident[e, k] = True
            for d in range(D):
                for i in np.flatnonzero(resident[d] & (last[d] == k)).tolist():
                    steps.append(("free", i, names[d]))
                    resident[d, i] = False
    return Plan.from_steps(steps, names, meta)


def solve_r_opt(graph, S, starts) -> np.ndarray:
    """The minimal ``R`` for a single-device staged ``S`` (Checkmate's
    ``solve_r_opt``).

    Block nodes are computed in their stage; a value kept into stage
    ``s+1`` but not resident at the start of ``s`` is computed in ``s``; then
    every missing input of a computed node is computed too (scanning each
    stage backwards, so the closure is complete).

    Parameters
    ----------
    graph : Graph
    S : array (T, n) of bool
    starts : array (T+1,) of int

    Returns
    -------
    ndarray (T, n) of bool
    """
    S = np.asarray(S) > 0.5
    T, n = S.shape
    R = np.zeros((T, n), dtype=bool)
    pp, pi = graph.pred_ptr, graph.pred_idx
    for s in range(T):
        lo, hi = int(starts[s]), int(starts[s + 1])
        R[s, lo:hi] = True
        if s + 1 < T:
            R[s, :hi] |= S[s + 1, :hi] & ~S[s, :hi]
        row_r, row_s = R[s], S[s]
        for v in range(hi - 1, -1, -1):
            if row_r[v]:
                for j in range(pp[v], pp[v + 1]):
                    u = pi[j]
                    if not row_r[u] and not row_s[u]:
                        row_r[u] = True
    return R


def staged_memory(problem, R, S, X, ends, mb):
    """``FREE`` and ``U`` of staged arrays as the XEngine model defines them:
    ``({(d,t,i,k): 1.0}, {(d,t,k): memory in units of mb})`` (value ``i``
    freed on ``d`` right after slot ``k``; memory right after slot ``k``'s
    arrival)."""
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
            last = np.full(n, -1, dtype=np.int64)  # the last consumer slot of each value on d in this stage
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
