"""Anytime solving: the best simulator-verified plan within a time limit,
with a bound and a gap.

:func:`anytime_solve` is the library's main entry point, a small function
over the portfolio (:mod:`hybrid_remat.portfolio`): a ledger (incumbent,
bounds, status), a scheduler (admission, order by measured value per
second, time shares) and a runner (in this process or in worker processes).
Every reported plan passed :func:`~hybrid_remat.simulate.simulate` and is
valued by ``problem.objective`` (serial time unless the problem or
``objective=`` says makespan).

Order.  Heuristics and bounds first (the first plan fast), improvers on the
first incumbent, then formulations warm-started with the incumbent and
improvers again sharing the time left; tasks that used their whole share
get the time others left, in further rounds.

Several devices.  After the heuristics and bounds, each compute device that
can hold the graph is solved alone by the same portfolio (the one-device
solve, with the single-device components), its plans passed on as they are
and lifted with host offload; the single-device bounds run on the merged
devices, whose bounds hold for every multi-device plan; the single-device
improvers work on the multi-device incumbent through the same reductions
(:mod:`hybrid_remat.portfolio.reduce`).  With work or node limits the result
is never worse than the one-device solve of any device.

Timing.  Warm-up (Numba kernels of every component, the simulator at a
small size, each component's ``warmup()``) runs *before* the clock starts
and is reported apart (``stats["warmup_s"]``).  The solve returns within
about a second of the limit at any size: components that declare
``"honours_limits"`` return within theirs; the others run in forked
processes that are killed at their deadline.  A component predicted to
need more than the time left is skipped, with the reason in the report.

First plan, then structure.  On one device, where a graph's structure
(repeated blocks, the segment chain: :func:`~hybrid_remat.segments.chain.derive_structure`,
0.1-0.5 s at 100k nodes) is not yet known, the quick start heuristic runs
alone first (:attr:`~hybrid_remat.portfolio.scheduler.Scheduler.quick`,
its own share), then detection with at most :data:`STRUCTURE_SHARE` of the
time left, then the rest of the portfolio, all inside the limit.  A
detection its share stops leaves the components that need the structure
out of this solve; the report's ``structure`` row says so
(``stats["structure"]``: its status, seconds and note).

Statuses.  ``optimal`` only when a plan reaches a bound over every plan
(``Result.lower_bound`` is always such a bound; ``Result.bound_source`` says
where it came from), to within a relative 2e-6 (bounds from exact models are
lowered by their solver's tolerance to stay valid,
:data:`hybrid_remat.portfolio.ledger.OPTIMALITY_RTOL`); the solve then stops
at once.  A restricted class's
bound (the staged Checkmate model's) is reported as
``Result.class_bound`` with ``Result.class_bound_scope``, never as
optimality: a class optimum is ``feasible``.  ``infeasible`` when a bound
over every plan is ``+inf`` (the feasibility check), ``no_solution``
otherwise.

Signals.  Ctrl-C (and what ``signals=`` names) stops the warm-up at once and every component within
about a second; the best result so far is attached to the
:class:`SolveInterrupted` raised (a ``KeyboardInterrupt``).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> r = anytime_solve(Problem.single(chain(6, bytes=1), 3), 10, node_limit=1000, workers=1)
>>> r.status, r.objective >= r.lower_bound
('optimal', True)
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from . import plugins
from .errors import HybridRematError
from .interfaces import ALL_PLANS
from .limits import now
from .objective import MAKESPAN, SERIAL
from .portfolio import Improvement, Ledger, SourceReport, default_workers, reductions_for, run_portfolio
from .portfolio.calls import adapt
from .portfolio.runner import catch_signals
from .portfolio.scheduler import Scheduler
from .segments.chain import STRUCTURE_KEYS, derive_structure, forget_stopped
from .simulate import simulate

__all__ = ["anytime_solve", "Result", "SourceReport", "Improvement", "SolveInterrupted", "warmup",
           "trivial_lower_bound", "makespan_lower_bound", "OBJECTIVES"]

OBJECTIVES = ("serial", "makespan")

#: a task that used its whole share gets another round with the time others left, if at least this much remains
SECOND_ROUND_MIN_S = 5.0
#: seconds of the time left kept back from a later round (formulations overrun their limit slightly)
SECOND_ROUND_MARGIN_S = 2.0
#: the most of the time left (after the first plan) that structure detection may use
STRUCTURE_SHARE = 0.5


@dataclass
class Result:
    """What :func:`anytime_solve` returns.

    Attributes
    ----------
    plan : Plan or None
    objective : float
        ``problem.objective`` of the simulated ``plan`` (``inf`` without one).
    lower_bound : float
        A bound over every plan (``inf``: no plan exists).
    gap : float
        ``(objective - lower_bound) / objective`` (``inf`` without a plan).
    status : str
        ``optimal`` (``plan`` reaches ``lower_bound``, to within a relative
        2e-6), ``feasible``,
        ``infeasible`` (a bound over every plan is ``+inf``) or
        ``no_solution``.
    history : list of (seconds, objective, bound, source)
    report : list of SourceReport
    simulation : SimulationResult or None
    solver : str
        The source of ``plan``.
    bound_source : str
        Where ``lower_bound`` came from (``"trivial"``: every node once on
        its cheapest device).
    class_bound, class_bound_scope : float, str
        The best bound of a restricted plan class and the class
        (``-inf``, ``""`` when none): e.g. Checkmate's staged plans.
    interrupted : bool
        Stopped by a signal or the caller's ``stop`` before its end.
    stats : dict
        Per-formulation statistics and run facts (``warmup_s``,
        ``seconds``, ``workers``, ``defects``, ``class_bounds``).
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
    bound_source: str = "trivial"
    class_bound: float = -math.inf
    class_bound_scope: str = ""
    interrupted: bool = False
    stats: dict = field(default_factory=dict)

    @property
    def bound_scope(self) -> str:
        """Older name of :attr:`bound_source` (the bound always covers every plan now)."""
        return self.bound_source

    def summary(self) -> dict:
        """The plan file's ``summary``: objective, total_time, tdi_pct,
        peak_bytes, makespan, lower_bound (over every plan) and its source,
        gap, solver, status, class bound and scope, interrupted."""
        sim = self.simulation
        return {
            "objective": self.stats.get("objective", "serial"),
            "total_time": sim.total_time if sim is not None else self.objective,
            "tdi_pct": sim.tdi_pct if sim is not None else None,
            "peak_bytes": dict(sim.peak_bytes) if sim is not None else {},
            "makespan": sim.makespan if sim is not None else None,
            "lower_bound": self.lower_bound,
            "bound_source": self.bound_source,
            "bound_scope": self.bound_source,
            "gap": self.gap,
            "solver": self.solver,
            "status": self.status,
            "class_bound": self.class_bound if math.isfinite(self.class_bound) else None,
            "class_bound_scope": self.class_bound_scope or None,
            "interrupted": self.interrupted,
        }

    def table(self) -> str:
        """The per-source report as a text table."""
        lines = [f"{'source':<22} {'kind':<11} {'status':<12} {'objective':>14} {'TDI%':>8} {'seconds':>8}"]
        for r in self.report:
            obj = f"{r.objective:.6g}" if math.isfinite(r.objective) else "-"
            tdi = f"{r.tdi_pct:.3f}" if r.tdi_pct == r.tdi_pct else "-"
            lines.append(f"{r.source:<22} {r.kind:<11} {r.status:<12} {obj:>14} {tdi:>8} {r.seconds:>8.2f}")
        return "\n".join(lines)


