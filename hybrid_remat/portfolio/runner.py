"""The portfolio runner: tasks of the scheduler, run where they can be
stopped, results into the ledger, within one deadline.

``workers=1`` runs the portfolio *in this process*, task after task, in a
fixed order: a run with a seed and node or work limits repeats exactly,
components may keep state (tests record calls), a debugger or profiler
sees them, and nothing is pickled.  Each task runs in a short-lived thread
while the main thread waits in short steps: it mirrors the caller's
``stop``, handles signals, sets the task's stop flag at its deadline and
returns at the deadline plus :data:`ABANDON_S` even if a task does not.  A
component that does not declare ``"honours_limits"`` runs instead in a
forked one-worker :class:`~hybrid_remat.portfolio.workers.Pool`, killed at
its deadline (it streams its plans, so nothing reported is lost).

``workers=W > 1`` forks ``W`` worker processes that take tasks from the
same ordered list and share the incumbent and bounds through the parent
(:mod:`hybrid_remat.portfolio.workers`).

Signals.  In the main thread the runner catches the signals it is given
(default SIGINT; the CLI adds SIGTERM) while it runs, where no other handler
is installed: the handler only sets a flag; every running task is asked to
stop and the runner returns within about a second with the best plan
(:attr:`PortfolioRun.signal` names the signal).

Reductions.  On a multi-device problem the reductions
(:mod:`~hybrid_remat.portfolio.reduce`) run after the heuristics and bounds
(fast: they give the first plan and let a reduction that cannot beat it be
skipped), before the improvers and formulations, in this process's main
thread: each solves its reduced problem with this very runner (the same
worker count, seed and limits, its own ledger) until its share of the time
left, passing its plans and bounds on as they come; the caller's stop flag,
a signal or a closed gap stops it too.

Stopping early.  When a plan reaches a bound over every plan (or a bound
over every plan is ``+inf``) every task is asked to stop and the rest are
skipped ("gap closed").
"""

from __future__ import annotations

import math
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from ..limits import Limits, now
from .execute import LedgerView, SameStart, execute
from .ledger import Ledger, SourceReport
from .scheduler import Scheduler, Task
from .workers import Pool, SharedIncumbent, fork_context, honours_limits

