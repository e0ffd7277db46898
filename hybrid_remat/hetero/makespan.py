"""An exact model for the makespan objective (devices and copy links as
parallel streams), which XEngine's serial model does not have.

It is the staged XEngine model (:mod:`hybrid_remat.hetero.xengine_model`:
the same ``R``/``S``/``X``, frees and memory rows) with the simulator's
timing added, in the order the staged decoder emits the steps (per stage,
per slot: the computations in device order, then the copies in link
order).  Per compute device ``d`` and link ``a -> b``:

* ``QD[d,t,k]`` -- when ``d``'s stream is free after slot ``k`` of stage
  ``t``; ``QL[a,b,t,k]`` -- the same for the link;
* ``RT[d,t,i]`` -- when the copy of ``i`` on ``d`` used in stage ``t`` is
  ready (its arrival's end, or the previous stage's when it was kept)::

    QD[d,t,k] >= QD[d,prev] + c_d(k) R[d,t,k]
    QD[d,t,k] >= RT[d,t,u] + c_d(k) - M (1 - R[d,t,k])       for u in pred(k)
    QL[a,b,t,k] >= QL[a,b,prev] + x_ab(k) X[a,b,t,k]
    QL[a,b,t,k] >= RT[a,t,k] + x_ab(k) - M (1 - X[a,b,t,k])
    RT[d,t,i] >= QD[d,t,i] - M (1 - R[d,t,i]);  RT[b,t,i] >= QL[a,b,t,i] - M (1 - X[a,b,t,i])
    RT[d,t,i] >= RT[d,t-1,i] - M (1 - S[d,t,i])
    MK >= QD, QL at the last slot;  MK >= the trivial makespan bound;  minimise MK

``M`` is the incumbent's makespan (every time is at most ``MK``, and
``MK <= M`` is added: solutions worse than the incumbent are cut off, which
keeps the bound valid).  Stream times are only bounded from below, so a
solution's ``MK`` is at least the simulated makespan of its decoded plan,
and equal at the optimum.  The class is the staged plans of the modelled
order with the decoder's step order (``bound_scope = "staged"``); memory is
counted in plan order (a relaxation of timed accounting).  Every plan is
decoded and checked by the simulator.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(3, bytes=1).with_costs({"gpu": [1.0, 1.0, 1.0], "cpu": [3.0, 3.0, 3.0]})
>>> p = Problem(g, [Device("gpu", "gpu", 3), Device("cpu", "cpu", 9)],
...             [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)]).with_objective("makespan")
>>> from hybrid_remat.limits import Limits
>>> r = XEngineMakespan().solve(p, limits=Limits(nodes=2000))
>>> r.status, round(r.objective, 6)
('optimal', 3.0)
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..core.reductions import InOrder
from ..interfaces import Formulation, FormulationResult
from ..objective import MAKESPAN
from ..problem import Problem
from ..scip import DEFAULT_PARAMS, ObjectiveScale, apply_params, check_bound, run, solve_limits
from ..simulate import simulate
from .staging import coarse_ends, model_size, stage_arrays
from .xengine_model import BuildTimeout, XEngineModel

__all__ = ["XEngineMakespan", "MakespanModel", "StagedTimer", "staged_times"]

#: the largest model (estimated variables of the serial model; the timing roughly doubles it)
MAX_VARIABLES = 30_000


def _slots(ends):
    """``[(t, k)]``: every stage's slots in the decoder's order."""
    out = []
    for t, e in enumerate(np.asarray(ends).tolist()):
        out.extend((t, k) for k in range(e + 1))
    return out


class StagedTimer:
    """Times of staged arrays as the decoded plan runs on the simulator
    (what the model's timing variables are at a solution), for one problem.

    ``timer(arrays, ends)`` returns ``(QD, QL, RT, makespan)``: dicts keyed
    like the model's variables and the makespan.
    """

    def __init__(self, problem):
        g = problem.graph
        D = self.D = problem.n_devices
        self.n = g.n
        self.can = problem.can_compute.tolist()
        self.cost = problem.cost_matrix.tolist()
        bw, lat = problem.link_arrays
        nbytes = g.bytes.tolist()
        self.links = [(a, b) for a in range(D) for b in range(D) if a != b and bw[a, b] > 0]
        self.dur = {(a, b): [float(lat[a, b]) + x / float(bw[a, b]) for x in nbytes] for a, b in self.links}
        self.preds = [g.preds(v).tolist() for v in range(g.n)]

    def __call__(self, arrays, ends):
        R, S, X = arrays
        D, can, cost, links, dur, preds = self.D, self.can, self.cost, self.links, self.dur, self.preds
        qd = [0.0] * D
        ql = {ab: 0.0 for ab in links}
        ready = [[0.0] * self.n for _ in range(D)]
        QD, QL, RT = {}, {}, {}
        for t, e in enumerate(int(x) for x in ends):
            Rt = R[:, t, : e + 1].tolist()
            St = S[:, t, : e + 1].tolist()
            Xt = {ab: X[ab[0], ab[1], t, : e + 1].tolist() for ab in links}
            for d in range(D):  # what is kept keeps its ready time
                for i in range(e + 1):
                    if St[d][i]:
                        RT[d, t, i] = ready[d][i]
            for k in range(e + 1):
                for d in range(D):
                    if not can[d]:
                        continue
                    if Rt[d][k]:
                        start = max([qd[d]] + [ready[d][u] for u in preds[k]])
                        qd[d] = start + cost[d][k]
                        ready[d][k] = qd[d]
                        RT[d, t, k] = qd[d]
                    QD[d, t, k] = qd[d]
                for ab in links:
                    if Xt[ab][k]:
                        a, b = ab
                        ql[ab] = max(ql[ab], ready[a][k]) + dur[ab][k]
                        ready[b][k] = ql[ab]
                        RT[b, t, k] = ql[ab]
                    QL[ab[0], ab[1], t, k] = ql[ab]
        mk = max([max(qd, default=0.0)] + list(ql.values()))
        return QD, QL, RT, mk


def staged_times(problem, arrays, ends):
    """:class:`StagedTimer` for one call: ``(QD, QL, RT, makespan)``."""
    return StagedTimer(problem)(arrays, ends)


class MakespanModel(XEngineModel):
    """The staged model with the simulator's timing and the makespan as
    objective (module docstring).

    Parameters
    ----------
    problem : Problem
    big_m : float
        An upper bound on the makespan (the incumbent's); ``MK <= big_m``.
    **kwargs
        As :class:`~hybrid_remat.hetero.xengine_model.XEngineModel` (no ``fix``).
    """

    def _build(self, problem, *, big_m: float, **kwargs):
        from pyscipopt import quicksum

        super()._build(problem, **kwargs)
        m = self.model
        g = problem.graph
        D = problem.n_devices
        can = problem.can_compute
        cost = problem.cost_matrix
        cc = self._cc
        ends = self.ends
        sc = self.tscale = ObjectiveScale.of(np.concatenate([cost[d] for d in range(D) if can[d]]
                                                            + [cc[a, b] for a, b in self._links]))
        M = sc.coef(big_m) * (1 + 1e-6) + 1e-6
        self.big_m = big_m
        R, S, X = self.R, self.S, self.X
        QD, QL, RT = self.QD, self.QL, self.RT = {}, {}, {}
        slots = _slots(ends)
        preds = [g.preds(i).tolist() for i in range(g.n)]

        def rt(d, t, i):
            v = RT.get((d, t, i))
            if v is None:
                v = RT[d, t, i] = m.addVar(vtype="C", lb=0.0, ub=M, name=f"RT_{d}_{t}_{i}")
            return v

        prev = {}
        limits = kwargs.get("limits")
        for t, k in slots:
            if k == 0 and limits is not None and limits.expired():
                raise BuildTimeout(f"model construction passed the deadline (timing, stage {t})")
            for d in range(D):
                if not can[d]:
                    continue
                q = QD[d, t, k] = m.addVar(vtype="C", lb=0.0, ub=M, name=f"QD_{d}_{t}_{k}")
                r = R[d, t, k]
                c = sc.coef(cost[d, k])
                p = prev.get(("d", d))
                if p is None:
                    m.addCons(q - c * r >= 0)
                else:
                    m.addCons(q - p - c * r >= 0)
                for u in preds[k]:
                    m.addCons(q - rt(d, t, u) - (c + M) * r >= -M)
                m.addCons(rt(d, t, k) - q - M * r >= -M)
                prev["d", d] = q
            for a, b in self._links:
                q = QL[a, b, t, k] = m.addVar(vtype="C", lb=0.0, ub=M, name=f"QL_{a}_{b}_{t}_{k}")
                x = X.get((a, b, t, k))
                p = prev.get(("l", a, b))
                if x is None:
                    if p is not None:
                        m.addCons(q - p >= 0)
                else:
                    c = sc.coef(cc[a, b, k])
                    if p is None:
                        m.addCons(q - c * x >= 0)
                    else:
                        m.addCons(q - p - c * x >= 0)
                    m.addCons(q - rt(a, t, k) - (c + M) * x >= -M)
                    m.addCons(rt(b, t, k) - q - M * x >= -M)
                prev["l", a, b] = q
            if k == 0 and t > 0:  # kept values keep their ready time
                for d in range(D):
                    for i in range(int(ends[t - 1]) + 1):
                        s = S.get((d, t, i))
                        if s is not None:
                            m.addCons(rt(d, t, i) - rt(d, t - 1, i) - M * s >= -M)
        self._mk_lb = min(sc.coef(MAKESPAN.trivial_bound(problem)), M)
        mk = self.MK = m.addVar(vtype="C", lb=self._mk_lb, ub=M, name="MK")
        for q in prev.values():
            m.addCons(mk - q >= 0)
        m.setObjective(quicksum([mk]), "minimize")
        self.objscale = sc

    def add_start(self, arrays) -> str:
        """A full start (times by :func:`staged_times`) when the plan's
        makespan fits ``big_m``; else as the serial model's (partial)."""
        QDv, QLv, RTv, mk = staged_times(self.problem, arrays, self.ends)
        if mk > self.big_m * (1 + 1e-9):
            return "none"
        extra = {}
        for key, v in self.QD.items():
            extra[v.name] = self.tscale.coef(QDv[key])
        for key, v in self.QL.items():
            extra[v.name] = self.tscale.coef(QLv[key])
        for key, v in self.RT.items():
            extra[v.name] = self.tscale.coef(RTv.get(key, 0.0))
        extra[self.MK.name] = max(self.tscale.coef(mk), self._mk_lb)
        return super().add_start(arrays, extra)


class XEngineMakespan(Formulation):
    """The staged CPU+GPU model minimising the makespan (module docstring).

    It declares the capability ``"makespan"`` (not ``"serial"``): the
    portfolio runs it for problems whose objective is the makespan.  Its
    ``objective`` and ``lower_bound`` are makespans (a makespan never exceeds
    the serial time, so its bounds are valid, weak, serial bounds too).

    Parameters
    ----------
    max_variables : int
        The largest model built (estimated variables of the serial model);
        above it a coarse grid cut for the incumbent is tried.
    """

    name = "hetero_xengine_makespan"
    version = "1"
    capabilities = frozenset({"dag", "chain", "multi_device", "makespan", "exact", "scoped_bound",
                              "honours_limits"})
    bound_scope = "staged"
    rank = 12.0

    def __init__(self, max_variables: int = MAX_VARIABLES, params: dict | None = None):
        self.max_variables = int(max_variables)
        self.params = dict(DEFAULT_PARAMS if params is None else params)

    def predict_seconds(self, problem: Problem) -> float:
        """Seconds to build the per-node model (about 10k items per second)."""
        return 2.0 * model_size(problem)["variables"] / 10_000.0

    def solve(self, problem: Problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent=None,
              on_bound=None) -> FormulationResult:
        lim = solve_limits(limits)
        stats: dict = {"formulation": self.name}
        if incumbent is not None and not simulate(problem, incumbent).valid:
            incumbent = None
        if incumbent is None:
            incumbent = self._heuristic_start(problem)
            stats["start_from"] = "hetero_heft (makespan)" if incumbent is not None else "none"
        io = InOrder(problem, incumbent, on_incumbent,
                     follow=incumbent is not None and stage_arrays(problem, incumbent) is None)
        if io.order is not None:
            stats["frontier"] = "incumbent order"
        res = self._solve(io.problem, io.plan, lim, seed, 1, io.on_incumbent, on_bound, stats)  # one SCIP thread
        res.plan = io.back(res.plan)
        return res

    @staticmethod
    def _heuristic_start(problem):
        from .heft import HeftScheduler

        try:
            plan = HeftScheduler("makespan").run(problem)
        except Exception:  # a failing heuristic only costs the warm start
            return None
        return plan if plan is not None and simulate(problem, plan).valid else None

    def _solve(self, problem, incumbent, lim, seed, threads, on_incumbent, on_bound, stats) -> FormulationResult:
        best = {"plan": None, "mk": math.inf}
        if incumbent is not None:
            best["plan"], best["mk"] = incumbent, simulate(problem, incumbent).makespan
        trivial = MAKESPAN.trivial_bound(problem)
        if on_bound is not None:
            on_bound(trivial)
        ends = None
        if model_size(problem)["variables"] > self.max_variables:
            ends = coarse_ends(problem, incumbent, self.max_variables) if incumbent is not None else None
            if ends is None:
                stats["skipped"] = stats["reason"] = (
                    f"model too large: about {model_size(problem)['variables']} variables (limit "
                    f"{self.max_variables}) and no coarse grid for the incumbent")
                return FormulationResult("no_solution", best["plan"], best["mk"], trivial, stats)
        stats["grid"] = "per node" if ends is None else f"coarse ({len(ends)} stages)"
        full = ends is None
        big_m = best["mk"] if math.isfinite(best["mk"]) else self._serial_upper(problem)
        t0 = time.perf_counter()
        try:
            mm = MakespanModel(problem, ends=ends, big_m=big_m, relax_memory=full, limits=lim, seed=seed,
                               threads=threads, name="xengine_makespan")
        except BuildTimeout as e:
            stats["skipped"] = str(e)
            return FormulationResult("no_solution", best["plan"], best["mk"], trivial, stats)
        with mm:
            stats.update(build_s=round(time.perf_counter() - t0, 3), n_vars=mm.model.getNVars(),
                         n_cons=mm.model.getNConss())
            if incumbent is not None:
                arrs = stage_arrays(problem, incumbent, ends)
                stats["warm_start"] = "not staged" if arrs is None else mm.add_start(arrs)
            apply_params(mm.model, self.params)
            in_class = [best["mk"] if stats.get("warm_start") == "full" else math.inf]

            def on_solution(model, sol):
                plan = mm.decode(sol, {"solver": self.name})
                r = simulate(problem, plan)
                if not r.valid:
                    stats["decode_error"] = r.error
                    return
                in_class[0] = min(in_class[0], r.makespan)
                if r.makespan < best["mk"] - 1e-12 * max(1.0, best["mk"]):
                    best["plan"], best["mk"] = plan, r.makespan
                    if on_incumbent is not None:
                        on_incumbent(plan, self.name)

            def on_dual(db):
                if full and on_bound is not None:
                    lb, note = check_bound(mm.objscale.bound(db), in_class[0], mm.objscale.tolerance(in_class[0]))
                    if note:
                        stats["bound_note"] = note
                    elif math.isfinite(lb):
                        on_bound(lb)

            res = run(mm.model, limits=lim, on_solution=on_solution, on_dual=on_dual)
            stats.update(res.stats())
            if res.has_solution and not math.isfinite(in_class[0]):
                on_solution(mm.model, mm.model.getBestSol())
            res.reraise()
            staged = mm.objscale.bound(res.dual) if res.dual is not None else -math.inf
            if res.scip_status == "infeasible" and math.isfinite(best["mk"]):
                staged = best["mk"]  # nothing in the class beats the incumbent (MK <= its makespan)
            staged, note = check_bound(staged, in_class[0], mm.objscale.tolerance(in_class[0]))
            if note:
                stats["bound_note"] = note
        stats["staged_lower_bound"] = staged
        lb = max(trivial, staged) if full and math.isfinite(staged) else trivial
        if best["plan"] is None:
            return FormulationResult("no_solution", None, math.inf, lb, stats)
        lb = min(lb, best["mk"])
        closed = best["mk"] - lb <= 1e-9 * max(1.0, best["mk"]) + mm.objscale.tolerance(best["mk"])
        if full and res.scip_status in ("optimal", "infeasible") and closed:
            return FormulationResult("optimal", best["plan"], best["mk"], best["mk"], stats)
        return FormulationResult("feasible", best["plan"], best["mk"], lb, stats)

    @staticmethod
    def _serial_upper(problem) -> float:
        """Without an incumbent: a makespan no staged plan exceeds (every
        operation the model may schedule, one after another)."""
        n = problem.graph.n
        cost = np.where(problem.can_compute[:, None], problem.cost_matrix, 0.0)
        bw, lat = problem.link_arrays
        copies = sum(float((lat[a, b] + problem.graph.bytes / bw[a, b]).sum())
                     for a in range(problem.n_devices) for b in range(problem.n_devices) if a != b and bw[a, b] > 0)
        return float(n * (cost.sum() + copies)) + 1.0