class SolveInterrupted(KeyboardInterrupt):
    """A solve stopped by a signal; ``result`` is the best found so far
    (``result.interrupted`` is true), ``signal`` the signal's name."""

    def __init__(self, result: Result, signal: str = "SIGINT"):
        super().__init__(f"solve interrupted by {signal}")
        self.result = result
        self.signal = signal


class _WarmupStopped(BaseException):
    """A signal during the warm-up (past every ``except Exception``)."""


def trivial_lower_bound(problem) -> float:
    """Every node computed once, each on its cheapest compute device."""
    return SERIAL.trivial_bound(problem)


def makespan_lower_bound(problem) -> float:
    """The makespan bound of :class:`~hybrid_remat.objective.Makespan`."""
    return MAKESPAN.trivial_bound(problem)


def _tiny_problems():
    from .generators import chain
    from .problem import Device, Link, Problem

    g = chain(3, bytes=1)
    g2 = chain(4, bytes=1).with_costs({"gpu": [1.0] * 4, "cpu": [2.0] * 4})
    multi = Problem(g2, [Device("gpu", "gpu", 3), Device("cpu", "cpu", 64)],
                    [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)])
    return Problem.single(g, 3), multi


#: work budget of each component's warm-up run on a tiny problem (a search stops early; kernels compile anyway)
WARMUP_WORK = 5_000


