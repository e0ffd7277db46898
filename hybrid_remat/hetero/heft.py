"""Memory-aware list scheduling (HEFT) with eviction, recomputation and offload.

For each node, in a topological *processing order* (the reference order or
HEFT's decreasing upward rank), the kernel (:mod:`hybrid_remat.hetero.heft_kernel`)

1. scores every compute device ``d`` by the time it would add (serial mode:
   the node's cost on ``d`` plus the copies or recomputations that bring its
   inputs to ``d``; makespan mode: its earliest finish time on ``d`` with the
   same streams as the simulator), plus the restore cost of what ``d`` would
   have to evict to make room; devices where the node cannot fit at all are
   refused;
2. brings the inputs to the chosen device: a value resident on another
   device is copied (a *prefetch*), a value resident nowhere is recomputed,
   recursively, in index order (DTR's rematerialization), on the device
   where recomputing plus copying the results over is cheapest;
3. evicts, when the device is short of memory, the resident unpinned value
   with the lowest DTR score ``restore / (bytes x staleness)`` (or, as an
   option, ``restore / (bytes x distance to next use)``), where ``restore``
   is the cheaper of recomputing it later and offloading it (copy to a
   device with room and back), the offload weighted by ``offload_weight``;
   an offload is emitted as ``copy`` then ``free``; a value that also lives
   elsewhere is simply dropped on ``d``.  Candidates are the device's
   resident values (a seeded sample of :data:`~hybrid_remat.hetero.heft_kernel.SCAN`
   of them when more are resident), which keeps the kernel near-linear;
4. frees every value whose consumers have all run (on every device).

HEFT's *insertion* (placing a task into an idle gap of an earlier schedule)
is the improver ``insertion`` (:mod:`hybrid_remat.hetero.insertion`); the
scheduler applies it to its best plan when the objective is the makespan.

:class:`HeftScheduler` is the registered heuristic: a small portfolio of
orders, modes and scores, each plan checked by the simulator, best by the
problem's objective (:attr:`Problem.objective <hybrid_remat.problem.Problem>`).
It honours its :class:`~hybrid_remat.limits.Limits` (the kernel gets a work
budget).  When no variant finds a plan, it falls back to computing on one
device that can hold every node with its inputs (the others store), and to
keep-all there: if one device can hold the graph, there is a plan.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(6, bytes=10).with_costs({"gpu": [1.0] * 6, "cpu": [5.0] * 6})
>>> p = Problem(g, [Device("gpu", "gpu", 20), Device("cpu", "cpu", 1000)],
...             [Link("gpu", "cpu", 10.0), Link("cpu", "gpu", 10.0)])
>>> from hybrid_remat.simulate import simulate
>>> simulate(p, heft_plan(p)).valid
True
>>> plan = HeftScheduler().run(p.with_objective("makespan"))
>>> simulate(p, plan).valid
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..budgets import keep_all_peak, node_need_bytes
from ..errors import PlanError
from ..interfaces import Heuristic
from ..limits import Limits
from ..plan import Plan, keep_all_plan
from ..problem import Problem
from ..simulate import simulate
from .heft_kernel import (
    MODE_MAKESPAN,
    MODE_SERIAL,
    SCAN,
    SCORE_NEXT_USE,
    SCORE_STALENESS,
    ST_CAPACITY,
    ST_OK,
    ST_STUCK,
    ST_WORK,
    graph_record,
    heft_kernel,
    machine_record,
    params_record,
)

__all__ = [
    "heft_kernel", "upward_rank", "rank_order", "heft_plan", "heft_run", "HeftScheduler", "objective_value",
    "MODE_SERIAL", "MODE_MAKESPAN", "SCORE_STALENESS", "SCORE_NEXT_USE", "WORK_RATE", "single_device_fallback",
]

#: kernel work units per second (nodes placed + eviction candidates scored): about half the rate measured on
#: the 2-core development machine (benchmarks/hetero.py --scale prints the measured rate)
WORK_RATE = 1.0e6


# ----------------------------------------------------------------- ranks
@njit(cache=True)
def upward_rank(bytes_, succ_ptr, succ_idx, cost, can_compute, bw, lat):
    """HEFT's upward rank with mean compute and mean link costs.

    ``rank(i) = w_i + max_{j in succ(i)} (c_i + rank(j))`` where ``w_i`` is
    the mean of node ``i``'s cost over compute devices and ``c_i`` the mean
    copy time of its output over the links.
    """
    n = bytes_.shape[0]
    D = cost.shape[0]
    mean_w = np.zeros(n)
    nd = 0
    for d in range(D):
        if can_compute[d]:
            nd += 1
            for i in range(n):
                mean_w[i] += cost[d, i]
    if nd > 0:
        mean_w /= nd
    nl = 0
    mlat = 0.0
    minv = 0.0
    for a in range(D):
        for b in range(D):
            if a != b and bw[a, b] > 0.0:
                nl += 1
                mlat += lat[a, b]
                minv += 1.0 / bw[a, b]
    rank = np.zeros(n)
    for i in range(n - 1, -1, -1):
        c = 0.0
        if nl > 0:
            c = mlat / nl + bytes_[i] * minv / nl
        best = 0.0
        for k in range(succ_ptr[i], succ_ptr[i + 1]):
            r = c + rank[succ_idx[k]]
            if r > best:
                best = r
        rank[i] = mean_w[i] + best
    return rank


def rank_order(problem: Problem) -> np.ndarray:
    """Nodes by decreasing upward rank, ties by index (a topological order)."""
    g = problem.graph
    bw, lat = problem.link_arrays
    cost = problem.cost_matrix
    cost = np.where(np.isfinite(cost), cost, 0.0)
    rank = upward_rank(g.bytes, g.succ_ptr, g.succ_idx, cost, problem.can_compute, bw, lat)
    order = np.lexsort((np.arange(g.n), -rank)).astype(np.int64)
    # repair any tie-induced violation (zero-cost chains): keep it topological
    pos = np.empty(g.n, dtype=np.int64)
    pos[order] = np.arange(g.n)
    src, dst = (g.edges()[:, 0], g.edges()[:, 1]) if g.m else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if g.m and np.any(pos[src] > pos[dst]):
        return np.arange(g.n, dtype=np.int64)
    return order




# ---------------------------------------------------------------- wrappers
def objective_value(result, objective) -> float:
    """``result.total_time`` (serial) or ``result.makespan``; ``objective``
    is a name or an :class:`~hybrid_remat.objective.Objective`."""
    name = getattr(objective, "name", objective)
    if name == "serial":
        return result.total_time
    if name == "makespan":
        return result.makespan
    raise PlanError(f"unknown objective {objective!r}: use 'serial' or 'makespan'")


def heft_run(problem: Problem, *, order=None, mode: int = MODE_SERIAL, offload_weight: float = 1.0,
             score_kind: int = SCORE_STALENESS, devices=None, scan: int = SCAN, seed: int = 0,
             work: int | None = None, strict: bool = False, grow: bool = True):
    """Run :func:`~hybrid_remat.hetero.heft_kernel.heft_kernel` once:
    ``(plan or None, status, work spent)``.

    Parameters
    ----------
    problem : Problem
    order : array of int, optional
        Processing order (default: the reference order ``0..n-1``).
    mode, offload_weight, score_kind, scan, seed, strict
        See :func:`~hybrid_remat.hetero.heft_kernel.heft_kernel`.
    devices : sequence of str, optional
        Restrict computation to these devices (others stay storage).
    work : int, optional
        Work budget (default: unlimited).
    grow : bool
        A plan longer than ``8 n + 64`` steps stops the kernel; with
        ``grow`` it is rerun with room for 4 times as many steps (a plan that
        long recomputes a lot: a portfolio that has a plan already skips it).
    """
    from ..limits import UNLIMITED_WORK

    g = problem.graph
    order = np.arange(g.n, dtype=np.int64) if order is None else np.ascontiguousarray(order, dtype=np.int64)
    if order.shape != (g.n,) or not np.array_equal(np.sort(order), np.arange(g.n)):
        raise PlanError("order must be a permutation of the nodes")
    cost = problem.cost_matrix
    can = problem.can_compute
    if devices is not None:
        keep = np.array([d.name in devices for d in problem.devices])
        can = can & keep
        cost = np.where(keep[:, None], cost, np.inf)
    G, M = graph_record(g), machine_record(problem, cost, can)
    P = params_record(mode, offload_weight, score_kind, scan, seed, strict)
    budget = UNLIMITED_WORK if work is None else int(work)
    cap = 8 * g.n + 64
    spent = 0
    for _ in range(6):
        st, aux, k, op, node, dev, dst, w = heft_kernel(G, M, P, order, int(cap), budget - spent)
        spent += int(w)
        if st == ST_CAPACITY and grow and spent < budget:
            cap *= 4
            continue
        if st != ST_OK:
            return None, int(st), spent
        names = [d.name for d in problem.devices]
        return Plan(op[:k], node[:k], dev[:k], dst[:k], names,
                    {"solver": "heft", "mode": int(mode), "offload_weight": float(offload_weight),
                     "score": int(score_kind), "strict": bool(strict)}), ST_OK, spent
    return None, ST_CAPACITY, spent


def heft_plan(problem: Problem, **kw) -> Plan | None:
    """:func:`heft_run`'s plan; ``None`` when it finds no placement."""
    return heft_run(problem, **kw)[0]


