"""Where the segment chain's menus are computed: this process, the
portfolio's forked workers, or Ray tasks.

The menus of a chain are independent (:class:`~.menus.MenuTask` holds all
one needs as plain arrays), so any executor may run them, in any order, at
once.  An executor has one method, ``menus(tasks, *, exact, limits)``:
``{key: Menu}`` of every task, each task computed by
:func:`~.menus.compute_menu` with the ``exact`` limits (the exact solves'
share, as :func:`~.menus.compute_menus` gives it), and whatever is not back
by ``limits``' deadline (or stop flag) replaced by :func:`~.menus.greedy_menu`
(``stats["fallback"]`` says why), so that the chain DP has a valid menu for
every stage.  Nothing is left running when it returns.

* ``None`` (the default of :func:`~.menus.compute_menus`): here, in order.
* :class:`PoolMenus` -- ``workers`` forked processes of the portfolio's own
  executor (:class:`~hybrid_remat.portfolio.workers.Pool` with a menu
  runner: the tasks are inherited by the fork, nothing is pickled on the way
  in; each worker gets the exact limits and the shared stop flag, and is
  killed :data:`~hybrid_remat.portfolio.workers.GRACE_S` after ``limits``'
  deadline if it has not returned).  :func:`executor_for` picks it where the
  limits allow more than one process (:attr:`~hybrid_remat.limits.Limits.workers`:
  ``anytime_solve(..., workers=k)``, ``hybrid-remat solve --workers k``).
* :class:`RayMenus` -- one Ray task per menu (``num_cpus=1``) on a local
  runtime or the cluster at an address (extra ``[ray]``; a clear error where
  Ray is not installed).  A task gets the exact deadline as wall-clock time
  (``time.time()``: a cluster's clocks agree to NTP's precision) and builds
  its limits from what is left when it starts; tasks not back by the
  deadline are cancelled (``force=True``: their worker processes are
  killed).

Same limits, same menus: with node limits and no deadline every executor
returns exactly the menus of the serial computation (the exact solves are
deterministic; tests/test_segments_menus_exec.py).  Under a deadline the
executors differ only in which menus finish in time.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.limits import Limits
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.segments.chain import segment_chain
>>> from hybrid_remat.segments.menus import compute_menus, menu_tasks
>>> g = training_graph(nx.path_graph(12, create_using=nx.DiGraph))
>>> tasks = menu_tasks(Problem.single(g, "60%"), segment_chain(g, segment_size=4))
>>> lim = Limits(nodes=200)
>>> serial = compute_menus(tasks, limits=lim)
>>> pooled = compute_menus(tasks, limits=lim, executor=PoolMenus(2))
>>> all(a.held == pooled[k].held and a.extra == pooled[k].extra for k, a in serial.items())
True
>>> executor_for(Limits(workers=2)).workers, executor_for(Limits()) is None
(2, True)
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, replace

from ..limits import Limits, now
from ..portfolio.execute import Outcome
from ..portfolio.scheduler import Assignment, Task
from ..portfolio.workers import GRACE_S, Pool, fork_context
from .menus import Menu, MenuTask, compute_menu, greedy_menu

__all__ = ["PoolMenus", "RayMenus", "executor_for", "POLL_S"]

#: seconds between the parent's looks at its deadline while menus are out
POLL_S = 0.05


def executor_for(limits: Limits | None, executor=None):
    """``executor`` if given, else a :class:`PoolMenus` of ``limits.workers``
    processes where that is more than one, else ``None`` (this process)."""
    if executor is not None:
        return executor
    w = int(getattr(limits, "workers", 1) or 1)
    return PoolMenus(w) if w > 1 else None


def _order(tasks: list) -> list:
    """The tasks' own order, as the serial computation takes them (largest first left the two workers on the
    two largest solves when the exact share ran out: 0 exact menus of 11 where serial had 6, random layered 1k)."""
    return list(range(len(tasks)))


def _complete(tasks: list, got: dict, why: dict) -> tuple[dict, int]:
    """``{key: Menu}`` in the tasks' order; a task not in ``got`` gets the greedy menu, ``why`` it fell back."""
    out, fell = {}, 0
    for i, t in enumerate(tasks):
        m = got.get(i)
        if m is None:
            m = greedy_menu(t)
            m.stats["fallback"] = why.get(i, "not back by the deadline")
            fell += 1
        out[t.key] = m
    return out, fell


# ------------------------------------------------------------------ the portfolio's forked workers
@dataclass
class _Job:
    """A menu task as the pool's worker finds it (inherited by the fork) with the exact solves' deadline."""

    task: MenuTask
    exact_deadline: float

    @property
    def name(self) -> str:
        return f"menu {self.task.key}"


@dataclass
class _MenuOutcome(Outcome):
    menu: Menu | None = None
    note: str = ""


def _run_job(task, problem, sink, shared, *, limits: Limits, share: float = math.inf, seed: int = 0,
             worker: int = -1) -> Outcome:
    """(worker) One menu within the job's exact deadline and the pool's stop flag."""
    job = task.obj
    t0 = now()
    try:
        menu = compute_menu(job.task, limits=replace(limits, deadline=min(limits.deadline, job.exact_deadline),
                                                     workers=1))
    except Exception as e:      # the parent falls back to the greedy menu
        return _MenuOutcome("error", now() - t0, note=repr(e))
    return _MenuOutcome("done", now() - t0, menu=menu)