def warmup(components=()) -> float:
    """Compile or load every Numba kernel the solve path uses; returns the
    seconds it took (never inside a time limit).

    Calls ``hybrid_remat.heuristics.warmup()``, the simulator on a tiny
    problem, every component's ``warmup()`` where it has one, and runs the
    built-in heuristics and bounds without one on tiny problems.
    """
    from .limits import Limits
    from .plan import keep_all_plan

    t0 = now()
    try:
        from . import heuristics as _h

        if callable(getattr(_h, "warmup", None)):
            _h.warmup()
    except Exception:  # a broken warm-up must not stop solving
        pass
    single, multi = _tiny_problems()
    simulate(single, keep_all_plan(single.graph, "cost"))
    simulate(multi, keep_all_plan(multi.graph, "gpu"))
    for obj in components:
        try:
            if callable(getattr(obj, "warmup", None)):
                obj.warmup()
                continue
            if not type(obj).__module__.startswith("hybrid_remat."):
                continue
            caps = set(getattr(obj, "capabilities", ()))
            for p in ((single,) if "single_device" in caps else ()) + ((multi,) if "multi_device" in caps else ()):
                if callable(getattr(obj, "bound", None)):
                    obj.bound(p, limits=Limits.seconds(2.0, work=WARMUP_WORK))
                elif callable(getattr(obj, "run", None)):
                    obj.run(p, seed=0, limits=Limits.seconds(2.0, work=WARMUP_WORK))
        except Exception:
            pass
    return now() - t0


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
        else:  # an object handed over here is registered for this solve: adapted once (calls.adapt)
            out.append(adapt(kind, w))
    return out


def _bounds_from_heuristics(heur: list) -> tuple[list, list]:
    """Older ``bound_only`` heuristics (adapted to bounds when registered) go with the bounds."""
    keep, as_bounds = [], []
    for h in heur:
        (keep if callable(getattr(h, "run", None)) else as_bounds).append(h)
    return keep, as_bounds


