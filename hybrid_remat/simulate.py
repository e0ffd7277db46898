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
times), the **makespan**, the number of recomputations and a memory
timeline.

Time and memory in time
-----------------------
For the makespan every device and every copy direction is its own stream:
a step starts when its inputs are ready on its device and its stream is
free, in plan order.  With overlapping streams, memory is also counted *in
time*:

* a compute or copy allocates its output (on the destination of a copy)
  when it starts;
* a ``free(v, d)`` takes effect when the last step that reads that copy of
  ``v`` has finished (a compute on ``d`` that takes it as input, or a copy
  out of ``d``), not at the free's position in plan order;
* **an allocation that would not fit waits for memory**: a step allocating
  ``b`` bytes on ``d`` starts at the earliest time ``t`` (no earlier than
  its streams and inputs allow) at which
  ``M + F(t) + b <= budget`` where ``M`` is the device's memory in plan
  order before the step (every earlier allocation less every earlier free)
  and ``F(t)`` the bytes of the earlier frees that take effect after ``t``.
  ``M + F(t)`` bounds what the device holds at every time from ``t`` on
  (an earlier step may start later than this one), so the memory held
  over time never exceeds the budget.

Waiting (rather than rejecting the plan) keeps every plan that is valid in
plan order executable with an honest makespan: once the earlier frees have
taken effect ``M + b`` is the plan-order count, which the budget check
bounds.  The result reports the peak over time (``timed_peak_bytes``,
computed from the step times by a sweep) beside the plan-order peak
(``peak_bytes``), and the waits (``memory_wait``, included in the
makespan).  With ``wait_for_memory=False`` the makespan is that of
unlimited memory and ``timed_peak_bytes`` shows what that schedule would
hold.  On one device the stream is sequential and every free is due before
the next allocation starts, so the timed and plan-order accounts agree; the
serial time and the plan-order peak never depend on timing.

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


# ---------------------------------------------------------------- timed memory
@njit(cache=True)
def _heap_push(ht, hb, hn, d, t, b):
    """Push the free ``(time t, bytes b)`` onto device ``d``'s max-heap."""
    i = hn[d]
    hn[d] = i + 1
    while i > 0:
        p = (i - 1) // 2
        if ht[d, p] >= t:
            break
        ht[d, i] = ht[d, p]
        hb[d, i] = hb[d, p]
        i = p
    ht[d, i] = t
    hb[d, i] = b


@njit(cache=True)
def _later_frees(ht, hb, hn, d, s, stack, out_t, out_b):
    """Frees on ``d`` taking effect after time ``s``: their count (copied
    to ``out_t``/``out_b``); visits only those and their children."""
    m = 0
    if hn[d] == 0 or ht[d, 0] <= s:
        return 0
    top = 1
    stack[0] = 0
    while top > 0:
        top -= 1
        i = stack[top]
        out_t[m] = ht[d, i]
        out_b[m] = hb[d, i]
        m += 1
        for c in (2 * i + 1, 2 * i + 2):
            if c < hn[d] and ht[d, c] > s:
                stack[top] = c
                top += 1
    return m


@njit(cache=True)
def _allocation_time(d, b, s, mem, budget, ht, hb, hn, stack, out_t, out_b):
    """Earliest time ``>= s`` at which ``b`` more bytes fit on ``d``.

    ``mem[d]`` is the plan-order memory (every earlier allocation, less
    every earlier free); the frees that take effect after the allocation
    still hold their bytes then.  So ``b`` fits at time ``t`` when
    ``mem[d] + (bytes of earlier frees due after t) + b <= budget[d]``,
    which bounds the memory held at every time from ``t`` on.
    """
    room = budget[d] - mem[d] - b
    m = _later_frees(ht, hb, hn, d, s, stack, out_t, out_b)
    held = 0
    for i in range(m):
        held += out_b[i]
    if held <= room or room < 0:
        return s
    order = np.argsort(-out_t[:m])
    acc = 0
    for i in order:
        if acc + out_b[i] > room:
            return out_t[i]
        acc += out_b[i]
    return s


