"""The forked executor: worker processes that run the assignments they are
given and stream what they find.

:class:`Pool` forks up to ``W`` worker processes (the ``fork`` start
method: the problem, the components and their compiled kernels are
inherited, nothing is pickled on the way in).  The parent asks the
:class:`~hybrid_remat.portfolio.scheduler.Scheduler` what each free worker
runs and sends it the assignment (the task's number, its note, seed,
deadline and share); the worker runs it (:func:`~hybrid_remat.portfolio.execute.execute`)
and reports how it ended.  Workers decide nothing: this module imports no
policy.

Sharing.  The parent owns the :class:`~hybrid_remat.portfolio.ledger.Ledger`.
Workers send every improvement at once through their own pipe (a
synchronous write: a message is in the pipe before the component goes on),
so a worker killed at the deadline never takes the best plan with it, and a
task's plans reach the ledger before its end does (one pipe, in order): a
plan on its way is never taken for none.  The parent publishes the
incumbent, its value and the bound in a :class:`SharedIncumbent` (a file
replaced atomically and shared-memory numbers) that improvers and
formulations read through ``shared=``.

Stopping.  At the deadline (or when the gap is closed, or on a signal) the
parent sets the shared stop flag, waits :data:`GRACE_S` and kills what is
still running.  Workers ignore SIGINT (a Ctrl-C reaches the whole process
group; the parent decides) and take SIGTERM's default action.

An assignment marked ``contained`` (its component does not declare
``"honours_limits"``) is held to its deadline from outside: its worker is
killed :data:`GRACE_S` after it and a fresh worker takes the next
assignment (:meth:`Pool.enforce`).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import signal
import threading
from dataclasses import replace

from ..errors import HybridRematError
from ..limits import Limits, now
from ..simulate import simulate
from .execute import Outcome, execute
from .ledger import SourceReport, better

__all__ = ["Pool", "SharedIncumbent", "PipeSink", "fork_context", "GRACE_S"]

#: seconds between the stop flag and killing a worker
GRACE_S = 0.3


def fork_context():
    """The ``fork`` multiprocessing context, or ``None`` where there is none
    (or where this process may have no children: a daemonic process)."""
    if mp.current_process().daemon:
        return None
    try:
        return mp.get_context("fork")
    except ValueError:
        return None


class SharedIncumbent:
    """The incumbent as workers see it: the parent publishes, workers read.
    ``incumbent()`` reloads the plan file only when the version changed.
    """

    def __init__(self, ctx, directory: str):
        self._value = ctx.RawValue("d", math.inf)
        self._bound = ctx.RawValue("d", -math.inf)
        self._version = ctx.RawValue("q", 0)
        self._path = os.path.join(directory, "incumbent.pkl")
        self._seen = 0
        self._plan = None

    def publish(self, plan, value: float) -> None:
        """(parent) Make ``plan`` the incumbent workers read."""
        tmp = self._path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(plan, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self._path)
        self._value.value = float(value)
        self._version.value += 1
        self._plan, self._seen = plan, self._version.value

    def set_bound(self, value: float) -> None:
        self._bound.value = float(value)

    def incumbent(self):
        v = self._version.value
        if v != self._seen:
            try:
                with open(self._path, "rb") as f:
                    self._plan = pickle.load(f)
                self._seen = v
            except (OSError, EOFError, pickle.UnpicklingError):
                pass
        return self._plan

    def incumbent_value(self) -> float:
        return self._value.value

    def lower_bound(self) -> float:
        return self._bound.value


class PipeSink:
    """A worker's sink: plans that beat what it knows go to the parent at once."""

    def __init__(self, conn, problem, shared, send_all: bool = False):
        self.conn, self.problem, self.shared, self.send_all = conn, problem, shared, send_all
        self.best = math.inf
        self._lock = threading.Lock()

    def send(self, msg) -> None:
        with self._lock:
            try:
                self.conn.send(msg)
            except (OSError, ValueError):
                pass

    def offer_plan(self, plan, source):
        sim = simulate(self.problem, plan)
        if not sim.valid:
            return sim, False
        value = self.problem.objective.value(sim)
        if better(value, min(self.best, self.shared.incumbent_value())):
            self.best = value
            self.send(("plan", source, plan))
            return sim, True
        if self.send_all:  # a one-task pool: the parent keeps a pool of good plans
            self.send(("plan", source, plan))
        return sim, False

    def offer_bound(self, value, source, scope) -> bool:
        self.send(("bound", float(value), source, scope))
        return True

    def note(self, source, value=math.inf) -> None:
        self.send(("note", source, float(value)))

    def add_report(self, row) -> None:
        self.send(("report", row))

    def add_stats(self, name, stats) -> None:
        try:
            pickle.dumps(stats)
        except Exception:
            stats = {k: repr(v) for k, v in stats.items()}
        self.send(("stats", name, stats))


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the thread that forked it ends."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _worker_main(wid, pool, orders, conn) -> None:
    """Run what the parent sends (``(entry, note, seed, deadline, share)``)
    until it sends ``None`` or closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    sink = PipeSink(conn, pool.problem, pool.shared, send_all=pool.send_all)
    try:
        while True:
            try:
                order = orders.recv()
            except (EOFError, OSError):
                break
            if order is None:
                break
            entry, note, seed, deadline, share = order
            task = replace(pool.tasks[entry], note=note)
            limits = Limits(deadline, pool.work, pool.stop, pool.nodes, pool.workers)
            out = pool.runner(task, pool.problem, sink, pool.shared, limits=limits, share=share, seed=seed,
                              worker=wid)
            sink.send(("done", wid, out))
    finally:
        sink.send(("exit", wid))
        conn.close()


class Pool:
    """Up to ``workers`` forked processes running assignments.

    Parent side: :meth:`idle` (free worker ids), :meth:`submit`,
    :meth:`wait` (it feeds the ledger; the assignments that ended, with
    their outcomes), :meth:`request_stop`, :meth:`close`.  ``tasks`` is the
    scheduler's task list (:attr:`Scheduler.tasks`); ``send_all`` passes
    every valid plan to the parent (a one-worker pool: the ledger keeps a
    pool of good plans), not only better ones.  ``runner``: what a worker
    calls with each assignment (default :func:`~hybrid_remat.portfolio.execute.execute`;
    the segment menus' pool, :mod:`hybrid_remat.segments.menu_exec`, passes
    its own), with ``execute``'s signature, returning an
    :class:`~hybrid_remat.portfolio.execute.Outcome`.  Each task's limits
    carry ``workers`` (:attr:`~hybrid_remat.limits.Limits.workers`).
    """

    def __init__(self, ctx, problem, tasks, *, ledger, shared, workers: int, nodes=None, work=None,
                 send_all: bool = False, runner=None):
        self.runner = runner or execute
        self.ctx, self.problem, self.tasks, self.ledger, self.shared = ctx, problem, list(tasks), ledger, shared
        self.workers, self.nodes, self.work, self.send_all = int(workers), nodes, work, send_all
        self.stop = ctx.Event()
        self.procs: dict = {}  # worker id -> process
        self.orders: dict = {}  # worker id -> the parent's end of its order pipe
        self.conns: dict = {}  # the parent's end of a worker's event pipe -> worker id
        self.running: dict = {}  # worker id -> (assignment, started)
        self.ended: list = []  # (assignment, outcome) not yet returned by :meth:`wait`
        self.stopped_at: float | None = None
        self.asked = False  # the parent set the stop flag (else a component did)

    # ------------------------------------------------------------ workers
    def _spawn(self, wid: int) -> None:
        r, w = self.ctx.Pipe(duplex=False)
        orders_r, orders_w = self.ctx.Pipe(duplex=False)
        p = self.ctx.Process(target=_worker_main, args=(wid, self, orders_r, w), name=f"hybrid-remat-worker-{wid}")
        p.start()
        w.close()
        orders_r.close()
        self.procs[wid], self.orders[wid] = p, orders_w
        self.conns[r] = wid

    def idle(self) -> list:
        """Worker ids free for an assignment (started when first used)."""
        return [wid for wid in range(self.workers) if wid not in self.running]

    def busy(self) -> bool:
        return bool(self.running)

    def submit(self, wid: int, a) -> None:
        """Send assignment ``a`` to worker ``wid`` (after publishing the
        ledger's incumbent if the workers do not see it yet)."""
        led = self.ledger
        if isinstance(self.shared, SharedIncumbent):
            if led.plan is not None and better(led.value, self.shared.incumbent_value()):
                self.shared.publish(led.plan, led.value)
            self.shared.set_bound(led.bound)
        proc = self.procs.get(wid)
        if proc is None or not proc.is_alive():
            self._retire(wid)
            self._spawn(wid)
        self.running[wid] = (a, now())
        try:
            self.orders[wid].send((a.entry, a.task.note, a.seed, a.deadline, a.share))
        except (OSError, ValueError):
            self._lost(wid, "its worker could not be reached")

    def _retire(self, wid: int) -> None:
        conn = self.orders.pop(wid, None)
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        for c, w in list(self.conns.items()):
            if w == wid:
                self._drain(c)
                self._closed(c)
        p = self.procs.pop(wid, None)
        if p is not None and p.is_alive():
            p.kill()
        if p is not None:
            p.join(1.0)

    def _lost(self, wid: int, note: str, status: str = "error") -> None:
        """Worker ``wid`` ended without finishing its task: report and retire it."""
        a, t0 = self.running.pop(wid, (None, 0.0))
        if a is None:
            return
        self.ledger.add_report(SourceReport(a.task.name, a.task.kind, status, seconds=now() - t0, note=note,
                                            worker=wid))
        self.ended.append((a, Outcome(status, now() - t0)))

    def enforce(self) -> None:
        """A contained assignment past its deadline: kill its worker (its
        reported plans are kept); the next assignment starts a fresh one."""
        if self.stop.is_set():
            return
        t = now()
        for wid, (a, _) in list(self.running.items()):
            if not a.contained or t <= a.deadline + GRACE_S:
                continue
            proc = self.procs.get(wid)
            if proc is not None:
                proc.kill()
                proc.join(1.0)
            self._retire(wid)
            self._lost(wid, "killed at its deadline (worker restarted)", "stopped")

    # ------------------------------------------------------------ messages
    def _drain(self, conn) -> None:
        while conn in self.conns:
            try:
                if not conn.poll():
                    return
                msg = conn.recv()
            except (EOFError, OSError, pickle.UnpicklingError, AttributeError, ImportError):
                self._closed(conn)
                return
            self._handle(self.conns[conn], msg)
            if msg[0] == "exit":
                self._closed(conn)

    def wait(self, timeout: float) -> list:
        """Read what the workers sent (waiting at most ``timeout``); kill
        what overran; the assignments that ended since the last call, as
        ``(assignment, outcome)``."""
        if self.conns:
            for conn in mpc.wait(list(self.conns), timeout):
                self._drain(conn)
        elif timeout > 0:
            threading.Event().wait(timeout)
        for wid in list(self.running):
            if wid not in self.conns.values():  # its worker died (its pipe is closed) without a word
                self._retire(wid)
                self._lost(wid, "its worker process died")
        self.enforce()
        if self.overdue():
            self.kill()
        ended, self.ended = self.ended, []
        return ended

    def _closed(self, conn) -> None:
        self.conns.pop(conn, None)
        try:
            conn.close()
        except OSError:
            pass

    def _handle(self, wid, msg) -> None:
        kind = msg[0]
        led = self.ledger
        if kind == "plan":
            _, source, plan = msg
            try:
                sim, improved = led.offer_plan(plan, source)
            except HybridRematError as e:  # a plan the simulator cannot even read: the worker checked it, still
                led.add_report(SourceReport(source, "plan", "error", note=str(e), worker=wid))
                return
            if improved and isinstance(self.shared, SharedIncumbent):
                self.shared.publish(plan, led.value)
        elif kind == "bound":
            _, value, source, scope = msg
            led.offer_bound(value, source, scope)
            if isinstance(self.shared, SharedIncumbent):
                self.shared.set_bound(led.bound)
        elif kind == "note":
            led.note(msg[1], msg[2])
        elif kind == "report":
            led.add_report(msg[1])
        elif kind == "stats":
            led.add_stats(msg[1], msg[2])
        elif kind == "done":
            a, _ = self.running.pop(wid, (None, 0.0))
            if a is not None:
                self.ended.append((a, msg[2]))

    # ------------------------------------------------------------ stopping
    def request_stop(self) -> None:
        """Set the stop flag (once); :meth:`overdue` says when to kill."""
        if not self.stop.is_set():
            self.asked = True
            self.stop.set()
        if self.stopped_at is None:
            self.stopped_at = now()

    def overdue(self) -> bool:
        return self.stopped_at is not None and now() > self.stopped_at + GRACE_S and bool(self.running)

    def kill(self) -> None:
        """Kill every worker still running a task; what it ran is reported as stopped."""
        for wid in sorted(self.running):
            proc = self.procs.get(wid)
            if proc is not None and proc.is_alive():
                proc.kill()
                proc.join(1.0)
            self._retire(wid)
            self._lost(wid, "killed at its deadline", "stopped")

    def child_asked_stop(self) -> bool:
        """A component set the stop flag itself (a Ctrl-C it caught, as SCIP's run loop passes it on)."""
        return self.stop.is_set() and not self.asked

    def close(self) -> None:
        """End every worker (those still running are killed)."""
        for conn in list(self.orders.values()):
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for wid in list(self.procs):
            p = self.procs[wid]
            p.join(0.2)
            self._retire(wid)