def single_device_fallback(problem: Problem, *, work: int | None = None, seed: int = 0):
    """A plan computing on one device only, when some device can hold every
    node with its inputs: HEFT restricted to that device (the others store
    offloaded values), else keep-all there when the graph fits.  Devices by
    decreasing budget; ``(plan or None, work spent)``."""
    g = problem.graph
    need = int(node_need_bytes(g).max()) if g.n else 0
    spent = 0
    for d in sorted((d for d in problem.devices if d.can_compute), key=lambda d: -d.memory_bytes):
        if d.memory_bytes < need:
            continue
        plan, st, w = heft_run(problem, devices=[d.name], seed=seed,
                               work=None if work is None else max(0, work - spent))
        spent += w
        if plan is not None and simulate(problem, plan).valid:
            plan.meta["fallback"] = d.name
            return plan, spent
        if keep_all_peak(g) <= d.memory_bytes:
            ka = keep_all_plan(g, d.name)
            plan = Plan(ka.op, ka.node, np.zeros(len(ka), np.int64) + problem.device_index(d.name), ka.target,
                        [x.name for x in problem.devices], {"solver": "heft", "fallback": d.name, "keep_all": True})
            if simulate(problem, plan).valid:
                return plan, spent
    return None, spent


def _keep_all_on_one_device(problem: Problem):
    """Keep-all on the only device when it fits there (the last plan of
    :func:`single_device_fallback`), else ``None``; no kernel run."""
    d = problem.devices[0]
    if not d.can_compute or keep_all_peak(problem.graph) > d.memory_bytes:
        return None
    ka = keep_all_plan(problem.graph, d.name)
    plan = Plan(ka.op, ka.node, np.zeros(len(ka), np.int64), ka.target, [d.name],
                {"solver": "heft", "fallback": d.name, "keep_all": True})
    return plan if simulate(problem, plan).valid else None