@njit(cache=True)
def _timed_peak(op, dev, dst, bytes_, node, t_start, steps, D):
    """Per-device peak of the memory held over time: allocations at their
    step's start, frees when they take effect (events at one instant
    applied together)."""
    times = np.empty(steps)
    for k in range(steps):
        times[k] = t_start[k]
    order = np.argsort(times, kind="mergesort")
    held = np.zeros(D, dtype=np.int64)
    peak = np.zeros(D, dtype=np.int64)
    for i in range(steps):
        k = order[i]
        o = op[k]
        b = bytes_[node[k]]
        if o == 0:
            held[dev[k]] += b
        elif o == 1:
            held[dev[k]] -= b
        else:
            held[dst[k]] += b
        if i + 1 == steps or times[order[i + 1]] > times[k]:
            for d in range(D):
                if held[d] > peak[d]:
                    peak[d] = held[d]
    return peak


@njit(cache=True)
def _count(mem, peak, budget, d, b, check_budget):
    """Allocate ``b`` on ``d`` in plan order; True when it goes over budget."""
    mem[d] += b
    if mem[d] > peak[d]:
        peak[d] = mem[d]
    return check_budget and mem[d] > budget[d]


@njit(cache=True)
def simulate_kernel(op, node, dev, dst, bytes_, pred_ptr, pred_idx, cost, can_compute, budget, bw, lat, check_budget,
                    wait):
    """Walk a plan; return ``(err, err_step, err_aux, peak, timed_peak,
    compute_time, copy_time, makespan, waited, n_computes, timeline, start,
    end, computed)``.

    All inputs are numpy arrays: ``op`` int8, ``node``/``dev``/``dst`` int64
    (steps), ``bytes_`` int64 (n), CSR predecessors, ``cost`` float64
    (D, n), ``can_compute`` bool (D), ``budget`` int64 (D), ``bw``/``lat``
    float64 (D, D), ``check_budget`` and ``wait`` bool.
    ``timeline[k, d]`` is device ``d``'s memory after step ``k`` in plan
    order; ``start[k]``/``end[k]`` the times of step ``k`` (a free: when it
    takes effect); ``timed_peak[d]`` the peak of ``d``'s memory over time;
    ``waited`` the seconds steps were delayed waiting for memory.
    """
    n = bytes_.shape[0]
    D = budget.shape[0]
    K = op.shape[0]
    resident = np.zeros((D, n), dtype=np.bool_)
    ready = np.zeros((D, n), dtype=np.float64)
    last_read = np.zeros((D, n), dtype=np.float64)  # latest end of a step reading the value there
    mem = np.zeros(D, dtype=np.int64)
    peak = np.zeros(D, dtype=np.int64)
    # one device runs one stream: every free is due before the next step starts, so memory in time
    # is the plan-order count and nothing waits (the heaps below are only needed with overlap)
    timed = D > 1
    H = K if timed else 0
    ht = np.zeros((D, H), dtype=np.float64)  # per-device max-heaps of the frees so far (time, bytes)
    hb = np.zeros((D, H), dtype=np.int64)
    hn = np.zeros(D, dtype=np.int64)
    stack = np.zeros(H + 1, dtype=np.int64)
    out_t = np.zeros(H + 1, dtype=np.float64)
    out_b = np.zeros(H + 1, dtype=np.int64)
    stream = np.zeros(D, dtype=np.float64)
    cstream = np.zeros((D, D), dtype=np.float64)
    computed = np.zeros(n, dtype=np.int64)
    timeline = np.zeros((K, D), dtype=np.int64)
    t_start = np.zeros(K, dtype=np.float64)
    t_end = np.zeros(K, dtype=np.float64)
    wait_on = check_budget and wait and timed
    compute_time = 0.0
    copy_time = 0.0
    makespan = 0.0
    waited = 0.0
    n_computes = 0
    err = OK
    err_step = -1
    aux = -1
    rows = K
    for k in range(K):
        o = op[k]
        v = node[k]
        d = dev[k]
        if v < 0 or v >= n:
            err, aux = E_BAD_NODE, v
        elif d < 0 or d >= D:
            err, aux = E_BAD_DEVICE, d
        elif o == 0:
            if not can_compute[d]:
                err, aux = E_CANNOT_COMPUTE, d
            elif resident[d, v]:
                err, aux = E_ALREADY_RESIDENT, v
            else:
                start = stream[d]
                for j in range(pred_ptr[v], pred_ptr[v + 1]):
                    u = pred_idx[j]
                    if not resident[d, u]:
                        err, aux = E_INPUT_MISSING, u
                        break
                    if ready[d, u] > start:
                        start = ready[d, u]
                if err == OK:
                    s = start
                    if wait_on:
                        s = _allocation_time(d, bytes_[v], start, mem, budget, ht, hb, hn, stack, out_t, out_b)
                    waited += s - start
                    end = s + cost[d, v]
                    for j in range(pred_ptr[v], pred_ptr[v + 1]):
                        u = pred_idx[j]
                        if end > last_read[d, u]:
                            last_read[d, u] = end
                    stream[d] = end
                    ready[d, v] = end
                    last_read[d, v] = end
                    t_start[k] = s
                    t_end[k] = end
                    if end > makespan:
                        makespan = end
                    compute_time += cost[d, v]
                    resident[d, v] = True
                    computed[v] += 1
                    n_computes += 1
                    if _count(mem, peak, budget, d, bytes_[v], check_budget):
                        err, aux = E_OVER_BUDGET, mem[d]
                        rows = k + 1
                        timeline[k] = mem
        elif o == 1:
            if not resident[d, v]:
                err, aux = E_FREE_ABSENT, v
            else:
                # the value stays allocated until its last reader has ended
                f = last_read[d, v]
                if timed:
                    _heap_push(ht, hb, hn, d, f, bytes_[v])
                t_start[k] = f
                t_end[k] = f
                resident[d, v] = False
                mem[d] -= bytes_[v]
        elif o == 2:
            t = dst[k]
            if t < 0 or t >= D:
                err, aux = E_BAD_DEVICE, t
            elif not resident[d, v]:
                err, aux = E_COPY_SRC_ABSENT, v
            elif resident[t, v]:
                err, aux = E_COPY_DST_RESIDENT, v
            elif bw[d, t] <= 0.0:
                err, aux = E_NO_LINK, t
            else:
                dur = lat[d, t] + bytes_[v] / bw[d, t]
                start = cstream[d, t]
                if ready[d, v] > start:
                    start = ready[d, v]
                s = start
                if wait_on:
                    s = _allocation_time(t, bytes_[v], start, mem, budget, ht, hb, hn, stack, out_t, out_b)
                waited += s - start
                end = s + dur
                cstream[d, t] = end
                if end > last_read[d, v]:
                    last_read[d, v] = end
                ready[t, v] = end
                last_read[t, v] = end
                t_start[k] = s
                t_end[k] = end
                if end > makespan:
                    makespan = end
                copy_time += dur
                resident[t, v] = True
                if _count(mem, peak, budget, t, bytes_[v], check_budget):
                    err, aux = E_OVER_BUDGET, mem[t]
                    rows = k + 1
                    timeline[k] = mem
        else:
            err, aux = E_BAD_OP, o
        if err != OK:
            err_step = k
            if rows == K:
                rows = k
            break
        timeline[k] = mem
    if err == OK:
        for v in range(n):
            if computed[v] == 0:
                err, aux = E_NOT_COMPUTED, v
                break
    if timed:
        tpeak = _timed_peak(op, dev, dst, bytes_, node, t_start, err_step if err_step >= 0 else K, D)
    else:
        tpeak = peak.copy()
    return (err, err_step, aux, peak, tpeak, compute_time, copy_time, makespan, waited, n_computes,
            timeline[:rows], t_start, t_end, computed)


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
        ``(steps, devices)`` memory after each step, in plan order.
    timed_peak_bytes : dict
        Per-device peak of the memory held *over time* (a value stays
        allocated until its last reader has finished; see the module
        docstring).  Within the budgets whenever the plan is valid (steps
        wait for memory).
    memory_wait : float
        Seconds that steps were delayed waiting for memory (summed over
        steps; included in ``makespan``).
    start, end : ndarray
        Per-step start and end times (a free: when it takes effect).
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
    timed_peak_bytes: dict = field(default_factory=dict)
    memory_wait: float = 0.0
    start: np.ndarray = field(default=None, repr=False)
    end: np.ndarray = field(default=None, repr=False)

    def summary(self) -> dict:
        """JSON-ready figures for the plan file's ``summary``."""
        return {
            "total_time": self.total_time,
            "makespan": self.makespan,
            "tdi_pct": self.tdi_pct,
            "peak_bytes": dict(self.peak_bytes),
            "timed_peak_bytes": dict(self.timed_peak_bytes),
            "memory_wait": self.memory_wait,
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


def simulate(problem: Problem, plan: Plan, *, check_budget: bool = True,
             wait_for_memory: bool = True) -> SimulationResult:
    """Check ``plan`` against ``problem`` and measure it.

    Parameters
    ----------
    problem : Problem
    plan : Plan
        Device names must be the problem's; a one-device plan may run on any
        one-device problem.
    check_budget : bool
        With ``False`` an over-budget plan still counts as valid (use it to
        measure the peak a plan needs); nothing waits for memory then.
    wait_for_memory : bool
        Steps whose allocation would exceed a budget at that time wait for
        earlier frees to take effect (the library's semantics).  ``False``
        measures the schedule of unlimited memory: its makespan, and in
        ``timed_peak_bytes`` the memory it would hold (which may exceed a
        budget; validity still follows the plan-order count).

    Examples
    --------
    A copy out of the GPU keeps the value there until the copy ends, so a
    GPU allocation listed after the free waits for it:

    >>> from hybrid_remat.graph import Graph
    >>> from hybrid_remat.plan import Plan
    >>> from hybrid_remat.problem import Device, Link, Problem
    >>> g = Graph.from_arrays([4, 4], [], {"gpu": [1.0, 1.0], "cpu": [1.0, 1.0]})
    >>> p = Problem(g, [Device("gpu", "gpu", 4), Device("cpu", "cpu", 8)],
    ...             [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)])
    >>> plan = Plan.from_steps([("compute", 0, "gpu"), ("copy", 0, "gpu", "cpu"),
    ...                         ("free", 0, "gpu"), ("compute", 1, "gpu")], ["gpu", "cpu"])
    >>> r = simulate(p, plan)
    >>> r.peak_bytes["gpu"], r.timed_peak_bytes["gpu"], r.makespan, r.memory_wait
    (4, 4, 6.0, 4.0)
    >>> r = simulate(p, plan, wait_for_memory=False)
    >>> r.timed_peak_bytes["gpu"], r.makespan
    (8, 5.0)
    """
    g = problem.graph
    dmap = _device_map(problem, plan)
    dev = dmap[plan.device] if len(plan) else plan.device
    tgt = np.where(plan.target >= 0, dmap[np.maximum(plan.target, 0)], -1) if len(plan) else plan.target
    bw, lat = problem.link_arrays
    err, step, aux, peak, tpeak, ctime, xtime, span, waited, ncomp, timeline, t_start, t_end, computed = \
        simulate_kernel(plan.op, plan.node, dev.astype(np.int64), tgt.astype(np.int64), g.bytes, g.pred_ptr,
                        g.pred_idx, problem.cost_matrix, problem.can_compute, problem.budgets, bw, lat,
                        bool(check_budget), bool(wait_for_memory))
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
        timed_peak_bytes={nm: int(p) for nm, p in zip(names, tpeak)},
        memory_wait=float(waited),
        start=t_start,
        end=t_end,
    )


def check_plan(problem: Problem, plan: Plan) -> SimulationResult:
    """Simulate and raise :class:`PlanError` unless the plan is valid."""
    r = simulate(problem, plan)
    if not r.valid:
        raise PlanError(f"invalid plan for {problem.graph.name!r}: {r.error}")
    return r

