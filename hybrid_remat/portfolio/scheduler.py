"""The scheduler: every decision of a portfolio run.

The executors (:mod:`~hybrid_remat.portfolio.runner`: one task at a time in a thread of this process;
:mod:`~hybrid_remat.portfolio.workers`: forked worker processes) decide nothing: for each free slot they ask
:meth:`Scheduler.next` ``(view, now, slot)`` for an :class:`Assignment` (which task, seed, share, deadline),
:data:`WAIT` or :data:`DONE`, run what they are given and pass how it ended to :meth:`Scheduler.done`.  Given the
same outcomes, both executors see the same sequence of assignments.

Admission.  A component runs when its capabilities admit the problem (:func:`~hybrid_remat.interfaces.accepts`:
devices, graph shape, its own ``applicable``), and, on one device, when it declares ``"needs_budget"`` only if
keep-all does not fit.  Refusals go to the report with the reason.

Order: measured value per second.  Each component gets a *priority* ``value / predicted seconds``: the prediction is
the component's own ``predict_seconds(problem)`` when it has one, else ``c * n**k`` from the calibration table
(:mod:`hybrid_remat.portfolio.calibration_table`, written by ``benchmarks/portfolio_calibration.py``: seconds to a
first useful result at 1k-100k nodes), and ``value`` its measured value there (1 where it gave the best plan or
bound, 0.1 where it gave one).  Calibrated components run by decreasing priority.  One exception, the *quick start*:
of the calibrated heuristics that gave plans on about half the instances or more (value at least
:data:`QUICK_START_MIN_VALUE`), the one with the smallest prediction runs first, so that the first plan never waits
for the best-valued component; where rows say where each planned (``plans``), only those that planned on
:data:`QUICK_START_MIN_PLANS` of their instances (DTR's size rule thrashes on random layered graphs and U-Nets:
``dtr_belady`` plans on every family).

*Share users* (heuristics with a value but no time fit: they use the time they are given) run after the probes
and the constructors of a positive priority (last, ``memory_order`` had 0.5 s and no plan on a random layered 2k
graph, 2.8 s give the best plan; before the block solver, they took the time it needs to prove a decoder's plan).

Fairness.  A component outside the calibration table (a plugin, a new built-in) has no figures to earn a turn with:
it gets a *short first slot* in its phase, right after the quick start, before the calibrated ones, ordered by its
declared ``rank`` (its share in the construct phase is :data:`PROBE_SHARE` of the time left).  It is then calibrated
from what it did: its measured seconds become its prediction for the rest of the run, and a probe that used its
whole slot gets a later round.

A formulation that can start without a plan (no ``"needs_incumbent"``) and that the calibration measured to deliver
a useful first result on its own (its row has a time fit, ``c``, and a positive value; a formulation that used all
the time it was given has no fit, one that returned nothing has value 0) is a *constructor*: it runs with the
heuristics and bounds, by priority (the block solver on repeated graphs: the best plan and bound in seconds), and
again later only when it used its whole share.  The other formulations run after the improvers' first pass, by
``rank`` (they share the time equally, so the order only decides who gets the time others leave).  An uncalibrated
formulation whose ``constructs_on(problem)`` is true is a constructor there too (as a probe, right after the quick
start); a constructor's or a bound's first-pass share is at most :data:`FIRST_PASS_CAP` of the time left.

The first pass is ``construct`` (heuristics, bounds, constructor formulations), the reductions of a multi-device
problem (each alone, when nothing else runs: :mod:`~hybrid_remat.portfolio.reduce`), ``polish`` (improvers on the
first incumbent), ``long`` (formulations, then improvers again).  A component runs in one slot at a time: the next
task of a busy component waits while the free slots take the tasks after it.

Skipping (a report row with the reason).  Everything left once the gap is closed, infeasibility proved, the run
stopped or the deadline passed; a component predicted to need more than the time left (``predicted 290 s > 40 s
left``: predict the time to a *useful* result); a feasibility-only bound (``infeasibility_only``) once a plan
exists; an improver (or a formulation that ``"needs_incumbent"``) without a plan (it is tried again once there is
one); a ``"deterministic"`` improver or formulation that would start from the incumbent value of its last run, which
it finished within its share (*same-start memory*).

Deferring.  A heuristic predicted to need over :data:`CONSTRUCT_SHARE` of the time left (times the slots) runs in
the later rounds, not the first pass (``split``: 10-14 s of 20 s at 32k nodes, on every family).

Waiting for the first plan.  A formulation that would start without a plan while a heuristic is running waits a
little (at most :data:`PLAN_WAIT_S`, or 5 % of the time left) for that plan, its warm start: started cold beside the
heuristics, the block solver found nothing in 6 s where, warm, it found the best plan.  (The executors pass a task's
plans on before its end, so a plan on its way is never mistaken for none.)

Without a plan.  Until a plan is held, the quick start is neither deferred nor skipped for its prediction (it runs
with the time left and honours its deadline: a stale prediction must not leave a short run with no plan), and later
rounds run on one slot too whatever time is left, keeping back at most a tenth of it instead of ``margin``.

Later rounds.  Once the first pass is handed out, a component whose latest run used its whole share (an improver or
formulation, or a probe), or that was skipped or started cold for want of a plan (first, once a plan exists), runs
again, with a new seed per run (``seed + 7919 * k``, ``k`` counting the later runs).  With one slot a round starts
only while ``min_round`` seconds remain and shares the time left less ``margin`` among the tasks of its round; with
several slots later runs take the time left like the long phase does.  When nothing else is left, free slots run
*copies*, with other seeds, of a running improver that shares the incumbent (LNS: the copies pass what they find to
each other), until a copy ends before its share does (more copies would only spin).

Time shares (of the time left when a task starts): ``construct``: :data:`CONSTRUCT_SHARE`, or twice the
prediction when that is more (:data:`PROBE_SHARE` for a component without figures); ``polish``:
:data:`POLISH_SHARE` each; ``long``: the time left split equally among the long tasks not yet started (with ``W``
slots: ``W`` of them run at once); reductions: their own ``share`` of the time left.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> from hybrid_remat.heuristics.checkpoints import ChenSqrtN
>>> s = Scheduler(Problem.single(chain(50, bytes=1), "100%"), heuristics=[ChenSqrtN(), KeepAll()])
>>> [t.name for t in s.construct], s.skipped[0][2]
(['keep_all'], 'keep-all fits the budget')
>>> s.begin(deadline=10.0)
>>> class View:                      # what the scheduler reads of the run: here, nothing found yet
...     def incumbent_value(self): return float("inf")
...     def finished(self): return False
>>> a = s.next(View(), 0.0, 0)
>>> a.task.name, a.seed, a.deadline
('keep_all', 0, 2.5)
>>> s.next(View(), 0.0, 1) is WAIT  # one more slot: nothing to give it while keep_all runs
True
>>> s.done(a, Outcome("valid", 0.01))
>>> s.next(View(), 0.01, 0) is DONE
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..interfaces import accepts
from .calibration_table import TABLE
from .execute import Outcome, honours_limits

__all__ = ["Scheduler", "Task", "Assignment", "WAIT", "DONE", "CONSTRUCT_SHARE", "POLISH_SHARE", "PROBE_SHARE",
           "PLAN_WAIT_S", "honours_limits"]

#: value from which a heuristic can be the quick start (0.1 per instance where it gave a plan); and the share of
#: its calibration instances where it must have planned, where its row says (``plans``)
QUICK_START_MIN_VALUE, QUICK_START_MIN_PLANS = 0.05, 0.9
#: share of the time left that a heuristic or bound may use
CONSTRUCT_SHARE = 0.25
#: the most of the time left a constructor formulation's or a bound's first-pass share may take
FIRST_PASS_CAP = 0.4
#: share of the time left that each improver gets on the first incumbent
POLISH_SHARE = 0.1
#: share of the time left of a construct-phase component's first slot when it has no calibration figures
PROBE_SHARE = 0.05
#: the reason prefix of a first-pass heuristic moved to a later round (:meth:`Scheduler._defer`)
DEFERRED = "deferred to a later round:"
#: the longest a formulation waits for a running heuristic's first plan
PLAN_WAIT_S = 1.0
#: seeds of later runs: ``seed + SEED_STEP * k``
SEED_STEP = 7919


class _Mark:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: :meth:`Scheduler.next`: nothing for this slot now (ask again after an event or a short wait)
WAIT = _Mark("WAIT")
#: :meth:`Scheduler.next`: nothing more for any slot once the running tasks end
DONE = _Mark("DONE")


@dataclass
class Task:
    """One run of one component: ``kind`` (heuristic, bound, improver, formulation, reduction), the object,
    its phase (construct, reduce, polish, long), a note prefix for its report row (``"second round: "``), its
    prediction and priority."""

    kind: str
    obj: object
    phase: str = "construct"
    note: str = ""
    predicted: float | None = None
    priority: float | None = None
    index: int = 0
    probe: bool = False

    @property
    def name(self) -> str:
        return str(getattr(self.obj, "name", type(self.obj).__name__))

    def again(self, note: str) -> Task:
        """The same component for a later round."""
        return replace(self, phase="long", note=note, probe=False)


@dataclass
class Assignment:
    """What an executor runs: ``task`` (its note says the round) with ``seed`` until ``deadline`` (a
    :func:`~hybrid_remat.limits.now` value; ``share`` seconds from when it was given).  ``entry`` numbers the
    task in :attr:`Scheduler.tasks` (a forked worker finds its component there), ``number`` the assignment in
    the run; ``contained``: the component does not declare ``"honours_limits"``, so it must run where it can be
    killed at its deadline."""

    task: Task
    entry: int
    seed: int
    share: float
    deadline: float
    number: int = 0
    round: int = 1
    copy: bool = False
    contained: bool = False
    start_value: float = math.inf


@dataclass
class _Later:
    """A component to run again: the entry, the round it would run in, why."""

    entry: int
    round: int
    needs_plan: bool


@dataclass
class _State:
    deadline: float = math.inf
    slots: int = 1
    seed: int = 0
    min_round: float = 0.0
    margin: float = 0.0
    pending: list = field(default_factory=list)    # first-pass entries not handed out, in order
    running: dict = field(default_factory=dict)    # assignment number -> Assignment
    later: list = field(default_factory=list)      # _Later, first in first out
    starts: dict = field(default_factory=dict)     # id(component) -> incumbent value its last run started from
    no_copies: set = field(default_factory=set)    # id(component) of improvers whose copies end early
    learned: dict = field(default_factory=dict)    # name -> seconds its probe took
    waiting_since: float | None = None
    stopped: str | None = None
    count: int = 0
    reruns: int = 0


class Scheduler:
    """Admission, order, shares and every later decision for one problem
    (module docstring).

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
        #: the quick start task (:meth:`_quick_start_first`), ``None`` when no heuristic qualifies
        self.quick = None
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
                                           + [replace(t, phase="construct", index=start + t.index) for t in early])
        self.construct = self._quick_start_first(self.construct)
        self.polish = self._by_priority([self._task("improver", o, "polish", i) for i, o in enumerate(imps)])
        forms_t.sort(key=lambda t: (float(getattr(t.obj, "rank", 10.0)), t.index))
        self.long = forms_t + [replace(t, phase="long", probe=False) for t in self.polish]
        if any(t.name in self.named for t in forms_t):  # the formulations asked for get the time the polish left
            self.long = forms_t
        #: the first pass, in order: what :attr:`Assignment.entry` numbers
        self.tasks: list = self.construct + self.reduce + self.polish + self.long
        #: every assignment handed out (tests compare executors with it)
        self.log: list = []
        #: called as ``on_skip(task, reason, slot)`` for each task skipped (the runner reports it)
        self.on_skip = lambda task, reason, slot: self.skips.append((task.name, reason))
        self.skips: list = []
        self.state = _State()
        self._value_now = math.inf
        self.begin()

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
        declared = getattr(task.obj, "constructs_on", None)   # uncalibrated: it says where it constructs
        if task.kind == "formulation" and not row and callable(declared) and task.predicted is not None:
            return bool(declared(self.problem)) and "needs_incumbent" not in set(getattr(task.obj, "capabilities", ()))
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
        return Task(kind, obj, phase, "", pred, prio, index, probe=val is None)

    def _quick_start_first(self, tasks: list) -> list:
        """``tasks`` with the *quick start* first: the calibrated heuristic that gave plans (value at least
        :data:`QUICK_START_MIN_VALUE`, ``plans`` module docstring) with the smallest predicted time."""
        quick = [t for t in tasks if t.kind == "heuristic" and t.predicted is not None
                 and (self.value(t.obj) or 0.0) >= QUICK_START_MIN_VALUE]
        if not quick:
            return tasks
        quick = [t for t in quick if float((self.table.get(t.name) or {}).get("plans", -1)) >= QUICK_START_MIN_PLANS
                 ] or quick
        first = min(quick, key=lambda t: (t.predicted, t.index))
        self.quick = first
        return [first] + [t for t in tasks if t is not first]

    @staticmethod
    def _by_priority(tasks: list) -> list:
        """Components without figures first (their short first slot), by ``rank``; then the calibrated ones by
        priority, the *share users* (module docstring) by ``rank`` after the last constructor; then the rest."""
        last = max((-t.priority for t in tasks if t.kind == "formulation" and (t.priority or 0) > 0), default=-1e300)

        def key(t):
            rank = float(getattr(t.obj, "rank", 10.0))
            if t.probe or t.priority is not None:
                return (0, 0.0, rank, t.index) if t.probe else (1, -t.priority, 0.0, t.index)
            return (1, last, 1.0 + rank, t.index) if t.kind == "heuristic" else (2, 0.0, rank, t.index)

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
            s = (PROBE_SHARE if task.probe else CONSTRUCT_SHARE) * left
            if task.predicted is not None:
                s = max(s, 2.0 * task.predicted + 0.05)
            return min(left, s, FIRST_PASS_CAP * left if task.kind in ("formulation", "bound") else left)
        if task.phase == "polish":
            return POLISH_SHARE * left
        return min(left, left * workers / max(workers, remaining))

    # ------------------------------------------------------------ the run
    def begin(self, *, deadline: float = math.inf, slots: int = 1, seed: int = 0, min_round: float = 0.0,
              margin: float = 0.0) -> None:
        """Start a run: ``slots`` tasks at once until ``deadline``; later
        rounds (one slot) while ``min_round`` seconds remain, ``margin`` kept
        back from their shares."""
        self.state = _State(deadline=float(deadline), slots=max(1, int(slots)), seed=int(seed),
                            min_round=float(min_round), margin=float(margin), pending=list(range(len(self.tasks))))
        self.log = []

    def stop(self, reason: str = "stopped") -> None:
        """Hand out nothing more (a signal, the caller's stop flag)."""
        if self.state.stopped is None:
            self.state.stopped = reason

    def running(self) -> list:
        """The assignments handed out and not yet done."""
        return list(self.state.running.values())

    def _busy(self, obj) -> bool:
        return any(a.task.obj is obj for a in self.state.running.values())

    def _skip(self, task: Task, reason: str, slot: int) -> None:
        self.on_skip(task, reason, slot)

    def _why_stop(self, view, now: float) -> str | None:
        if view.finished():
            return "gap closed"
        if self.state.stopped is not None:
            return self.state.stopped
        if now >= self.state.deadline:
            return "time limit"
        return None

    def next(self, view, now: float, slot: int = 0):
        """What ``slot`` runs now: an :class:`Assignment`, :data:`WAIT` or
        :data:`DONE`.

        ``view`` has ``incumbent_value()`` (``inf`` without a plan) and
        ``finished()`` (the gap closed or infeasibility proved); ``now`` is
        the run's clock (:func:`~hybrid_remat.limits.now`).
        """
        st = self.state
        self._value_now = float(view.incumbent_value())
        why = self._why_stop(view, now)
        if why is not None:
            for e in st.pending:
                self._skip(self.tasks[e], why, slot)
            st.pending, st.later = [], []
            return DONE
        left = st.deadline - now
        have_plan = math.isfinite(view.incumbent_value())
        pos = 0
        while pos < len(st.pending):
            e = st.pending[pos]
            t = self.tasks[e]
            if t.kind == "reduction":
                if st.running:
                    break  # the reductions run alone (each is a portfolio run of its own)
                del st.pending[pos]
                why = t.obj.skip_reason(self.problem, view.incumbent_value())
                if why:
                    self._skip(t, why, slot)
                    continue
                return self._assign(t, e, now, min(left, t.obj.share * left))
            if self._busy(t.obj):
                pos += 1
                continue
            rescue = not have_plan and t is self.quick   # *Without a plan* (module docstring)
            why = (self._why_skip(t, view, math.inf, have_plan) if rescue
                   else self._why_skip(t, view, left, have_plan) or self._defer(t, left))
            if why is not None:
                del st.pending[pos]
                self._skip(t, why, slot)
                if why == "no incumbent" and t.phase != "polish":
                    self._want(e, 2, needs_plan=True)
                elif why.startswith(DEFERRED):
                    self._want(e, 2, needs_plan=False)
                continue
            if t.kind == "formulation" and not have_plan and self._plan_may_come(now, left):
                return WAIT
            del st.pending[pos]
            remaining = sum(self.tasks[x].phase == "long" for x in st.pending) + 1
            return self._assign(t, e, now, self.share(t, left, remaining=remaining, workers=st.slots))
        if any(self.tasks[e].kind == "reduction" for e in st.pending):
            return WAIT  # the reductions wait for the construct phase to end
        return self._later(view, now, left, have_plan, slot)

    def _why_skip(self, t: Task, view, left: float, have_plan: bool) -> str | None:
        caps = set(getattr(t.obj, "capabilities", ()))
        pred = self.state.learned.get(t.name, t.predicted)
        if pred is not None and pred > left:
            return f"predicted {pred:.3g} s > {max(left, 0.0):.3g} s left"
        if t.kind == "bound" and getattr(t.obj, "infeasibility_only", False) and have_plan:
            return "a valid plan fits: nothing to prove infeasible"
        if not have_plan and (t.kind == "improver" or (t.kind == "formulation" and "needs_incumbent" in caps)):
            return "no incumbent"
        if self._same_start(t) and self.state.starts.get(id(t.obj), math.nan) == view.incumbent_value():
            return "same start as its last run (deterministic)"
        return None

    def _defer(self, t: Task, left: float) -> str | None:
        """Why a first-pass heuristic runs in a later round (module docstring, *Deferring*), or ``None``."""
        cap = CONSTRUCT_SHARE * left * self.state.slots
        if t.kind == "heuristic" and t.phase == "construct" and t.predicted is not None and t.predicted > cap:
            return f"{DEFERRED} predicted {t.predicted:.3g} s > its share {cap:.3g} s of the first pass"
        return None

    @staticmethod
    def _same_start(t: Task) -> bool:
        return t.kind in ("improver", "formulation") and "deterministic" in set(getattr(t.obj, "capabilities", ()))

    def _plan_may_come(self, now: float, left: float) -> bool:
        """A heuristic runs and the wait for its first plan is not over (module docstring)."""
        st = self.state
        if not any(a.task.kind == "heuristic" for a in st.running.values()):
            return False
        if st.waiting_since is None:
            st.waiting_since = now
        return now < st.waiting_since + min(PLAN_WAIT_S, 0.05 * left)

    def _later(self, view, now: float, left: float, have_plan: bool, slot: int):
        st = self.state
        one = st.slots == 1
        if not one or left >= st.min_round or not have_plan:
            order = [x for x in st.later if x.needs_plan] if have_plan else []
            order += [x for x in st.later if not x.needs_plan]
            for x in order:
                t = self.tasks[x.entry]
                if self._busy(t.obj):
                    continue
                st.later.remove(x)
                note = "second round: " if x.round == 2 else f"round {x.round}: "
                task = t.again(note)
                why = self._why_skip(task, view, left, have_plan)
                if why is not None:
                    self._skip(task, why, slot)
                    return self._later(view, now, left, have_plan, slot)
                if one:
                    n_round = 1 + sum(y.round == x.round for y in st.later)
                    keep = st.margin if have_plan else min(st.margin, 0.1 * left)
                    share = max(0.0, left - keep) / n_round
                else:
                    share = min(left, left * st.slots / max(st.slots, len(st.later) + 1))
                st.reruns += 1
                return self._assign(task, x.entry, now, share, seed=st.seed + SEED_STEP * st.reruns, rnd=x.round)
        for a in sorted(st.running.values(), key=lambda a: a.number):
            if self._copyable(a.task) and id(a.task.obj) not in st.no_copies:
                st.reruns += 1
                share = min(left, left * st.slots / max(st.slots, len(st.later) + 1))
                return self._assign(a.task.again("copy: "), a.entry, now, share,
                                    seed=st.seed + SEED_STEP * st.reruns, rnd=a.round, copy=True)
        return WAIT if st.running else DONE

    @staticmethod
    def _copyable(task: Task) -> bool:
        """An improver that shares the incumbent (LNS): a copy with another
        seed searches elsewhere and passes what it finds to the first, at
        little memory.  (Exact models are not copied: a race of SCIP seeds
        costs a model's memory per worker and starves the rest.)"""
        return task.kind == "improver" and "shares_incumbent" in set(getattr(task.obj, "capabilities", ()))

    def _assign(self, task: Task, entry: int, now: float, share: float, *, seed: int | None = None, rnd: int = 1,
                copy: bool = False) -> Assignment:
        st = self.state
        share = max(0.0, min(share, st.deadline - now))
        st.count += 1
        a = Assignment(task, entry, st.seed if seed is None else seed, share, min(st.deadline, now + share),
                       st.count, rnd, copy, not honours_limits(task.obj), self._value_now)
        st.running[a.number] = a
        self.log.append(a)
        return a

    def _want(self, entry: int, rnd: int, *, needs_plan: bool) -> None:
        obj = self.tasks[entry].obj
        st = self.state
        st.later = [x for x in st.later if self.tasks[x.entry].obj is not obj]
        st.later.append(_Later(entry, rnd, needs_plan))

    def done(self, a: Assignment, out: Outcome) -> None:
        """``a`` ended as ``out`` (a stopped or killed task: status ``stopped``)."""
        st = self.state
        st.running.pop(a.number, None)
        t = a.task
        if t.kind == "reduction":
            return
        obj = t.obj
        if t.probe and t.name not in st.learned:
            if out.seconds >= 0.9 * a.share and out.status not in ("valid", "bound", "error", "skipped"):
                out = replace(out, wants_more=True)  # its slot was too short: a later round
            elif out.status != "stopped":
                st.learned[t.name] = float(out.seconds)  # what it needs: its prediction from now on
        if a.copy:
            if not out.wants_more:
                st.no_copies.add(id(obj))
        elif self._same_start(t):
            forget = out.wants_more or out.needs_incumbent or out.status in ("error", "stopped")
            st.starts[id(obj)] = math.nan if forget else a.start_value
        if t.phase == "polish" or out.status == "stopped" or (a.copy and not out.wants_more):
            return  # its long-phase run follows / it broke its limits / a copy says nothing of the next run
        if not a.copy:
            st.later = [x for x in st.later if self.tasks[x.entry].obj is not obj]
        if out.needs_incumbent or out.wants_more:
            self._want(a.entry, a.round + 1, needs_plan=out.needs_incumbent)
