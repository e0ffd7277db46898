"""Worker processes that run portfolio tasks and stream what they find.

:class:`Pool` forks ``W`` worker processes (the ``fork`` start method: the
problem, the components and their compiled kernels are inherited, nothing
is pickled on the way in).  Each worker takes the next task of a shared,
ordered list (heuristics and bounds, then improvers, then formulations and
improvers again); when the list is done it runs again, with new seeds, the
tasks that used their whole share (LNS restarts from the shared incumbent),
in the manner of CP-SAT's portfolio workers.

Picking again (:func:`_pick_again`).  First the tasks that waited for a
plan (skipped for want of one, or a formulation that started cold, beside
the heuristics, and found nothing), then those that want more time.  A
worker claims what it picks under the pool's lock, and a component runs in
one worker at a time, so that sixteen idle workers never run one
deterministic improver from the same start (:class:`SameStart` is shared
by the workers too).  When nothing else is left, idle workers run copies,
with other seeds, of a running improver that shares the incumbent (LNS),
until a copy ends before its share does.

Sharing.  The parent owns the :class:`~hybrid_remat.portfolio.ledger.Ledger`.
Workers send every improvement at once through their own pipe (a
synchronous write: a message is in the pipe before the component goes on),
so a worker killed at the deadline never takes the best plan with it.  The
parent publishes the incumbent, its value and the bound in a
:class:`SharedIncumbent` (a file replaced atomically and shared-memory
numbers) that improvers and formulations read through ``shared=``.

Stopping.  At the deadline (or when the gap is closed, or on a signal) the
parent sets the shared stop flag, waits :data:`GRACE_S` and kills what is
still running.  Workers ignore SIGINT (a Ctrl-C reaches the whole process
group; the parent decides) and take SIGTERM's default action.

A task that cannot be trusted to return within its limits (no
``"honours_limits"``) is held to its deadline from outside: its worker is
killed :data:`GRACE_S` after it and a fresh worker takes the next tasks
(:meth:`Pool.enforce`).  In a one-process solve such a task runs alone in a
one-worker pool, killed the same way.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import signal
import threading

from ..errors import HybridRematError
from ..limits import Limits, now
from ..simulate import simulate
from .execute import SameStart, execute
from .ledger import SourceReport, better
from .scheduler import Scheduler


def honours_limits(obj) -> bool:
    """``obj`` declares that it returns within the limits it is given."""
    return "honours_limits" in set(getattr(obj, "capabilities", ()))

__all__ = ["Pool", "SharedIncumbent", "PipeSink", "fork_context", "GRACE_S"]

#: seconds between the stop flag and killing a worker
GRACE_S = 0.3
#: the longest a formulation waits for the heuristics' first plan (:func:`_await_first_plan`)
PLAN_WAIT_S = 1.0


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
        self.sent_at = -math.inf  # when it last sent a plan better than the shared incumbent
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
            self.sent_at = now()
            self.send(("plan", source, plan))
            return sim, True
        if self.send_all:  # a one-task pool: the parent keeps a pool of good plans
            self.send(("plan", source, plan))
        return sim, False

    def plan_in_flight(self, wait: float = 1.0) -> bool:
        """It sent a plan that the parent has not published yet (for at most ``wait`` seconds)."""
        return now() - self.sent_at < wait and better(self.best, self.shared.incumbent_value())

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


def _copyable(task) -> bool:
    """An improver that shares the incumbent (LNS): a second copy, with
    another seed, searches elsewhere and passes what it finds to the first,
    at little memory.  (Exact models are not copied: a race of SCIP seeds
    costs a model's memory per worker and starves the rest.)"""
    return task.kind == "improver" and "shares_incumbent" in set(getattr(task.obj, "capabilities", ()))


def _pick_again(pool, wid: int, rounds: int):
    """Claim a task to run again: ``(index, candidates, copy)``, index
    ``None`` for nothing.  First one that waited for a plan, once there is
    one (it has not had its try yet), else one that wants more time; a
    component runs in one worker at a time (listed twice, as a first pass
    and a later one, too), so that idle workers never repeat each other.
    When nothing else is left, a second copy of a running one that
    :func:`_copyable` admits, until a copy ends before its share does (then
    more copies would only spin)."""
    with pool.counter_lock:
        n = len(pool.tasks)
        wants, running = pool.wants[:n], pool.inside[:n]
        busy = {id(pool.tasks[i].obj) for i in range(n) if running[i] > 0}
        cands = []
        if math.isfinite(pool.shared.incumbent_value()):
            cands = [i for i in range(n) if wants[i] == 2 and id(pool.tasks[i].obj) not in busy]
        if not cands:
            cands = [i for i in range(n) if wants[i] == 1 and id(pool.tasks[i].obj) not in busy]
        copy = not cands
        if copy:
            cands = [i for i in range(n)
                     if running[i] > 0 and pool.copies[pool.slot(pool.tasks[i].obj)] and _copyable(pool.tasks[i])]
        if not cands:
            return None, 0, False
        idx = cands[(wid + rounds) % len(cands)]
        pool.wants[idx] = 0
        pool.inside[idx] += 1
        return idx, len(cands), copy


def _await_first_plan(pool, left: float) -> None:
    """Before a formulation starts with no plan while heuristics run: wait a
    little (at most :data:`PLAN_WAIT_S`, or 5 % of the time left) for their
    first plan, its warm start.  Started cold beside the heuristics, the
    block solver found nothing in 6 s where, warm, it found the best plan."""
    until = now() + min(PLAN_WAIT_S, 0.05 * left)
    while now() < until and not math.isfinite(pool.shared.incumbent_value()) and not pool.stop.is_set():
        if not any(pool.inside[i] > 0 and t.kind == "heuristic" for i, t in enumerate(pool.tasks)):
            return
        pool.stop.wait(0.01)


def _worker_main(wid, pool, conn) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    sink = PipeSink(conn, pool.problem, pool.shared, send_all=not pool.repeat)
    tasks = pool.tasks
    same_start = SameStart(pool.starts, key=pool.slot)
    rounds = 0
    try:
        while not pool.stop.is_set():
            left = pool.deadline - now()
            if left <= 0:
                break
            with pool.counter_lock:
                idx = pool.counter.value
                if idx < len(tasks):
                    pool.counter.value += 1
                    pool.inside[idx] += 1
            copy = False
            if idx < len(tasks):
                task, seed, remaining = tasks[idx], pool.seed, len(tasks) - idx
            elif pool.repeat:
                idx, remaining, copy = _pick_again(pool, wid, rounds)
                if idx is None:
                    # a task claimed or running may still bring a plan or want more (``inside`` is set at the
                    # claim, under the lock, so a task claimed and not yet started counts)
                    if any(pool.inside[:len(tasks)]) or sink.plan_in_flight():
                        pool.stop.wait(0.05)
                        continue
                    break
                rounds += 1
                task = tasks[idx].again(f"round {rounds + 1}: ")
                seed = pool.seed + 7919 * rounds + wid
            else:
                break
            reason = Scheduler.too_slow(task, left)
            if reason is None and not copy and same_start.repeats(task, pool.shared):
                reason = "same start as its last run (deterministic)"
            if reason:
                sink.add_report(SourceReport(task.name, task.kind, "skipped", note=reason, worker=wid))
                with pool.counter_lock:  # picked and skipped: it wants nothing more (else it is picked forever)
                    pool.inside[idx] -= 1
                    if not copy:
                        pool.wants[idx] = 0
                continue
            if task.kind == "formulation":
                _await_first_plan(pool, left)
            start_value = pool.shared.incumbent_value()
            share = pool.share if pool.share is not None else \
                Scheduler.share(task, left, remaining=remaining, workers=pool.workers)
            limits = Limits(min(pool.deadline, now() + share), pool.work, pool.stop, pool.nodes)
            sink.send(("start", wid, idx, task.name, task.kind, limits.deadline, honours_limits(task.obj)))
            out = execute(task, pool.problem, sink, pool.shared, limits=limits, share=share, seed=seed, worker=wid)
            if not copy:  # a copy ran with another seed: its start says nothing of the next run's
                same_start.record(task, start_value, out)
            # a task counts as running until its plan is published: a formulation waiting for the first
            # plan (:func:`_await_first_plan`) must not start cold while that plan is on its way
            while sink.plan_in_flight() and not pool.stop.is_set():
                pool.stop.wait(0.005)
            with pool.counter_lock:
                pool.inside[idx] -= 1
                if copy and not out.wants_more:
                    pool.copies[pool.slot(task.obj)] = 0
                if not copy or out.wants_more:
                    pool.wants[idx] = 0 if not pool.repeat else 2 if out.needs_incumbent else 1 if out.wants_more else 0
            sink.send(("done", wid, idx, out))
    finally:
        sink.send(("exit", wid))
        conn.close()


class Pool:
    """``workers`` forked processes running ``tasks`` until ``deadline``.

    Parent side: :meth:`start`, then :meth:`poll` in a loop (it feeds the
    ledger), :meth:`stop` (the flag), :meth:`kill`, :meth:`finish`.
    ``share`` fixes every task's seconds (one-task pools); ``repeat`` runs
    the tasks that want more again once the list is done.
    """

    def __init__(self, ctx, problem, tasks, *, ledger, shared, workers: int, deadline: float, seed: int = 0,
                 nodes=None, work=None, repeat: bool = True, share: float | None = None):
        self.ctx, self.problem, self.tasks, self.ledger, self.shared = ctx, problem, list(tasks), ledger, shared
        self.workers, self.deadline, self.seed, self.nodes, self.work = int(workers), deadline, seed, nodes, work
        self.repeat, self.share = repeat, share
        self.stop = ctx.Event()
        self.counter = ctx.RawValue("q", 0)
        self.counter_lock = ctx.Lock()
        self.wants = ctx.RawArray("b", max(1, len(self.tasks)))  # 0 nothing more, 1 more time, 2 a plan to start
        self.inside = ctx.RawArray("i", max(1, len(self.tasks)))  # workers inside each task now
        # where each deterministic component last started (NaN: never), one slot per component
        self._slots = {}
        for t in self.tasks:
            self._slots.setdefault(id(t.obj), len(self._slots))
        self.starts = ctx.RawArray("d", [math.nan] * max(1, len(self._slots)))
        self.copies = ctx.RawArray("b", [1] * max(1, len(self._slots)))  # copies may still help (_pick_again)
        self.procs: list = []
        self.by_wid: dict = {}  # worker id -> (process, conn)
        self.conns: dict = {}  # conn -> worker id
        self.running: dict = {}  # worker id -> (task index, name, kind, started, deadline, honours its limits)
        self.respawned = 0
        self.outcomes: dict = {}  # task index -> Outcome (last run)
        self.stopped_at: float | None = None
        self.asked = False  # the parent set the stop flag (else a component did)

    def slot(self, obj) -> int:
        """The component's slot in :attr:`starts`."""
        return self._slots[id(obj)]

    def start(self) -> None:
        for wid in range(self.workers):
            self._spawn(wid)

    def _spawn(self, wid: int) -> None:
        r, w = self.ctx.Pipe(duplex=False)
        p = self.ctx.Process(target=_worker_main, args=(wid, self, w), name=f"hybrid-remat-worker-{wid}")
        p.start()
        w.close()
        self.procs.append(p)
        self.conns[r] = wid
        self.by_wid[wid] = (p, r)

    def enforce(self) -> None:
        """(several workers) A task that does not honour its limits and runs
        past its deadline: kill its worker (its reported plans are kept)
        and start a fresh one on the next tasks."""
        if not self.repeat or self.stop.is_set():
            return
        t = now()
        for wid, (idx, name, tkind, t0, deadline, honours) in list(self.running.items()):
            if honours or t <= deadline + GRACE_S:
                continue
            proc, conn = self.by_wid[wid]
            proc.kill()
            proc.join(1.0)
            self._drain(conn)
            self._closed(conn)
            self.wants[idx] = 0
            self.inside[idx] = max(0, self.inside[idx] - 1)
            self.running.pop(wid, None)
            self.ledger.add_report(SourceReport(name, tkind, "stopped", seconds=t - t0,
                                                note="killed at its deadline (worker restarted)", worker=wid))
            if self.deadline - now() > GRACE_S:
                self.respawned += 1
                self._spawn(wid)

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

    def alive(self) -> bool:
        return any(p.is_alive() for p in self.procs) or bool(self.conns)

    def poll(self, timeout: float) -> None:
        """Read what the workers sent (waiting at most ``timeout``)."""
        if not self.conns:
            if timeout > 0:
                mpc.wait([p.sentinel for p in self.procs if p.is_alive()] or [], timeout)
            return
        for conn in mpc.wait(list(self.conns), timeout):
            self._drain(conn)

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
        elif kind == "start":
            _, _, idx, name, tkind, deadline, honours = msg
            self.running[wid] = (idx, name, tkind, now(), deadline, honours)
        elif kind == "done":
            self.running.pop(wid, None)
            self.outcomes[msg[2]] = msg[3]
        elif kind == "exit":
            self.running.pop(wid, None)

    def request_stop(self) -> None:
        """Set the stop flag (once); :meth:`overdue` says when to kill."""
        if not self.stop.is_set():
            self.asked = True
            self.stop.set()
        if self.stopped_at is None:
            self.stopped_at = now()

    def overdue(self) -> bool:
        return self.stopped_at is not None and now() > self.stopped_at + GRACE_S

    def kill(self) -> None:
        """Kill every worker still running; what they were running is reported as stopped."""
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(1.0)
        self.poll(0)  # complete messages already in the pipes
        for wid, (_, name, tkind, t0, _, _) in sorted(self.running.items()):
            self.ledger.add_report(SourceReport(name, tkind, "stopped", seconds=now() - t0,
                                                note="killed at its deadline", worker=wid))
        self.running.clear()
        for conn in list(self.conns):
            self._closed(conn)

    def child_asked_stop(self) -> bool:
        """A component set the stop flag itself (the legacy way to stop a solve)."""
        return self.stop.is_set() and not self.asked

    def finish(self) -> None:
        for p in self.procs:
            p.join(0.1)
            if p.is_alive():
                p.kill()
                p.join(1.0)