def anytime_solve(problem, time_limit: float, *, workers: int | None = None, heuristics=None, bounds=None,
                  improvers=None, formulations=None, seed: int = 0, on_improve: Callable | None = None,
                  stop: threading.Event | None = None, warm: bool = True, objective=None,
                  node_limit: int | None = None, work_limit: int | None = None, signals=("SIGINT",),
                  local_search: bool | None = None) -> Result:
    """Best verified plan for ``problem`` within ``time_limit`` seconds.

    Parameters
    ----------
    problem : Problem
    time_limit : float
        Seconds for the portfolio (warm-up excluded).
    workers : int, optional
        Processes running the portfolio; default: the cores this process
        may use.  ``1`` runs in this process and, with ``node_limit`` or
        ``work_limit``, repeats exactly for a seed.
    heuristics, bounds, improvers, formulations : list of names or objects, optional
        Default: every registered one (``plugins.heuristics()``, ...) that
        admits the problem, except those with ``run_by_default = False``
        (name them to run them).  ``[]`` skips a kind.
    seed : int
    on_improve : callable, optional
        Called with an :class:`Improvement` on each better plan or bound.
    stop : threading.Event, optional
        Set it (from another thread) to stop early.
    warm : bool
        Run :func:`warmup` first (outside the limit).  ``stats["warmup_s"]``
        counts it with the loading of the components before it (a first
        call in a process imports the plugins: 0.6 s with OR-Tools), so that
        the call's wall is the limit plus ``warmup_s``.
    objective : {"serial", "makespan"}, optional
        Solve ``problem.with_objective(objective)``; default: the problem's.
    node_limit, work_limit : int, optional
        Node limit of exact models and work budget of every component (tests).
    signals : tuple of str
        Signals that stop the solve (handled in the main thread only, where
        no other handler is installed); the CLI adds ``"SIGTERM"``.
    local_search : bool, optional
        Older switch: ``False`` runs no improvers (``improvers=[]``).

    Raises
    ------
    HybridRematError
        An unknown component name, objective or a bad time limit.
    SolveInterrupted
        A signal stopped the solve; ``.result`` holds the best plan.
    """
    if not (isinstance(time_limit, (int, float)) and time_limit >= 0 and math.isfinite(time_limit)):
        raise HybridRematError(f"time_limit must be a finite number of seconds >= 0, not {time_limit!r}")
    if objective is not None:
        problem = problem.with_objective(objective)
    if local_search is False and improvers is None:
        improvers = []
    t_warm = now()  # the warm-up: loading the plugins' components (a first call imports them) and the kernels
    heur = _resolve("heuristic", heuristics, plugins.heuristics())
    bnds = _resolve("bound", bounds, plugins.bounds())
    imps = _resolve("improver", improvers, plugins.improvers())
    forms = _resolve("formulation", formulations, plugins.formulations())
    heur, legacy_bounds = _bounds_from_heuristics(heur)
    bnds += legacy_bounds
    red = reductions_for(problem, heuristics=heur, bounds=bnds, improvers=imps, formulations=forms)
    workers = default_workers() if workers is None else max(1, int(workers))
    early: dict = {}  # a signal during the warm-up ends it at once (a first-run Numba compile takes a minute)
    warm_s = 0.0
    if warm:
        def stop_warmup(name):
            early.setdefault("signal", name)
            raise _WarmupStopped

        try:
            with catch_signals(signals, stop_warmup):
                warmup(heur + bnds + imps + forms)
        except _WarmupStopped:
            pass
        warm_s = now() - t_warm
    # formulations the caller named run whatever the scheduler predicts (issue 23.7)
    named = {w for w in (formulations or ()) if isinstance(w, str)}
    t0 = now()  # the admission (each component's applicable() and prediction) is inside the limit too
    deadline = t0 + (0.0 if early else float(time_limit))
    ledger = Ledger(problem, on_improve=on_improve, t0=t0)
    kw = dict(seed=seed, node_limit=node_limit, work_limit=work_limit, stop=stop, signals=signals,
              second_round_min_s=SECOND_ROUND_MIN_S, second_round_margin_s=SECOND_ROUND_MARGIN_S, ledger=ledger)
    heur, run, found = red.heuristics, None, None
    try:
        if not early and _structure_pending(problem):
            heur, run, found = _first_plan_then_structure(problem, heur, deadline, kw)
        first = run
        if run is None or not (run.interrupted or ledger.finished() or now() >= deadline):
            sched = Scheduler(problem, heuristics=heur, bounds=red.bounds, improvers=red.improvers,
                              formulations=red.formulations, reductions=red.reductions, named=named)
            run = run_portfolio(
                problem, deadline=deadline, heuristics=heur, bounds=red.bounds, improvers=red.improvers,
                formulations=red.formulations, reductions=red.reductions, workers=workers, scheduler=sched, **kw)
            if first is not None:
                run.abandoned[:0] = first.abandoned
    finally:
        forget_stopped(problem.graph)   # a stopped detection's stand-ins serve this solve only
    run.signal = run.signal or early.get("signal")
    result = _result(ledger, run, warm_s)
    if found is not None:
        result.stats["structure"] = found
    if run.signal is not None:
        raise SolveInterrupted(result, run.signal)
    return result


