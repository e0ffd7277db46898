"""Single-device plans lifted to CPU+GPU: host offload instead of recomputation.

A GPU-only plan recomputes a value ``v`` after freeing it.  The lifted plan
copies ``v`` to host memory just before that free (``copy(v, gpu, host)``)
and replaces the recomputation by a copy back (``copy(v, host, gpu)``)
wherever the cost model says the round trip is cheaper than recomputing
(policy ``"serial"``: recompute cost > copy in + copy out, the copy out
charged once), or everywhere (policy ``"all"``: useful for the makespan,
where copies overlap with computation).  GPU memory is unchanged at every
step (the copy out happens while ``v`` is resident anyway; the copy back
allocates exactly what the recomputation allocated); host memory grows by
the offloaded values, each freed on the host after its last copy back.
Recomputations that only fed a replaced recomputation become dead and are
removed (which can only lower memory).

The lift is the ``invert`` of the one-device reduction
(:class:`~hybrid_remat.core.devices.OneDevice`): ``anytime_solve`` solves a
multi-device problem on each device alone and lifts the plans;
:class:`~hybrid_remat.hetero.lifted.LiftedSingleDevice` does the same with
the registered single-device heuristics (run only when named).
:mod:`hybrid_remat.hetero.lift` re-exports this module.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.plan import Plan
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(3, bytes=1).with_costs({"gpu": [5.0, 5.0, 5.0], "cpu": [9.0] * 3})
>>> p = Problem(g, [Device("gpu", "gpu", 3), Device("cpu", "cpu", 10)],
...             [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)])
>>> plan = Plan.from_steps([("compute", 0, "gpu"), ("compute", 1, "gpu"), ("free", 0, "gpu"),
...                         ("compute", 0, "gpu"), ("compute", 2, "gpu")])
>>> lift_plan(p, plan).steps()[2:5]  # doctest: +NORMALIZE_WHITESPACE
[Step(op='copy', node=0, device='gpu', target='cpu'), Step(op='free', node=0, device='gpu', target=None),
 Step(op='copy', node=0, device='cpu', target='gpu')]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import BudgetError, PlanError
from ..problem import Problem
from .plans import OP_COPY, OP_FREE, Plan

__all__ = ["lift_plan", "remove_dead_computes", "remove_dead_steps", "dead_steps_kernel",
           "recompute_candidates_kernel", "gpu_only_problem", "host_device"]


def host_device(problem: Problem, compute: str) -> str | None:
    """The largest other device with links both ways to ``compute``."""
    bw, _ = problem.link_arrays
    ci = problem.device_index(compute)
    best, best_mem = None, -1
    for j, d in enumerate(problem.devices):
        if j != ci and bw[ci, j] > 0 and bw[j, ci] > 0 and d.memory_bytes > best_mem:
            best, best_mem = d.name, d.memory_bytes
    return best


def gpu_only_problem(problem: Problem, device: str | None = None) -> Problem | None:
    """The one-device problem of ``device`` (default: the primary device);
    ``None`` when the graph cannot fit on it at all."""
    dev = problem.devices[problem.device_index(device)] if device else problem.primary
    try:
        return Problem(problem.graph, [dev])
    except BudgetError:
        return None


def remove_dead_computes(graph, steps: list) -> list:
    """Drop recomputations whose value is freed (or left) unread, repeatedly.

    ``steps`` are ``[op, node, dev, dst]`` lists; the first computation of
    every node is kept.  (The arrays' version, :func:`remove_dead_steps`,
    is what :func:`lift_plan` uses.)
    """
    if not steps:
        return []
    a = np.asarray(steps, dtype=np.int64).reshape(-1, 4)
    keep = remove_dead_steps(graph, a[:, 0], a[:, 1], a[:, 2], a[:, 3])
    return [list(map(int, s)) for s in a[keep]]


def remove_dead_steps(graph, op, node, dev, dst) -> np.ndarray:
    """The steps to keep (a boolean mask) once dead recomputations and their
    frees are dropped (:func:`dead_steps_kernel`, until nothing changes)."""
    n_dev = int(max(dev.max(initial=0), dst.max(initial=0))) + 1
    alive = np.ones(len(op), dtype=np.bool_)
    while dead_steps_kernel(np.asarray(op, np.int64), np.asarray(node, np.int64), np.asarray(dev, np.int64),
                            np.asarray(dst, np.int64), graph.pred_ptr, graph.pred_idx, graph.n, n_dev, alive):
        pass
    return alive


@njit(cache=True)
def dead_steps_kernel(op, node, dev, dst, pred_ptr, pred_idx, n, n_dev, alive):
    """One pass over the live steps: a recomputation (not a node's first
    computation) whose value is freed, or left at the end, before anything
    reads it is dead, with its free.  Marks them in ``alive``; returns how
    many steps it marked."""
    open_at = np.full((n_dev, n), -1, np.int64)  # step that made the value resident there
    read = np.zeros((n_dev, n), np.bool_)
    seen = np.zeros(n, np.bool_)
    marked = 0
    for i in range(op.shape[0]):
        if not alive[i]:
            continue
        o, v, d = op[i], node[i], dev[i]
        if o == 0:  # compute
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[j]
                if open_at[d, u] >= 0:
                    read[d, u] = True
            open_at[d, v] = i
            read[d, v] = not seen[v]  # a first computation counts as read
            seen[v] = True
        elif o == 2:  # copy
            if open_at[d, v] >= 0:
                read[d, v] = True
            open_at[dst[i], v] = i
            read[dst[i], v] = True
        else:  # free
            k = open_at[d, v]
            if k >= 0:
                if not read[d, v] and op[k] == 0:
                    alive[k] = False
                    alive[i] = False
                    marked += 2
                open_at[d, v] = -1
    for d in range(n_dev):
        for v in range(n):
            k = open_at[d, v]
            if k >= 0 and not read[d, v] and op[k] == 0:
                alive[k] = False
                marked += 1
    return marked


@njit(cache=True)
def recompute_candidates_kernel(op, node, n):
    """``(compute step, last free step before it, node)`` of every
    recomputation of a one-device plan that follows a free of its node."""
    K = op.shape[0]
    computed = np.zeros(n, np.bool_)
    last_free = np.full(n, -1, np.int64)
    out = np.empty((K, 3), np.int64)
    c = 0
    for i in range(K):
        v = node[i]
        if op[i] == 0:
            if computed[v] and last_free[v] >= 0:
                out[c, 0], out[c, 1], out[c, 2] = i, last_free[v], v
                c += 1
            computed[v] = True
        elif op[i] == 1:
            last_free[v] = i
    return out[:c]


def lift_plan(problem: Problem, plan: Plan, *, host: str | None = None, policy: str = "serial",
              max_offloads: int | None = None) -> Plan:
    """Replace recomputations of a one-device plan by host round trips.

    Near-linear (two Numba passes and a sort): fit for plans of 100k-node
    graphs.

    Parameters
    ----------
    problem : Problem
        The multi-device problem (the plan's device must be one of its
        compute devices).
    plan : Plan
        A single-device plan without copies.
    host : str, optional
        Offload target (default: :func:`host_device`).
    policy : {"serial", "all"}
        ``"serial"``: only where recomputing costs more than the round trip;
        ``"all"``: every recomputation that a copy can replace.
    max_offloads : int, optional
        Keep only the ``max_offloads`` offloads with the largest gain (to
        respect a small host budget).

    Returns
    -------
    Plan
        Over the problem's devices (unchanged steps when nothing pays off).
    """
    if len(set(plan.devices[i] for i in set(plan.device.tolist()))) > 1 or (plan.op == OP_COPY).any():
        raise PlanError("lift_plan needs a single-device plan without copies")
    if policy not in ("serial", "all"):
        raise PlanError(f"unknown lift policy {policy!r}: use 'serial' or 'all'")
    names = [d.name for d in problem.devices]
    gname = plan.devices[int(plan.device[0])] if len(plan) else problem.primary.name
    if gname not in names:
        gname = problem.primary.name
    gi = names.index(gname)
    host = host or host_device(problem, gname)
    g = problem.graph
    op, node = plan.op.astype(np.int64), plan.node.astype(np.int64)
    K = len(op)
    unchanged = Plan(op, node, np.full(K, gi, np.int64), np.full(K, -1, np.int64), names, dict(plan.meta))
    if host is None:
        return unchanged
    hi = names.index(host)
    bw, lat = problem.link_arrays
    cost = problem.cost_matrix[gi]
    t_out = lat[gi, hi] + g.bytes / bw[gi, hi]
    t_in = lat[hi, gi] + g.bytes / bw[hi, gi]

    # which recomputations to replace: each node's gain is the same at every candidate; the copy out is
    # paid once per node, charged to its first chosen candidate
    cand = recompute_candidates_kernel(op, node, g.n)
    ci, cf, cv = cand[:, 0], cand[:, 1], cand[:, 2]
    gain = cost[cv] - t_in[cv]
    if policy == "serial":
        pick = gain - t_out[cv] > 0
        ci, cf, cv, gain = ci[pick], cf[pick], cv[pick], gain[pick]
    first = np.unique(cv, return_index=True)[1]
    gain[first] -= t_out[cv[first]]
    if max_offloads is not None and len(ci) > max_offloads:
        top = np.sort(np.argsort(-gain, kind="stable")[:max_offloads])
        ci, cf, cv = ci[top], cf[top], cv[top]
    if len(ci) == 0:
        return unchanged
    # one copy out before the free that precedes each node's first replaced recomputation, the copy back in
    # place of each, the host copy freed after the node's last one
    first = np.unique(cv, return_index=True)[1]
    last = len(cv) - 1 - np.unique(cv[::-1], return_index=True)[1]
    n_op = np.concatenate([op, np.full(len(first), OP_COPY), np.full(len(last), OP_FREE)])
    n_node = np.concatenate([node, cv[first], cv[last]])
    n_dev = np.concatenate([np.full(K, gi), np.full(len(first), gi), np.full(len(last), hi)])
    n_dst = np.concatenate([np.full(K, -1), np.full(len(first), hi), np.full(len(last), -1)])
    n_op[ci], n_dev[ci], n_dst[ci] = OP_COPY, hi, gi
    pos = np.concatenate([np.arange(K), cf[first], ci[last]])
    sub = np.concatenate([np.ones(K, np.int64), np.zeros(len(first), np.int64), np.full(len(last), 2)])
    order = np.lexsort((sub, pos))
    n_op, n_node, n_dev, n_dst = n_op[order], n_node[order], n_dev[order], n_dst[order]
    keep = remove_dead_steps(g, n_op, n_node, n_dev, n_dst)
    meta = dict(plan.meta)
    meta.update({"lifted": policy, "offloads": int(len(ci)), "host": host})
    return Plan(n_op[keep], n_node[keep], n_dev[keep], n_dst[keep], names, meta)
