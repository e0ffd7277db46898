"""The staged Checkmate MILP as a formulation: phases, warm starts, the run.

:class:`CheckmateFormulation` solves the phases of its policy
(:mod:`.policy`) in turn, each warm-started with the best plan so far (in
that plan's order of first computations when ``follow_incumbent``), pushes
local-search improvements of SCIP's incumbents back into the running solve,
and reports every simulated improvement and every bound of the staged class
as found.

Scope of the bound.  The model optimises over *staged plans*: first
computations in the reference order, each node computed at most once per
stage, in index order within a stage.  Its optimum (with exact memory
units) equals the best such plan under the simulator's accounting; its dual
bound is a bound over that class (``bound_scope = "staged"``), not over
every plan (a plan following another topological order can be cheaper).
Status ``"optimal"`` means optimal within that class.
:func:`hybrid_remat.oracle.brute_force` computes both optima on tiny graphs.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(5, bytes=1), 3)
>>> from hybrid_remat.limits import Limits
>>> r = CheckmateFormulation().solve(p, limits=Limits(nodes=1000))
>>> r.status, r.objective
('optimal', 5.0)
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...core.staged import first_compute_order, stage_starts
from ...errors import PlanError
from ...interfaces import Formulation, FormulationResult
from ...scip import DEFAULT_PARAMS, PushHeuristic, apply_params, check_bound, run, solve_limits
from ...simulate import simulate
from .model import BuildTimeout, CheckmateModel, estimate_size
from .policy import BUILD_RATE, DEFAULT_SECONDS, CheckmatePolicy

__all__ = ["CheckmateFormulation", "STAGED_SCOPE"]

#: the name of the plan class whose bounds the staged models prove: staged plans in the graph's own order
STAGED_SCOPE = "staged"


def order_scope(order) -> str:
    """The class name of the staged plans in another first-compute order:
    ``"staged (order #<digest>)"`` (a digest of the order), so that bounds of
    different orders are never taken for one another's.

    >>> order_scope(None), order_scope([1, 0])[:15]
    ('staged', 'staged (order #')
    """
    if order is None:
        return STAGED_SCOPE
    import hashlib

    digest = hashlib.blake2b(np.ascontiguousarray(order, dtype=np.int64).tobytes(), digest_size=4).hexdigest()
    return f"{STAGED_SCOPE} (order #{digest})"


def _better(a: float, b: float) -> bool:
    """``a`` below ``b`` by a relative 1e-12 (never an absolute amount: plans of 1e-12 s compare too)."""
    return a < b if not math.isfinite(b) else a < b - 1e-12 * abs(b)


class CheckmateFormulation(CheckmatePolicy, Formulation):
    """The staged Checkmate MILP on SCIP, warm-started from the incumbent.

    Parameters
    ----------
    stage_size : int or "auto"
        Nodes per stage; ``"auto"``: see :meth:`phases`.
    recompute_cap : int or None
        Moccasin's ``C`` (at most ``C`` computations per node); with
        ``"auto"`` it applies to the fast phase (default 2 there).
    push_local_search : bool
        Polish each new SCIP incumbent by local search (dropping
        recomputations, :func:`hybrid_remat.pruning.drop_recomputations`) and push
        improvements back into the running solve through a SCIP primal
        heuristic.
    follow_incumbent : bool
        Model the incumbent's order of first computations (relabelling the
        graph) rather than the reference order, so the start is usable.
    tiny_items, small_items, fast_items, max_stage_size
        Size thresholds (variables + rows per 60 s) of the ``"auto"`` policy.
    build_fraction : float
        Share of the time limit model construction may take.
    rins_share : float
        With an incumbent and a model small enough for the full staged
        phase, this share of the time first goes to a RINS-style phase: the
        full model with every ``S`` fixed where its LP relaxation and the
        incumbent agree.  Its plans count; its bound and status do not (the
        model is restricted).  Off by default: measured in
        ``benchmarks/results/exact_rins.md`` it helped vgg19 @0.8 but cost
        RLG1 its best plans (the LP relaxation alone used the phase's time).
    params : dict, optional
        Extra SCIP parameters.
    """

    name = "checkmate"
    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "serial", "makespan", "needs_budget", "exact",
                              "scoped_bound", "honours_limits"})
    bound_scope = STAGED_SCOPE

    def __init__(self, stage_size="auto", recompute_cap: int | None = None, build_fraction: float = 0.4,
                 params: dict | None = None, name: str | None = None, small_items: float = 40_000,
                 fast_items: float = 20_000, max_stage_size: int = 8, tiny_items: float = 5_000,
                 follow_incumbent: bool = True, push_local_search: bool = True, rins_share: float = 0.0):
        CheckmatePolicy.__init__(self, stage_size, recompute_cap, build_fraction, small_items, fast_items,
                                 max_stage_size, tiny_items)
        self.rins_share = float(rins_share)
        self.follow_incumbent = follow_incumbent
        self.push_local_search = push_local_search
        self.params = dict(DEFAULT_PARAMS if params is None else params)
        if name:
            self.name = name

    # ------------------------------------------------------------------ solve
    def solve(self, problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent=None,
              on_bound=None) -> FormulationResult:
        """Solve within ``limits`` (see :class:`~hybrid_remat.interfaces.Formulation`).

        On one device serial time and makespan coincide (one stream, no
        copies), so both objectives are served.
        """
        lim = solve_limits(limits)
        seconds = lim.left()
        seconds = None if not math.isfinite(seconds) else seconds
        stats: dict = {"formulation": self.name, "phases": []}
        if not problem.is_single_device:
            return FormulationResult("error", stats={**stats, "error": "checkmate handles one device only"})
        phases = self.phases(problem, seconds)
        if not phases:
            # no model fits the prediction; the scheduler skips this formulation then (predict_seconds is inf)
            # unless it was named, and a named model is attempted: the smallest one, built with the deadline
            # (a build that cannot finish ends with BuildTimeout, said in the phase's stats)
            cap = self.recompute_cap if self.recompute_cap is not None else 2
            phases = [(self.max_stage_size, cap, 1.0)]
            stats["attempted"] = ("no model predicted to fit the time limit: the smallest attempted "
                                  f"(stages of {self.max_stage_size}, recompute cap {cap})")
        best_plan, best_obj = None, float("inf")
        if incumbent is not None:
            sim = simulate(problem, incumbent)
            if sim.valid:
                best_plan, best_obj = incumbent, sim.total_time
        bound, status = float("-inf"), "no_solution"
        class_bounds: dict = {}
        stats["class_bounds"] = class_bounds  # scope -> bound of the staged plans in another first-compute order
        if self.rins_share > 0 and best_plan is not None:
            fr = self._rins_phase(problem, best_plan, lim, seed, on_incumbent, stats)
            if fr is not None and fr.plan is not None and _better(fr.objective, best_obj):
                best_plan, best_obj = fr.plan, fr.objective
        for k, (size, cap, share) in enumerate(phases):
            if lim.expired():
                break
            left = lim.left()
            if math.isfinite(left) and left <= 0.5:
                break
            plim = lim.share(left * share) if k < len(phases) - 1 and math.isfinite(left) else lim
            pstats: dict = {"stage_size": size, "recompute_cap": cap}
            stats["phases"].append(pstats)
            # the fast phase of a multi-phase run keeps the reference order; the others model the best
            # plan's order of first computations (relabelling the graph) so that it is a complete start
            follow = best_plan is not None and self.follow_incumbent and (k > 0 or len(phases) == 1)
            fr = self._in_order(problem, best_plan if follow else None, best_plan, on_incumbent, pstats,
                                lambda pr, start, cb, st, _s=size, _c=cap, _l=plim, _k=k:
                                self._solve_phase(pr, _s, _c, start, _l, seed, cb, on_bound, st,
                                                  predicted_skip=_k > 0))
            pstats["status"] = fr.status
            if fr.plan is not None and (best_plan is None or _better(fr.objective, best_obj)):
                best_plan, best_obj = fr.plan, fr.objective
            scope = pstats.get("class_scope", STAGED_SCOPE)
            if scope != STAGED_SCOPE:  # another order's class: its own name, never merged into the "staged" bound
                if math.isfinite(fr.lower_bound) and fr.lower_bound > class_bounds.get(scope, -math.inf):
                    class_bounds[scope] = fr.lower_bound
            elif math.isfinite(fr.lower_bound):
                bound = max(bound, fr.lower_bound)
            if size == 1 and cap is None and fr.status in ("optimal", "infeasible"):
                status = fr.status
        return self._result(status, best_plan, best_obj, bound, stats)

    @staticmethod
    def _result(status, best_plan, best_obj, bound, stats) -> FormulationResult:
        if stats["phases"]:
            last = stats["phases"][-1]
            for key in ("vars", "binaries", "rows", "build_s", "mem_unit", "mem_exact", "mem_relaxed", "start",
                        "start_note", "scip_status", "nodes", "skipped", "model_bound", "stages", "relabelled",
                        "bound_note"):
                if key in last:
                    stats[key] = last[key]
        if any(ph.get("relabelled") for ph in stats["phases"]):
            stats["relabelled"] = True
            stats["order_note"] = ("modelled the incumbent's first-compute order; its bounds cover that order's staged "
                                   "plans only and are kept under that class's name in stats['class_bounds']")
        if status == "optimal" and best_plan is not None:
            lb = best_obj if best_obj - bound <= 1e-9 * abs(best_obj) else min(bound, best_obj)
            return FormulationResult("optimal", best_plan, best_obj, lb, stats)
        if status == "infeasible" and best_plan is None:
            # the staged class is empty; other plans may exist: never claim infeasibility (team contract)
            stats["staged_class_empty"] = True
            return FormulationResult("no_solution", None, float("inf"), float("-inf"), stats)
        if best_plan is not None:
            return FormulationResult("feasible", best_plan, best_obj, min(bound, best_obj), stats)
        return FormulationResult("no_solution", None, float("inf"), bound, stats)

    def predict_seconds(self, problem) -> float:
        """Seconds to build the first model (the scheduler skips the
        formulation when they exceed the time left)."""
        return CheckmatePolicy.predict_seconds(self, problem)

    # ------------------------------------------------------------------ phases
    @staticmethod
    def _in_order(problem, order_of, start, on_incumbent, pstats, solve_fn) -> FormulationResult:
        """Run ``solve_fn(problem, start, on_incumbent, stats)`` on the problem
        relabelled along ``order_of``'s first computations (when given and
        not the identity), mapping plans back."""
        from ...core.reductions import InOrder, plan_to_relabelled

        io = InOrder(problem, order_of, on_incumbent)
        pstats["class_scope"] = order_scope(io.order)
        if io.order is not None:
            pstats["relabelled"] = True
            start = None if start is None else plan_to_relabelled(start, io.order)
        fr = solve_fn(io.problem, start, io.on_incumbent, pstats)
        fr.plan = io.back(fr.plan)
        return fr

    def _rins_phase(self, problem, best_plan, lim, seed, on_incumbent, stats):
        full = estimate_size(problem.graph, stage_starts(problem.graph.n, 1), None)
        left = lim.left()
        rins_time = self.rins_share * (left if math.isfinite(left) else DEFAULT_SECONDS)
        if 2 * (full["vars"] + full["rows"]) / BUILD_RATE > 0.6 * rins_time:  # LP + MILP builds
            return None
        if lim.expired() or first_compute_order(best_plan, problem.graph.n) is None:
            return None
        rstats: dict = {"stage_size": 1, "recompute_cap": None, "rins_phase": True}
        stats["phases"].append(rstats)
        rlim = lim.share(left * self.rins_share) if math.isfinite(left) else lim
        fr = self._in_order(problem, best_plan, best_plan, on_incumbent, rstats,
                            lambda pr, start, cb, st: self._solve_phase(pr, 1, None, start, rlim, seed, cb, None, st,
                                                                        fix_from_lp=True))
        rstats["status"] = fr.status  # a restricted model: its status and bound are not claims
        return fr

    def _solve_phase(self, problem, size, cap, incumbent, lim, seed, on_incumbent, on_bound, stats,
                     fix_from_lp: bool = False, predicted_skip: bool = True) -> FormulationResult:
        """One model built and solved within ``lim``; a later phase
        (``predicted_skip``) is skipped when its build is predicted to
        overrun the time left, the first is attempted (the scheduler admitted
        it, or the user named it) and its build honours the deadline."""
        t0 = time.perf_counter()
        starts = stage_starts(problem.graph.n, size)
        est = estimate_size(problem.graph, starts, cap)
        stats.update(stages=int(len(starts) - 1), estimate=est)
        left = lim.left()
        if predicted_skip and math.isfinite(left) and (est["vars"] + est["rows"]) / BUILD_RATE > 0.9 * left:
            stats["skipped"] = "model too large to build within the time limit"
            return FormulationResult("no_solution", stats=stats)
        cm = None
        try:
            try:
                # the full staged model is built as a relaxation (sizes rounded down when the memory unit is
                # inexact) so that its dual bound is valid; restricted phases stay conservative
                relax = size == 1 and cap is None and not fix_from_lp
                cm = CheckmateModel(problem, starts=starts, recompute_cap=cap, limits=lim, relax_memory=relax,
                                    seed=seed)
            except BuildTimeout as e:
                stats["skipped"] = str(e)
                return FormulationResult("no_solution", stats=stats)
            stats.update(vars=cm.n_vars, binaries=cm.n_binaries, rows=cm.n_rows, build_s=time.perf_counter() - t0,
                         mem_unit=cm.scale.unit, mem_exact=cm.scale.exact, mem_relaxed=cm.scale.relaxed)
            if fix_from_lp and incumbent is not None:
                self._fix_where_lp_agrees(cm, problem, incumbent, lim, stats)
            return self._solve_model(cm, problem, incumbent, lim, on_incumbent, on_bound, stats)
        finally:
            if cm is not None:
                cm.free()

    @staticmethod
    def _fix_where_lp_agrees(cm, problem, incumbent, lim, stats, tol: float = 0.05) -> None:
        """RINS-style restriction: solve the LP relaxation of the same model and
        fix every checkpoint variable ``S`` where the LP value and the
        incumbent agree (within ``tol``).  The incumbent stays feasible; the
        model's bound no longer bounds the staged class (``cm.fixed > 0``)."""
        try:
            R_inc, S_inc = cm.stage_rs(incumbent)
        except PlanError as e:
            stats["rins"] = f"incumbent has no staged form: {e}"
            return
        t_lp = time.perf_counter()
        try:
            with CheckmateModel(problem, starts=cm.starts, recompute_cap=cm.recompute_cap, integral=False,
                                limits=lim, scale=cm.scale) as lp:
                left = lim.left()
                res = run(lp.model, limits=lim.share(0.3 * left) if math.isfinite(left) else lim)
                if res.scip_status != "optimal":
                    stats["rins"] = f"LP relaxation {res.scip_status}"
                    res.reraise()
                    return
                fixed = 0
                for key, var in cm.S.items():
                    s_, i = key
                    want = 1.0 if S_inc[s_, i] else 0.0
                    if abs(lp.model.getVal(lp.S[key]) - want) <= tol:
                        cm.model.chgVarLb(var, want)
                        cm.model.chgVarUb(var, want)
                        fixed += 1
                cm.fixed = fixed
                stats["rins"] = {"fixed": fixed, "of": len(cm.S), "lp_s": round(time.perf_counter() - t_lp, 3)}
        except BuildTimeout as e:
            stats["rins"] = f"LP not built: {e}"

    @staticmethod
    def _local_search_push(cm, problem, plan, push, stats) -> None:
        """Polish a new incumbent with local search; queue it for SCIP when it improves."""
        from ...limits import Limits
        from ...pruning import drop_recomputations

        before = simulate(problem, plan)
        better = drop_recomputations(problem, plan, limits=Limits.seconds(0.3))
        after = simulate(problem, better)
        if not (after.valid and _better(after.total_time, before.total_time)):
            return
        try:
            R, S = cm.stage_rs(better)
        except PlanError:
            return
        val, _ = cm.values_from_rs(R, S)
        if val is not None:
            push.push(val)

    def _solve_model(self, cm, problem, incumbent, lim, on_incumbent, on_bound, stats) -> FormulationResult:
        m = cm.model
        best = {"plan": None, "obj": float("inf"), "bound": float("-inf"), "in_class": float("inf")}
        if incumbent is not None:
            sim = simulate(problem, incumbent)
            kind, why = cm.add_start(incumbent)
            stats["start"] = kind
            if why:
                stats["start_note"] = why
            if sim.valid:
                best["plan"], best["obj"] = incumbent, sim.total_time
                if kind != "none":  # the start is a model solution no costlier than the incumbent
                    best["in_class"] = sim.total_time
        else:
            stats["start"] = "none"
        apply_params(m, self.params)
        # only the full staged model's bound bounds the staged class (blocks and caps restrict it)
        full_class = bool(cm.scale.bound_valid and np.all(np.diff(cm.starts) == 1) and cm.recompute_cap is None
                          and cm.fixed == 0)
        push = PushHeuristic.include(m, "local_search", "plans from local search", stats) \
            if self.push_local_search else None

        def consider(sol) -> None:
            plan = cm.decode(sol, {"solver": self.name})
            if push is not None:
                self._local_search_push(cm, problem, plan, push, stats)
            sim = simulate(problem, plan)
            if not sim.valid:
                stats["decode_rejected"] = stats.get("decode_rejected", 0) + 1
                return
            best["in_class"] = min(best["in_class"], sim.total_time)
            if best["plan"] is None or _better(sim.total_time, best["obj"]):
                best["plan"], best["obj"] = plan, sim.total_time
                if on_incumbent is not None:
                    on_incumbent(plan, self.name)

        def on_dual(db) -> None:
            lb = cm.objscale.bound(db)
            if lb > best["bound"]:
                best["bound"] = lb
                if on_bound is not None and full_class and stats.get("class_scope", STAGED_SCOPE) == STAGED_SCOPE:
                    lb, note = check_bound(lb, best["in_class"], cm.objscale.tolerance(best["in_class"]))
                    if note:
                        stats["bound_note"] = note
                    elif math.isfinite(lb):
                        on_bound(lb)

        res = run(m, limits=lim, on_solution=lambda model, sol: consider(sol), on_dual=on_dual)
        stats.update(res.stats())
        stats["solve_s"] = res.seconds
        if res.dual is not None:
            best["bound"] = max(best["bound"], cm.objscale.bound(res.dual))
        if best["plan"] is None and res.has_solution:
            try:
                consider(m.getBestSol())
            except Exception as e:
                stats["decode_error"] = repr(e)
        res.reraise()
        bound, note = check_bound(best["bound"], best["in_class"], cm.objscale.tolerance(best["in_class"]))
        if note:
            stats["bound_note"] = note
        stats["model_bound"] = bound
        stats["bound_valid_for_staged_class"] = full_class
        if not full_class:
            bound = float("-inf")  # a restricted model's bound does not bound the staged class: stats only
        status = res.scip_status
        if status == "optimal" and best["plan"] is not None:
            lb = min(bound, best["obj"])
            if best["obj"] - lb <= cm.objscale.tolerance(best["obj"]):
                lb = best["obj"]
            elif full_class and cm.scale.relaxed:
                # the relaxed model's optimum does not fit in bytes: our best plan is not proven optimal
                stats["relaxed_optimum_over_budget"] = True
                return FormulationResult("feasible", best["plan"], best["obj"], lb, stats)
            return FormulationResult("optimal", best["plan"], best["obj"], lb, stats)
        if status == "infeasible":
            return FormulationResult("infeasible" if best["plan"] is None else "feasible", best["plan"], best["obj"],
                                     float("inf") if best["plan"] is None else bound, stats)
        if best["plan"] is not None:
            return FormulationResult("feasible", best["plan"], best["obj"], min(bound, best["obj"]), stats)
        return FormulationResult("no_solution", None, float("inf"), bound, stats)

