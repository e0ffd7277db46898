"""CP-SAT model of single-device rematerialization with retention intervals.

The model (written from the Moccasin paper's description, not its code)
----------------------------------------------------------------------
Fix a topological order ``order`` (position ``p(v)`` of node ``v``; by
default the incumbent's first-computation order, else the reference order).
The time axis is Checkmate's staged grid: stage ``s`` (``0 <= s < n``)
holds the events ``(q, s)`` for positions ``q <= s``, numbered
``event(q, s) = s (s + 1) / 2 + q``; event ``(q, s)`` means "the node at
position ``q`` is computed inside stage ``s``".  Stage ``s`` ends with the
first computation of the node at position ``s``.  One event computes one
node, so no all-different constraint is needed.

For every node ``v`` and copy ``i < C`` (``C = 2`` by default):

* ``a[v,i]`` presence (``a[v,0] = 1``; ``a[v,i+1] => a[v,i]``),
* ``s[v,i]`` start event, domain the events of ``v``;
  ``s[v,0] = event(p(v), p(v))`` (first computation in its own stage),
  ``s[v,i>0]`` in a later stage,
* ``e[v,i] >= s[v,i]`` the last event at which the output is kept,
  ``e[v,i] < s[v,i+1]`` (a copy is freed before the node is recomputed),
* an optional interval ``[s, e + 1)`` of demand ``bytes[v]``; all of them
  in one ``AddCumulative`` with capacity = the budget (memory at an event
  = every output live there, the one computed included: the simulator's
  peak after allocation).

Precedence: for every edge ``u -> v`` and copies ``i, j`` a literal
``x[u,i,v,j]`` ("copy i of u serves copy j of v") implies ``a[u,i]``,
``a[v,j]``, ``s[u,i] < s[v,j] <= e[u,i]``; every present copy of ``v`` is
served by some copy of each input, and a recomputation (``i > 0``) serves
someone.  Objective: ``sum_v sum_{i>0} cost[v] a[v,i]`` (integer costs after
scaling; the reported objective is always the simulated time).

The decoded solution is a :class:`~hybrid_remat.plan.Plan`: copies in event
order, each computed at its start and freed after the last computation at
or before its end event.  Every plan is checked with
:func:`~hybrid_remat.simulate.simulate` before it is reported.

Without a valid incumbent the model can express (none, or one computing
some node more than ``C`` times), a first phase (Moccasin's two-phase idea)
minimises the cumulative capacity, starting from the keep-all schedule of
the order as a hint, until it reaches the budget; that plan is the hint of
the real solve (else the incumbent's partial hint is used).

Stopping
--------
``solve`` honours its :class:`~hybrid_remat.limits.Limits`: the model build checks the deadline
and ``stop`` as it goes; CP-SAT runs in a helper thread with
``catch_sigint_signal`` off (CP-SAT's own SIGINT handler would swallow
Ctrl-C during the solve and leave ``SIG_DFL`` installed afterwards, so a
later Ctrl-C killed the process), while the calling thread waits in short
slices.  When ``stop`` is set, or a signal handler raises in the calling
thread (``KeyboardInterrupt`` from Ctrl-C), it calls ``StopSearch``, waits
for the helper thread, and returns (``stats["stopped"]``) or re-raises.  No
signal handler is installed or left behind, and no thread outlives ``solve``.

Exactness
---------
The staged grid (first computations in the fixed order) and ``C`` restrict
the plan space, so CP-SAT's optimality proof and bound hold inside the model
only.  The formulation therefore reports ``optimal`` only when its plan costs
the sum of node costs (no recomputation: optimal for any model), its
``lower_bound`` is that trivially valid sum, and the model's own status and
bound go to ``stats`` (``model_status``, ``model_bound``).
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from hybrid_remat.budgets import keep_all_peak
from hybrid_remat.errors import HybridRematError, SolverError
from hybrid_remat.interfaces import Formulation, FormulationResult
from hybrid_remat.limits import Limits
from hybrid_remat.plan import OP_COMPUTE, OP_COPY, Plan, plan_from_order
from hybrid_remat.simulate import simulate

__all__ = ["CpSatRemat", "event_index", "plan_to_intervals", "first_compute_order", "PRESOLVE_MAX_NODES",
           "MAX_NODES"]

SOURCE = "ortools"
PRESOLVE_MAX_NODES = 120
#: the largest graph the formulation takes: the staged grid has ``n (n + 1) / 2`` events, and CP-SAT found no
#: plan above 500 nodes within 60 s (``benchmarks/results/ortools_moccasin.md``); at 10k nodes the model alone
#: took 10 s
MAX_NODES = 1000
#: seconds to build one model: ``BUILD_C * n ** BUILD_K`` (measured at 250-2000 nodes: 0.05-1.2 s)
BUILD_C, BUILD_K = 1.3e-5, 1.5


def event_index(position: int, stage: int) -> int:
    """Index of event ``(position, stage)`` on the staged grid (``position <= stage``)."""
    return stage * (stage + 1) // 2 + position


def first_compute_order(plan: Plan, n: int) -> np.ndarray | None:
    """Nodes in the order of their first computation, or ``None`` if the
    plan does not compute every node of ``0..n-1``."""
    comp = plan.node[plan.op == OP_COMPUTE]
    if comp.size == 0 or comp.min() < 0 or comp.max() >= n:
        return None
    _, first = np.unique(comp, return_index=True)
    if first.size != n:
        return None
    return comp[np.sort(first)].astype(np.int64)


def plan_to_intervals(plan: Plan, graph, order: np.ndarray, max_copies: int):
    """Retention intervals of a single-device plan on the staged grid.

    Returns
    -------
    copies : dict ``(v, i) -> [start_event, end_event]``
    serves : set of ``(u, i, v, j)``
    complete : bool
        ``False`` when some computation did not fit the grid (a copy beyond
        ``max_copies``, a recomputation after the last stage): the intervals
        then describe only part of the plan (still fine as a hint).
    """
    n = graph.n
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    frontier = 0
    count = np.zeros(n, dtype=np.int64)
    live: dict[int, int] = {}  # node -> copy index of its live copy
    copies: dict[tuple[int, int], list[int]] = {}
    serves: set[tuple[int, int, int, int]] = set()
    complete = True
    last_event = -1
    for o, v in zip(plan.op.tolist(), plan.node.tolist(), strict=True):
        if o == OP_COMPUTE:
            if count[v] == 0:
                if pos[v] != frontier:
                    complete = False
                    break
                ev = event_index(frontier, frontier)
                frontier += 1
            else:
                if frontier >= n or pos[v] >= frontier:
                    complete = False
                    count[v] += 1
                    continue
                ev = event_index(int(pos[v]), frontier)
            i = int(count[v])
            count[v] += 1
            last_event = max(last_event, ev)
            for cp in live.items():
                rng = copies.get(cp)
                if rng is not None:
                    rng[1] = max(rng[1], ev)
            if i >= max_copies:
                complete = False
                live.pop(v, None)
                continue
            copies[(v, i)] = [ev, ev]
            for u in graph.preds(v).tolist():
                if u in live and (u, live[u]) in copies:
                    serves.add((u, live[u], v, i))
            live[v] = i
        elif o == OP_COPY:
            complete = False
        else:
            live.pop(v, None)
    return copies, serves, complete


def _scale_costs(cost: np.ndarray) -> tuple[np.ndarray, float, bool]:
    """Integer costs ``floor(cost * scale)`` (a valid under-estimate), the
    scale, and whether the scaling is exact."""
    cmax = float(cost.max()) if cost.size else 0.0
    if cmax <= 0:
        return np.zeros(cost.shape, dtype=np.int64), 1.0, True
    if np.all(cost == np.floor(cost)) and cmax <= 1e9:
        return cost.astype(np.int64), 1.0, True
    scale = 10.0 ** math.floor(math.log10(1e8 / cmax))
    scaled = np.floor(cost * scale)
    return scaled.astype(np.int64), scale, bool(np.all(scaled == cost * scale))


class _Stopped(Exception):
    """The limits ran out while a model was being built."""


class _Model:
    """The CP-SAT model of one problem (built once, solved once); building
    raises :class:`_Stopped` when ``limits`` expire."""

    def __init__(self, problem, order: np.ndarray, max_copies: int, *, soft_capacity: bool = False,
                 limits: Limits | None = None):
        limits = limits or Limits()
        g = problem.graph
        self.problem, self.graph, self.n, self.C = problem, g, g.n, max_copies
        self.order = order
        n, C = self.n, max_copies
        self.pos = np.empty(n, dtype=np.int64)
        self.pos[order] = np.arange(n)
        H = n * (n + 1) // 2
        self.horizon = H
        cost = problem.cost_matrix[0]
        self.int_cost, self.scale, self.exact_scale = _scale_costs(cost)
        b = g.bytes.astype(np.int64)
        unit = int(np.gcd.reduce(b[b > 0])) if (b > 0).any() else 1
        self.mem_unit = unit
        from ._cpsat import cp_model  # imported on the first model (module docstring of _cpsat)

        m = cp_model.CpModel()
        self.m = m
        self.a: dict[tuple[int, int], object] = {}
        self.s: dict[tuple[int, int], object] = {}
        self.e: dict[tuple[int, int], object] = {}
        self.size: dict[tuple[int, int], object] = {}
        intervals, demands = [], []
        has_succ = np.diff(g.succ_ptr) > 0
        for v in range(n):
            if v % 64 == 0 and limits.expired():
                raise _Stopped
            p = int(self.pos[v])
            ncopies = C if (has_succ[v] and p < n - 1) else 1
            for i in range(ncopies):
                if i == 0:
                    a = m.new_constant(1)
                    ev = event_index(p, p)
                    s = m.new_constant(ev)
                    e = m.new_int_var(ev, H - 1, f"e{v}_0")
                else:
                    a = m.new_bool_var(f"a{v}_{i}")
                    evs = [event_index(p, st) for st in range(p + 1, n)]
                    s = m.new_int_var_from_domain(cp_model.Domain.from_values(evs), f"s{v}_{i}")
                    e = m.new_int_var(evs[0], H - 1, f"e{v}_{i}")
                    m.add_implication(a, self.a[(v, i - 1)])
                    m.add(self.e[(v, i - 1)] < s).only_enforce_if(a)
                    m.add(s == evs[0]).only_enforce_if(~a)
                    m.add(e == s).only_enforce_if(~a)
                m.add(e >= s)
                size = m.new_int_var(1, H, f"len{v}_{i}")
                m.add(size == e + 1 - s)
                if b[v] > 0:
                    intervals.append(m.new_optional_interval_var(s, size, e + 1, a, f"iv{v}_{i}"))
                    demands.append(int(b[v] // unit))
                self.a[(v, i)], self.s[(v, i)], self.e[(v, i)], self.size[(v, i)] = a, s, e, size
        budget = int(problem.budgets[0]) // unit
        self.budget_units = budget
        self.cap = None
        if soft_capacity:  # phase 1: the capacity is a variable to minimise, down to the budget
            top = max(budget, -(-keep_all_peak(g) // unit))
            self.cap = m.new_int_var(budget, top, "capacity")
            self.cap_top = top
        if intervals:
            m.add_cumulative(intervals, demands, self.cap if soft_capacity else budget)
        # precedence via serves literals
        self.x: dict[tuple[int, int, int, int], object] = {}
        served_by: dict[tuple[int, int], list] = {}
        for k, (u, v) in enumerate(g.edges().tolist()):
            if k % 64 == 0 and limits.expired():
                raise _Stopped
            for j in range(self._ncopies(v)):
                lits = []
                for i in range(self._ncopies(u)):
                    if i == 0 and j == 0:
                        x = m.new_bool_var(f"x{u}_{i}_{v}_{j}")
                        m.add(self.e[(u, 0)] >= self.s[(v, 0)]).only_enforce_if(x)
                    else:
                        if i > 0 and j == 0 and self.pos[u] + 1 > self.pos[v]:
                            continue  # a recomputation of u happens after v's first computation
                        x = m.new_bool_var(f"x{u}_{i}_{v}_{j}")
                        m.add_implication(x, self.a[(u, i)])
                        m.add_implication(x, self.a[(v, j)])
                        m.add(self.s[(u, i)] < self.s[(v, j)]).only_enforce_if(x)
                        m.add(self.e[(u, i)] >= self.s[(v, j)]).only_enforce_if(x)
                    self.x[(u, i, v, j)] = x
                    lits.append(x)
                    served_by.setdefault((u, i), []).append(x)
                if j == 0:
                    m.add_bool_or(lits)
                else:
                    m.add_bool_or(lits).only_enforce_if(self.a[(v, j)])
        for (v, i), a in self.a.items():
            if i > 0:  # a recomputation must serve someone
                m.add_bool_or(served_by.get((v, i), [])).only_enforce_if(a)
        terms = [(int(self.int_cost[v]), self.a[(v, i)]) for (v, i) in self.a if i > 0 and self.int_cost[v] > 0]
        if soft_capacity:
            m.minimize(self.cap)
        else:
            m.minimize(sum(c * a for c, a in terms) if terms else 0)

    def _ncopies(self, v: int) -> int:
        return sum(1 for i in range(self.C) if (v, i) in self.a)

    # ---------------------------------------------------------------- hints
    def add_hint(self, plan: Plan) -> str:
        copies, serves, complete = plan_to_intervals(plan, self.graph, self.order, self.C)
        m = self.m
        for key, a in self.a.items():
            v, i = key
            if key in copies:
                start, end = copies[key]
            else:  # absent copies sit at their first possible event
                start = end = event_index(int(self.pos[v]), int(self.pos[v]) + (i > 0))
            if i > 0:
                m.add_hint(a, int(key in copies))
                m.add_hint(self.s[key], start)
            m.add_hint(self.e[key], end)
            m.add_hint(self.size[key], end + 1 - start)
        for key, x in self.x.items():
            m.add_hint(x, int(key in serves))
        return "full" if complete else "partial"

    # --------------------------------------------------------------- decode
    def decode(self, value) -> Plan:
        rows = []
        for key, a in self.a.items():
            if value(a):
                rows.append((int(value(self.s[key])), int(value(self.e[key])), key[0]))
        rows.sort()
        ops, nodes = [], []
        live: list[tuple[int, int]] = []  # (end, node)
        for k, (_start, end, v) in enumerate(rows):
            ops.append(OP_COMPUTE)
            nodes.append(v)
            live.append((end, v))
            nxt = rows[k + 1][0] if k + 1 < len(rows) else None
            keep = []
            for end_u, u in sorted(live, key=lambda t: t[1]):
                if nxt is None or end_u < nxt:
                    ops.append(1)
                    nodes.append(u)
                else:
                    keep.append((end_u, u))
            live = keep
        return Plan.single_device(ops, nodes, self.problem.primary.name, {"solver": SOURCE})


_POLL_S = 0.05  # how often the waiting thread looks at ``stop`` (and lets signal handlers run)


def _solve_watched(solver, model, callback, stop: threading.Event | None):
    """``solver.solve`` in a helper thread; the calling thread waits in short
    slices, so Python runs its signal handlers (Ctrl-C) there, and stops the
    search when ``stop`` is set or a handler raises (then re-raises once the
    helper thread has ended).  Returns the CP-SAT status."""
    out: dict = {}
    done = threading.Event()  # waited on instead of Thread.join: an interrupted join can mark a live thread dead

    def work():
        try:
            out["status"] = solver.solve(model, callback)
        except BaseException as e:  # reported in the calling thread
            out["error"] = e
        finally:
            done.set()

    helper = threading.Thread(target=work, name="hybrid-remat-ortools-cpsat", daemon=True)
    helper.start()
    try:
        while not done.wait(_POLL_S):
            if stop is not None and stop.is_set():
                solver.stop_search()
                stop = None  # asked once; now wait for the search to wind down
    except BaseException:  # KeyboardInterrupt (or SystemExit) from a signal handler: stop, wait, re-raise
        solver.stop_search()
        while not done.is_set():
            try:
                done.wait(_POLL_S)
            except BaseException:  # another Ctrl-C while the search winds down: keep waiting
                solver.stop_search()
        helper.join()
        raise
    helper.join()
    if "error" in out:
        raise out["error"]
    return out["status"]


class CpSatRemat(Formulation):
    """OR-Tools CP-SAT formulation (retention intervals on the staged grid).

    Parameters
    ----------
    max_computations : int
        ``C``: computations allowed per node (default 2, as Moccasin).
    presolve : bool or None
        CP-SAT presolve; ``None`` (default): on for graphs up to
        :data:`PRESOLVE_MAX_NODES` nodes.  On larger graphs its single-thread
        presolve alone takes tens of seconds (about 20 s at n = 250).
    phase1_share : float
        Without a valid incumbent the model can express, at most this share
        of the time limit goes to a first phase that minimises the memory capacity from the
        keep-all order down to the budget (Moccasin's two-phase scheme); its
        first plan within budget becomes the hint.  ``0`` disables it.

    Examples
    --------
    >>> from hybrid_remat import Problem, generators
    >>> from hybrid_remat_ortools import CpSatRemat
    >>> from hybrid_remat.limits import Limits
    >>> p = Problem.single(generators.random_dag(8, seed=1), "100%")
    >>> CpSatRemat().solve(p, limits=Limits.seconds(5)).status
    'optimal'
    """

    name = "ortools"
    version = "0.1.0"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits"})

    def applicable(self, problem) -> tuple[bool, str]:
        """Graphs of at most :data:`MAX_NODES` nodes (the staged grid grows as ``n**2``)."""
        n = problem.graph.n
        if n > MAX_NODES:
            return False, f"{n} nodes > {MAX_NODES}: the staged grid has n(n+1)/2 events"
        return True, ""

    def predict_seconds(self, problem) -> float:
        """Seconds to build its models (the phase-one model and the main one) before CP-SAT searches."""
        return 2.0 * BUILD_C * float(problem.graph.n) ** BUILD_K

    def __init__(self, max_computations: int = 2, phase1_share: float = 0.5, presolve: bool | None = None,
                 interleave: int = 1, threads: int = 1):
        if max_computations < 1:
            raise SolverError("max_computations must be >= 1")
        if not 0 <= phase1_share < 1:
            raise SolverError("phase1_share must be in [0, 1)")
        self.max_computations = int(max_computations)
        self.phase1_share = float(phase1_share)
        self.presolve = presolve
        self.interleave = int(interleave)
        self.threads = max(1, int(threads))

    def solve(self, problem, *, incumbent=None, limits: Limits | None = None, seed: int = 0, on_incumbent=None,
              on_bound=None):
        """Solve with CP-SAT; see the module docstring for the model, what
        ``status`` and ``lower_bound`` mean here, and how it stops.

        ``limits`` bound the run: ``nodes`` caps CP-SAT's conflicts
        (deterministic), the deadline its time, ``stop`` ends it within
        about 0.05 s.  ``threads`` (the constructor's) sets its workers, ``seed`` its random
        seed.  ``incumbent`` (a valid plan) fixes the topological order and
        is given as a complete hint.
        """
        from . import _cpsat  # OR-Tools itself: imported on the first solve
        t0 = time.perf_counter()
        lim = self.limits_of(limits)
        stop, node_limit, threads = lim.stop, lim.nodes, self.threads
        if not problem.is_single_device:
            raise SolverError(f"{self.name} handles single-device problems only")
        g = problem.graph
        base = problem.base_cost
        if on_bound is not None:
            on_bound(base)
        hint_plan = None
        if incumbent is not None:
            try:
                r = simulate(problem, incumbent)
                if r.valid and len(set(incumbent.device.tolist())) <= 1:
                    hint_plan = incumbent
            except HybridRematError:
                hint_plan = None
        order = first_compute_order(hint_plan, g.n) if hint_plan is not None else None
        if order is None:
            order = np.arange(g.n, dtype=np.int64)
        phase1 = {}
        stream = _cpsat.Stream(None, on_incumbent, t0, SOURCE)
        stream.phase1 = phase1
        complete = hint_plan is not None and plan_to_intervals(hint_plan, g, order, self.max_computations)[2]
        try:
            if not complete and self.phase1_share > 0 and not lim.expired():
                # no incumbent, or one the model cannot express (more than C computations): find one it can
                share = lim.share(self.phase1_share * lim.left()) if math.isfinite(lim.left()) else lim
                found = self._phase1(problem, order, share, seed, threads, phase1)
                hint_plan = found if found is not None else hint_plan
            model = _Model(problem, order, self.max_computations, limits=lim)
        except _Stopped:
            return self._result(problem, stream, "UNKNOWN", math.nan, base, time.perf_counter() - t0, 0.0, "none",
                                order, stopped=True)
        stream.model = model
        hint = model.add_hint(hint_plan) if hint_plan is not None else "none"
        build_s = time.perf_counter() - t0
        if phase1:
            hint = f"phase1 ({hint})" if phase1.get("found") else hint
        if lim.expired():
            return self._result(problem, stream, "UNKNOWN", math.nan, base, build_s, 0.0, hint, order, stopped=True)
        solver = _cpsat.new_solver(threads, self.interleave, seed, lim.left(), self._presolve(problem), node_limit)
        status = _solve_watched(solver, model.m, stream, stop)
        solve_s = time.perf_counter() - t0 - build_s
        model_status = _cpsat.STATUS.get(status, str(status))
        bound = solver.best_objective_bound if status in (_cpsat.cp_model.OPTIMAL, _cpsat.cp_model.FEASIBLE) else math.nan
        return self._result(problem, stream, model_status, bound, base, build_s, solve_s, hint, order,
                            stopped=bool(stop is not None and stop.is_set()), model=model)

    def _presolve(self, problem) -> bool:
        return self.presolve if self.presolve is not None else problem.graph.n <= PRESOLVE_MAX_NODES

    def _phase1(self, problem, order, lim: Limits, seed, threads, info) -> Plan | None:
        """Moccasin's two-phase idea: minimise the memory capacity from the
        keep-all hint down to the budget; the first plan that fits is the
        hint of the real solve."""
        from . import _cpsat

        t = time.perf_counter()
        m1 = _Model(problem, order, self.max_computations, soft_capacity=True, limits=lim)
        m1.add_hint(plan_from_order(problem.graph, order, problem.primary.name))  # keep-all in `order`
        m1.m.add_hint(m1.cap, m1.cap_top)
        solver = _cpsat.new_solver(threads, 1, seed, lim.left(), self._presolve(problem), lim.nodes)
        cb = _cpsat.FirstFit(m1, lim.stop)
        status = _solve_watched(solver, m1.m, cb, lim.stop)
        info.update(found=cb.plan is not None, seconds=time.perf_counter() - t, status=_cpsat.STATUS.get(status, str(status)),
                    n_solutions=cb.n_solutions)
        return cb.plan

    def _result(self, problem, stream, model_status, bound, base, build_s, solve_s, hint, order, *, stopped,
                model=None):
        stats = {
            "phase1": dict(getattr(stream, "phase1", {}) or {}),
            "model_status": model_status, "n_solutions": stream.n_solutions, "n_invalid": stream.n_invalid,
            "build_s": build_s, "solve_s": solve_s, "hint": hint, "stopped": stopped,
            "max_computations": self.max_computations, "history": list(stream.history),
            "order": "incumbent" if not np.array_equal(order, np.arange(problem.graph.n)) else "reference",
        }
        if model is not None and not math.isnan(bound):
            stats["model_bound"] = base + bound / model.scale
            stats["cost_scale"] = model.scale
        if stream.best_plan is None:
            return FormulationResult("no_solution", None, math.inf, base, stats)
        total = stream.best_time
        optimal = total <= base * (1 + 1e-12) + 1e-12
        return FormulationResult("optimal" if optimal else "feasible", stream.best_plan, total, base, stats)
