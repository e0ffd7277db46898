"""The plan simulator: the single authority on validity, peaks and times.

Every plan that leaves the library has passed :func:`simulate`.  The Numba
kernel :func:`simulate_kernel` walks the steps once and checks:

* a ``compute(v, d)`` has every input resident on ``d``, ``v`` is not
  already resident on ``d``, and ``d`` can compute;
* a ``free(v, d)`` frees something resident;
* a ``copy(v, s, t)`` has ``v`` on ``s``, not on ``t``, and a link ``s -> t``;
* every node is computed at least once;
* no device goes over its budget (memory is counted after each allocation:
  a compute or copy allocates the output on its device).

It returns the per-device peak, the **serial** time (sum of compute and copy
times), the **makespan** when every device and every copy direction is its
own stream (a step starts when its inputs are ready on its device and its
stream is free, in plan order), the number of recomputations and a memory
timeline.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.plan import keep_all_plan
>>> g = chain(3, bytes=10)
>>> r = simulate(Problem.single(g, "100%"), keep_all_plan(g, "cost"))
>>> r.valid, r.peak_bytes, r.tdi_pct
(True, {'cost': 20}, 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .errors import PlanError
from .plan import OP_COPY, Plan
from .problem import Problem

__all__ = ["SimulationResult", "simulate", "simulate_kernel", "ERROR_MESSAGES", "check_plan"]

OK = 0
E_BAD_NODE = 1
E_BAD_DEVICE = 2
E_INPUT_MISSING = 3
E_ALREADY_RESIDENT = 4
E_FREE_ABSENT = 5
E_OVER_BUDGET = 6
E_NOT_COMPUTED = 7
E_COPY_SRC_ABSENT = 8
E_COPY_DST_RESIDENT = 9
E_NO_LINK = 10
E_CANNOT_COMPUTE = 11
E_BAD_OP = 12

ERROR_MESSAGES = {
    E_BAD_NODE: "names node {aux}, which is not in the graph",
    E_BAD_DEVICE: "names device index {aux}, which the problem lacks",
    E_INPUT_MISSING: "computes node {node} on {dev} but its input {aux} is not resident there",
    E_ALREADY_RESIDENT: "computes node {node} on {dev} where it is already resident",
    E_FREE_ABSENT: "frees node {node} on {dev} where it is not resident",
    E_OVER_BUDGET: "puts {dev} at {aux} bytes, over its budget of {budget} bytes",
    E_NOT_COMPUTED: "ends without ever computing node {aux}",
    E_COPY_SRC_ABSENT: "copies node {node} from {dev}, where it is not resident",
    E_COPY_DST_RESIDENT: "copies node {node} to {dev2}, where it is already resident",
    E_NO_LINK: "copies node {node} from {dev} to {dev2}, but no link joins them",
    E_CANNOT_COMPUTE: "computes node {node} on {dev}, which is storage only",
    E_BAD_OP: "has an unknown op code",
}


@njit(cache=True)
def simulate_kernel(op, node, dev, dst, bytes_, pred_ptr, pred_idx, cost, can_compute, budget, bw, lat, check_budget):
    """Walk a plan; return ``(err, err_step, err_aux, peak, compute_time,
    copy_time, makespan, n_computes, timeline, computed)``.

    All inputs are numpy arrays: ``op`` int8, ``node``/``dev``/``dst`` int64
    (steps), ``bytes_`` int64 (n), CSR predecessors, ``cost`` float64
    (D, n), ``can_compute`` bool (D), ``budget`` int64 (D), ``bw``/``lat``
    float64 (D, D), ``check_budget`` bool.  ``timeline[k, d]`` is device
    ``d``'s memory after step ``k``.
    """
    n = bytes_.shape[0]
    D = budget.shape[0]
    K = op.shape[0]
    resident = np.zeros((D, n), dtype=np.bool_)
    ready = np.zeros((D, n), dtype=np.float64)
    mem = np.zeros(D, dtype=np.int64)
    peak = np.zeros(D, dtype=np.int64)
    stream = np.zeros(D, dtype=np.float64)
    cstream = np.zeros((D, D), dtype=np.float64)
    computed = np.zeros(n, dtype=np.int64)
    timeline = np.zeros((K, D), dtype=np.int64)
    compute_time = 0.0
    copy_time = 0.0
    makespan = 0.0
    n_computes = 0
    for k in range(K):
        o = op[k]
        v = node[k]
        d = dev[k]
        if v < 0 or v >= n:
            return E_BAD_NODE, k, v, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
        if d < 0 or d >= D:
            return E_BAD_DEVICE, k, d, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
        if o == 0:
            if not can_compute[d]:
                return E_CANNOT_COMPUTE, k, d, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
            if resident[d, v]:
                return E_ALREADY_RESIDENT, k, v, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
            start = stream[d]
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[j]
                if not resident[d, u]:
                    return E_INPUT_MISSING, k, u, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
                if ready[d, u] > start:
                    start = ready[d, u]
            end = start + cost[d, v]
            stream[d] = end
            ready[d, v] = end
            if end > makespan:
                makespan = end
            compute_time += cost[d, v]
            resident[d, v] = True
            mem[d] += bytes_[v]
            computed[v] += 1
            n_computes += 1
            if mem[d] > peak[d]:
                peak[d] = mem[d]
            if check_budget and mem[d] > budget[d]:
                timeline[k] = mem
                return E_OVER_BUDGET, k, mem[d], peak, compute_time, copy_time, makespan, n_computes, timeline[: k + 1], computed
        elif o == 1:
            if not resident[d, v]:
                return E_FREE_ABSENT, k, v, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
            resident[d, v] = False
            mem[d] -= bytes_[v]
        elif o == 2:
            t = dst[k]
            if t < 0 or t >= D:
                return E_BAD_DEVICE, k, t, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
            if not resident[d, v]:
                return E_COPY_SRC_ABSENT, k, v, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
            if resident[t, v]:
                return E_COPY_DST_RESIDENT, k, v, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
            if bw[d, t] <= 0.0:
                return E_NO_LINK, k, t, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
            dur = lat[d, t] + bytes_[v] / bw[d, t]
            start = cstream[d, t]
            if ready[d, v] > start:
                start = ready[d, v]
            end = start + dur
            cstream[d, t] = end
            ready[t, v] = end
            if end > makespan:
                makespan = end
            copy_time += dur
            resident[t, v] = True
            mem[t] += bytes_[v]
            if mem[t] > peak[t]:
                peak[t] = mem[t]
            if check_budget and mem[t] > budget[t]:
                timeline[k] = mem
                return E_OVER_BUDGET, k, mem[t], peak, compute_time, copy_time, makespan, n_computes, timeline[: k + 1], computed
        else:
            return E_BAD_OP, k, o, peak, compute_time, copy_time, makespan, n_computes, timeline[:k], computed
        timeline[k] = mem
    for v in range(n):
        if computed[v] == 0:
            return E_NOT_COMPUTED, -1, v, peak, compute_time, copy_time, makespan, n_computes, timeline, computed
    return OK, -1, -1, peak, compute_time, copy_time, makespan, n_computes, timeline, computed


@dataclass
class SimulationResult:
    """What :func:`simulate` found.

    Attributes
    ----------
    valid : bool
        The plan is executable and within every budget (when checked).
    error : str or None
        First offending step and why, e.g. ``"step 12 computes node 5 on gpu
        but its input 3 is not resident there"``.
    error_step : int
        Index of that step (-1 for end-of-plan errors, or when valid).
    peak_bytes : dict
        Per-device peak, counted after each allocation.
    total_time : float
        Serial time: sum of compute and copy times.
    makespan : float
        Time with overlap between device and copy streams.
    tdi_pct : float
        ``(total_time - base) / base * 100`` with ``base`` the sum of costs
        on the primary device.
    n_recompute : int
        Computations beyond the first of each node.
    timeline : ndarray
        ``(steps, devices)`` memory after each step.
    """

    valid: bool
    error: str | None
    error_step: int
    peak_bytes: dict
    total_time: float
    compute_time: float
    copy_time: float
    makespan: float
    tdi_pct: float
    n_recompute: int
    timeline: np.ndarray = field(repr=False)
    computed: np.ndarray = field(repr=False)

    def summary(self) -> dict:
        """JSON-ready figures for the plan file's ``summary``."""
        return {
            "total_time": self.total_time,
            "makespan": self.makespan,
            "tdi_pct": self.tdi_pct,
            "peak_bytes": dict(self.peak_bytes),
            "n_recompute": self.n_recompute,
        }


