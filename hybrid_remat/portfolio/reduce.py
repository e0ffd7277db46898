"""Reductions of a multi-device problem, solved by the same runner.

A *reduction* (the one protocol of :mod:`hybrid_remat.core.reduction`;
the reductions of a multi-device problem are in
:mod:`hybrid_remat.core.devices`) turns the problem into another one
(``apply``), which the portfolio runner solves like any problem (its own
:class:`~hybrid_remat.portfolio.ledger.Ledger`, every admitted component,
the same seed and limits), and maps what it finds back (``inverts`` for
plans, ``carry`` for bounds: only a carried bound whose scope is every plan
is offered; ``forward`` for the improvers' warm starts).  This module uses
reductions through that protocol only.  On a multi-device problem the runner runs
them after the heuristics and bounds, before the improvers and formulations
(:func:`reductions_for` builds them, phase ``reduce`` of the
:class:`~hybrid_remat.portfolio.scheduler.Scheduler`):

* :class:`OneDevice` (one per compute device that can hold the graph,
  cheapest first; skipped when its trivial bound reaches the incumbent):
  the one-device problem of that device.  Its plans come
  back as they are (a one-device plan is a plan of the multi-device
  problem) and lifted with host offload
  (:func:`~hybrid_remat.core.lift.lift_plan`: recomputations replaced by
  round trips to the other device where that is cheaper).  The sub-run is
  the very run the one-device solve makes (same components, seed, work and
  node limits), so with work or node limits the multi-device result is never
  worse than the one-device result; with time limits it gets
  :data:`REDUCE_SHARE` of the time left (serial objective: nearly all of
  it, since the one-device search decides the serial time unless another
  device is cheaper, and the single-device improvers go on from its plan;
  makespan: half, the multi-device methods matter more).
* :class:`MergedDevices` (bounds only): every device merged into one.

Bounds.  A bound of a one-device problem does **not** bound the
multi-device problem: a plan may keep a value in host memory instead of
recomputing it, or compute a node on a device where it is cheaper, so the
multi-device optimum can lie below the one-device optimum (its bounds are
kept in ``stats["reductions"]``, never offered: their carried scope is
``"<device> only"``).  What does carry over is a
bound of the *merged* problem: one device whose cost of each node is the
cheapest over the compute devices and whose budget is the sum of every
device's budget.  Any multi-device plan ``P`` maps to a plan ``P'`` of it:
keep ``P``'s computations in order (dropping those of a value already
resident on some device), drop its copies, free a value when no device holds
it any more.  ``P'`` is valid (an input resident on the computing device is
resident in the union), holds at every step the union of what the devices
hold, at most the sum of their usages and so of their budgets, and costs at
most ``P``'s compute time (each node at its cheapest cost, copies dropped).
Hence a bound over every plan of the merged problem bounds ``P``'s serial
time, and, since the compute devices run their computations on at most
``k`` streams, ``k`` times ``P``'s makespan; ``+inf`` (no merged plan)
proves that no multi-device plan exists.  The ledger's own bound (every node
once on its cheapest device, :meth:`~hybrid_remat.objective.Objective.trivial_bound`)
is the special case of an unlimited budget.

Improvers.  Improvers that declare ``"multi_device"`` get the multi-device
incumbent as any component does; single-device improvers run inside the
one-device sub-runs and, through :class:`ThroughReduction`, on the
multi-device incumbent when it maps to a one-device plan (a plan of that
reduction, or one that computes on one device without copies).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(4, bytes=1).with_costs({"gpu": [1.0] * 4, "cpu": [3.0] * 4})
>>> p = Problem(g, [Device("gpu", "gpu", 3), Device("cpu", "cpu", 64)],
...             [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)])
>>> [r.name for r in reductions_for(p, heuristics=[], bounds=[], improvers=[], formulations=[]).reductions]
['gpu only', 'cpu only']
>>> merged = MergedDevices().apply(p)
>>> merged.primary.memory_bytes, merged.base_cost
(67, 4.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core.devices import MergedDevices, OneDevice
from ..core.reduction import ALL_PLANS
from ..interfaces import accepts
from ..limits import now
from ..problem import Problem
from .ledger import Ledger, SourceReport

__all__ = ["OneDevice", "MergedDevices", "SubPortfolio", "ThroughReduction", "Reductions", "reductions_for",
           "REDUCE_SHARE", "OTHER_DEVICE_SHARE", "MERGED_SHARE"]

#: share of the time left that the first (cheapest) device's sub-run gets, by objective
REDUCE_SHARE = {"serial": 0.95, "makespan": 0.5}
#: share of the time left that each further device's sub-run gets
OTHER_DEVICE_SHARE = 0.25
#: share of the time left that the merged problem's bounds get
MERGED_SHARE = 0.25


@dataclass
class Reductions:
    """What :func:`reductions_for` decided: the reductions and the
    components left to run on the problem itself."""

    reductions: list = field(default_factory=list)
    heuristics: list = field(default_factory=list)
    bounds: list = field(default_factory=list)
    improvers: list = field(default_factory=list)
    formulations: list = field(default_factory=list)


class _Stop:
    """A stop flag that is set when any of ``flags`` is (``is_set`` only)."""

    def __init__(self, *flags):
        self.flags = [f for f in flags if f is not None]

    def is_set(self) -> bool:
        return any(f() if callable(f) else f.is_set() for f in self.flags)


class SubPortfolio:
    """One reduction as a portfolio task (kind ``"reduction"``): the runner
    solves the reduced problem with ``components`` and passes the plans
    (inverted) and bounds (carried) to the problem's ledger.

    Parameters
    ----------
    reduction : Reduction
        Any :class:`~hybrid_remat.core.reduction.Reduction` (used through
        that protocol only: ``apply``, ``inverts``, ``forward``, ``carry``,
        ``lower_bound``, ``maps_plans``).
    share : float
        Share of the time left when it starts.
    heuristics, bounds, improvers, formulations : lists
        The components offered to the reduced problem (its scheduler admits
        those that accept it).
    """

    capabilities = frozenset({"dag", "chain", "multi_device", "serial", "makespan", "honours_limits"})
    #: seconds between two lifts of a sub-run's improvements, at least, as a multiple of the last lift's time
    LIFT_EVERY = 4.0

    def __init__(self, reduction, *, share: float, heuristics=(), bounds=(), improvers=(), formulations=()):
        self.reduction = reduction
        self.name = reduction.name
        self.share = float(share)
        self.components = {"heuristics": list(heuristics), "bounds": list(bounds), "improvers": list(improvers),
                           "formulations": list(formulations)}

    def skip_reason(self, problem: Problem, incumbent: float) -> str | None:
        """Why not to run it now (``None``: run it)."""
        lb = self.reduction.lower_bound(problem)  # one device: its plans, lifted or not, compute every node there
        if lb >= incumbent:
            return f"every plan of {self.reduction.name} takes >= {lb:.6g} >= the incumbent"
        return None

    def run(self, problem: Problem, sink, *, deadline: float, seed: int = 0, nodes=None, work=None, workers: int = 1,
            stop=None, second_round_min_s: float = 5.0, second_round_margin_s: float = 2.0) -> SourceReport:
        """Solve the reduced problem until ``deadline``; report to ``sink``
        (the problem's ledger); its summary row (already reported)."""
        from .runner import run_portfolio
        from .scheduler import Scheduler

        t0 = now()
        sub = self.reduction.apply(problem)
        if sub is None:
            row = SourceReport(self.name, "reduction", "skipped", note="the graph does not fit on the device")
            sink.add_report(row)
            return row
        lifter = _Lifter(self, problem, sink)
        ledger = Ledger(sub, on_improve=lifter.on_improve)
        sched = Scheduler(sub, **self.components)
        run_portfolio(sub, deadline=deadline, workers=workers, seed=seed, node_limit=nodes, work_limit=work,
                      stop=_Stop(stop, lifter.finished), signals=(), ledger=ledger, scheduler=sched,
                      second_round_min_s=second_round_min_s, second_round_margin_s=second_round_margin_s)
        lifter.finish(ledger)
        if ledger.closed():
            self.reduction.optimum = ledger.value
        for r in ledger.report:
            if r.status == "skipped" and r.note == "multi-device only":
                continue
            sink.add_report(SourceReport(self.reduction.prefix + r.source, r.kind, r.status, r.objective, r.tdi_pct,
                                         r.seconds, r.note, r.worker))
        for name, st in ledger.stats.get("formulations", {}).items():
            sink.add_stats(self.reduction.prefix + name, st)
        carried = self.reduction.carry(ledger.bound, ledger.status())  # what the sub-run proves about the problem
        facts = {"status": ledger.status(), "objective": ledger.value, "lower_bound": ledger.bound,
                 "bound_source": ledger.bound_source, "solver": ledger.source, "seconds": now() - t0,
                 "lifted": lifter.best, "lifted_source": lifter.best_source,
                 "carried": {"lower_bound": carried.bound, "scope": carried.scope, "status": carried.status}}
        if callable(getattr(sink, "add_reduction", None)):
            sink.add_reduction(self.name, facts)
        if not self.reduction.maps_plans:
            value = carried.bound
            status, note = "bound", f"bound {ledger.bound:.6g} of the {self.reduction.name}"
        else:
            value = lifter.best
            status = "valid" if ledger.plan is not None else "no_plan"
            note = f"{ledger.status()} on the reduced problem ({ledger.value:.6g}, bound {ledger.bound:.6g})"
        row = SourceReport(self.name, "reduction", status, value, problem.objective.tdi_pct(problem, value),
                           now() - t0, note)
        sink.add_report(row)
        return row


class _Lifter:
    """The sub-run's ``on_improve``: invert its plans (at most every
    :attr:`SubPortfolio.LIFT_EVERY` lift times; the last one always, in
    :meth:`finish`) and carry its bounds to the problem's ledger."""

    def __init__(self, owner: SubPortfolio, problem: Problem, sink):
        self.owner, self.problem, self.sink = owner, problem, sink
        self.red = owner.reduction
        self.last_plan = None
        self.pending = None
        self.lift_s = 0.0
        self.next_at = -math.inf
        self.bound = -math.inf
        self.best, self.best_source = math.inf, ""

    def finished(self) -> bool:
        """The problem's gap is closed: nothing the sub-run finds can help."""
        fin = getattr(self.sink, "finished", None)
        return bool(fin()) if callable(fin) else False

    def on_improve(self, ev) -> None:
        if ev.bound > self.bound:
            self.bound = ev.bound
            carried = self.red.carry(ev.bound)
            if carried.scope == ALL_PLANS:  # a bound of a restricted class stays the sub-run's (stats["reductions"])
                self.sink.offer_bound(carried.bound, self.red.prefix + ev.source, ALL_PLANS)
        if not self.red.maps_plans:
            return
        if ev.plan is None or ev.plan is self.last_plan:
            return
        self.last_plan = ev.plan
        self.pending = (ev.plan, ev.source)
        if now() >= self.next_at:
            self._lift(*self.pending)

    def _lift(self, plan, source) -> None:
        t = now()
        self.pending = None
        for tag, q in self.red.inverts(plan):
            sim, _ = self.sink.offer_plan(q, self.red.prefix + source + tag)
            if sim.valid:
                v = float(self.problem.objective.value(sim))
                if v < self.best:
                    self.best, self.best_source = v, self.red.prefix + source + tag
        self.lift_s = now() - t
        self.next_at = now() + self.owner.LIFT_EVERY * self.lift_s

    def finish(self, ledger: Ledger) -> None:
        """Lift what is pending and the sub-run's best plans."""
        if not self.red.maps_plans:
            return
        if self.pending is not None:
            self._lift(*self.pending)
        for _, source, plan in ledger.best_plans():
            if plan is not self.last_plan:
                self._lift(plan, source)


class _ForwardView:
    """The shared view of the problem's incumbent as a reduced improver sees it."""

    def __init__(self, shared, red, problem: Problem, sub: Problem):
        self.shared, self.red, self.problem, self.sub = shared, red, problem, sub
        self._seen = (None, None, math.inf)

    def incumbent(self):
        return self._forward()[1]

    def incumbent_value(self) -> float:
        return self._forward()[2]

    def lower_bound(self) -> float:
        return -math.inf  # the problem's bound does not bound the reduced problem

    def value(self, plan) -> float:
        """A one-device plan's value on the reduced problem (``inf``: invalid)."""
        from ..simulate import simulate

        sim = simulate(self.sub, plan)
        return float(sim.total_time) if sim.valid else math.inf

    def _forward(self):
        plan = self.shared.incumbent() if self.shared is not None else None
        if plan is not self._seen[0]:
            q = self.red.forward(plan)
            v = self.value(q) if q is not None else math.inf
            self._seen = (plan, q if v < math.inf else None, v)
        return self._seen


class ThroughReduction:
    """A single-device improver on the multi-device incumbent, through the
    :class:`OneDevice` reduction that maps it (its improvements are inverted
    as the sub-runs' are); nothing to do when no reduction maps it."""

    def __init__(self, inner, reductions):
        self.inner = inner
        self.reductions = list(reductions)
        self.inner_name = str(getattr(inner, "name", type(inner).__name__))
        self.name = f"{self.inner_name}@one-device"
        self.version = str(getattr(inner, "version", "0"))
        self.rank = float(getattr(inner, "rank", 10.0))
        caps = set(getattr(inner, "capabilities", ()))
        self.capabilities = frozenset((caps - {"single_device"}) | {"multi_device"})
        if callable(getattr(inner, "warmup", None)):
            self.warmup = inner.warmup

    def __repr__(self) -> str:
        return f"<improver {self.name}@{self.version}>"

    def applicable(self, problem):
        for red in self.reductions:
            sub = red.apply(problem)
            if sub is not None and accepts(self.inner, sub)[0]:
                return True, ""
        return False, "no device alone admits it"

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        for red in self.reductions:
            sub = red.apply(problem)
            start = red.forward(plan) if sub is not None else None
            if start is not None and accepts(self.inner, sub)[0]:
                break
        else:
            return None
        if math.isfinite(red.optimum) and _ForwardView(None, red, problem, sub).value(start) <= red.optimum:
            return None  # the start is optimal on its device alone

        def relay(p, source=None):
            if on_incumbent is None or p is None:
                return None
            for tag, q in red.inverts(p):
                on_incumbent(q, red.prefix + self.inner_name + tag)
            return None

        view = _ForwardView(shared, red, problem, sub) if shared is not None else None
        sharing = "shares_incumbent" in set(getattr(self.inner, "capabilities", ()))
        out = self.inner.improve(sub, start, seed=seed, limits=limits, on_incumbent=relay,
                                 shared=view if sharing else None)
        if out is not None and out is not start:
            relay(out, self.name)
        return None


def reductions_for(problem: Problem, *, heuristics, bounds, improvers, formulations) -> Reductions:
    """The reductions of ``problem`` and the components left for it.

    One :class:`OneDevice` sub-run per compute device that can hold the
    graph (cheapest device first: it gets :data:`REDUCE_SHARE` of the time
    left, the others, and the cheapest when it cannot hold the graph,
    :data:`OTHER_DEVICE_SHARE`), offered every
    component (each sub-run's scheduler admits what accepts it); the
    :class:`MergedDevices` bounds when some bound accepts only one device.
    The problem keeps the components that accept it or no reduced problem
    (those are reported as skipped), and the single-device improvers as
    :class:`ThroughReduction`.  A one-device problem has no reductions.
    """
    comps = {"heuristics": list(heuristics), "bounds": list(bounds), "improvers": list(improvers),
             "formulations": list(formulations)}
    if problem.is_single_device:
        return Reductions([], *comps.values())
    devs = [OneDevice(d.name) for d in problem.devices if d.can_compute]
    cheapest = min(r.lower_bound(problem) for r in devs)
    devs = [r for r in devs if r.apply(problem) is not None]
    devs.sort(key=lambda r: r.lower_bound(problem))
    subs = [r.apply(problem) for r in devs]
    first = REDUCE_SHARE.get(problem.objective.name, REDUCE_SHARE["serial"])
    out = Reductions([SubPortfolio(r, share=first if i == 0 and r.lower_bound(problem) <= cheapest
                                   else OTHER_DEVICE_SHARE, **comps) for i, r in enumerate(devs)])
    merged = MergedDevices().apply(problem)
    one_device_bounds = [b for b in comps["bounds"] if not accepts(b, problem)[0] and accepts(b, merged)[0]]
    # keep-all fits the merged device: its optimum is the trivial bound, which the ledger has already
    if one_device_bounds and merged.keep_all_peak() > merged.primary.memory_bytes:
        out.reductions.append(SubPortfolio(MergedDevices(), share=MERGED_SHARE, bounds=one_device_bounds))
    for kind, objs in comps.items():
        for o in objs:
            here = accepts(o, problem)[0]
            reduced = [s for s in subs if accepts(o, s)[0]]
            if here or not reduced and not (kind == "bounds" and o in one_device_bounds):
                getattr(out, kind).append(o)
            elif kind == "improvers":
                out.improvers.append(ThroughReduction(o, devs))
    return out
