"""Running one task (a heuristic, bound, improver or formulation) and
passing what it finds to a sink.

Every component is called with its kind's one signature
(:data:`~hybrid_remat.portfolio.calls.SIGNATURES`; older ones were wrapped
when they were registered).

A *sink* has the offering methods of :class:`~hybrid_remat.portfolio.ledger.Ledger`
(``offer_plan``, ``offer_bound``, ``note``, ``add_report``, ``add_stats``):
in-process it is the ledger itself, in a worker process a pipe to the
parent's ledger (:class:`~hybrid_remat.portfolio.workers.PipeSink`).  A
*shared view* has ``incumbent()``, ``incumbent_value()`` and
``lower_bound()`` (what components declaring ``"shares_incumbent"`` get as
``shared=``).

Every plan goes to the sink as soon as it is found (improvers and
formulations report through ``on_incumbent``), so a task stopped at its
deadline loses nothing it had reported.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> from hybrid_remat.portfolio.ledger import Ledger
>>> from hybrid_remat.portfolio.scheduler import Task
>>> p = Problem.single(chain(3, bytes=1), "100%")
>>> led = Ledger(p)
>>> out = execute(Task("heuristic", KeepAll()), p, led, LedgerView(led), share=1.0)
>>> out.status, led.report[0].status, led.status()
('valid', 'valid', 'optimal')
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import HybridRematError
from ..interfaces import ALL_PLANS, objectives_of
from ..limits import NO_LIMITS, Limits, now
from .calls import formulation_scope
from .ledger import SourceReport

__all__ = ["execute", "Outcome", "LedgerView", "honours_limits"]


@dataclass
class Outcome:
    """How a task ended: ``status`` (as in its report row), ``seconds``,
    ``wants_more`` (it used its whole share without finishing: a later
    round may give it more time), ``needs_incumbent`` (skipped for want of
    a plan to start from, or a formulation that started without one and
    found none: worth a later try from a plan)."""

    status: str
    seconds: float = 0.0
    wants_more: bool = False
    needs_incumbent: bool = False


class LedgerView:
    """The shared view of an in-process ledger."""

    def __init__(self, ledger):
        self._ledger = ledger

    def incumbent(self):
        return self._ledger.plan

    def incumbent_value(self) -> float:
        return self._ledger.value

    def lower_bound(self) -> float:
        return self._ledger.bound

    def finished(self) -> bool:
        return self._ledger.finished()


def _counts(obj, problem) -> bool:
    """Its bounds bound ``problem.objective`` (a serial bound does not bound makespan)."""
    return problem.objective.name in objectives_of(obj)


def execute(task, problem, sink, shared, *, limits: Limits | None = None, share: float = math.inf, seed: int = 0,
            worker: int = -1) -> Outcome:
    """Run ``task`` within ``limits``; report to ``sink``; return its :class:`Outcome`.

    Errors of the component are reported (status ``error``), never raised.
    """
    limits = limits or NO_LIMITS
    t0 = now()
    name = task.name

    def row(status, objective=math.inf, note="", bound=False):
        tdi = problem.objective.tdi_pct(problem, objective) if math.isfinite(objective) else math.nan
        sink.add_report(SourceReport(name, "bound" if bound else task.kind, status, objective, tdi, now() - t0,
                                     task.note + note, worker))
        return Outcome(status, now() - t0)

    try:
        run = {"heuristic": _heuristic, "bound": _bound, "improver": _improver, "formulation": _formulation}[task.kind]
        out = run(task, problem, sink, shared, limits, seed, row)
    except HybridRematError as e:
        return row("error", note=str(e))
    except Exception as e:  # a broken component never stops the portfolio
        return row("error", note=repr(e))
    except KeyboardInterrupt:  # a component that caught a signal itself: stop everything
        if limits.stop is not None:
            limits.stop.set()
        return row("stopped", note="interrupted")
    out.seconds = now() - t0
    if task.kind in ("improver", "formulation") and out.seconds >= 0.9 * share \
            and out.status not in ("optimal", "infeasible", "error", "skipped"):
        out.wants_more = True
    return out


def _heuristic(task, problem, sink, shared, limits, seed, row) -> Outcome:
    name = task.name
    plan = task.obj.run(problem, seed=seed, limits=limits)
    if plan is None:
        sink.note(name)
        return row("no_plan")
    sim, improved = sink.offer_plan(plan, name)
    if not sim.valid:
        sink.note(name)
        return row("over_budget", note=sim.error or "")
    value = problem.objective.value(sim)
    if not improved:
        sink.note(name, value)
    return row("valid", value)


def _bound(task, problem, sink, shared, limits, seed, row) -> Outcome:
    res = task.obj.bound(problem, limits=limits)
    if res is None or res.value is None or res.value != res.value:
        note = str((res.stats or {}).get("skipped", "")) if res is not None else ""
        return row("skipped", note=note or "no bound", bound=True)
    if res.value == -math.inf:  # it proved nothing (e.g. feasibility: a plan exists, or not settled)
        stats = res.stats or {}
        return row("no_bound", note=str(stats.get("reason") or stats.get("status") or "nothing proved"), bound=True)
    if not _counts(task.obj, problem):
        return row("skipped", note=f"bounds {'/'.join(sorted(objectives_of(task.obj)))}, not "
                                   f"{problem.objective.name}", bound=True)
    accepted = sink.offer_bound(float(res.value), task.name, res.scope)
    note = "" if res.scope == ALL_PLANS else f"class: {res.scope}"
    if accepted is False:
        note = (note + "; " if note else "") + "rejected: above a valid plan"
    return row("bound", float(res.value), note, bound=True)


def _improver(task, problem, sink, shared, limits, seed, row) -> Outcome:
    name = task.name
    start = shared.incumbent()
    if start is None:
        out = row("skipped", note="no incumbent")
        out.needs_incumbent = True
        return out
    before = shared.incumbent_value()
    best = {"value": before, "improved": False}

    def on_incumbent(plan, source=None):
        sim, improved = sink.offer_plan(plan, source or name)
        if sim.valid and problem.objective.value(sim) < best["value"]:
            best["value"], best["improved"] = problem.objective.value(sim), True
        return sim, improved

    sharing = "shares_incumbent" in set(getattr(task.obj, "capabilities", ()))
    out = task.obj.improve(problem, start, seed=seed, limits=limits, on_incumbent=on_incumbent,
                           shared=shared if sharing else None)
    if out is not None and out is not start:
        on_incumbent(out, name)
    status = "improved" if best["improved"] else "no_change"
    return row(status, best["value"], f"from {before:.6g}")


def _formulation(task, problem, sink, shared, limits, seed, row) -> Outcome:
    f, name = task.obj, task.name
    incumbent = shared.incumbent()
    if "needs_incumbent" in set(getattr(f, "capabilities", ())) and incumbent is None:
        out = row("skipped", note="no incumbent")
        out.needs_incumbent = True
        return out
    scope = formulation_scope(f)
    counts = _counts(f, problem)

    def on_incumbent(plan, source=None):
        return sink.offer_plan(plan, source or name)

    def on_bound(value):
        if counts:
            sink.offer_bound(value, name, scope)

    fr = f.solve(problem, incumbent=incumbent, limits=limits, seed=seed, on_incumbent=on_incumbent, on_bound=on_bound)
    key = name if not task.note else f"{name} ({task.note.strip(': ')})"
    sink.add_stats(key, dict(fr.stats or {}))
    if fr.plan is not None:
        sink.offer_plan(fr.plan, name)
    lb = fr.lower_bound
    if lb is not None and lb == lb and lb > -math.inf and counts:
        if lb < math.inf or (fr.status == "infeasible" and fr.plan is None):
            sink.offer_bound(float(lb), name, scope)
    if counts and scope != ALL_PLANS:  # bounds of other restricted classes, each under its own name
        for sc, value in (getattr(fr, "stats", None) or {}).get("class_bounds", {}).items():
            if sc != ALL_PLANS and math.isfinite(value):
                sink.offer_bound(float(value), name, str(sc))
    stats = fr.stats or {}
    note = str(stats.get("skipped") or stats.get("start_note") or "")
    out = row(fr.status, float(fr.objective) if fr.objective is not None else math.inf, note)
    if incumbent is None and fr.plan is None and fr.status not in ("optimal", "infeasible", "error"):
        # it started cold (a parallel pool starts formulations beside the heuristics) and found
        # nothing: worth another try from the plan that the others have found meanwhile
        out.needs_incumbent = True
    return out


def honours_limits(obj) -> bool:
    """``obj`` declares that it returns within the limits it is given."""
    return "honours_limits" in set(getattr(obj, "capabilities", ()))