__all__ = ["run_portfolio", "PortfolioRun", "honours_limits", "ABANDON_S", "POLL_S"]

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
        self.same_start = SameStart()

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

    def why_not(self) -> str | None:
        self.check()
        if self.ledger.finished():
            return "gap closed"
        if self.halt.is_set():
            return "stopped"
        if self.deadline - now() <= 0:
            return "time limit"
        return None

    def skip(self, task: Task, note: str) -> None:
        self.ledger.add_report(SourceReport(task.name, task.kind, "skipped", note=note))

    # ------------------------------------------------------------ one task
    def step(self, task: Task, *, remaining: int = 1, share: float | None = None):
        why = self.why_not()
        if why:
            self.skip(task, why)
            return None
        left = self.deadline - now()
        reason = Scheduler.too_slow(task, left)
        if reason:
            self.skip(task, reason)
            return None
        if task.kind == "bound" and getattr(task.obj, "infeasibility_only", False) and math.isfinite(self.ledger.value):
            self.skip(task, "a valid plan fits: nothing to prove infeasible")
            return None
        if self.same_start.repeats(task, LedgerView(self.ledger)):
            self.skip(task, "same start as its last run (deterministic)")
            return None
        start_value = self.ledger.value
        if share is None:
            share = Scheduler.share(task, left, remaining=remaining)
        share = max(0.0, min(share, left))
        limits = Limits(min(self.deadline, now() + share), self.work, None, self.nodes)
        if honours_limits(task.obj) or self.ctx is None:
            out = self._in_thread(task, limits, share)
        else:
            out = self._in_child(task, limits, share)
        if out is not None:
            self.same_start.record(task, start_value, out)
        self.check()
        return out

    def _in_thread(self, task: Task, limits: Limits, share: float):
        task_stop = threading.Event()
        lim = replace(limits, stop=task_stop)
        box: dict = {}

        def target():
            box["out"] = execute(task, self.problem, self.ledger, LedgerView(self.ledger), limits=lim, share=share,
                                 seed=self.seed)

        th = threading.Thread(target=target, name=f"portfolio-{task.name}", daemon=True)
        started = now()
        th.start()
        asked_at = None
        while th.is_alive():
            th.join(POLL_S)
            self.check()
            t = now()
            if asked_at is None and (self.halt.is_set() or t > lim.deadline):
                task_stop.set()
                asked_at = t
            if asked_at is not None and t > max(asked_at, lim.deadline) + ABANDON_S and th.is_alive():
                # it broke its promise: go on without it (its later plans still count until the end)
                self.info.abandoned.append(task.name)
                self.ledger.add_report(SourceReport(task.name, task.kind, "stopped", seconds=t - started,
                                                    note="did not return within its limits (left running)"))
                return None
        if task_stop.is_set() and asked_at is None:
            self.halt.set()  # the component set its stop flag: the legacy way to stop the solve
        return box.get("out")

    def _in_child(self, task: Task, limits: Limits, share: float):
        pool = Pool(self.ctx, self.problem, [task], ledger=self.ledger, shared=LedgerView(self.ledger), workers=1,
                    deadline=limits.deadline, seed=self.seed, nodes=self.nodes, work=self.work, repeat=False,
                    share=share)
        self._drive(pool, limits.deadline)
        if pool.child_asked_stop():
            self.halt.set()
        return pool.outcomes.get(0)

    def _drive(self, pool: Pool, deadline: float) -> None:
        pool.start()
        try:
            while pool.alive():
                pool.poll(POLL_S)
                pool.enforce()
                self.check()
                if self.halt.is_set() or now() >= deadline:
                    pool.request_stop()
                if pool.overdue():
                    pool.kill()
                    break
        finally:
            if any(p.is_alive() for p in pool.procs):
                pool.kill()
            pool.finish()

    # ------------------------------------------------------------ schedules
    def reduce(self) -> None:
        """Run the reductions (phase ``reduce``) one after the other."""
        for t in self.sched.reduce:
            why = self.why_not() or t.obj.skip_reason(self.problem, self.ledger.value)
            if why:
                self.skip(t, why)
                continue
            left = self.deadline - now()
            t.obj.run(self.problem, self.ledger, deadline=min(self.deadline, now() + t.obj.share * left),
                      seed=self.seed, nodes=self.nodes, work=self.work, workers=self.workers, stop=self.stopping,
                      second_round_min_s=self.min_round, second_round_margin_s=self.margin)
            self.check()

    def stopping(self) -> bool:
        """Whether a nested run must stop: a signal, the caller's flag, the gap closed."""
        self.check()
        return self.halt.is_set()

    def serial(self) -> None:
        s = self.sched
        wanting = []  # improvers and formulations that used their whole share: later rounds
        for t in s.construct:
            out = self.step(t)
            if out is not None and out.wants_more:
                wanting.append(t)
        self.reduce()
        for t in s.polish:
            self.step(t)
        for i, t in enumerate(s.long):
            out = self.step(t, remaining=len(s.long) - i)
            if out is not None and out.wants_more:
                wanting.append(t)
        rnd = 1
        while wanting:
            again = []
            for i, t in enumerate(wanting):
                left = self.deadline - now()
                if self.why_not() or left < self.min_round:
                    return
                note = "second round: " if rnd == 1 else f"round {rnd + 1}: "
                out = self.step(t.again(note), share=(left - self.margin) / (len(wanting) - i))
                if out is not None and out.wants_more:
                    again.append(t)
            wanting, rnd = again, rnd + 1

    def parallel(self) -> None:
        s = self.sched
        if s.reduce:  # the heuristics, the reductions (each a parallel run of its own), the rest
            self.pool(list(s.construct))
            self.reduce()
            self.pool(list(s.polish) + list(s.long))
        else:
            self.pool(list(s.construct) + list(s.polish) + list(s.long))

    def pool(self, tasks: list) -> None:
        """Run ``tasks`` in worker processes sharing the incumbent, until done or the deadline."""
        if not tasks:
            return
        tmp = tempfile.mkdtemp(prefix="hybrid_remat_portfolio_")
        try:
            shared = SharedIncumbent(self.ctx, tmp)
            shared.set_bound(self.ledger.bound)
            if self.ledger.plan is not None:
                shared.publish(self.ledger.plan, self.ledger.value)
            pool = Pool(self.ctx, self.problem, tasks, ledger=self.ledger, shared=shared, workers=self.workers,
                        deadline=self.deadline, seed=self.seed, nodes=self.nodes, work=self.work, repeat=True)
            if not self.why_not():
                self._drive(pool, self.deadline)
            if pool.child_asked_stop():
                self.halt.set()
            why = self.why_not() or "stopped"
            for t in tasks[min(pool.counter.value, len(tasks)):]:  # never started
                self.skip(t, why)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def run_portfolio(problem, *, deadline: float, heuristics=(), bounds=(), improvers=(), formulations=(),
                  reductions=(), workers: int = 1, seed: int = 0, node_limit: int | None = None, work_limit: int | None = None,
                  stop=None, on_improve=None, signals=("SIGINT",), second_round_min_s: float = 5.0,
                  second_round_margin_s: float = 2.0, ledger: Ledger | None = None, table=None,
                  scheduler: Scheduler | None = None) -> PortfolioRun:
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
    with catch_signals(signals, run.on_signal):
        try:
            if math.isfinite(deadline) and deadline <= now():
                for t in list(sched.reduce) + list(sched.construct) + list(sched.polish) + list(sched.long):
                    run.skip(t, "time limit")
            elif workers > 1:
                run.parallel()
            else:
                run.serial()
        except KeyboardInterrupt:  # a SIGINT with a handler other than ours (or outside the main thread's wait)
            run.on_signal("SIGINT")
    ledger.seal()
    return run.info