class _Notes:
    """The pool's ledger here: it only hears of workers lost (killed at the deadline)."""

    def __init__(self):
        self.rows: list = []

    def add_report(self, row) -> None:
        self.rows.append(row)


class PoolMenus:
    """The menus on ``workers`` forked processes (module docstring); in this
    process where there is no ``fork`` (or this is a daemonic process), one
    worker or one task.  ``stats``: the last call's figures."""

    name = "pool"

    def __init__(self, workers: int = 2):
        self.workers = max(1, int(workers))
        self.stats: dict = {}

    def __repr__(self) -> str:
        return f"PoolMenus({self.workers})"

    def menus(self, tasks: list, *, exact: Limits, limits: Limits) -> dict:
        t0 = now()
        ctx = fork_context()
        w = min(self.workers, len(tasks))
        if ctx is None or w < 2:
            self.stats = {"executor": "serial", "workers": 1, "seconds": 0.0}
            out = {t.key: compute_menu(t, limits=exact) for t in tasks}
            self.stats["seconds"] = now() - t0
            return out
        jobs = [Task("menu", _Job(t, exact.deadline)) for t in tasks]
        notes = _Notes()
        pool = Pool(ctx, None, jobs, ledger=notes, shared=None, workers=w, nodes=exact.nodes, work=exact.work,
                    runner=_run_job)
        got, why = {}, {}
        pending = deque(_order(tasks))
        stopping = False
        try:
            while pending or pool.busy():
                if not stopping and limits.expired():
                    stopping = True
                    pool.request_stop()     # workers see the flag; wait() kills what runs GRACE_S later
                    for i in pending:
                        why[i] = "not started by the deadline"
                    pending.clear()
                if not stopping:
                    for wid in pool.idle():
                        if not pending:
                            break
                        i = pending.popleft()
                        pool.submit(wid, Assignment(jobs[i], i, 0, limits.left(), limits.deadline, contained=True))
                for a, out in pool.wait(POLL_S):
                    if isinstance(out, _MenuOutcome) and out.menu is not None:
                        got[a.entry] = out.menu
                    else:
                        why[a.entry] = getattr(out, "note", "") or f"worker {out.status}"
        finally:
            pool.close()
        res, fell = _complete(tasks, got, why)
        self.stats = {"executor": "pool", "workers": w, "returned": len(got), "fallback": fell,
                      "killed": len(notes.rows), "seconds": now() - t0}
        return res


# ------------------------------------------------------------------ Ray
def _ray_menu(task: MenuTask, exact_wall: float, work, nodes) -> Menu:
    """(Ray worker) One menu with the exact deadline ``exact_wall`` (``time.time()``) as limits from now."""
    left = exact_wall - time.time()
    lim = Limits.seconds(left if math.isfinite(left) else None, work=work, nodes=nodes)
    return compute_menu(task, limits=lim)


class RayMenus:
    """One Ray task per menu (module docstring).  ``address``: ``True`` or
    ``"local"`` starts a local runtime of ``num_cpus`` CPUs, a string
    connects to that cluster; a runtime already initialised is used as it is.
    A runtime this call started is shut down when it returns (start one with
    ``ray.init`` before the time limit to keep the start-up out of it).
    ``stats``: the last call's figures."""

    name = "ray"

    def __init__(self, address=True, *, num_cpus: int | None = None):
        self.address, self.num_cpus = address, num_cpus
        self.stats: dict = {}

    def __repr__(self) -> str:
        return f"RayMenus({self.address!r})"

    def menus(self, tasks: list, *, exact: Limits, limits: Limits) -> dict:
        from .._ray import import_ray, start_ray

        ray = import_ray()
        t0 = now()
        started = start_ray(self.address, self.num_cpus)
        got, why = {}, {}
        pending: list = []
        try:
            remote = ray.remote(num_cpus=1, max_retries=0)(_ray_menu)
            left = exact.left()
            exact_wall = time.time() + left if math.isfinite(left) else math.inf
            refs = {remote.remote(tasks[i], exact_wall, exact.work, exact.nodes): i for i in _order(tasks)}
            pending = list(refs)
            stop_at = None
            while pending:
                if stop_at is None and limits.expired():
                    stop_at = now()
                if stop_at is not None and now() > stop_at + GRACE_S:
                    break
                left = limits.left()
                timeout = POLL_S if stop_at is not None else min(1.0, left)
                done, pending = ray.wait(pending, num_returns=1, timeout=timeout)
                for r in done:
                    try:
                        got[refs[r]] = ray.get(r)
                    except Exception as e:      # a task that failed: its greedy menu
                        why[refs[r]] = repr(e)
        finally:
            for r in pending:
                ray.cancel(r, force=True)
            if started:
                ray.shutdown()
        res, fell = _complete(tasks, got, why)
        self.stats = {"executor": "ray", "returned": len(got), "fallback": fell, "cancelled": len(pending),
                      "started_runtime": started, "seconds": now() - t0}
        return res