def _device_map(problem: Problem, plan: Plan) -> np.ndarray:
    names = [d.name for d in problem.devices]
    out = np.empty(len(plan.devices), dtype=np.int64)
    for i, nm in enumerate(plan.devices):
        if nm in names:
            out[i] = names.index(nm)
        elif len(plan.devices) == 1 and len(names) == 1:
            out[i] = 0  # a one-device plan fits any one-device problem
        else:
            raise PlanError(f"plan uses device {nm!r}, which the problem lacks (it has {', '.join(names)})")
    return out


def simulate(problem: Problem, plan: Plan, *, check_budget: bool = True) -> SimulationResult:
    """Check ``plan`` against ``problem`` and measure it.

    Parameters
    ----------
    problem : Problem
    plan : Plan
        Device names must be the problem's; a one-device plan may run on any
        one-device problem.
    check_budget : bool
        With ``False`` an over-budget plan still counts as valid (use it to
        measure the peak a plan needs).
    """
    g = problem.graph
    dmap = _device_map(problem, plan)
    dev = dmap[plan.device] if len(plan) else plan.device
    tgt = np.where(plan.target >= 0, dmap[np.maximum(plan.target, 0)], -1) if len(plan) else plan.target
    bw, lat = problem.link_arrays
    err, step, aux, peak, ctime, xtime, span, ncomp, timeline, computed = simulate_kernel(
        plan.op, plan.node, dev.astype(np.int64), tgt.astype(np.int64), g.bytes, g.pred_ptr, g.pred_idx,
        problem.cost_matrix, problem.can_compute, problem.budgets, bw, lat, bool(check_budget),
    )
    names = [d.name for d in problem.devices]
    total = float(ctime + xtime)
    base = problem.base_cost
    msg = None
    if err != OK:
        node = int(plan.node[step]) if step >= 0 else -1
        d = names[int(dev[step])] if step >= 0 and 0 <= dev[step] < len(names) else "?"
        d2 = names[int(tgt[step])] if step >= 0 and 0 <= tgt[step] < len(names) else "?"
        bud = ""
        if err == E_OVER_BUDGET:
            over_dev = int(tgt[step]) if plan.op[step] == OP_COPY else int(dev[step])
            d = names[over_dev]
            bud = int(problem.budgets[over_dev])
        text = ERROR_MESSAGES[int(err)].format(node=node, dev=d, dev2=d2, aux=int(aux), budget=bud)
        msg = (f"step {int(step)} " if step >= 0 else "plan ") + text
    return SimulationResult(
        valid=err == OK,
        error=msg,
        error_step=int(step),
        peak_bytes={nm: int(p) for nm, p in zip(names, peak)},
        total_time=total,
        compute_time=float(ctime),
        copy_time=float(xtime),
        makespan=float(span),
        tdi_pct=(total - base) / base * 100.0 if base > 0 else 0.0,
        n_recompute=int(ncomp - g.n) if err == OK else int(max(ncomp - g.n, 0)),
        timeline=timeline,
        computed=computed,
    )


def check_plan(problem: Problem, plan: Plan) -> SimulationResult:
    """Simulate and raise :class:`PlanError` unless the plan is valid."""
    r = simulate(problem, plan)
    if not r.valid:
        raise PlanError(f"invalid plan for {problem.graph.name!r}: {r.error}")
    return r