class HeftScheduler(Heuristic):
    """Memory-aware HEFT over all devices (see :mod:`hybrid_remat.hetero.heft`).

    Runs a small portfolio (reference and upward-rank orders; serial and
    makespan device choice; offload weights 1 and 0.25; staleness and
    next-use eviction scores), simulates every plan and returns the best by
    the problem's objective (serial time or makespan); with the makespan it
    then applies HEFT's insertion (the improver ``insertion``).  Variants
    run in order of usefulness (the objective's own mode first) while the
    limits last; the kernel gets a work budget (:meth:`Limits.work_for`).
    On one device only the orders and eviction scores differ (4 variants), and
    a stuck first variant ends the run at once (the others, strict or not,
    were stuck too wherever measured: random layered graphs), with keep-all
    as the only fallback.

    Parameters
    ----------
    objective : {"serial", "makespan"}, optional
        Override the problem's objective (default: ``problem.objective``).
    full : bool
        ``False`` runs only the reference-order variant in the objective's mode.
    insertion_time : float
        With the makespan objective, seconds at most for the insertion step.
    scan : int
        Eviction scan width (see :mod:`~hybrid_remat.hetero.heft_kernel`).
    """

    name = "hetero_heft"
    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "multi_device", "needs_budget", "serial",
                              "makespan", "honours_limits", "deterministic"})
    rank = 2.0

    def __init__(self, objective: str | None = None, full: bool = True, name: str | None = None,
                 insertion_time: float = 0.25, scan: int = SCAN):
        if objective is not None and objective not in ("serial", "makespan"):
            raise PlanError(f"unknown objective {objective!r}: use 'serial' or 'makespan'")
        self.objective = objective
        self.full = full
        self.insertion_time = float(insertion_time)
        self.scan = int(scan)
        if name:  # a second registration under its own name (one object serves both objectives)
            self.name = name

    #: on one device, above this many nodes it is not admitted: more than 20 s at 100k nodes without limits and
    #: no plan within 1 s, where the DTR heuristics plan in about 1 s (``benchmarks/results/heuristic_scaling.md``)
    single_device_max_nodes = 30_000

    def applicable(self, problem: Problem) -> tuple[bool, str]:
        if problem.is_single_device and problem.graph.n > self.single_device_max_nodes:
            return False, f"one device above {self.single_device_max_nodes} nodes (the DTR heuristics plan faster)"
        return True, ""

    def objective_of(self, problem: Problem) -> str:
        return self.objective or getattr(problem.objective, "name", "serial")

    def variants(self, problem: Problem):
        """``(order name, order, mode, offload weight, score)``, the
        objective's own mode first."""
        objective = self.objective_of(problem)
        first = MODE_MAKESPAN if objective == "makespan" else MODE_SERIAL
        # one device: no device to choose (the modes agree) and none to offload to (the weights agree), so
        # only the orders and the eviction scores differ (16 variants were 4 plans, each run twice when stuck)
        several = problem.n_devices > 1
        modes = (first, 1 - first) if self.full and several else (first,)
        weights = (1.0, 0.25) if self.full and several else (1.0,)
        scores = (SCORE_STALENESS, SCORE_NEXT_USE) if self.full else (SCORE_STALENESS,)
        orders = [("ref", None)] + ([("rank", None)] if self.full else [])
        for oname, _ in orders:
            order = rank_order(problem) if oname == "rank" else None
            for m in modes:
                for w in weights:
                    for s in scores:
                        yield oname, order, m, w, s

    def run(self, problem: Problem, *, seed: int = 0, limits: Limits | None = None):
        lim = limits if limits is not None else Limits()
        objective = self.objective_of(problem)
        best, best_val = None, np.inf
        spent = 0
        total = lim.work_for(WORK_RATE)

        def left() -> int:  # the time left as work, within the work budget
            return lim.work_for(WORK_RATE) if lim.work is None else min(lim.work_for(WORK_RATE), total - spent)

        first = True
        for oname, order, m, w, s in self.variants(problem):
            if best is not None and lim.expired():
                break
            if left() <= 0:
                break
            plan, st, used = heft_run(problem, order=order, mode=m, offload_weight=w, score_kind=s,
                                      scan=self.scan, seed=seed, work=left(), grow=best is None)
            spent += used
            if st == ST_STUCK and first and problem.is_single_device:
                # one device, stuck in the first variant: the other variants, their strict reruns and the
                # fallback (HEFT on that device again) were stuck too wherever measured (the families at 2k, 50 %
                # and 30 %: random layered, 2-3 s for no plan before; on one device a strict rerun never planned
                # where the loose run was stuck); keep-all is the fallback's only other plan
                return _keep_all_on_one_device(problem)
            first = False
            if st == ST_STUCK:  # pins of a recomputation set filled a device: place sets strictly
                plan, st, used = heft_run(problem, order=order, mode=m, offload_weight=w, score_kind=s,
                                          scan=self.scan, seed=seed, work=left(), strict=True, grow=best is None)
                spent += used
            if st == ST_WORK:
                break
            if plan is None:
                continue
            r = simulate(problem, plan)
            if not r.valid:
                continue
            val = objective_value(r, objective)
            if val < best_val - 1e-15:
                best, best_val = plan, val
                plan.meta["order"] = oname
        if best is None and problem.is_single_device:   # HEFT on that device is the variants' own run
            best = _keep_all_on_one_device(problem)
        elif best is None:
            best, _ = single_device_fallback(problem, work=max(0, left()), seed=seed)
        if best is not None and objective == "makespan" and problem.n_devices > 1:
            from .insertion import InsertionImprover  # HEFT's insertion, checked step by step

            better = InsertionImprover().improve(problem.with_objective("makespan"), best, seed=seed,
                                                 limits=lim.share(self.insertion_time))
            best = better if better is not None else best
        return best
