"""XEngine's staged CPU+GPU model as a formulation, at every graph size.

The model (:mod:`hybrid_remat.hetero.xengine_model`) decides, per stage of
a grid and per device, computations ``R``, copies ``X`` and residency ``S``
with the serial time (compute plus copies) as objective.  It avoids the
public code's defects (reference brief, section 1.2): the freed size is the
freed value's own (a), initial memory and FREE are per device (b), copy
costs are indexed ``src -> dst`` from the links (c), and a transfer is paid
once per (value, stage, destination), not per consuming edge and source
(d).  A storage-only device (``can_compute=False``) gives POET-style paging
(see :mod:`hybrid_remat.hetero.paging`).

:class:`XEngineMILP` picks what fits the time:

1. **the full model** (one stage per node) when :func:`model_size` is under
   ``max_variables``: its dual bound bounds every *staged* plan (first
   computations in the modelled order, each value arriving at most once per
   device and stage), so ``bound_scope = "staged"`` and ``"optimal"`` means
   optimal in that class; on tiny graphs this equals the brute-force
   optimum over frontier-ordered plans (tests);
2. otherwise **a coarse grid** cut for the incumbent (:func:`coarse_ends`;
   stages end only where the incumbent needs it, so it still warm-starts the
   model), when one fits;
3. and, with the time left (or when no coarse grid fits), **windows of the
   incumbent**: a few consecutive stages and the nodes around them are
   re-optimised exactly with everything else fixed (the incumbent's
   residency entering and leaving the window kept), each accepted
   improvement becoming the next window's incumbent.

Models 2 and 3 are restrictions: their bounds are kept in ``stats`` only.
Every plan is decoded and checked by the simulator before it counts.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(2, bytes=1).with_costs({"cpu": [1.0, 10.0], "gpu": [10.0, 1.0]})
>>> p = Problem(g, [Device("cpu", "cpu", 5), Device("gpu", "gpu", 5)],
...             [Link("cpu", "gpu", 1.0, 2.0), Link("gpu", "cpu", 1.0, 7.0)])
>>> from hybrid_remat.limits import Limits
>>> r = XEngineMILP().solve(p, limits=Limits(nodes=100))
>>> r.status, round(r.objective, 6)
('optimal', 5.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from ..core.reductions import InOrder
from ..core.staged import encode
from ..errors import SolverError
from ..interfaces import Formulation, FormulationResult
from ..plan import Plan
from ..problem import Problem
from ..scip import DEFAULT_PARAMS, apply_params, check_bound, run, solve_limits
from ..simulate import simulate
from .staging import coarse_ends, decode, model_size, stage_arrays
from .xengine_model import BuildTimeout, XEngineModel

__all__ = ["XEngineMILP", "MAX_VARIABLES", "WINDOW_VARIABLES", "model_size", "decode", "stage_arrays",
           "coarse_ends", "staged_base"]

#: the per-node (or coarse) model is built up to this many estimated variables
MAX_VARIABLES = 60_000
#: variables of one window model (about; the window's stage and node counts follow from it)
WINDOW_VARIABLES = 12_000
#: measured pyscipopt construction throughput of this model (variables + rows per second, 2 shared cores)
BUILD_RATE = 15_000.0
#: share of the time the coarse model gets when windows may follow it
COARSE_SHARE = 0.6


def _better(a: float, b: float) -> bool:
    return a < b if not math.isfinite(b) else a < b - 1e-12 * max(1.0, abs(b))


def staged_base(problem: Problem, plan: Plan):
    """``(R, S, X, plan)``: per-node staged arrays of ``plan``, or of its
    staged re-decode when that is valid and no costlier; ``None`` when
    neither exists (the plan is not frontier-ordered)."""
    arrs = stage_arrays(problem, plan)
    if arrs is not None:
        return (*arrs, plan)
    names = [d.name for d in problem.devices]
    try:
        dmap = np.array([names.index(x) for x in plan.devices], dtype=np.int64)
    except ValueError:
        return None
    dev = dmap[plan.device]
    tgt = np.where(plan.target >= 0, dmap[np.maximum(plan.target, 0)], -1)
    out = encode(problem.graph.n, problem.n_devices, plan.op.tolist(), plan.node.tolist(), dev.tolist(),
                 tgt.tolist(), np.arange(problem.graph.n), strict=False)
    if isinstance(out, str):
        return None
    again = decode(problem, *out, dict(plan.meta))
    r, r0 = simulate(problem, again), simulate(problem, plan)
    if not r.valid or r.total_time > r0.total_time + 1e-9 * max(1.0, r0.total_time):
        return None
    arrs = stage_arrays(problem, again)
    return None if arrs is None else (*arrs, again)


class XEngineMILP(Formulation):
    """The staged CPU+GPU MILP (module docstring), solved with SCIP.

    Parameters
    ----------
    max_variables : int
        The largest per-node or coarse model built (estimated variables).
    coarse : bool
        Try a coarse stage grid cut for the incumbent when the per-node
        model is too large.
    windows : bool
        Improve the incumbent window by window when the per-node model is
        too large (``False``: such problems get ``no_solution`` with the
        reason in ``stats["skipped"]`` unless a coarse grid fits).
    window_variables : int
        About how many variables one window model has.
    max_window_s : float
        Time cap of one window solve.
    params : dict, optional
        SCIP settings for the window models (default: the Checkmate
        formulation's, which favour primal heuristics).
    """

    name = "hetero_xengine"
    version = "2"
    capabilities = frozenset({"dag", "chain", "multi_device", "serial", "exact", "scoped_bound", "honours_limits"})
    bound_scope = "staged"

    def __init__(self, max_variables: int = MAX_VARIABLES, coarse: bool = True, windows: bool = True,
                 window_variables: int = WINDOW_VARIABLES, max_window_s: float = 10.0, params: dict | None = None):
        self.max_variables = max_variables
        self.coarse = coarse
        self.windows = windows
        self.window_variables = int(window_variables)
        self.max_window_s = float(max_window_s)
        self.params = dict(DEFAULT_PARAMS if params is None else params)

    def predict_seconds(self, problem: Problem) -> float:
        """Seconds to build the first model: the per-node one when it fits,
        else one window."""
        size = model_size(problem)
        if size["variables"] <= self.max_variables:
            return (size["variables"] + size["constraints"]) / BUILD_RATE
        return 3.0 * self.window_variables / BUILD_RATE if self.windows else math.inf

    def solve(self, problem: Problem, *, incumbent: Plan | None = None, limits=None, seed: int = 0,
              on_incumbent: Callable | None = None, on_bound: Callable | None = None,
              frontier: str = "auto") -> FormulationResult:
        """Solve within ``limits``; see :class:`~hybrid_remat.interfaces.Formulation`.

        ``frontier`` picks the topological order whose stages the model
        uses: ``"reference"`` (node indices, Checkmate's and XEngine's
        choice) or ``"auto"`` (default): the order of the incumbent's first
        computations when the incumbent is not staged in the reference
        order, so that it warm-starts the model and the result is never
        worse.
        """
        if frontier not in ("auto", "reference"):
            raise SolverError(f"unknown frontier {frontier!r}: use 'auto' or 'reference'")
        lim = solve_limits(limits)
        if incumbent is not None and not simulate(problem, incumbent).valid:
            incumbent = None
        io = InOrder(problem, incumbent, on_incumbent,
                     follow=frontier == "auto" and incumbent is not None and stage_arrays(problem, incumbent) is None)
        res = self._solve(io.problem, io.plan, lim, seed, 1, io.on_incumbent, on_bound)  # one SCIP thread
        res.plan = incumbent if res.plan is io.plan else io.back(res.plan)
        res.stats["frontier"] = "reference" if io.order is None else "incumbent order"
        return res

    # ------------------------------------------------------------------ policy
    def _solve(self, problem, incumbent, lim, seed, threads, on_incumbent, on_bound) -> FormulationResult:
        size = model_size(problem)
        stats: dict = {"formulation": self.name, **size}
        best = {"plan": None, "time": math.inf}
        if incumbent is not None:
            best["plan"], best["time"] = incumbent, simulate(problem, incumbent).total_time
        can = problem.can_compute
        trivial = float(np.where(can[:, None], problem.cost_matrix, np.inf).min(axis=0).sum())
        if on_bound is not None:
            on_bound(trivial)  # every node computed at least once somewhere: a bound over every plan

        def offer(plan, source):
            r = simulate(problem, plan)
            if r.valid and _better(r.total_time, best["time"]):
                best["plan"], best["time"] = plan, r.total_time
                if on_incumbent is not None:
                    on_incumbent(plan, source)
            return r

        status, staged_lb = "no_solution", -math.inf
        full_fits = size["variables"] <= self.max_variables
        if full_fits:
            stats["grid"] = "per node"
            status, staged_lb = self.solve_grid(problem, None, incumbent, lim, seed, threads, offer, on_bound,
                                                stats, full=True)
            if "skipped" in stats:  # not in the time left: the smaller models below
                stats["per_node_skipped"] = stats.pop("skipped")
                del stats["grid"]
                full_fits = False
        if not full_fits:
            ends = coarse_ends(problem, incumbent, self.max_variables, limits=lim) \
                if self.coarse and incumbent is not None else None
            if ends is not None:
                stats["grid"] = f"coarse ({len(ends)} stages)"
                left = lim.left()
                clim = lim.share(COARSE_SHARE * left) if self.windows and math.isfinite(left) else lim
                self.solve_grid(problem, ends, incumbent, clim, seed, threads, offer, None, stats, full=False)
            if self.windows and best["plan"] is not None and not lim.expired():
                stats["grid"] = (stats.get("grid", "") + " + windows").lstrip(" +")
                self.solve_windows(problem, best["plan"], lim, seed, threads, offer, stats)
            if "grid" not in stats:
                reason = (stats.get("per_node_skipped") or
                          f"model too large: about {size['variables']} variables (limit {self.max_variables})") + \
                    (", no coarse grid for the incumbent" if incumbent is not None else ", no incumbent")
                stats["reason"] = stats["skipped"] = reason
                return FormulationResult("no_solution", best["plan"], best["time"], trivial, stats)
        stats["staged_lower_bound"] = staged_lb
        lb = max(trivial, staged_lb) if math.isfinite(staged_lb) else trivial
        if best["plan"] is None:
            # infeasible over staged plans does not prove that no plan exists
            stats["staged_infeasible"] = status == "infeasible"
            return FormulationResult("no_solution", None, math.inf, lb, stats)
        lb = min(lb, best["time"])
        if status == "optimal" and best["time"] - lb <= 1e-9 * max(1.0, abs(best["time"])):
            return FormulationResult("optimal", best["plan"], best["time"], best["time"], stats)
        return FormulationResult("feasible", best["plan"], best["time"], lb, stats)

    # ------------------------------------------------------------- one model
    def solve_grid(self, problem, ends, incumbent, lim, seed, threads, offer, on_bound, stats, *, full: bool):
        """Build and solve the model on grid ``ends`` (``None``: per node).
        ``full``: the per-node model, built as a relaxation of the staged
        class (its bound is reported).  Returns ``(status, staged bound)``."""
        t0 = time.perf_counter()
        T = problem.graph.n if ends is None else len(ends)
        left = lim.left()
        est = model_size(problem, ends)
        if math.isfinite(left) and (est["variables"] + est["constraints"]) / BUILD_RATE > 0.5 * left:
            stats["grid_skipped" if not full else "skipped"] = "model too large to build and solve in the time left"
            return "no_solution", -math.inf
        try:
            xm = XEngineModel(problem, ends=ends, relax_memory=full, limits=lim, seed=seed, threads=threads)
        except BuildTimeout as e:
            stats["grid_skipped" if not full else "skipped"] = str(e)
            return "no_solution", -math.inf
        with xm:
            build_s = time.perf_counter() - t0
            stats.update(build_s=build_s, n_vars=xm.model.getNVars(), n_cons=xm.model.getNConss(), stages=T)
            warm = "none"
            for cand, label in self._starts(problem, incumbent, coarse=not full):
                arrs = stage_arrays(problem, cand, ends)
                if arrs is None:
                    warm = f"{label} not staged"
                    continue
                warm = f"{label} " + xm.add_start(arrs)
                if warm.endswith("full"):
                    break
            stats["warm_start"] = warm
            in_class = [math.inf]

            def on_solution(model, sol):
                r = offer(xm.decode(sol, {"solver": self.name}), self.name)
                if r.valid:
                    in_class[0] = min(in_class[0], r.total_time)
                else:
                    stats["decode_error"] = r.error

            def on_dual(db):
                if full and on_bound is not None:
                    lb, note = check_bound(xm.objscale.bound(db), in_class[0], xm.objscale.tolerance(in_class[0]))
                    if math.isfinite(lb) and not note:
                        on_bound(lb)

            res = run(xm.model, limits=lim, on_solution=on_solution, on_dual=on_dual)
            stats.update(res.stats())
            if res.has_solution:
                stats["milp_objective"] = xm.objscale.real(xm.model.getSolObjVal(xm.model.getBestSol()))
                if not math.isfinite(in_class[0]):
                    on_solution(xm.model, xm.model.getBestSol())
            res.reraise()
            staged = xm.objscale.bound(res.dual) if res.dual is not None else -math.inf
            if res.scip_status == "optimal" and "milp_objective" in stats:
                staged = max(staged, min(stats["milp_objective"], in_class[0]))
            staged, note = check_bound(staged, in_class[0], xm.objscale.tolerance(in_class[0]))
            if note:
                stats["bound_note"] = note
            if not full:
                stats["coarse_lower_bound"] = staged
                staged = -math.inf
            status = res.status if res.scip_status in ("optimal", "infeasible") else "feasible"
            return status, staged

    # ---------------------------------------------------------------- windows
    def window_shape(self, problem) -> tuple[int, int]:
        """``(stages, earlier nodes)`` of a window: about
        ``window_variables`` variables (``stages x (stages + earlier)``
        node-stages of ``compute devices + devices + links`` binaries and
        about as many FREE)."""
        bw, _ = problem.link_arrays
        per = 2.0 * (int(problem.can_compute.sum()) + problem.n_devices + int((bw > 0).sum()))
        w = int(max(2, math.sqrt(self.window_variables / (2.0 * per))))
        return min(w, problem.graph.n), min(w, problem.graph.n)

    def solve_windows(self, problem, plan, lim, seed, threads, offer, stats) -> None:
        """Improve ``plan`` window by window until a pass changes nothing,
        the limits pass, or every window was solved to optimality."""
        base = staged_base(problem, plan)
        if base is None:
            stats["windows_skipped"] = "the incumbent has no per-node staged form"
            return
        R, S, X, cur = base
        if cur is not plan:
            offer(cur, f"{self.name}_windows")
        cur_time = simulate(problem, cur).total_time
        n = problem.graph.n
        w, back = self.window_shape(problem)
        wst = stats.setdefault("windows", {"solved": 0, "improved": 0, "passes": 0, "stages": w, "earlier": back})
        for pas in range(1000):
            if lim.expired():
                break
            wst["passes"] = pas + 1
            shift = (w // 2) * (pas % 2)
            starts = list(range(-shift if shift else 0, n, w))
            wins = [(max(0, a), min(n, a + w)) for a in starts if min(n, a + w) > max(0, a)]
            extra = {ab: self._window_extra(problem, R, X, *ab) for ab in wins}
            # a window that pays nothing beyond its own nodes' cheapest computations cannot improve
            wins = sorted((ab for ab in wins if extra[ab] > 1e-12 * max(1.0, cur_time)), key=lambda ab: -extra[ab])
            if not wins:
                break
            improved, all_optimal = False, True
            for k, (a, b) in enumerate(wins):
                left = lim.left()
                if lim.expired() or (math.isfinite(left) and left <= 0.5):
                    all_optimal = False
                    break
                # at least a few build times each (most promising windows first), at most max_window_s
                floor = 3.0 * self.window_variables / BUILD_RATE
                share = min(left, max(left / (len(wins) - k), floor), self.max_window_s) \
                    if math.isfinite(left) else self.max_window_s
                out = self._solve_window(problem, (R, S, X), a, b, back, lim.share(share), seed, threads)
                wst["solved"] += 1
                all_optimal &= out[0] == "optimal"
                if out[1] is not None:
                    plan_w, arrs = out[1], out[2]
                    r = offer(plan_w, f"{self.name}_window")
                    if r.valid and _better(r.total_time, cur_time):
                        R, S, X = arrs
                        cur, cur_time = plan_w, r.total_time
                        improved = True
                        wst["improved"] += 1
            if not improved and (all_optimal or pas >= 1):
                break

    @staticmethod
    def _window_extra(problem, R, X, a, b) -> float:
        """What the plan pays in stages ``[a, b)`` beyond computing their
        own nodes once on the cheapest device: recomputations and copies."""
        cost = problem.cost_matrix
        can = problem.can_compute
        tot = float((R[:, a:b] * np.where(can[:, None], cost, 0.0)[:, None, :]).sum())
        bw, lat = problem.link_arrays
        g = problem.graph
        copies = 0.0
        for s, d in zip(*np.nonzero(bw > 0), strict=True):
            copies += float(X[s, d, a:b].sum(axis=0) @ (lat[s, d] + g.bytes / bw[s, d]))
        own = float(np.where(can[:, None], cost, np.inf).min(axis=0)[a:b].sum())
        return tot + copies - own

    def _solve_window(self, problem, arrs, a, b, back, lim, seed, threads):
        """Solve one window; ``(status, plan or None, arrays)``."""
        R, S, X = arrs
        n = problem.graph.n
        fstage = np.zeros(n, dtype=bool)
        fstage[a:b] = True
        fnode = np.zeros(n, dtype=bool)
        fnode[max(0, a - back):b] = True
        try:
            xm = XEngineModel(problem, fix=(R, S, X, fstage, fnode), limits=lim, seed=seed, threads=threads,
                              name="xengine_window")
        except BuildTimeout:
            return "no_solution", None, None
        with xm:
            if xm.add_start(arrs) != "full":
                return "error", None, None  # the window model must admit the plan it was cut from
            apply_params(xm.model, self.params)
            res = run(xm.model, limits=lim)
            out = None
            if res.has_solution:
                sol = xm.model.getBestSol()
                new = xm.arrays(lambda x: xm.model.getSolVal(sol, x))
                if any((u != v).any() for u, v in zip(new, arrs, strict=True)):
                    out = (decode(problem, *new, {"solver": self.name}), new)
            res.reraise()
        return res.scip_status, *(out if out is not None else (None, None))

    # ------------------------------------------------------------------ starts
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
