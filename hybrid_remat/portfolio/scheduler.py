"""The scheduler: which components run, in what order, with what share of
the time.

Admission.  A component runs when its capabilities admit the problem
(:func:`~hybrid_remat.interfaces.accepts`: devices, graph shape, its own
``applicable``), and, on one device, when it declares ``"needs_budget"``
only if keep-all does not fit.  Refusals go to the report with the reason.

Order: measured value per second.  Each component gets a *priority*
``value / predicted seconds``: the prediction is the component's own
``predict_seconds(problem)`` when it has one, else ``c * n**k`` from the
calibration table (:mod:`hybrid_remat.portfolio.calibration_table`, written
by ``benchmarks/portfolio_calibration.py``: seconds to a first useful
result at 1k-100k nodes), and ``value`` its measured value there (1 where
it gave the best plan or bound, 0.1 where it gave one).  Calibrated
components run by decreasing priority; those without figures follow, by
``rank``.  One exception, the *quick start*: of the calibrated heuristics
that gave plans on about half the instances or more (value at least
:data:`QUICK_START_MIN_VALUE`), the one with the smallest prediction runs first (DTR's size rule on
the llama graphs: a plan in 0.2 s at 100k nodes, before the block solver's
second), so that the first plan never waits for the best-valued component.

A formulation that can start without a plan (no ``"needs_incumbent"``) and
that the calibration measured to deliver a useful first result on its own
(its row has a time fit, ``c``, and a positive value; a formulation that
used all the time it was given has no fit, one that returned nothing has
value 0) is a *constructor*: it runs with the heuristics and bounds,
by priority (the block solver on repeated graphs: the best plan and bound
in seconds), and again later only when it used its whole share.  The other
formulations run after the improvers' first pass, by ``rank`` (they share
the time equally, so the order only decides who gets the time others
leave).

Skipping.  A component whose predicted time exceeds the time left when its
turn comes is skipped (report: ``predicted 290 s > 40 s left``).  Predict the
time to a *useful* result: a bound that returns a weaker bound within its
limits should predict that.

Time shares (of the time left when a task starts):

* ``construct`` (heuristics, bounds, constructor formulations):
  :data:`CONSTRUCT_SHARE`, or twice the prediction when that is more;
* ``polish`` (improvers on the first incumbent): :data:`POLISH_SHARE` each;
* ``long`` (formulations, then improvers again): the time left split equally
  among the long tasks not yet started (with ``W`` workers: ``W`` of them run
  at once);
* later rounds (``long`` tasks and constructor formulations that used their
  whole share): the time left, split equally, while at least the runner's
  minimum remains.

Reductions (multi-device problems, :mod:`~hybrid_remat.portfolio.reduce`)
run after ``construct`` and before ``polish``, in the given order, each
with its own share of the time left (``reduction.share``).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> from hybrid_remat.heuristics.checkpoints import ChenSqrtN
>>> s = Scheduler(Problem.single(chain(50, bytes=1), "100%"), heuristics=[ChenSqrtN(), KeepAll()])
>>> [t.name for t in s.construct], s.skipped[0][2]
(['keep_all'], 'keep-all fits the budget')
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..interfaces import accepts
from .calibration_table import TABLE

__all__ = ["Scheduler", "Task", "CONSTRUCT_SHARE", "POLISH_SHARE"]

#: value from which a heuristic can be the quick start (0.1 per instance where it gave a plan)
QUICK_START_MIN_VALUE = 0.05
#: share of the time left that a heuristic or bound may use
CONSTRUCT_SHARE = 0.25
#: share of the time left that each improver gets on the first incumbent
POLISH_SHARE = 0.1


@dataclass
class Task:
    """One run of one component: ``kind`` (heuristic, bound, improver,
    formulation), the object, its phase (construct, polish, long), a note
    prefix for its report row (``"second round: "``), its prediction and
    priority."""

    kind: str
    obj: object
    phase: str = "construct"
    note: str = ""
    predicted: float | None = None
    priority: float | None = None
    index: int = 0

    @property
    def name(self) -> str:
        return str(getattr(self.obj, "name", type(self.obj).__name__))

    def again(self, note: str) -> Task:
        """The same component for a later round."""
        return Task(self.kind, self.obj, "long", note, self.predicted, self.priority, self.index)


class Scheduler:
    """Admission, order and shares for one problem (module docstring).

    Parameters
    ----------
    problem : Problem
    heuristics, bounds, improvers, formulations : sequences of objects
    reductions : sequence of SubPortfolio
        Run after the construct phase, in this order (phase ``reduce``).
    table : dict, optional
        Calibration figures by component name (default: the shipped table).
    named : set of str, optional
        Components the user named (e.g. ``--formulation checkmate``): they run
        whatever their prediction, and named formulations in the ``long``
        phase with its share of the time (never as constructors).
    """

    def __init__(self, problem, *, heuristics=(), bounds=(), improvers=(), formulations=(), reductions=(),
                 table=None, named=frozenset()):
        self.problem = problem
        self.named = frozenset(named)
        self.n = problem.graph.n
        self.table = TABLE if table is None else table
        self.skipped: list = []  # (kind, object, reason)
        self._keep_all_fits = None
        heur = self._admit("heuristic", heuristics)
        bnds = self._admit("bound", bounds)
        imps = self._admit("improver", improvers)
        forms = self._admit("formulation", formulations)
        self.reduce = [Task("reduction", r, "reduce", "", None, None, i) for i, r in enumerate(reductions)]
        forms_t = [self._task("formulation", o, "long", i) for i, o in enumerate(forms)]
        early = [t for t in forms_t if self.constructs(t)]
        forms_t = [t for t in forms_t if not self.constructs(t)]
        start = len(heur) + len(bnds)
        self.construct = self._by_priority([self._task("heuristic", o, "construct", i) for i, o in enumerate(heur)]
                                           + [self._task("bound", o, "construct", len(heur) + i)
                                              for i, o in enumerate(bnds)]
                                           + [Task(t.kind, t.obj, "construct", "", t.predicted, t.priority,
                                                   start + t.index) for t in early])
        self.construct = self._quick_start_first(self.construct)
        self.polish = self._by_priority([self._task("improver", o, "polish", i) for i, o in enumerate(imps)])
        forms_t.sort(key=lambda t: (float(getattr(t.obj, "rank", 10.0)), t.index))
        self.long = forms_t + [Task(t.kind, t.obj, "long", "", t.predicted, t.priority, t.index) for t in self.polish]
        if any(t.name in self.named for t in forms_t):  # the formulations asked for get the time the polish left
            self.long = forms_t

    # ------------------------------------------------------------ admission
    def keep_all_fits(self) -> bool:
        if self._keep_all_fits is None:
            p = self.problem
            self._keep_all_fits = bool(p.is_single_device and p.keep_all_peak() <= int(p.primary.memory_bytes))
        return self._keep_all_fits

    def _admit(self, kind: str, objs) -> list:
        out = []
        for o in objs:
            ok, why = accepts(o, self.problem)
            if ok and "needs_budget" in set(getattr(o, "capabilities", ())) and self.keep_all_fits():
                ok, why = False, "keep-all fits the budget"
            if ok:
                out.append(o)
            else:
                self.skipped.append((kind, o, why))
        return out

    # ------------------------------------------------------------ figures
    def predict(self, obj) -> float | None:
        """Predicted seconds on this problem: the component's own
        ``predict_seconds`` or the calibration table's ``c * n**k``."""
        fn = getattr(obj, "predict_seconds", None)
        if callable(fn):
            try:
                s = float(fn(self.problem))
                return s if s == s and s >= 0 else None
            except Exception:
                return None
        return self.measured(obj)

    def measured(self, obj) -> float | None:
        """The calibration table's ``c * n**k`` (seconds to a first useful
        result), or ``None``."""
        row = self.table.get(getattr(obj, "name", None))
        if row is None or row.get("c") is None:
            return None
        return float(row["c"]) * float(max(self.n, 1)) ** float(row["k"])

    def value(self, obj) -> float | None:
        """Measured value (win rate) of a component, ``None`` when unmeasured."""
        row = self.table.get(getattr(obj, "name", None))
        return None if row is None else float(row["value"])

    def constructs(self, task: Task) -> bool:
        """A formulation that runs with the heuristics (module docstring):
        it starts without a plan and its calibration row measured when its
        first result comes."""
        row = self.table.get(task.name) or {}
        return (task.kind == "formulation" and task.priority is not None and row.get("c") is not None
                and float(row.get("value") or 0.0) > 0.0   # its first result was useful (a plan or a bound)
                and "needs_incumbent" not in set(getattr(task.obj, "capabilities", ())))

    def _task(self, kind, obj, phase, index) -> Task:
        if getattr(obj, "name", None) in self.named:  # asked for by name: no prediction skips or hurries it
            return Task(kind, obj, phase, "", None, None, index)
        pred = self.predict(obj)
        val = self.value(obj)
        prio = None
        if pred is not None and val is not None:
            # order by the slower of its own prediction (which may cover only a part, e.g. building a
            # model) and the measured time to a first result
            prio = max(val, 0.01) / max(pred, self.measured(obj) or 0.0, 1e-4)
        return Task(kind, obj, phase, "", pred, prio, index)

    def _quick_start_first(self, tasks: list) -> list:
        """``tasks`` with the *quick start* first: the calibrated heuristic
        that gave plans (value at least :data:`QUICK_START_MIN_VALUE`) with
        the smallest predicted time, so that a plan comes at once however long the best-valued
        components take (module docstring)."""
        quick = [t for t in tasks if t.kind == "heuristic" and t.predicted is not None
                 and (self.value(t.obj) or 0.0) >= QUICK_START_MIN_VALUE]
        if not quick:
            return tasks
        first = min(quick, key=lambda t: (t.predicted, t.index))
        return [first] + [t for t in tasks if t is not first]

    @staticmethod
    def _by_priority(tasks: list) -> list:
        def key(t):
            if t.priority is not None:
                return (0, -t.priority, 0.0, t.index)
            return (1, 0.0, float(getattr(t.obj, "rank", 10.0)), t.index)

        return sorted(tasks, key=key)

    # ------------------------------------------------------------ time
    @staticmethod
    def too_slow(task: Task, left: float) -> str | None:
        """Why ``task`` must be skipped with ``left`` seconds left (or ``None``)."""
        if task.predicted is not None and task.predicted > left:
            return f"predicted {task.predicted:.3g} s > {max(left, 0.0):.3g} s left"
        return None

    @staticmethod
    def share(task: Task, left: float, *, remaining: int = 1, workers: int = 1) -> float:
        """Seconds for ``task`` with ``left`` seconds left; ``remaining``:
        long tasks not yet started, this one included."""
        if not math.isfinite(left):
            return left
        if task.phase == "construct":
            s = CONSTRUCT_SHARE * left
            if task.predicted is not None:
                s = max(s, 2.0 * task.predicted + 0.05)
            return min(left, s)
        if task.phase == "polish":
            return POLISH_SHARE * left
        return min(left, left * workers / max(workers, remaining))
