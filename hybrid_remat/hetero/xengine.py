"""XEngine's staged CPU+GPU model as a MILP with explicit transfer variables.

Stages ``t = 0..n-1``; stage ``t`` runs slots ``k = 0..t`` in index order and
must compute node ``t`` (the frontier) on exactly one device.  Per device
``d`` (storage-only devices have no ``R``):

* ``R[d,t,i]``   node ``i`` is computed on ``d`` at slot ``i`` of stage ``t``;
* ``X[d,e,t,i]`` the value of ``i`` is copied ``d -> e`` at slot ``i``;
* ``S[d,t,i]``   ``i`` is resident on ``d`` when stage ``t`` starts;
* ``A[d,t,i] = R[d,t,i] + sum_e X[e,d,t,i]`` (an *arrival*: it allocates
  ``bytes[i]`` on ``d`` at slot ``i``, so a received copy counts against the
  receiving device);
* ``FREE[d,t,i,k]`` value ``i`` is freed on ``d`` right after slot ``k``
  (``k = i`` or a consumer of ``i``); ``U[d,t,k]`` memory on ``d`` right
  after the arrival at slot ``k``.

Constraints::

    sum_d R[d,t,t] = 1                                   (frontier, one device)
    R[d,t,v] <= S[d,t,u] + A[d,t,u]        for (u, v) in E       (inputs on d)
    S[d,t+1,i] <= S[d,t,i] + A[d,t,i]                     (residency carries)
    X[d,e,t,i] <= S[d,t,i] + R[d,t,i]      (a copy needs a source; no relays)
    A[d,t,i] + S[d,t,i] <= 1               (no arrival where already resident)
    FREE[d,t,i,i] <= S[d,t,i] + A[d,t,i];  FREE[d,t,i,k] <= R[d,t,k]  (k > i)
    FREE[d,t,i,k] <= 1 - S[d,t+1,i];  FREE[d,t,i,k] <= 1 - R[d,t,j]  (j in succ(i), j > k)
    U[d,t,0] = sum_i m_i S[d,t,i] + m_0 A[d,t,0]
    U[d,t,k] = U[d,t,k-1] - sum_{i in pred(k-1) + {k-1}} m_i FREE[d,t,i,k-1] + m_k A[d,t,k]
    U[d,t,k] <= M_d

Objective (serial time, XEngine's): ``sum c_d(i) R + sum (lat + m_i/bw) X``.
This avoids the public code's defects (reference brief, section 1.2): the
freed size is the freed value's own (a), initial memory and FREE are per
device (b), copy costs are indexed ``src -> dst`` from the links (c), and
a transfer is paid once per (value, stage, destination), not per consuming
edge and source (d).  A storage-only device (``can_compute=False``) gives
POET-style paging (see :mod:`hybrid_remat.hetero.paging`).

The model covers *staged* plans only (first computations in index order,
each value arriving at most once per device and stage, copies at the
value's slot), so its dual bound is not a bound over all plans: it is
reported as ``stats["staged_lower_bound"]``, and ``lower_bound`` is the
proven ``sum_i min_d c_d(i)``.  Status ``"optimal"`` means optimal over
staged plans with no better plan known; on tiny graphs this equals the
brute-force optimum over frontier-ordered plans (tests).

``FREE`` is bounded from above only: freeing less than allowed merely
over-counts memory, and the decoder frees everything as early as the
solution allows, so the simulated memory never exceeds ``U``.  The
decoded plan's simulated serial time equals the objective.

The model has ``O(D n^2 + D n m)`` variables, like Checkmate's: use
:func:`model_size` to decide whether to build it.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(2, bytes=1).with_costs({"cpu": [1.0, 10.0], "gpu": [10.0, 1.0]})
>>> p = Problem(g, [Device("cpu", "cpu", 5), Device("gpu", "gpu", 5)],
...             [Link("cpu", "gpu", 1.0, 2.0), Link("gpu", "cpu", 1.0, 7.0)])
>>> r = XEngineMILP().solve(p, node_limit=100)
>>> r.status, round(r.objective, 6)
('optimal', 5.0)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from ..errors import SolverError
from ..interfaces import Formulation, FormulationResult
from ..plan import Plan
from ..problem import Problem
from ..simulate import simulate
from .staging import (
    coarse_ends,
    copy_costs,
    decode,
    first_compute_order,
    memory_scale,
    model_size,
    relabel,
    relabel_plan,
    stage_arrays,
    staged_memory,
)

__all__ = ["XEngineMILP", "MAX_VARIABLES", "model_size", "decode", "stage_arrays", "coarse_ends"]

MAX_VARIABLES = 60_000


# ------------------------------------------------------------- formulation
class XEngineMILP(Formulation):
    """The staged CPU+GPU MILP (module docstring), solved with SCIP.

    Parameters
    ----------
    max_variables : int
        Refuse (status ``"no_solution"``, the incumbent returned, reason in
        ``stats["skipped"]``) when :func:`model_size` estimates more
        variables than this.
    coarse : bool
        When the per-node model is too large, try a coarse stage grid cut
        for the incumbent (:func:`coarse_ends`): stages end only where the
        incumbent needs it, so it still warm-starts the model.
    """

    name = "hetero_xengine"
    version = "1"
    capabilities = frozenset({"dag", "chain", "multi_device", "exact"})

    def __init__(self, max_variables: int = MAX_VARIABLES, coarse: bool = True):
        self.max_variables = max_variables
        self.coarse = coarse

    def solve(
        self,
        problem: Problem,
        *,
        incumbent: Plan | None = None,
        time_limit: float = 60.0,
        node_limit: int | None = None,
        seed: int = 0,
        threads: int = 1,
        on_incumbent: Callable | None = None,
        on_bound: Callable | None = None,
        stop: threading.Event | None = None,
        frontier: str = "auto",
    ) -> FormulationResult:
        """Solve; see :class:`~hybrid_remat.interfaces.Formulation`.

        ``frontier`` picks the topological order whose stages the model
        uses: ``"reference"`` (node indices, Checkmate's and XEngine's
        choice) or ``"auto"`` (default): the order of the incumbent's first
        computations when the incumbent is not staged in the reference
        order, so that it warm-starts the model and the result is never
        worse.
        """
        order = None
        if frontier not in ("auto", "reference"):
            raise SolverError(f"unknown frontier {frontier!r}: use 'auto' or 'reference'")
        if incumbent is not None and not simulate(problem, incumbent).valid:
            incumbent = None
        if frontier == "auto" and incumbent is not None:
            if stage_arrays(problem, incumbent) is None:
                fo = first_compute_order(incumbent, problem.graph.n)
                if fo is not None and not np.array_equal(fo, np.arange(problem.graph.n)):
                    order = fo
        target, inc_t, cb = problem, incumbent, on_incumbent
        if order is not None:
            target, new_of_old = relabel(problem, order)
            inc_t = relabel_plan(incumbent, new_of_old)
            if on_incumbent is not None:
                cb = lambda plan, src: on_incumbent(relabel_plan(plan, order), src)  # noqa: E731
        ends = None
        if self.coarse and inc_t is not None and model_size(target)["variables"] > self.max_variables:
            ends = coarse_ends(target, inc_t, self.max_variables)
        res = self._solve(target, inc_t, time_limit, node_limit, seed, threads, cb, on_bound, stop, ends)
        if order is not None and res.plan is not None and res.plan is not inc_t:
            res.plan = relabel_plan(res.plan, order)
            r = simulate(problem, res.plan)
            if not r.valid:  # pragma: no cover - relabelling preserves validity
                raise SolverError(f"relabelled plan is invalid: {r.error}")
            res.objective = r.total_time
        elif res.plan is inc_t:
            res.plan = incumbent
        res.stats["frontier"] = "reference" if order is None else "incumbent order"
        res.stats["grid"] = "per node" if ends is None else f"coarse ({len(ends)} stages)"
        return res

    def _solve(self, problem, incumbent, time_limit, node_limit, seed, threads, on_incumbent, on_bound, stop,
               ends=None):
        t0 = time.perf_counter()
        ends = np.arange(problem.graph.n) if ends is None else np.asarray(ends, dtype=np.int64)
        T = len(ends)
        size = model_size(problem, ends)
        inc_time = np.inf
        if incumbent is not None:
            r = simulate(problem, incumbent)
            inc_time = r.total_time if r.valid else np.inf
            if not r.valid:
                incumbent = None
        if size["variables"] > self.max_variables:
            return FormulationResult(
                "no_solution", incumbent, inc_time, float("-inf"),
                {"reason": f"model too large: about {size['variables']} variables (limit {self.max_variables})",
                 "skipped": f"model too large (~{size['variables']} variables)",
                 **size})
        try:
            from pyscipopt import SCIP_EVENTTYPE, Model, quicksum
        except ImportError as e:  # pragma: no cover
            raise SolverError(f"pyscipopt is needed for {self.name}: {e}") from None

        g = problem.graph
        n, D = g.n, problem.n_devices
        can = problem.can_compute
        cost = problem.cost_matrix
        cc = copy_costs(problem)
        unit, cap = memory_scale(problem)
        mb = g.bytes / unit
        tscale = 1000.0 / max(problem.base_cost, 1e-30)  # objective ~ 1000
        preds = [g.preds(i).tolist() for i in range(n)]
        succs = [g.succs(i).tolist() for i in range(n)]
        links = [(a, b) for a in range(D) for b in range(D) if a != b and not np.isnan(cc[a, b, 0])]

        m = Model("xengine")
        m.hideOutput()
        m.setParam("randomization/randomseedshift", int(seed))
        m.setParam("parallel/maxnthreads", max(1, int(threads)))
        R, S, X, F, U = {}, {}, {}, {}, {}
        try:
            for t in range(T):
                e_t = int(ends[t])
                p_t = int(ends[t - 1]) if t else -1
                for i in range(e_t + 1):
                    for d in range(D):
                        if can[d]:
                            R[d, t, i] = m.addVar(vtype="B", obj=cost[d, i] * tscale, name=f"R_{d}_{t}_{i}")
                        if i <= p_t:
                            S[d, t, i] = m.addVar(vtype="B", name=f"S_{d}_{t}_{i}")
                    for a, b in links:
                        if can[a] or i <= p_t:
                            X[a, b, t, i] = m.addVar(vtype="B", obj=cc[a, b, i] * tscale, name=f"X_{a}_{b}_{t}_{i}")

            def A(d, t, i):
                return quicksum(x for x in ([R[d, t, i]] if (d, t, i) in R else [])
                                + [X[a, d, t, i] for a in range(D) if (a, d, t, i) in X])

            def present(d, t, i):
                terms = [X[a, d, t, i] for a in range(D) if (a, d, t, i) in X]
                if (d, t, i) in R:
                    terms.append(R[d, t, i])
                if (d, t, i) in S:
                    terms.append(S[d, t, i])
                return quicksum(terms)

            for t in range(T):
                e_t = int(ends[t])
                p_t = int(ends[t - 1]) if t else -1
                for i in range(p_t + 1, e_t + 1):
                    m.addCons(quicksum(R[d, t, i] for d in range(D) if can[d]) == 1, name=f"front_{t}_{i}")
                for i in range(e_t + 1):
                    for d in range(D):
                        if (d, t, i) in R:
                            for u in preds[i]:
                                m.addCons(R[d, t, i] <= present(d, t, u))
                        if t + 1 < T:
                            m.addCons(S[d, t + 1, i] <= present(d, t, i))
                        arr = [X[a, d, t, i] for a in range(D) if (a, d, t, i) in X]
                        if (d, t, i) in R:
                            arr.append(R[d, t, i])
                        if len(arr) + ((d, t, i) in S) > 1:
                            m.addCons(quicksum(arr) + (S[d, t, i] if (d, t, i) in S else 0) <= 1)
                    for a, b in links:
                        if (a, b, t, i) in X:
                            src = ([S[a, t, i]] if (a, t, i) in S else []) + ([R[a, t, i]] if (a, t, i) in R else [])
                            m.addCons(X[a, b, t, i] <= quicksum(src))
                # frees and memory, per device
                for d in range(D):
                    for i in range(e_t + 1):
                        later = [j for j in succs[i] if j <= e_t]
                        ks = [i] + (later if can[d] else [])
                        for k in ks:
                            f = m.addVar(vtype="C", lb=0.0, ub=1.0, name=f"F_{d}_{t}_{i}_{k}")
                            F[d, t, i, k] = f
                            m.addCons(f <= (present(d, t, i) if k == i else R[d, t, k]))
                            if t + 1 < T:
                                m.addCons(f + S[d, t + 1, i] <= 1)
                            if can[d]:
                                for j in later:
                                    if j > k:
                                        m.addCons(f + R[d, t, j] <= 1)
                    prev = None
                    for k in range(e_t + 1):
                        u = m.addVar(vtype="C", lb=0.0, ub=float(cap[d]), name=f"U_{d}_{t}_{k}")
                        U[d, t, k] = u
                        if prev is None:
                            m.addCons(u == quicksum(mb[i] * S[d, t, i] for i in range(p_t + 1)) + mb[0] * A(d, t, 0))
                        else:
                            fr = [mb[i] * F[d, t, i, k - 1] for i in preds[k - 1] + [k - 1] if (d, t, i, k - 1) in F]
                            m.addCons(u == prev - quicksum(fr) + mb[k] * A(d, t, k))
                        prev = u
            build_s = time.perf_counter() - t0
            stats = {**size, "build_s": build_s, "n_vars": m.getNVars(), "n_cons": m.getNConss(), "stages": T}

            # ---- warm start
            warm = "none"
            for cand, label in self._starts(problem, incumbent, coarse=T < n):
                arrs = stage_arrays(problem, cand, ends)
                if arrs is None:
                    warm = f"{label} not staged"
                    continue
                warm = f"{label} " + self._add_start(m, problem, arrs, R, S, X, F, U, mb, ends)
                if warm.endswith("full"):
                    break
            stats["warm_start"] = warm

            def values():
                s = m.getBestSol()
                Rv = np.zeros((D, T, n), dtype=bool)
                Sv = np.zeros((D, T, n), dtype=bool)
                Xv = np.zeros((D, D, T, n), dtype=bool)
                for (d, t, i), x in R.items():
                    Rv[d, t, i] = m.getSolVal(s, x) > 0.5
                for (d, t, i), x in S.items():
                    Sv[d, t, i] = m.getSolVal(s, x) > 0.5
                for (a, b, t, i), x in X.items():
                    Xv[a, b, t, i] = m.getSolVal(s, x) > 0.5
                return Rv, Sv, Xv

            best = {"plan": incumbent, "time": inc_time, "bound": float("-inf")}
            # proven for every plan: each node is computed at least once somewhere
            trivial_lb = float(np.where(can[:, None], cost, np.inf).min(axis=0).sum())
            if on_bound is not None:
                on_bound(trivial_lb)

            def consider(source):
                plan = decode(problem, *values(), {"solver": self.name}, ends)
                r = simulate(problem, plan)
                if r.valid and r.total_time < best["time"] - 1e-12:
                    best["plan"], best["time"] = plan, r.total_time
                    if on_incumbent is not None:
                        on_incumbent(plan, source)
                return r

            def on_event(model, event):
                et = event.getType()
                if et == SCIP_EVENTTYPE.BESTSOLFOUND:
                    s = model.getBestSol()
                    if model.getSolObjVal(s) / tscale < best["time"] - 1e-12:
                        consider(self.name)
                db = model.getDualbound()
                if db / tscale > best["bound"] + 1e-12 and abs(db) < 1e19:
                    best["bound"] = db / tscale  # over staged plans only: kept in stats
                if stop is not None and stop.is_set():
                    model.interruptSolve()

            m.attachEventHandlerCallback(
                on_event, [SCIP_EVENTTYPE.BESTSOLFOUND, SCIP_EVENTTYPE.NODESOLVED, SCIP_EVENTTYPE.LPSOLVED])
            left = time_limit - (time.perf_counter() - t0)
            m.setParam("limits/time", max(0.0, left))
            if node_limit is not None:
                m.setParam("limits/nodes", int(node_limit))
            m.optimize()
            status = m.getStatus()
            stats.update({"scip_status": status, "solve_s": time.perf_counter() - t0 - build_s,
                          "nodes": m.getNNodes()})
            lb = m.getDualbound() / tscale if abs(m.getDualbound()) < 1e19 else float("-inf")
            if m.getNSols() > 0:
                r = consider(self.name)
                if not r.valid:
                    stats["decode_error"] = r.error
                stats["milp_objective"] = m.getSolObjVal(m.getBestSol()) / tscale
            if status == "optimal":
                lb = stats.get("milp_objective", lb)
            stats["staged_lower_bound"] = max(best["bound"], lb)
            milp_obj = stats.get("milp_objective", np.inf)
            if best["plan"] is None:
                # infeasible over staged plans does not prove that no plan exists
                st = "no_solution"
                stats["staged_infeasible"] = status == "infeasible"
            elif status == "optimal" and best["time"] >= milp_obj - 1e-9 * max(1.0, abs(milp_obj)):
                st = "optimal"  # optimal over staged plans, and nothing better is known
            else:
                st = "feasible"
            return FormulationResult(st, best["plan"], best["time"], trivial_lb, stats)
        finally:
            m.free()

    @staticmethod
    def _starts(problem: Problem, incumbent, coarse: bool = False):
        """Warm-start candidates: the incumbent, then the frontier-ordered
        (reference-order) HEFT plans, best first."""
        from .heft import MODE_MAKESPAN, MODE_SERIAL, SCORE_NEXT_USE, SCORE_STALENESS, heft_plan

        out = []
        if incumbent is not None:
            out.append((incumbent, "incumbent"))
        if coarse:  # the grid was cut for the incumbent
            return out
        cands = []
        for mode in (MODE_SERIAL, MODE_MAKESPAN):
            for w in (1.0, 0.25):
                for sk in (SCORE_STALENESS, SCORE_NEXT_USE):
                    plan = heft_plan(problem, mode=mode, offload_weight=w, score_kind=sk)
                    if plan is not None:
                        r = simulate(problem, plan)
                        if r.valid:
                            cands.append((r.total_time, len(cands), plan))
        cands.sort(key=lambda c: c[:2])
        out.extend((c[2], "heft") for c in cands)
        return out

    @staticmethod
    def _add_start(m, problem, arrs, R, S, X, F, U, mb, ends) -> str:
        """Full warm start from staged arrays (FREE and U by their
        definitions); a partial one if the full start is infeasible."""
        Ra, Sa, Xa = arrs
        sol = m.createSol()
        for (d, t, i), x in R.items():
            m.setSolVal(sol, x, float(Ra[d, t, i]))
        for (d, t, i), x in S.items():
            m.setSolVal(sol, x, float(Sa[d, t, i]))
        for (a, b, t, i), x in X.items():
            m.setSolVal(sol, x, float(Xa[a, b, t, i]))
        fval, uval = staged_memory(problem, Ra, Sa, Xa, ends, mb)
        for key, f in F.items():
            m.setSolVal(sol, f, fval.get(key, 0.0))
        for key, u in U.items():
            m.setSolVal(sol, u, max(uval[key], 0.0))
        if m.checkSol(sol, printreason=False, original=True):
            m.addSol(sol, free=True)
            return "full"
        m.freeSol(sol)
        ps = m.createPartialSol()
        for (d, t, i), x in R.items():
            m.setSolVal(ps, x, float(Ra[d, t, i]))
        for (a, b, t, i), x in X.items():
            m.setSolVal(ps, x, float(Xa[a, b, t, i]))
        m.addSol(ps)
        return "partial"
