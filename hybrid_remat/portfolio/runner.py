"""The portfolio runner: the assignments of the scheduler, run by an
executor, results into the ledger, within one deadline.

One loop (:meth:`_Run.drive`) asks the
:class:`~hybrid_remat.portfolio.scheduler.Scheduler` what each free slot of
the executor runs next and tells it how each assignment ended; the two
executors only execute.

``workers=1`` runs the portfolio *in this process* (:class:`InThread`),
task after task: a run with a seed and node or work limits repeats exactly,
components may keep state (tests record calls), a debugger or profiler
sees them, and nothing is pickled.  Each task runs in a short-lived thread
while the main thread waits in short steps: it mirrors the caller's
``stop``, handles signals, sets the task's stop flag at its deadline and
returns at the deadline plus :data:`ABANDON_S` even if a task does not.  A
component that does not declare ``"honours_limits"`` runs instead in a
forked one-worker :class:`~hybrid_remat.portfolio.workers.Pool`, killed at
its deadline (it streams its plans, so nothing reported is lost).

``workers=W > 1`` forks ``W`` worker processes that run the assignments
they are given and share the incumbent and bounds through the parent
(:mod:`hybrid_remat.portfolio.workers`).

Signals.  In the main thread the runner catches the signals it is given
(default SIGINT; the CLI adds SIGTERM) while it runs, where no other handler
is installed: the handler only sets a flag; every running task is asked to
stop and the runner returns within about a second with the best plan
(:attr:`PortfolioRun.signal` names the signal).

Reductions.  On a multi-device problem the reductions
(:mod:`~hybrid_remat.portfolio.reduce`) run after the heuristics and bounds
(fast: they give the first plan and let a reduction that cannot beat it be
skipped), before the improvers and formulations, alone, in this process's
main thread: each solves its reduced problem with this very runner (the same
worker count, seed and limits, its own ledger) until its share of the time
left, passing its plans and bounds on as they come; the caller's stop flag,
a signal or a closed gap stops it too.

Stopping early.  When a plan reaches a bound over every plan (or a bound
over every plan is ``+inf``) every task is asked to stop and the rest are
skipped ("gap closed").
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..limits import Limits, now
from .execute import LedgerView, Outcome, execute
from .ledger import Ledger, SourceReport
from .scheduler import DONE, WAIT, Scheduler, honours_limits
from .workers import Pool, SharedIncumbent, fork_context

__all__ = ["run_portfolio", "PortfolioRun", "honours_limits", "InThread", "ABANDON_S", "POLL_S"]

#: seconds an in-process task may run past its stop request before the runner goes on without it
ABANDON_S = 0.5
#: the main thread's waiting step
POLL_S = 0.05


@dataclass
class PortfolioRun:
    """What :func:`run_portfolio` did besides filling the ledger."""

    ledger: Ledger
    workers: int = 1
    signal: str | None = None
    stopped_by_caller: bool = False
    abandoned: list = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return self.signal is not None or self.stopped_by_caller


@contextmanager
def catch_signals(names, on_signal):
    """While inside, ``on_signal(name)`` handles each named signal (only in
    the main thread, only where the default handler is installed, or a
    handler marked ``yields_to_solve``)."""
    saved = []
    if threading.current_thread() is threading.main_thread():
        for nm in names:
            sig = getattr(signal, nm, None)
            if sig is None:
                continue
            cur = signal.getsignal(sig)
            # the default handlers, or one that yields to a solve (the CLI's SIGTERM handler)
            if cur in (signal.default_int_handler, signal.SIG_DFL) or getattr(cur, "yields_to_solve", False):
                saved.append((sig, cur))
                signal.signal(sig, lambda s, f, _nm=nm: on_signal(_nm))
    try:
        yield
    finally:
        for sig, cur in saved:
            signal.signal(sig, cur)


def _forked_pool(run, workers: int):
    """A :class:`~hybrid_remat.portfolio.workers.Pool` sharing the incumbent
    through a temporary directory (removed by ``pool.close()``)."""
    tmp = tempfile.mkdtemp(prefix="hybrid_remat_portfolio_")
    shared = SharedIncumbent(run.ctx, tmp)
    pool = Pool(run.ctx, run.problem, run.sched.tasks, ledger=run.ledger, shared=shared, workers=workers,
                nodes=run.nodes, work=run.work, send_all=workers == 1)
    close = pool.close

    def close_and_clean():
        close()
        shutil.rmtree(tmp, ignore_errors=True)

    pool.close = close_and_clean
    return pool


class InThread:
    """The in-process executor: one assignment at a time, in a short-lived
    thread, while the main thread waits in short steps (module docstring).
    A ``contained`` assignment (its component does not declare
    ``"honours_limits"``) goes to a one-worker forked
    :class:`~hybrid_remat.portfolio.workers.Pool`, killed at its deadline."""

    def __init__(self, run):
        self.run = run
        self.current = None  # (assignment, thread, stop flag, box, started)
        self.asked_at = None
        self.child = None
        self.component_stopped = False

    def idle(self) -> list:
        return [] if self.busy() else [0]

    def busy(self) -> bool:
        return self.current is not None or (self.child is not None and self.child.busy())

    def submit(self, slot: int, a) -> None:
        run = self.run
        if a.contained and run.ctx is not None:
            if self.child is None:
                self.child = _forked_pool(run, 1)
            self.child.submit(0, a)
            return
        task_stop = threading.Event()
        lim = Limits(a.deadline, run.work, task_stop, run.nodes)
        box: dict = {}

        def target():
            box["out"] = execute(a.task, run.problem, run.ledger, run.view, limits=lim, share=a.share, seed=a.seed)

        th = threading.Thread(target=target, name=f"portfolio-{a.task.name}", daemon=True)
        self.current, self.asked_at = (a, th, task_stop, box, now()), None
        th.start()

    def wait(self, timeout: float) -> list:
        if self.child is not None and self.child.busy():
            return self.child.wait(timeout)
        if self.current is None:
            return []
        a, th, task_stop, box, started = self.current
        th.join(timeout)
        t = now()
        if th.is_alive():
            if self.asked_at is None and (self.run.halt.is_set() or t > a.deadline):
                task_stop.set()
                self.asked_at = t
            if self.asked_at is not None and t > max(self.asked_at, a.deadline) + ABANDON_S:
                # it broke its promise: go on without it (its later plans still count until the end)
                self.run.info.abandoned.append(a.task.name)
                self.run.ledger.add_report(SourceReport(a.task.name, a.task.kind, "stopped", seconds=t - started,
                                                        note="did not return within its limits (left running)"))
                self.current = None
                return [(a, Outcome("stopped", t - started))]
            return []
        if task_stop.is_set() and self.asked_at is None:
            self.component_stopped = True  # the component set its stop flag (a Ctrl-C it caught itself): stop the run
        self.current = None
        return [(a, box.get("out") or Outcome("error", t - started))]

    def request_stop(self) -> None:
        if self.child is not None:
            self.child.request_stop()

    def child_asked_stop(self) -> bool:
        return self.component_stopped or (self.child is not None and self.child.child_asked_stop())

    def close(self) -> None:
        if self.child is not None:
            self.child.close()


class _Run:
    def __init__(self, problem, sched: Scheduler, ledger: Ledger, *, deadline, seed, nodes, work, stop, workers,
                 second_round_min_s, second_round_margin_s):
        self.problem, self.sched, self.ledger = problem, sched, ledger
        self.deadline, self.seed, self.nodes, self.work = deadline, seed, nodes, work
        self.user_stop, self.workers = stop, workers
        self.min_round, self.margin = second_round_min_s, second_round_margin_s
        self.halt = threading.Event()
        self.ctx = fork_context()
        self.info = PortfolioRun(ledger, workers)
        self.view = LedgerView(ledger)

    # ------------------------------------------------------------ state
    def on_signal(self, name: str) -> None:
        if self.info.signal is None:
            self.info.signal = name
        self.halt.set()

    def check(self) -> None:
        """Mirror the caller's stop flag; stop everything when nothing is left to find."""
        if self.user_stop is not None and self.user_stop.is_set() and not self.halt.is_set():
            self.info.stopped_by_caller = True
            self.halt.set()
        if self.ledger.finished():
            self.halt.set()

    def stopping(self) -> bool:
        """Whether a nested run must stop: a signal, the caller's flag, the gap closed."""
        self.check()
        return self.halt.is_set()

    # ------------------------------------------------------------ the loop
    def drive(self, executor) -> None:
        """Until the scheduler is done: give each free slot what the
        scheduler says, pass back how each assignment ended."""
        sched = self.sched
        worker_of = (lambda slot: -1) if isinstance(executor, InThread) else (lambda slot: slot)
        sched.on_skip = lambda task, reason, slot: self.ledger.add_report(
            SourceReport(task.name, task.kind, "skipped", note=reason, worker=worker_of(slot)))
        sched.begin(deadline=self.deadline, slots=len(executor.idle()), seed=self.seed, min_round=self.min_round,
                    margin=self.margin)
        try:
            while True:
                self.check()
                if self.halt.is_set():
                    sched.stop("stopped")
                if self.halt.is_set() or now() >= self.deadline:
                    executor.request_stop()
                verdict = None
                for slot in executor.idle():
                    verdict = sched.next(self.view, now(), slot)
                    if verdict is WAIT or verdict is DONE:
                        break
                    if verdict.task.kind == "reduction":
                        self.reduction(verdict)
                        sched.done(verdict, Outcome("done"))
                        break
                    executor.submit(slot, verdict)
                if verdict is DONE and not executor.busy():
                    return
                for a, out in executor.wait(POLL_S if executor.busy() else 0.0):
                    sched.done(a, out)
                if executor.child_asked_stop():
                    self.halt.set()
        finally:
            executor.close()

    def reduction(self, a) -> None:
        """Run a reduction (a portfolio run of its own) here, until its deadline."""
        a.task.obj.run(self.problem, self.ledger, deadline=a.deadline, seed=self.seed, nodes=self.nodes,
                       work=self.work, workers=self.workers, stop=self.stopping, second_round_min_s=self.min_round,
                       second_round_margin_s=self.margin)
        self.check()

