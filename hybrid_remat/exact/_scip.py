"""The one SCIP layer: every SCIP model of hybrid_remat is made, run and
freed here.

What it gives a model builder:

* :func:`scip_model` (:func:`new_model`) -- a context manager that makes a
  quiet, single threaded, seeded ``pyscipopt.Model`` and always calls
  ``model.free()``
  (the model/plugin reference cycle otherwise holds SCIP's memory until the
  cyclic GC runs; ``reference/tooling.md`` 1.11).
* :func:`set_limits` -- the time and node limits of a
  :class:`~hybrid_remat.limits.Limits` as SCIP parameters;
  :func:`apply_params` -- emphasis settings and raw parameters.
* :func:`run` -- the run loop: ``optimizeNogil`` in a worker thread, an
  event handler that reports every new incumbent (``on_solution``) and every
  trusted dual bound (``on_dual``) and interrupts SCIP from its own thread
  when the stop flag is set or the deadline passes; the waiting thread never
  calls SCIP.  A Ctrl-C is passed on: caught by Python in the waiting thread,
  or by SCIP itself (``misc/catchctrlc``: status ``userinterrupt`` that
  nobody asked for); :class:`RunResult` says ``interrupted`` and
  :meth:`RunResult.reraise` raises ``KeyboardInterrupt`` once the caller has
  collected what it needs.
* :data:`STATUS_MAP` / :func:`status_of` -- SCIP's status strings onto the
  library's (``optimal``, ``feasible``, ``infeasible``, ``no_solution``,
  ``error``), as cvxpy keeps one ``STATUS_MAP`` per backend.
* The trusted-bound rule (:func:`trusted_dual`, :class:`ObjectiveScale`,
  :func:`check_bound`), below.
* :class:`PushHeuristic` -- a SCIP primal heuristic that tries plans pushed
  from outside (local search, other solvers) inside a running solve.

The trusted-bound rule
----------------------
*When.*  SCIP's dual bound is read only in the SCIP thread (event handler or
after the solve); it is trusted when the status is ``optimal`` or
``infeasible``, when no primal solution exists, or when it lies strictly
below the primal bound (at a limit SCIP may report the primal bound as the
dual one).  It is then lowered by SCIP's own optimality tolerance
(:meth:`ObjectiveScale.bound`) before it leaves the model: every objective is
scaled so that its largest coefficient is 1 (:class:`ObjectiveScale`), so
that tolerance is relative to the data, and a cost of 1e-9 s is as safe as
one of 1e6 s.  Memory is counted in a unit chosen the same way
(:class:`MemoryScale`).

*In what scope.*  A dual bound bounds exactly the plans the model admits.
A formulation reports it (``on_bound``, ``lower_bound``) only when its model
is a relaxation of the class it names in ``bound_scope`` (e.g. the full
staged model for the ``"staged"`` class, with memory sizes rounded down);
a restricted model (coarser stages, a recomputation cap, fixed variables,
windows, conservative memory units) keeps its bound in ``stats`` only.

*Against plans.*  :func:`check_bound` compares every bound with the best
simulated plan: a bound above it by more than the tolerance is a numerical
failure (reported, bound dropped); within the tolerance it is clamped.

Examples
--------
>>> with scip_model("demo") as m:
...     x = m.addVar(vtype="B", obj=-1.0)
...     res = run(m)
...     res.status, round(m.getSolVal(m.getBestSol(), x))
('optimal', 1)
>>> status_of("timelimit", has_solution=True), status_of("nodelimit", has_solution=False)
('feasible', 'no_solution')
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

import numpy as np

from ..errors import SolverError

__all__ = [
    "STATUS_MAP", "LIMIT_STATUSES", "status_of", "new_model", "scip_model", "set_limits", "apply_params", "DEFAULT_PARAMS",
    "run", "RunResult", "trusted_dual", "ObjectiveScale", "MemoryScale", "check_bound", "PushHeuristic",
    "BOUND_RTOL", "INFINITY", "OwnsModel", "BuildTimeout",
]

#: SCIP_STAGE_SOLVING (a model stopped at a limit; ``optimize()`` resumes it)
_STAGE_SOLVING = 9  # pyscipopt.SCIP_STAGE.SOLVING

#: SCIP's "infinity" as pyscipopt reports it
INFINITY = 1e20

#: SCIP status -> what it proves: "optimal", "infeasible", "limit" (stopped early) or "error"
STATUS_MAP = {
    "optimal": "optimal",
    "infeasible": "infeasible",
    "unbounded": "error",
    "inforunbd": "error",
    **{s: "limit" for s in (
        "timelimit", "nodelimit", "totalnodelimit", "stallnodelimit", "gaplimit", "sollimit", "bestsollimit",
        "memlimit", "restartlimit", "userinterrupt", "primallimit", "duallimit", "unknown")},
}

#: SCIP statuses that mean "stopped early" rather than "proved something"
LIMIT_STATUSES = frozenset(k for k, v in STATUS_MAP.items() if v == "limit")

#: relative optimality tolerance of a scaled objective (SCIP's dual feasibility tolerance is 1e-7)
BOUND_RTOL = 1e-6

#: SCIP settings chosen by measurement (benchmarks/exact_tradeoffs.py; FCN8 @0.9: the default settings spend the
#: first 25 s in presolve, cut rounds and strong branching without improving the start, these find RENS plans)
DEFAULT_PARAMS = {"presolve": "FAST", "separating": "OFF", "heuristics": "AGGRESSIVE"}


def status_of(scip_status: str, has_solution: bool) -> str:
    """The library's status for a SCIP status string.

    ``optimal``/``infeasible`` as SCIP proved them (in the model's class),
    ``feasible`` or ``no_solution`` at a limit, ``error`` otherwise.
    """
    kind = STATUS_MAP.get(str(scip_status), "error")
    if kind == "optimal":
        return "optimal" if has_solution else "error"
    if kind == "infeasible":
        return "infeasible"
    if kind == "limit":
        return "feasible" if has_solution else "no_solution"
    return "error"


def new_model(name: str = "hybrid_remat", *, seed: int = 0, threads: int = 1, quiet: bool = True,
              params: dict | None = None):
    """A configured ``pyscipopt.Model`` (the caller frees it; prefer
    :func:`scip_model`, or an object whose ``free()`` a ``finally`` calls).

    Parameters
    ----------
    name : str
    seed : int
        ``randomization/randomseedshift``.
    threads : int
        LP threads and SCIP's thread cap (1 by default: several models may
        run side by side, one per thread).
    quiet : bool
        Hide SCIP's log (its error messages still go to stderr).
    params : dict, optional
        See :func:`apply_params`.

    Raises
    ------
    SolverError
        pyscipopt is not installed.
    """
    try:
        from pyscipopt import Model
    except ImportError as e:  # pragma: no cover - a core dependency
        raise SolverError(f"pyscipopt is needed for the exact models: {e}") from None
    m = Model(name)
    try:
        if quiet:
            m.hideOutput()
        m.setParam("randomization/randomseedshift", int(seed) % 2**31)
        m.setParam("lp/threads", max(1, int(threads)))
        m.setParam("parallel/maxnthreads", max(1, int(threads)))
        if params:
            apply_params(m, params)
    except BaseException:
        m.free()
        raise
    return m


@contextlib.contextmanager
def scip_model(name: str = "hybrid_remat", *, seed: int = 0, threads: int = 1, quiet: bool = True,
               params: dict | None = None, limits=None):
    """A :func:`new_model` freed on exit whatever happens; ``limits`` are set
    with :func:`set_limits` (:func:`run` sets them again before solving)."""
    m = new_model(name, seed=seed, threads=threads, quiet=quiet, params=params)
    try:
        if limits is not None:
            set_limits(m, limits)
        yield m
    finally:
        m.free()


def set_limits(model, limits) -> float:
    """Set ``limits/time`` (seconds left; SCIP counts total solving time, so
    the solving time so far is added) and ``limits/nodes`` (both reset to
    unlimited when ``limits`` has none).  Returns the seconds left (``inf``
    without a deadline)."""
    left = math.inf if limits is None else limits.left()
    if math.isfinite(left):
        spent = model.getSolvingTime() if model.getStage() == _STAGE_SOLVING else 0.0
        model.setParam("limits/time", max(0.0, float(left)) + spent)
    else:
        model.setParam("limits/time", 1e20)
    nodes = None if limits is None else limits.nodes
    model.setParam("limits/nodes", -1 if nodes is None else int(nodes))
    return left


def apply_params(model, params: dict) -> None:
    """Set SCIP parameters; the keys ``presolve``, ``separating`` and
    ``heuristics`` take an emphasis (``"FAST"``, ``"OFF"``, ``"AGGRESSIVE"``,
    ``"DEFAULT"``), every other key is a SCIP parameter name."""
    from pyscipopt import SCIP_PARAMSETTING

    setters = {"presolve": model.setPresolve, "separating": model.setSeparating, "heuristics": model.setHeuristics}
    for k, v in params.items():
        if k in setters:
            setters[k](getattr(SCIP_PARAMSETTING, str(v).upper()))
        else:
            model.setParam(k, v)


class BuildTimeout(SolverError):
    """Model construction did not finish before the deadline (or the stop flag was set)."""


class OwnsModel:
    """Base of the objects that build and own a SCIP model (``self.model``):
    ``free()`` releases it (idempotent) and the object is a context
    manager that frees it on exit."""

    model = None

    def free(self) -> None:
        """Release the SCIP model."""
        if getattr(self, "model", None) is not None:
            try:
                self.model.free()
            finally:
                self.model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.free()


# ------------------------------------------------------------------ scaling
@dataclass(frozen=True)
class ObjectiveScale:
    """``real = offset + scale * model`` for an objective whose model
    coefficients are the real ones divided by ``scale`` (the largest), so
    that SCIP's absolute tolerances become relative to the data.

    Examples
    --------
    >>> s = ObjectiveScale.of([1e-9, 3e-9], offset=4e-9)
    >>> s.coef(3e-9), s.real(2.0)
    (1.0, 1e-08)
    >>> s.bound(2.0) < s.real(2.0)
    True
    """

    scale: float = 1.0
    offset: float = 0.0

    @classmethod
    def of(cls, costs, offset: float = 0.0) -> ObjectiveScale:
        """Scale by the largest finite ``|cost|`` (1 when there is none)."""
        c = np.abs(np.asarray(costs, dtype=np.float64).ravel())
        c = c[np.isfinite(c) & (c > 0)]
        return cls(float(c.max()) if c.size else 1.0, float(offset))

    def coef(self, cost: float) -> float:
        """A real cost as a model coefficient."""
        return float(cost) / self.scale

    def real(self, model_value: float) -> float:
        """A model objective value in real units."""
        return self.offset + self.scale * float(model_value)

    def model(self, real_value: float) -> float:
        """A real objective value in model units."""
        return (float(real_value) - self.offset) / self.scale

    def slack(self, model_value: float) -> float:
        """SCIP's tolerance around a model value, in model units."""
        return BOUND_RTOL * max(1.0, abs(float(model_value)))

    def bound(self, model_dual: float) -> float:
        """A trusted dual bound in real units, lowered by the tolerance."""
        return self.real(float(model_dual) - self.slack(model_dual))

    def tolerance(self, real_value: float) -> float:
        """The real-unit tolerance within which a bound meets a plan's value."""
        return self.scale * 2.0 * self.slack(self.model(real_value)) + 1e-12 * abs(float(real_value))


