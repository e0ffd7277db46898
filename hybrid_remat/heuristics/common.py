"""Glue between problems, the executor kernels and plans (single device).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(random_layered(40, seed=1), "80%")
>>> arrays = GraphArrays.from_problem(p)
>>> res = run_executor(arrays, score="next_use_full")
>>> plan = finish(p, arrays, res.seq, "dtr") if res.ok else None
>>> plan is None or simulate(p, plan).valid
True
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..core.sequence import PRUNE_RATE, minimal_plan, prune_kernel, sequence_of_plan
from ..limits import NO_LIMITS, UNLIMITED_WORK
from ..plan import OP_COMPUTE, Plan
from ..simulate import simulate
from .belady import belady_kernel
from .executor import SCORE_BELADY, SCORE_NAMES, STATUS_OK, STATUS_STOPPED, STATUS_WORK_SPENT, execute_kernel

__all__ = [
    "GraphArrays", "ExecResult", "score_code", "run_executor", "plan_from_sequence", "sequence_of_plan",
    "prune_sequence", "finish", "empty_drop", "WorkMeter", "cpu_share", "SCAN_ALL", "SAMPLE", "EXEC_RATE",
    "EXEC_RATE_EDGES", "exec_rate", "stop_flag", "WATCH_NODES", "POLL_S",
    "PRUNE_RATE",
]

#: eviction candidates scored per eviction (time-dependent scores): every resident value while there are at
#: most SCAN_ALL, else SAMPLE drawn at random (seeded).  Measured at 10k-100k nodes: a sample of 256 plans as
#: well as a full scan (benchmarks/results/heuristic_scaling.md)
SCAN_ALL = 2048
SAMPLE = 256
#: executor work units (3 a step, 1 a scored candidate or heap entry) per CPU second: 2.5e6-3.6e6 measured at
#: 1k-100k nodes on the repeated llama graphs, so a conservative 2e6 -- on graphs of up to
#: :data:`EXEC_RATE_EDGES` edges; :func:`exec_rate` scales it down above
EXEC_RATE = 2e6
#: above this many edges the kernel's memory traffic slows each unit (per CPU second, load ~2, dtr_eq / belady:
#: random layered 32k nodes 190k edges 2.2-2.5 / 1.6-1.7 M; 100k nodes 604k edges 1.4-1.5 / 1.25-1.3 M; ResNet stages
#: and Checkmate decoders at 100k nodes, 220-300k edges, 1.9-2.7 / 2.3-2.5 M)
EXEC_RATE_EDGES = 150_000
#: from this many nodes :meth:`WorkMeter.execute` stops a kernel at the deadline by its stop flag (a watching
#: thread: 0.1-0.25 ms a call) instead of sizing its work budget by :func:`exec_rate`; below it a whole run takes
#: milliseconds
WATCH_NODES = 4_000
#: how often the watching thread looks at ``limits.stop`` (the deadline itself it waits for)
POLL_S = 0.01


@dataclass(frozen=True)
class GraphArrays:
    """The arrays of a one-device problem that the kernels read."""

    bytes: np.ndarray
    cost: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    budget: int
    device: str
    phase: np.ndarray

    @classmethod
    def from_problem(cls, problem) -> GraphArrays:
        g = problem.graph
        return cls(
            bytes=np.ascontiguousarray(g.bytes, dtype=np.int64),
            cost=np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64),
            pred_ptr=g.pred_ptr, pred_idx=g.pred_idx, succ_ptr=g.succ_ptr, succ_idx=g.succ_idx,
            budget=int(problem.budgets[0]), device=problem.primary.name, phase=np.asarray(g.phase),
        )

    @property
    def n(self) -> int:
        return int(self.bytes.shape[0])


@dataclass
class ExecResult:
    """A compute sequence with its cost and peak, or a failure status."""

    status: int
    seq: np.ndarray
    cost: float
    peak: int
    used: int = 0

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def spent(self) -> bool:
        """Stopped because the work budget ran out."""
        return self.status == STATUS_WORK_SPENT

    @property
    def stopped(self) -> bool:
        """Stopped by its stop flag (the deadline passed or ``limits.stop`` was set)."""
        return self.status == STATUS_STOPPED


def exec_rate(a: GraphArrays) -> float:
    """Executor work units per CPU second on ``a``'s graph:
    :data:`EXEC_RATE`, times ``(EXEC_RATE_EDGES / edges) ** 0.35`` above
    :data:`EXEC_RATE_EDGES` edges (conservative at every size measured, so
    that a deadline sized by it holds on large graphs).

    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> exec_rate(GraphArrays.from_problem(Problem.single(chain(4), 100)))
    2000000.0
    """
    edges = int(a.succ_idx.shape[0])
    return EXEC_RATE * min(1.0, (EXEC_RATE_EDGES / max(edges, 1)) ** 0.35)


def cpu_share() -> float:
    """The share of a core a busy process gets now: ``cores / load`` (the
    one-minute load average, this process included), at most 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return float(min(1.0, max(0.05, cores / max(load, 1e-9))))