def _structure_pending(problem) -> bool:
    """One device, a training graph (a backward phase after the forward one), structure not yet derived."""
    g = problem.graph
    if not problem.is_single_device or all(k in g.__dict__.get("_derived", {}) for k in STRUCTURE_KEYS):
        return False
    fwd, bwd = g.phase == 0, g.phase != 0
    return bool(fwd.any() and bwd.any() and fwd.nonzero()[0][-1] < bwd.nonzero()[0][0])


def _first_plan_then_structure(problem, heuristics: list, deadline: float, kw: dict):
    """The quick start alone (in this process, within its share), then
    :func:`~hybrid_remat.segments.chain.derive_structure` with at most
    :data:`STRUCTURE_SHARE` of the time left (module docstring).  Returns
    the heuristics left for the rest of the solve, the quick start's run
    (``None`` without one) and what detection did (``None`` when the run
    ended the solve: a signal, the caller's stop, the gap closed)."""
    from .limits import Limits
    from .portfolio.ledger import SourceReport

    ledger, run = kw["ledger"], None
    quick = Scheduler(problem, heuristics=heuristics).quick   # the heuristics' admission needs no structure
    if quick is not None:
        sched = Scheduler(problem, heuristics=[quick.obj])
        t = now()
        end = min(deadline, t + sched.share(sched.construct[0], deadline - t))
        run = run_portfolio(problem, deadline=end, heuristics=[quick.obj], workers=1, executor="thread",
                            scheduler=sched, **kw)
        ledger.sealed = False   # the solve goes on with this ledger (run_portfolio sealed it)
        if math.isfinite(ledger.value):   # it planned: not again (without a plan it runs again, a later round)
            heuristics = [h for h in heuristics if h is not quick.obj]
        if run.interrupted or ledger.finished():
            return heuristics, run, None
    t = now()
    found = derive_structure(problem.graph, Limits(deadline, stop=kw["stop"]).share(STRUCTURE_SHARE * (deadline - t)))
    ledger.add_report(SourceReport("structure", "detection", "stopped" if found["status"] == "stopped" else "done",
                                   seconds=found["seconds"], note=found["note"]))
    return heuristics, run, found


def _result(ledger: Ledger, run, warm_s: float) -> Result:
    status = ledger.status()
    lb = ledger.bound
    if ledger.plan is not None:
        lb = min(lb, ledger.value)
    cb, scope = ledger.class_bound()
    stats = dict(ledger.stats)
    stats.update({
        "objective": ledger.objective.name, "trivial_lower_bound": ledger.trivial, "interrupted": run.interrupted,
        "signal": run.signal, "seconds": ledger.seconds(), "warmup_s": warm_s, "workers": run.workers,
        "defects": list(ledger.defects), "abandoned": list(run.abandoned),
        "class_bounds": {k: v[0] for k, v in ledger.class_bounds.items()}, "bound_scope": ALL_PLANS,
    })
    return Result(
        plan=ledger.plan, objective=ledger.value, lower_bound=lb, gap=ledger.gap(), status=status,
        history=list(ledger.history), report=list(ledger.report), simulation=ledger.simulation,
        solver=ledger.source, bound_source=ledger.bound_source, class_bound=cb, class_bound_scope=scope,
        interrupted=run.interrupted, stats=stats,
    )
