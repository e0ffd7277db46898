"""The ledger: what a portfolio run knows at any moment.

One :class:`Ledger` per solve holds the incumbent (the best plan, its
value, its simulation and its source), the best bound over every plan (with
its source), the bounds of restricted plan classes by scope, the history of
improvements, the per-component report and the defects found.  It is the
only place where plans are accepted: every offered plan is simulated
(:func:`~hybrid_remat.simulate.simulate`) and valued by
``problem.objective``; nothing a component claims about its own plan is
taken on trust.

Bounds are checked against plans.  A bound over every plan that exceeds a
valid plan's value by more than :meth:`Ledger.tolerance` (relative to the
data: the trivial bound, so that costs of 1e-9 s are judged at their own
scale) is impossible: it is rejected, recorded in :attr:`Ledger.defects` and
never used, whichever of the two arrived first.  A bound of a restricted
class (``scope`` other than :data:`~hybrid_remat.interfaces.ALL_PLANS`) is
kept under its own name and never decides the status.

The ledger is thread-safe: the runner's task thread and its main thread
(reading worker pipes) may offer at the same time.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.plan import keep_all_plan
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(4, bytes=1), "100%")
>>> led = Ledger(p)
>>> led.offer_plan(keep_all_plan(p.graph, "cost"), "keep_all")[1]
True
>>> led.status(), led.value, led.bound
('optimal', 4.0, 4.0)
>>> led.offer_bound(5.0, "bogus")        # above a valid plan: a defect
False
>>> led.defects[0]["source"]
'bogus'
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..core.plans import plan_key
from ..interfaces import ALL_PLANS
from ..limits import now
from ..simulate import simulate

__all__ = ["Ledger", "SourceReport", "Improvement", "better", "plan_key"]

#: a plan within this relative distance of a bound over every plan is optimal: bounds from exact models are
#: lowered by their solver's tolerance (1e-6 relative, ``scip.BOUND_RTOL``) to stay valid, so a tie
#: can only be proved up to it
OPTIMALITY_RTOL = 2e-6


@dataclass
class SourceReport:
    """One component's outcome in a solve.

    ``kind``: ``heuristic``, ``bound`` (``objective`` and ``tdi_pct`` are its
    bound), ``improver`` or ``formulation``.  ``status``: ``valid``,
    ``over_budget`` (simulated but over the budget or invalid), ``no_plan``,
    ``error``, ``no_bound`` (a bound that proved nothing; ``note`` says
    why), ``skipped`` (``note`` says why: ``time limit``, ``gap
    closed``, ``predicted 290 s > 40 s left``, ...), ``bound``, ``improved``,
    ``no_change``, ``stopped`` (killed at its deadline), or a formulation's
    status (``optimal``, ``feasible``, ``infeasible``, ``no_solution``).
    ``worker`` is the worker process that ran it (``-1``: in-process).
    """

    source: str
    kind: str
    status: str
    objective: float = float("inf")
    tdi_pct: float = float("nan")
    seconds: float = 0.0
    note: str = ""
    worker: int = -1


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


def better(a: float, b: float) -> bool:
    """``a`` is smaller than ``b`` by more than round-off (``b`` may be inf):
    by a relative ``1e-12`` of ``b``, never an absolute amount, so that plans
    costing 1e-12 s are compared at their own scale.

    >>> better(4.0e-12, 5.0e-12), better(5.0 - 1e-15, 5.0)
    (True, False)
    """
    if not math.isfinite(b):
        return math.isfinite(a) or a < b
    return a < b - 1e-12 * abs(b)


class Ledger:
    """Incumbent, bounds, history and report of one solve (module docstring).

    Parameters
    ----------
    problem : Problem
        Its ``objective`` values every plan.
    on_improve : callable, optional
        Called with an :class:`Improvement` on every better plan or bound
        (outside the lock, in the order of the changes).
    pool_size : int
        How many of the best distinct plans :meth:`best_plans` keeps.
    """

    def __init__(self, problem, *, on_improve: Callable | None = None, pool_size: int = 4, t0: float | None = None):
        self.problem = problem
        self.objective = problem.objective
        self.on_improve = on_improve
        self.t0 = now() if t0 is None else t0
        self._lock = threading.RLock()
        self._notify_lock = threading.Lock()
        self.plan = None
        self.value = math.inf
        self.simulation = None
        self.source = ""
        self.trivial = float(self.objective.trivial_bound(problem))
        self._scale = max(abs(self.trivial), abs(float(problem.base_cost)), 1e-300)
        self._bounds: list = [(self.trivial, "trivial")]  # every accepted bound over every plan
        self.bound, self.bound_source = self.trivial, "trivial"
        self.class_bounds: dict = {}  # scope -> (value, source)
        self.history: list = []
        self.report: list = []
        self.defects: list = []
        self.stats: dict = {"formulations": {}}
        self._pool: list = []  # (value, source, plan), best first
        self._pool_size = int(pool_size)
        self.sealed = False

    # ------------------------------------------------------------ figures
    def seconds(self) -> float:
        """Seconds since the ledger was opened (the solve's clock)."""
        return now() - self.t0

    def tolerance(self, value: float) -> float:
        """Round-off allowed between a bound and a plan's value: relative to
        the value and to the data (the trivial bound), never absolute."""
        v = abs(value) if math.isfinite(value) else 0.0
        return 1e-9 * max(v, self._scale)

    def gap(self) -> float:
        """``(value - bound) / value``; 0 when closed, inf without a plan."""
        if not math.isfinite(self.value):
            return math.inf
        if self.closed():
            return 0.0
        return max(0.0, (self.value - self.bound) / self.value) if self.value > 0 else 0.0

    def closed(self) -> bool:
        """A plan reaches a bound over every plan (within :data:`OPTIMALITY_RTOL`
        of its value): nothing can beat it by more than that."""
        return self.plan is not None and self.bound >= self.value - max(
            self.tolerance(self.value), OPTIMALITY_RTOL * abs(self.value))

    def proved_infeasible(self) -> bool:
        """A bound over every plan is ``+inf``: no plan exists."""
        return self.plan is None and self.bound == math.inf

    def finished(self) -> bool:
        """Nothing left to find: the gap is closed or infeasibility proved."""
        return self.closed() or self.proved_infeasible()

    def status(self) -> str:
        """``optimal`` (a bound over every plan is reached), ``feasible``,
        ``infeasible`` (a bound over every plan is ``+inf``) or
        ``no_solution``."""
        if self.plan is None:
            return "infeasible" if self.proved_infeasible() else "no_solution"
        return "optimal" if self.closed() else "feasible"

    def class_bound(self) -> tuple[float, str]:
        """The highest bound of a restricted class and its scope, when it
        says more than the bound over every plan (``(-inf, "")`` otherwise:
        a class bound below that one adds nothing)."""
        with self._lock:
            best, scope = -math.inf, ""
            for sc, (v, _) in self.class_bounds.items():
                if v > best and v > self.bound:
                    best, scope = v, sc
            return best, scope

    def best_plans(self, k: int | None = None) -> list:
        """The best distinct valid plans seen, ``[(value, source, plan)]``,
        best first (at most ``pool_size``)."""
        with self._lock:
            return list(self._pool[: k if k is not None else self._pool_size])

    # ------------------------------------------------------------ offers
    def offer_plan(self, plan, source: str):
        """Simulate ``plan``; keep it when valid and better.

        Returns
        -------
        (SimulationResult, bool)
            The simulation and whether the plan became the incumbent.
        """
        sim = simulate(self.problem, plan)
        if not sim.valid:
            return sim, False
        value = float(self.objective.value(sim))
        events = []
        with self._lock:
            if self.sealed:
                return sim, False
            self._pool_add(value, source, plan)
            improved = better(value, self.value)
            if improved:
                self.plan, self.value, self.simulation, self.source = plan, value, sim, source
                self._retract_bounds_above(value, source)
                self.history.append((self.seconds(), self.value, self.bound, source))
                events.append(self._event(source))
        self._notify(events)
        return sim, improved

    def offer_bound(self, value: float, source: str, scope: str = ALL_PLANS) -> bool:
        """Record a lower bound of ``scope``; True when it was accepted.

        A bound over every plan above a valid plan's value (beyond
        :meth:`tolerance`) is a defect: rejected and recorded.
        """
        try:
            value = float(value)
        except (TypeError, ValueError):
            return False
        if value != value or value == -math.inf:
            return False
        events = []
        with self._lock:
            if self.sealed:
                return False
            if scope != ALL_PLANS:
                old = self.class_bounds.get(scope)
                if old is None or value > old[0]:
                    self.class_bounds[scope] = (value, source)
                return True
            if self.plan is not None and value > self.value + self.tolerance(self.value):
                self._defect(value, source, self.value, self.source)
                return False
            self._bounds.append((value, source))
            if value > self.bound:
                self.bound, self.bound_source = value, source
                self.history.append((self.seconds(), self.value, self.bound, source))
                events.append(self._event(source))
        self._notify(events)
        return True

    def note(self, source: str, value: float = math.inf) -> None:
        """A history entry for a component that found no better plan
        (``value``: its plan's, ``inf`` when it found none)."""
        with self._lock:
            if not self.sealed:
                self.history.append((self.seconds(), float(value), self.bound, source))

    def add_report(self, row: SourceReport) -> None:
        with self._lock:
            if not self.sealed:
                self.report.append(row)

    def add_stats(self, name: str, stats: dict) -> None:
        """Keep a formulation's ``stats`` under its name."""
        with self._lock:
            self.stats["formulations"][name] = stats

    def add_reduction(self, name: str, facts: dict) -> None:
        """Keep what a reduction's sub-run found (its status, value, bound)
        under ``stats["reductions"][name]``."""
        with self._lock:
            self.stats.setdefault("reductions", {})[name] = dict(facts)

    def seal(self) -> None:
        """Accept nothing more (a component left running past the end)."""
        with self._lock:
            self.sealed = True

    # ------------------------------------------------------------ internals
    def _pool_add(self, value, source, plan) -> None:
        if any(abs(v - value) <= self.tolerance(value) and plan_key(p) == plan_key(plan) for v, _, p in self._pool):
            return
        self._pool.append((value, source, plan))
        self._pool.sort(key=lambda x: x[0])
        del self._pool[self._pool_size:]

    def _retract_bounds_above(self, value: float, plan_source: str) -> None:
        keep = []
        for v, src in self._bounds:
            if v > value + self.tolerance(value):
                self._defect(v, src, value, plan_source)
            else:
                keep.append((v, src))
        if len(keep) != len(self._bounds):
            self._bounds = keep
            self.bound, self.bound_source = max(keep, key=lambda x: x[0])

    def _defect(self, bound: float, source: str, value: float, plan_source: str) -> None:
        self.defects.append({"kind": "bound above a valid plan", "source": source, "bound": bound,
                             "plan_value": value, "plan_source": plan_source})

    def _event(self, source: str) -> Improvement:
        return Improvement(self.seconds(), self.value, self.bound, self.gap(), source, self.plan, self.simulation)

    def _notify(self, events: list) -> None:
        if self.on_improve is None or not events:
            return
        with self._notify_lock:
            for e in events:
                try:
                    self.on_improve(e)
                except Exception as err:  # the caller's callback must not break the solve (nor blame a component)
                    self.stats.setdefault("on_improve_error", repr(err))