@contextmanager
def stop_flag(limits=None):
    """A one-element ``uint8`` array for a kernel to poll: 1 once ``limits``
    expire (the deadline passes or ``limits.stop`` is set), set by a daemon
    thread that watches while the ``with`` block runs (the kernels release
    the GIL); 1 from the start when they already expired, never set without
    a deadline or ``stop``.

    Examples
    --------
    >>> from hybrid_remat.limits import Limits
    >>> with stop_flag(Limits.seconds(0.0)) as flag:    # expired already
    ...     int(flag[0])
    1
    >>> with stop_flag(Limits(work=10)) as flag:        # no deadline, no stop: no thread, never set
    ...     int(flag[0])
    0
    """
    limits = limits if limits is not None else NO_LIMITS
    flag = np.zeros(1, dtype=np.uint8)
    if limits.expired():
        flag[0] = 1
    if flag[0] or (limits.deterministic and limits.stop is None):
        yield flag
        return
    done = threading.Event()

    def watch():
        while True:
            left = limits.left()
            if left <= 0.0:
                flag[0] = 1
                return
            if done.wait(min(left, POLL_S) if limits.stop is not None else left):
                return

    th = threading.Thread(target=watch, name="hybrid_remat-stop-flag", daemon=True)
    th.start()
    try:
        yield flag
    finally:
        done.set()
        th.join()


class WorkMeter:
    """The work budget of one heuristic run, shared by its kernel calls.

    ``limits.work`` (when given) is the total in work units; the deadline
    caps each call at what fits in the time left at the kernel's measured
    rate (units per second).  Without a deadline the result depends on the
    work budget only (deterministic).  ``floor`` units are granted even when
    the limits are spent (a first plan on small graphs costs a few
    milliseconds).

    Examples
    --------
    >>> from hybrid_remat.limits import Limits
    >>> m = WorkMeter(Limits(work=100))
    >>> m.budget(rate=1e6), m.spent
    (100, False)
    >>> m.take(100); m.spent
    True
    """

    def __init__(self, limits=None, *, floor: int = 0):
        self.limits = limits if limits is not None else NO_LIMITS
        self.left = UNLIMITED_WORK if self.limits.work is None else int(self.limits.work)
        self.floor = int(floor)
        self.share = cpu_share() if not self.limits.deterministic else 1.0

    def budget(self, rate: float) -> int:
        """Work units for the next kernel call running at ``rate`` units per
        CPU second (times the share of a core this process gets, so that a
        deadline holds on a loaded machine too)."""
        return max(0, self.floor, min(self.left, self.limits.work_for(rate * self.share)))

    def take(self, used: int) -> None:
        """Count ``used`` units as spent."""
        self.left -= int(used)
        self.floor = max(0, self.floor - int(used))

    @property
    def spent(self) -> bool:
        """Nothing left: the work budget is used up, the deadline passed or
        ``stop`` is set (and the floor is used up)."""
        return self.floor <= 0 and (self.left <= 0 or self.limits.expired())

    def prune(self, a: GraphArrays, seq: np.ndarray, *, budget=None) -> np.ndarray:
        """:func:`prune_sequence` within the budget left (a partial pass when it runs out)."""
        b = a.budget if budget is None else int(budget)
        seq = np.ascontiguousarray(seq, dtype=np.int64)
        active = np.ones(seq.shape[0], dtype=np.bool_)
        active, _, used = prune_kernel(seq, active, a.bytes, a.cost, a.pred_ptr, a.pred_idx, np.int64(b),
                                       np.int64(self.budget(PRUNE_RATE)))
        self.take(used)
        return seq[active]

    def execute(self, a: GraphArrays, **kw) -> ExecResult:
        """:func:`run_executor` within the budget left: on graphs of
        :data:`WATCH_NODES` nodes or more (and no ``floor``) the kernel stops
        at the deadline by its stop flag (:func:`stop_flag`; ``STATUS_STOPPED``)
        and its work budget is ``limits.work`` alone, so that a run ends at
        its deadline however little of a core it gets; below, the work budget
        is also sized by :func:`exec_rate` and the share of a core."""
        if a.n < WATCH_NODES or self.floor > 0:
            with stop_flag(self.limits if self.floor <= 0 and self.limits.expired() else None) as flag:
                res = run_executor(a, work=self.budget(exec_rate(a)), stop=flag, **kw)
        else:
            with stop_flag(self.limits) as flag:
                res = run_executor(a, work=max(0, self.left), stop=flag, **kw)
        self.take(res.used)
        return res