@dataclass(frozen=True)
class MemoryScale:
    """How bytes become model units: sizes rounded up, the budget down.

    Attributes
    ----------
    unit : int
        Bytes per unit.
    budget : int
        ``floor(B / unit)``.
    sizes : ndarray of int64
        ``ceil(bytes / unit)`` per node.
    exact : bool
        ``unit`` divides every size, so model memory is exact (the budget is
        floored without loss: memory is a multiple of ``unit``).
    relaxed : bool
        Sizes were rounded *down* (``relax=True`` with an inexact unit): the
        model then admits every plan that fits in bytes (and a few that do
        not), so its dual bound bounds the modelled class; its solutions
        must be checked by the simulator (they always are).
    """

    unit: int
    budget: int
    sizes: np.ndarray = field(repr=False)
    exact: bool
    relaxed: bool = False

    @property
    def bound_valid(self) -> bool:
        """Whether the model's optimum is at most the best byte-feasible plan's."""
        return self.exact or self.relaxed

    def units(self, budget_bytes) -> int:
        """Another budget in this unit (floored; conservative unless exact)."""
        return int(int(budget_bytes) // self.unit)

    @classmethod
    def choose(cls, bytes_, budget: int, *, max_units: int = 1 << 24, target_units: int = 1 << 18,
               relax: bool = False) -> MemoryScale:
        """The gcd of all sizes when that leaves at most ``max_units`` budget
        units (exact: memory is always a multiple of it, so flooring the
        budget loses nothing), else a multiple of it giving about
        ``target_units``: sizes rounded up (conservative: every model plan
        fits in bytes) or, with ``relax=True``, down (a relaxation: every
        plan that fits in bytes is a model plan, since
        ``sum floor(b/u) <= floor(sum b / u) <= floor(B/u)``).

        Examples
        --------
        >>> MemoryScale.choose([3, 5], 10, max_units=2, target_units=2).sizes.tolist()
        [1, 1]
        >>> MemoryScale.choose([3, 5], 10, max_units=2, target_units=2, relax=True).sizes.tolist()
        [0, 1]
        """
        vals = [int(b) for b in np.asarray(bytes_).tolist() if b > 0]
        g = reduce(math.gcd, vals) if vals else 1
        unit = g
        budget = int(budget)
        if budget // g > max_units:
            unit = g * max(1, math.ceil(budget / g / target_units))
        exact = unit == g
        b = np.asarray(bytes_, dtype=np.int64)
        relaxed = bool(relax and not exact)
        sizes = b // unit if relaxed else -(-b // unit)
        return cls(int(unit), int(budget // unit), sizes.astype(np.int64), bool(exact), relaxed)


def check_bound(bound: float, best_value: float, tolerance: float) -> tuple[float, str]:
    """A bound checked against the best simulated plan's value.

    Returns ``(bound, note)``: the bound (clamped to ``best_value`` when it
    exceeds it by at most ``tolerance``), or ``-inf`` with a note when it
    exceeds it by more (a numerical failure: never report it).

    Examples
    --------
    >>> check_bound(8.0 + 1e-12, 8.0, 1e-9)
    (8.0, '')
    >>> check_bound(9.0, 8.0, 1e-9)[0]
    -inf
    """
    if not math.isfinite(bound) or not math.isfinite(best_value) or bound <= best_value:
        return float(bound), ""
    if bound - best_value <= tolerance:
        return float(best_value), ""
    return float("-inf"), (f"bound {bound:.12g} exceeds a simulated plan's value {best_value:.12g} "
                           f"(tolerance {tolerance:.3g}): dropped as a numerical failure")


def trusted_dual(model, status: str | None = None) -> float | None:
    """SCIP's dual bound (model units) when the rule of the module docstring
    trusts it, else ``None``.  Call it from the SCIP thread or after a solve."""
    db = model.getDualbound()
    if not abs(db) < 1e19:
        return None
    if status in ("optimal", "infeasible"):
        return float(db)
    pb = model.getPrimalbound()
    if abs(pb) >= 1e19 or db < pb - 1e-9 * max(1.0, abs(pb)):
        return float(db)
    return None


# ------------------------------------------------------------------- run loop
#: model -> [the current run's event callback]; one SCIP event handler per model, however often it is run
_EVENT_HOLDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _event_holder(model) -> list:
    from pyscipopt import SCIP_EVENTTYPE

    holder = _EVENT_HOLDERS.get(model)
    if holder is None:
        holder = [None]

        def dispatch(m, event, _holder=holder):
            cb = _holder[0]
            if cb is not None:
                cb(m, event)

        model.attachEventHandlerCallback(
            dispatch,
            [SCIP_EVENTTYPE.BESTSOLFOUND, SCIP_EVENTTYPE.NODESOLVED, SCIP_EVENTTYPE.LPSOLVED,
             SCIP_EVENTTYPE.DUALBOUNDIMPROVED],
            name="hybrid_remat_run",
        )
        _EVENT_HOLDERS[model] = holder
    return holder


@dataclass
class RunResult:
    """What :func:`run` saw.

    Attributes
    ----------
    scip_status : str
    status : str
        :func:`status_of` the SCIP status (``optimal`` means optimal *for the
        model*, which may be a restriction).
    has_solution : bool
    dual : float or None
        The trusted dual bound in model units (best seen during the solve).
    nodes : int
    seconds : float
    interrupted : bool
        A Ctrl-C arrived (see :meth:`reraise`).
    errors : list of str
        Exceptions raised by callbacks (SCIP was interrupted).
    """

    scip_status: str
    status: str
    has_solution: bool
    dual: float | None
    nodes: int
    seconds: float
    interrupted: bool = False
    errors: list = field(default_factory=list)

    def reraise(self) -> None:
        """Raise ``KeyboardInterrupt`` if a Ctrl-C arrived during the solve."""
        if self.interrupted:
            raise KeyboardInterrupt

    def stats(self) -> dict:
        """The figures formulations put in their ``stats``."""
        out = {"scip_status": self.scip_status, "nodes": self.nodes, "solve_s": round(self.seconds, 3)}
        if self.errors:
            out["callback_errors"] = self.errors[:3]
        return out


def run(model, *, limits=None, on_solution: Callable | None = None, on_dual: Callable | None = None) -> RunResult:
    """Solve ``model`` within ``limits``, reporting as it goes.

    Parameters
    ----------
    model : pyscipopt.Model
        Built, with its start added; :func:`set_limits` is applied here.
    limits : Limits, optional
        Deadline, node limit and stop flag (``limits.stop``; a private flag
        when ``None``).
    on_solution : callable, optional
        ``on_solution(model, sol)`` for each new best solution, in the SCIP
        thread (read values with ``model.getSolVal(sol, var)``).
    on_dual : callable, optional
        ``on_dual(value)`` with each improved trusted dual bound (model
        units), in the SCIP thread.

    Callbacks must not raise; if one does, SCIP is interrupted and the error
    is listed in :attr:`RunResult.errors`.  The caller raises
    ``KeyboardInterrupt`` (:meth:`RunResult.reraise`) after collecting its
    results.
    """
    from pyscipopt import SCIP_EVENTTYPE

    t0 = time.perf_counter()
    stop = getattr(limits, "stop", None) or threading.Event()
    deadline = getattr(limits, "deadline", math.inf)
    we_stopped = threading.Event()
    errors: list = []
    best_dual = [None]
    set_limits(model, limits)

    def on_event(m, event):
        try:
            if event.getType() == SCIP_EVENTTYPE.BESTSOLFOUND and on_solution is not None:
                on_solution(m, m.getBestSol())
            db = trusted_dual(m)
            if db is not None and (best_dual[0] is None or db > best_dual[0]):
                best_dual[0] = db
                if on_dual is not None:
                    on_dual(db)
            if stop.is_set() or we_stopped.is_set() or time.perf_counter() > deadline:
                we_stopped.set()
                m.interruptSolve()
        except Exception as e:  # never let a callback error escape into SCIP
            errors.append(repr(e))
            we_stopped.set()
            with contextlib.suppress(Exception):
                m.interruptSolve()

    holder = _event_holder(model)
    holder[0] = on_event
    worker_error: list = []

    def work():
        try:
            model.optimizeNogil()
        except Exception as e:
            worker_error.append(repr(e))

    th = threading.Thread(target=work, name="scip-solve", daemon=True)
    th.start()
    interrupted = False
    try:
        while th.is_alive():
            th.join(0.1)
            if stop.is_set():
                break
    except KeyboardInterrupt:
        interrupted = True
    if th.is_alive():
        we_stopped.set()  # the event handler interrupts SCIP from its own thread (never call SCIP from here)
        th.join()
    if worker_error:
        errors.append(worker_error[0])
    status = model.getStatus()
    if status == "userinterrupt" and not we_stopped.is_set() and not stop.is_set() and not errors:
        interrupted = True  # SCIP caught a Ctrl-C itself (misc/catchctrlc): pass it on
    if interrupted:
        stop.set()
    has_sol = model.getNSols() > 0
    db = trusted_dual(model, status)
    if db is not None and (best_dual[0] is None or db > best_dual[0]):
        best_dual[0] = db
    holder[0] = None
    lib_status = "error" if worker_error else status_of(status, has_sol)
    return RunResult(status, lib_status, has_sol, best_dual[0], int(model.getNNodes()),
                     time.perf_counter() - t0, interrupted, errors)


# -------------------------------------------------------------- pushed plans
class PushHeuristic:
    """Plans from outside tried inside a running solve (a SCIP primal heuristic).

    ``push(values)`` (any thread) queues a complete assignment
    ``{variable name: value}``; SCIP's thread tries each at its next
    heuristic call with ``trySol``.  Variables fixed or aggregated by
    presolve are left to SCIP.  Counts go to ``stats`` (``pushed``,
    ``push_accepted``, ``push_rejected``, ``push_error``).

    Examples
    --------
    >>> with scip_model() as m:
    ...     x = m.addVar("x", vtype="I", ub=5, obj=-1.0)
    ...     h = PushHeuristic.include(m, "demo")
    ...     h.push({"x": 5.0})
    ...     run(m).status
    'optimal'
    """

    def __init__(self, model, stats: dict | None = None):
        self.model = model
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.stats = stats if stats is not None else {}
        self._by_name = None

    def push(self, values: dict) -> None:
        self.queue.put(values)
        self.stats["pushed"] = self.stats.get("pushed", 0) + 1

    @classmethod
    def include(cls, model, name: str, description: str = "plans pushed from outside", stats: dict | None = None):
        """Create one and include it in ``model`` (before solving)."""
        from pyscipopt import SCIP_HEURTIMING, SCIP_RESULT, Heur

        me = cls(model, stats)
        me._by_name = {v.name: v for v in model.getVars()}

        class _Heur(Heur):
            def heurexec(self, heurtiming, nodeinfeasible):
                return {"result": me._try_all(self.model, self, SCIP_RESULT)}

        model.includeHeur(_Heur(), f"hr_{name}", description, "Y",
                          timingmask=SCIP_HEURTIMING.AFTERLPNODE | SCIP_HEURTIMING.AFTERPSEUDONODE
                          | SCIP_HEURTIMING.BEFORENODE, freq=1)
        return me

    def _try_all(self, m, heur, RES):
        result = RES.DIDNOTRUN
        while True:
            try:
                values = self.queue.get_nowait()
            except queue.Empty:
                return result
            if result == RES.DIDNOTRUN:
                result = RES.DIDNOTFIND
            try:
                sol = m.createSol(heur)
                for name, x in values.items():
                    var = self._by_name.get(name)
                    if var is None:
                        continue
                    tvar = m.getTransformedVar(var)
                    if tvar.getStatus() not in ("LOOSE", "COLUMN"):
                        continue  # fixed or aggregated by presolve: SCIP derives its value
                    m.setSolVal(sol, tvar, x)
                if m.trySol(sol, printreason=False):
                    result = RES.FOUNDSOL
                    self.stats["push_accepted"] = self.stats.get("push_accepted", 0) + 1
                else:
                    self.stats["push_rejected"] = self.stats.get("push_rejected", 0) + 1
            except Exception as e:  # never raise inside SCIP
                self.stats["push_error"] = repr(e)