def run_portfolio(problem, *, deadline: float, heuristics=(), bounds=(), improvers=(), formulations=(),
                  reductions=(), workers: int = 1, seed: int = 0, node_limit: int | None = None, work_limit: int | None = None,
                  stop=None, on_improve=None, signals=("SIGINT",), second_round_min_s: float = 5.0,
                  second_round_margin_s: float = 2.0, ledger: Ledger | None = None, table=None,
                  scheduler: Scheduler | None = None, executor: str | None = None) -> PortfolioRun:
    """Run the portfolio on ``problem`` until ``deadline`` (a
    :func:`~hybrid_remat.limits.now` value); the ledger holds the result.

    Parameters
    ----------
    heuristics, bounds, improvers, formulations : sequences of objects
        Already resolved (names are the caller's business).
    reductions : sequence of SubPortfolio
        Run after the heuristics and bounds
        (:func:`~hybrid_remat.portfolio.reduce.reductions_for`).
    workers : int
        1: in this process (module docstring); more: forked workers.
    node_limit, work_limit : int, optional
        ``Limits.nodes`` and ``Limits.work`` of every task (tests).
    stop : Event, optional
        The caller's stop flag (read, never set).
    signals : tuple of str
        Signal names handled while running (main thread only).
    executor : {"thread", "fork"}, optional
        Who runs the assignments: this process (default for one worker) or
        forked worker processes (default for more).  The scheduler decides
        the same way for both.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> from hybrid_remat.heuristics.keep_all import KeepAll
    >>> run = run_portfolio(Problem.single(chain(4, bytes=1), "100%"), deadline=now() + 5, heuristics=[KeepAll()])
    >>> run.ledger.status(), run.interrupted
    ('optimal', False)
    """
    ledger = ledger or Ledger(problem, on_improve=on_improve)
    sched = scheduler or Scheduler(problem, heuristics=heuristics, bounds=bounds, improvers=improvers,
                                   formulations=formulations, reductions=reductions, table=table)
    for kind, obj, why in sched.skipped:
        ledger.add_report(SourceReport(getattr(obj, "name", type(obj).__name__), kind, "skipped", note=why))
    ctx = fork_context()
    workers = max(1, int(workers)) if ctx is not None else 1
    run = _Run(problem, sched, ledger, deadline=deadline, seed=seed, nodes=node_limit, work=work_limit, stop=stop,
               workers=workers, second_round_min_s=second_round_min_s, second_round_margin_s=second_round_margin_s)
    if executor is None:
        executor = "thread" if workers == 1 else "fork"
    ex = InThread(run) if executor == "thread" or ctx is None else _forked_pool(run, workers)
    with catch_signals(signals, run.on_signal):
        try:
            run.drive(ex)
        except KeyboardInterrupt:  # a SIGINT with a handler other than ours (or outside the main thread's wait)
            run.on_signal("SIGINT")
    ledger.seal()
    return run.info
