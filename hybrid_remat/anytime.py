"""Anytime solving: heuristics first, then exact formulations warm-started
with the best heuristic plan, within one time limit.

:func:`anytime_solve` is the library's main entry point.  Every plan it
reports has passed :func:`~hybrid_remat.simulate.simulate`; the objective is
the simulator's serial ``total_time`` (sum of compute and copy times).

Timing.  Numba kernels are compiled (or loaded from cache) *before* the
clock starts: :func:`warmup` calls ``hybrid_remat.heuristics.warmup()`` when
it exists and runs the simulator on a tiny problem.  The time limit covers
heuristics, model construction and solving; the solve stops within about a
second of the limit.  Formulations share the time left after the heuristics
equally, in order; time left by those that finish early goes back once to
those that ran out of theirs (a second round, when at least
``SECOND_ROUND_MIN_S`` seconds remain).  Ctrl-C returns the best plan found
so far.

Bounds.  The trivial bound is every node computed once on its cheapest
device.  Bound sources that declare ``bound_scope = "all plans"`` (the cut
bound, :mod:`hybrid_remat.exact.bounds`) bound every plan: a plan that
reaches such a bound is optimal, and the remaining sources are skipped ("gap
closed").  Formulations and bounding heuristics (the LP relaxation) report
bounds of their own model; the built-in Checkmate model's bound covers the
*staged* plans (first computations in the reference order), see
:mod:`hybrid_remat.exact.checkmate`.  ``Result.bound_scope`` says which bound
is reported.  A model bound above a plan found outside the model is
discarded (it cannot be a bound for the whole problem).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> r = anytime_solve(Problem.single(chain(6, bytes=1), 3), 10, node_limit=1000)
>>> r.status, r.objective >= r.lower_bound
('optimal', True)
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import plugins
from .errors import HybridRematError
from .interfaces import accepts
from .simulate import simulate

__all__ = ["anytime_solve", "Result", "SourceReport", "Improvement", "warmup", "trivial_lower_bound",
           "makespan_lower_bound", "OBJECTIVES"]


@dataclass
class SourceReport:
    """One heuristic's or formulation's outcome.

    ``kind``: ``heuristic``, ``bound`` (a bound source: ``objective`` and
    ``tdi_pct`` are its bound) or ``formulation``.  ``status``: ``valid``,
    ``over_budget`` (simulated but over the budget or invalid), ``no_plan``,
    ``error``, ``skipped``, ``bound``, or a formulation's status (``optimal``,
    ``feasible``, ``infeasible``, ``no_solution``).
    """

    source: str
    kind: str
    status: str
    objective: float = float("inf")
    tdi_pct: float = float("nan")
    seconds: float = 0.0
    note: str = ""


@dataclass
class Improvement:
    """Passed to ``on_improve`` for each new best plan or better bound."""

    seconds: float
    objective: float
    bound: float
    gap: float
    source: str
    plan: object = None
    simulation: object = None


@dataclass
class Result:
    """What :func:`anytime_solve` returns.

    Attributes
    ----------
    plan : Plan or None
    objective : float
        Simulated total time of ``plan`` (``inf`` without a plan).
    lower_bound : float
    gap : float
        ``(objective - lower_bound) / objective`` (``inf`` without a plan).
    status : str
        ``optimal`` (a formulation proved ``plan`` optimal over its plan
        class: for ``checkmate``, the staged plans with the modelled order
        of first computations; see ``bound_scope``), ``feasible``,
        ``infeasible`` (the exact model proved its plan class empty and
        nothing was found) or ``no_solution``.
    history : list of (seconds, objective, bound, source)
    report : list of SourceReport
    simulation : SimulationResult or None
    solver : str
        The source of ``plan``.
    bound_scope : str
        ``"trivial"`` or the model whose bound is reported.
    stats : dict
        Per-formulation statistics and run facts.
    """

    plan: object
    objective: float
    lower_bound: float
    gap: float
    status: str
    history: list = field(default_factory=list)
    report: list = field(default_factory=list)
    simulation: object = None
    solver: str = ""
    bound_scope: str = "trivial"
    stats: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """The plan file's ``summary``: total_time, tdi_pct, peak_bytes,
        lower_bound, gap, solver (plus status and makespan)."""
        sim = self.simulation
        return {
            "objective": self.stats.get("objective", "serial"),
            "total_time": sim.total_time if sim is not None else self.objective,
            "tdi_pct": sim.tdi_pct if sim is not None else None,
            "peak_bytes": dict(sim.peak_bytes) if sim is not None else {},
            "makespan": sim.makespan if sim is not None else None,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "solver": self.solver,
            "status": self.status,
            "bound_scope": self.bound_scope,
        }

    def table(self) -> str:
        """The per-source report as a text table."""
        lines = [f"{'source':<22} {'kind':<11} {'status':<12} {'objective':>14} {'TDI%':>8} {'seconds':>8}"]
        for r in self.report:
            obj = f"{r.objective:.6g}" if math.isfinite(r.objective) else "-"
            tdi = f"{r.tdi_pct:.3f}" if r.tdi_pct == r.tdi_pct else "-"
            lines.append(f"{r.source:<22} {r.kind:<11} {r.status:<12} {obj:>14} {tdi:>8} {r.seconds:>8.2f}")
        return "\n".join(lines)


def warmup() -> None:
    """Compile or load every Numba kernel the solve path uses (not timed)."""
    from .generators import chain
    from .plan import keep_all_plan
    from .problem import Problem

    try:
        from . import heuristics as _h

        if callable(getattr(_h, "warmup", None)):
            _h.warmup()
    except Exception:  # a broken warm-up must not stop solving
        pass
    g = chain(3, bytes=1)
    simulate(Problem.single(g, 3), keep_all_plan(g, "cost"))


def trivial_lower_bound(problem) -> float:
    """Every node computed once, each on its cheapest compute device."""
    cm = np.asarray(problem.cost_matrix, dtype=np.float64)
    can = np.asarray(problem.can_compute, dtype=bool)
    return float(cm[can].min(axis=0).sum())


def makespan_lower_bound(problem) -> float:
    """A bound on the makespan of any plan: the longest path with each node at
    its cheapest compute device (no copy costs), and the total of the cheapest
    costs spread over the compute devices."""
    cm = np.asarray(problem.cost_matrix, dtype=np.float64)
    can = np.asarray(problem.can_compute, dtype=bool)
    c = cm[can].min(axis=0)
    g = problem.graph
    finish = np.zeros(g.n, dtype=np.float64)
    for v in range(g.n):  # nodes are numbered in a topological order
        p = g.preds(v)
        finish[v] = c[v] + (finish[p].max() if p.size else 0.0)
    return float(max(finish.max(initial=0.0), c.sum() / max(1, int(can.sum()))))


OBJECTIVES = ("serial", "makespan")

#: a formulation that ran out of time gets a second run with the time others left, if at least this much
SECOND_ROUND_MIN_S = 5.0
#: seconds of the time left kept back from the second round (formulations overrun their limit slightly)
SECOND_ROUND_MARGIN_S = 2.0


def _better(a: float, b: float) -> bool:
    """``a`` is smaller than ``b`` by more than round-off (``b`` may be inf)."""
    if not math.isfinite(b):
        return math.isfinite(a) or a < b
    return a < b - 1e-12 * max(1.0, abs(b))


def _resolve(kind: str, wanted, registry: dict) -> list:
    if wanted is None:  # every registered one that does not opt out of the default set
        return [o for o in registry.values() if getattr(o, "run_by_default", True)]
    out = []
    for w in wanted:
        if isinstance(w, str):
            if w not in registry:
                raise HybridRematError(
                    f"unknown {kind} {w!r}; registered: {', '.join(sorted(registry)) or 'none'}"
                )
            out.append(registry[w])
        else:
            out.append(w)
    return out


def anytime_solve(problem, time_limit: float, *, heuristics=None, formulations=None,
                  on_improve: Callable | None = None, seed: int = 0, node_limit: int | None = None,
                  stop: threading.Event | None = None, warm: bool = True, local_search: bool = True,
                  objective: str = "serial") -> Result:
    """Best verified plan for ``problem`` within ``time_limit`` seconds.

    Parameters
    ----------
    problem : Problem
    time_limit : float
        Seconds for heuristics plus exact solving (warm-up excluded).
    heuristics, formulations : list of names or objects, optional
        Default: every registered one that accepts the problem
        (:func:`hybrid_remat.interfaces.accepts`) except those that declare
        ``run_by_default = False`` (name them to run them); heuristics and
        formulations run by ``rank``.  Pass ``[]`` to skip a stage.
    on_improve : callable, optional
        Called with an :class:`Improvement` on each better plan or bound.
    seed : int
        Passed to heuristics and to SCIP; with ``node_limit`` the result is
        deterministic.
    node_limit : int, optional
        Branch-and-bound node limit for formulations (tests).
    stop : threading.Event, optional
        Set it (from another thread) to stop early.
    warm : bool
        Run :func:`warmup` first (outside the limit).
    objective : {"serial", "makespan"}
        What "best" means: the simulator's serial ``total_time`` (default)
        or its ``makespan`` (devices and copy directions overlap).  Exact
        formulations optimise serial time; with ``"makespan"`` their plans
        are compared by makespan, their bounds are not used (a serial bound
        does not bound the makespan) and the bound is
        :func:`makespan_lower_bound`.
    local_search : bool
        Polish the best plan by dropping recomputations
        (:func:`hybrid_remat.exact.local_search.drop_recomputations`) after
        the heuristics (10 % of the time left) and at the end.

    Raises
    ------
    HybridRematError
        An unknown heuristic or formulation name.
    """
    if not (isinstance(time_limit, (int, float)) and time_limit >= 0 and math.isfinite(time_limit)):
        raise HybridRematError(f"time_limit must be a finite number of seconds >= 0, not {time_limit!r}")
    if objective not in OBJECTIVES:
        raise HybridRematError(f"unknown objective {objective!r}: use 'serial' or 'makespan'")
    serial = objective == "serial"

    def value(sim) -> float:
        return sim.total_time if serial else sim.makespan

    heur_objs = _resolve("heuristic", heuristics, plugins.heuristics())
    form_objs = _resolve("formulation", formulations, plugins.formulations())
    if warm:
        warmup()
    stop = stop or threading.Event()
    t0 = time.perf_counter()
    deadline = t0 + max(0.0, float(time_limit))
    trivial = trivial_lower_bound(problem) if serial else makespan_lower_bound(problem)
    st = {
        "plan": None, "obj": float("inf"), "sim": None, "source": "",
        "lb": trivial, "scope": "trivial", "model_lbs": [], "global_lb": trivial, "global_scope": "trivial",
    }
    history: list = []
    report: list = []
    stats: dict = {"trivial_lower_bound": trivial, "formulations": {}, "objective": objective}

    def now() -> float:
        return time.perf_counter() - t0

    def gap() -> float:
        if not math.isfinite(st["obj"]):
            return float("inf")
        return max(0.0, (st["obj"] - st["lb"]) / st["obj"]) if st["obj"] > 0 else 0.0

    def notify(source: str) -> None:
        if on_improve is not None:
            on_improve(Improvement(now(), st["obj"], st["lb"], gap(), source, st["plan"], st["sim"]))

    def offer(plan, source: str):
        """Simulate a plan; keep it if valid and better. Returns (simulation, improved)."""
        sim = simulate(problem, plan)
        if sim.valid and _better(value(sim), st["obj"]):
            st.update(plan=plan, obj=value(sim), sim=sim, source=source)
            _refresh_bound()
            history.append((now(), st["obj"], st["lb"], source))
            notify(source)
            return sim, True
        return sim, False

    def _refresh_bound() -> None:
        # bounds over every plan always count; model bounds only while no plan beats them (else they do not
        # bound the whole problem)
        lb, scope = st["global_lb"], st["global_scope"]
        for value, src in st["model_lbs"]:
            if value > lb and value <= st["obj"] * (1 + 1e-9):
                lb, scope = value, src
        st["lb"], st["scope"] = min(lb, st["obj"]), scope

    def proven_globally() -> bool:
        """A plan reaches a bound that covers every plan: nothing can beat it."""
        return st["plan"] is not None and st["global_lb"] >= st["obj"] * (1 - 1e-9)

    def offer_bound(value: float, source: str, all_plans: bool = False) -> None:
        if not math.isfinite(value) or not serial:  # model bounds are serial-time bounds
            return
        if all_plans:
            if value > st["global_lb"]:
                st["global_lb"], st["global_scope"] = float(value), source
        else:
            st["model_lbs"].append((float(value), source))
        old = st["lb"]
        _refresh_bound()
        if _better(old, st["lb"]):
            history.append((now(), st["obj"], st["lb"], source))
            notify(source)

    def polish(name: str, share: float) -> None:
        """Drop recomputations from the best plan (single device), within a share of the time left."""
        if not local_search or st["plan"] is None or not problem.is_single_device or stop.is_set():
            return
        if proven_globally():
            return
        if st["sim"] is not None and st["sim"].n_recompute == 0:
            return
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        from .exact.local_search import drop_recomputations

        ts = time.perf_counter()
        before = st["obj"]
        plan = drop_recomputations(problem, st["plan"], deadline=ts + left * share)
        sim, improved = offer(plan, name)
        secs = time.perf_counter() - ts
        report.append(SourceReport(name, "improver", "improved" if improved else "no_change",
                                   st["obj"], st["sim"].tdi_pct if st["sim"] is not None else float("nan"), secs,
                                   f"from {before:.6g}"))

    interrupted = False
    formulation_statuses: list = []
    try:
        # ---------------------------------------------------------- heuristics
        heur = []
        for h in heur_objs:
            ok, why = accepts(h, problem)
            if ok:
                heur.append(h)
            else:
                report.append(SourceReport(h.name, "heuristic", "skipped", note=why))
        heur.sort(key=lambda h: (float(getattr(h, "rank", 10.0)), h.name))
        for h in heur:
            if stop.is_set() or time.perf_counter() >= deadline:
                report.append(SourceReport(h.name, "heuristic", "skipped", note="time limit"))
                continue
            if proven_globally():
                report.append(SourceReport(h.name, "heuristic", "skipped", note="gap closed"))
                continue
            ts = time.perf_counter()
            bound = None
            try:
                if callable(getattr(h, "run_detailed", None)):
                    out = h.run_detailed(problem, seed=seed, deadline=deadline)
                    plan, bound = out.get("plan"), out.get("lower_bound")
                else:
                    plan = h.run(problem, seed=seed)
            except KeyboardInterrupt:
                raise
            except Exception as e:
                report.append(SourceReport(h.name, "heuristic", "error", seconds=time.perf_counter() - ts, note=repr(e)))
                history.append((now(), float("inf"), st["lb"], h.name))
                continue
            secs = time.perf_counter() - ts
            if bound is not None:
                offer_bound(float(bound), h.name, getattr(h, "bound_scope", "") == "all plans")
            if plan is None and "bound_only" in getattr(h, "capabilities", ()):
                tdi = (float(bound) - problem.base_cost) / problem.base_cost * 100 \
                    if bound is not None and problem.base_cost > 0 else float("nan")
                report.append(SourceReport(h.name, "bound", "bound" if bound is not None else "skipped",
                                           float(bound) if bound is not None else float("inf"), tdi, secs))
                continue
            if plan is None:
                report.append(SourceReport(h.name, "heuristic", "no_plan", seconds=secs))
                history.append((now(), float("inf"), st["lb"], h.name))
                continue
            try:
                sim, improved = offer(plan, h.name)
            except HybridRematError as e:
                report.append(SourceReport(h.name, "heuristic", "error", seconds=secs, note=str(e)))
                continue
            if sim.valid:
                report.append(SourceReport(h.name, "heuristic", "valid", value(sim), sim.tdi_pct, secs))
                if not improved:
                    history.append((now(), value(sim), st["lb"], h.name))
            else:
                report.append(SourceReport(h.name, "heuristic", "over_budget", seconds=secs, note=sim.error or ""))
                history.append((now(), float("inf"), st["lb"], h.name))
        # ------------------------------------------------- local search (incumbent)
        polish("local_search", 0.1)
        # -------------------------------------------------------- formulations
        forms = []
        for f in sorted(form_objs, key=lambda f: float(getattr(f, "rank", 10.0))):  # stable: ties keep order
            ok, why = accepts(f, problem)
            if ok:
                forms.append(f)
            else:
                report.append(SourceReport(f.name, "formulation", "skipped", note=why))
        def run_formulation(f, share: float, note_prefix: str = "") -> bool:
            """Run one formulation with ``share`` seconds; True when it used (nearly) all of them
            without proving anything (it could use more time)."""
            ts = time.perf_counter()

            def on_incumbent(plan, source=None, _f=f):
                offer(plan, source or _f.name)

            def on_bound(value, _f=f):
                offer_bound(value, _f.name)

            try:
                fr = f.solve(problem, incumbent=st["plan"], time_limit=share, node_limit=node_limit, seed=seed,
                             threads=1, on_incumbent=on_incumbent, on_bound=on_bound, stop=stop)
            except KeyboardInterrupt:
                raise
            except Exception as e:
                report.append(SourceReport(f.name, "formulation", "error", seconds=time.perf_counter() - ts,
                                           note=note_prefix + repr(e)))
                return False
            secs = time.perf_counter() - ts
            key = f.name if not note_prefix else f"{f.name} ({note_prefix.strip(': ')})"
            stats["formulations"][key] = fr.stats
            if fr.plan is not None:
                offer(fr.plan, f.name)
            if fr.lower_bound is not None and math.isfinite(fr.lower_bound):
                offer_bound(fr.lower_bound, f.name)
            formulation_statuses.append((f.name, fr.status, fr.objective))
            note = note_prefix + str(fr.stats.get("skipped") or fr.stats.get("start_note") or "")
            tdi = (fr.objective - problem.base_cost) / problem.base_cost * 100 if math.isfinite(fr.objective) and \
                problem.base_cost > 0 else float("nan")
            report.append(SourceReport(f.name, "formulation", fr.status, fr.objective, tdi, secs, note))
            return secs >= 0.9 * share and fr.status not in ("optimal", "infeasible", "error")

        wanting_more = []
        for idx, f in enumerate(forms):
            remaining = deadline - time.perf_counter()
            if stop.is_set() or remaining <= 0:
                report.append(SourceReport(f.name, "formulation", "skipped", note="time limit"))
                continue
            if proven_globally():
                report.append(SourceReport(f.name, "formulation", "skipped", note="gap closed"))
                continue
            if run_formulation(f, remaining / (len(forms) - idx)):
                wanting_more.append(f)
        # time left by formulations that finished early goes back, once, to those that ran out of it
        for idx, f in enumerate(wanting_more):
            remaining = deadline - time.perf_counter()
            if stop.is_set() or proven_globally() or remaining < SECOND_ROUND_MIN_S:
                break
            # formulations overrun their limit by a second or two (decoding, freeing): keep that margin
            run_formulation(f, (remaining - SECOND_ROUND_MARGIN_S) / (len(wanting_more) - idx), "second round: ")
        polish("local_search_final", 1.0)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
    stats["interrupted"] = interrupted
    stats["seconds"] = now()
    # ---------------------------------------------------------------- status
    if st["plan"] is None:
        proved_empty = any(s == "infeasible" for _, s, _ in formulation_statuses)
        status = "infeasible" if proved_empty and not interrupted else "no_solution"
    else:
        proven = proven_globally() or any(
            s == "optimal" and o <= st["obj"] * (1 + 1e-9) and st["lb"] >= st["obj"] * (1 - 1e-9)
            for _, s, o in formulation_statuses
        ) if serial else st["lb"] >= st["obj"] * (1 - 1e-9)
        status = "optimal" if proven and not interrupted else "feasible"
        if status == "optimal":
            st["lb"] = st["obj"]
    return Result(
        plan=st["plan"], objective=st["obj"], lower_bound=st["lb"], gap=gap(), status=status,
        history=history, report=report, simulation=st["sim"], solver=st["source"], bound_scope=st["scope"],
        stats=stats,
    )