def score_code(score: str | int) -> int:
    """``"dtr_eq"`` -> its kernel code; codes pass through."""
    if isinstance(score, (int, np.integer)):
        if not 0 <= int(score) < len(SCORE_NAMES):
            raise ValueError(f"unknown eviction score code {score}")
        return int(score)
    try:
        return SCORE_NAMES.index(score)
    except ValueError:
        raise ValueError(f"unknown eviction score {score!r}; choose from {', '.join(SCORE_NAMES)}") from None


def empty_drop(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A drop CSR that drops nothing."""
    return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)


def run_executor(a: GraphArrays, *, score="dtr_eq", weights=None, drop=None, allow_evict=True, seed=0,
                 budget=None, max_steps=None, scan_all: int = SCAN_ALL, sample: int = SAMPLE,
                 work: int = UNLIMITED_WORK, stop=None) -> ExecResult:
    """Run :func:`~hybrid_remat.heuristics.executor.execute_kernel` (the
    ``belady`` score with eviction: :func:`~hybrid_remat.heuristics.belady.belady_kernel`,
    the same steps faster) and return the compute sequence it produced
    (``work``: its work budget; ``stop``: its stop flag, :func:`stop_flag`)."""
    n = a.n
    w = np.ones(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    dptr, didx = drop if drop is not None else empty_drop(n)
    b = a.budget if budget is None else int(budget)
    steps = max_steps if max_steps is not None else 10 * n + 1000
    flag = np.zeros(1, dtype=np.uint8) if stop is None else stop
    code = score_code(score)
    if code == SCORE_BELADY and allow_evict:
        status, op, node, peak, total, used = belady_kernel(
            a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(b), dptr, didx, w,
            int(seed), int(steps), np.int64(work), flag)
    else:
        status, op, node, peak, total, used = execute_kernel(
            a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(b), dptr, didx, w,
            code, bool(allow_evict), int(seed), int(steps), int(scan_all), int(sample), np.int64(work), flag)
    seq = node[op == OP_COMPUTE].copy()
    return ExecResult(int(status), seq, float(total), int(peak), int(used))


def prune_sequence(a: GraphArrays, seq: np.ndarray, *, budget=None, work: int = UNLIMITED_WORK) -> np.ndarray:
    """Drop recomputations from ``seq`` while its minimal-memory plan fits
    (:func:`~hybrid_remat.core.sequence.prune_kernel`, one pass within
    ``work``)."""
    b = a.budget if budget is None else int(budget)
    seq = np.ascontiguousarray(seq, dtype=np.int64)
    active = np.ones(seq.shape[0], dtype=np.bool_)
    active, _, _ = prune_kernel(seq, active, a.bytes, a.cost, a.pred_ptr, a.pred_idx, np.int64(b), np.int64(work))
    return seq[active]


def plan_from_sequence(a: GraphArrays, seq: np.ndarray, meta: dict | None = None) -> tuple[Plan, int]:
    """The minimal-memory plan of a compute sequence and its peak."""
    return minimal_plan(a, seq, a.device, meta)


def finish(problem, a: GraphArrays, seq: np.ndarray, solver: str, **meta) -> Plan | None:
    """Build the plan of ``seq``; return it only if the simulator accepts it."""
    plan, peak = plan_from_sequence(a, seq, {"solver": solver, **meta})
    if peak > a.budget:
        return None
    res = simulate(problem, plan)
    return plan if res.valid else None
