"""The run loop: solve in a worker thread, report incumbents and trusted
bounds as found, stop on the flag or the deadline, pass Ctrl-C on (see
the package docstring).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from .model import set_limits
from .status import status_of, trusted_dual

__all__ = ["run", "RunResult", "solve_limits", "cap_nodes", "DEFAULT_SECONDS"]

#: the time limit of a formulation on SCIP called without ``limits`` (``solve(problem)``)
DEFAULT_SECONDS = 60.0


def solve_limits(limits=None):
    """The :class:`~hybrid_remat.limits.Limits` a formulation's ``solve``
    works within: ``limits``, or :data:`DEFAULT_SECONDS` when it is
    ``None``, and always a stop flag (a private one when the caller has none).

    Examples
    --------
    >>> from hybrid_remat.limits import Limits
    >>> lim = solve_limits(Limits(nodes=10))
    >>> lim.nodes, lim.left(), lim.stop is not None
    (10, inf, True)
    >>> 0 < solve_limits().left() <= DEFAULT_SECONDS
    True
    """
    from dataclasses import replace

    from ..limits import Limits

    lim = limits if limits is not None else Limits.seconds(DEFAULT_SECONDS)
    return lim if lim.stop is not None else replace(lim, stop=threading.Event())


def cap_nodes(limits, node_limit: int | None):
    """``limits`` (``None``: no limit) with at most ``node_limit`` branch and
    bound nodes (the smaller of the two node limits).

    Examples
    --------
    >>> from hybrid_remat.limits import Limits
    >>> cap_nodes(None, 100).nodes, cap_nodes(Limits(nodes=10), 100).nodes
    (100, 10)
    """
    from dataclasses import replace

    from ..limits import Limits

    lim = limits if limits is not None else Limits()
    if node_limit is None:
        return lim
    return replace(lim, nodes=int(node_limit) if lim.nodes is None else min(int(node_limit), lim.nodes))


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



# SCIPinterruptSolve may be called from the problem to the presolved stage and while solving, not
# in between (INITSOLVE: a warm start found while the solve starts); later events interrupt then
_INTERRUPTIBLE = frozenset(range(1, 8)) | {9}


def _interrupt(m) -> None:
    """Ask SCIP to stop where its stage allows it (else the next event does)."""
    if m.getStage() in _INTERRUPTIBLE:
        m.interruptSolve()


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
    # SCIP would install its own SIGINT handler for the solve and swallow Ctrl-C (the caller, e.g. the
    # portfolio's main thread, never hears of it): leave signals to Python; a stop request interrupts SCIP
    model.setBoolParam("misc/catchctrlc", False)

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
                _interrupt(m)
        except Exception as e:  # never let a callback error escape into SCIP
            errors.append(repr(e))
            we_stopped.set()
            with contextlib.suppress(Exception):
                _interrupt(m)

    holder = _event_holder(model)
    holder[0] = on_event
    worker_error: list = []

    done = threading.Event()  # not Thread.join: a Ctrl-C inside join() can leave is_alive() False while the
    # thread still runs (CPython 3.11, bpo-45274's fix), and the model would be freed under SCIP (a segfault)

    def work():
        try:
            model.optimizeNogil()
        except Exception as e:
            worker_error.append(repr(e))
        finally:
            done.set()

    th = threading.Thread(target=work, name="scip-solve", daemon=True)
    interrupted = False
    try:
        th.start()
        while not done.wait(0.1):
            if stop.is_set():
                break
    except KeyboardInterrupt:
        interrupted = True
    if th.ident is not None and not done.is_set():
        we_stopped.set()  # the event handler interrupts SCIP from its own thread (never call SCIP from here)
        while not done.is_set():  # SCIP stops at its next event; further signals do not hurry it
            try:
                done.wait(0.1)
            except KeyboardInterrupt:
                interrupted = True
    if worker_error:
        errors.append(worker_error[0])
    status = model.getStatus()
    if status == "userinterrupt" and not we_stopped.is_set() and not stop.is_set() and not errors:
        interrupted = True  # SCIP caught a Ctrl-C itself (a model with misc/catchctrlc set again): pass it on
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
