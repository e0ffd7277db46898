"""Where a sweep's solves run (this process, a local process pool, Ray) and
how its progress is shown.  Used by :func:`hybrid_remat.sweep.sweep`.

Every runner yields ``(task index, (row, plan document, detail))`` as each
solve finishes.  On Ctrl-C or SIGTERM the pool's workers (which ignore
SIGINT) are terminated and Ray's pending tasks cancelled; the caller keeps
the rows it already has.  The pool is forked (:func:`pool_context`), never
spawned: a spawned worker would run the caller's script again.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

from ._sweep_task import _solve_indexed, _worker_init, solve_task
from .errors import HybridRematError

__all__ = ["run_tasks", "run_local", "run_pool", "run_ray", "progress_reporter", "pool_context", "LOCAL_SIGNALS"]


#: the signals a solve in this process handles itself (its best plan kept); pool workers handle none
LOCAL_SIGNALS = ("SIGINT", "SIGTERM")


def run_local(tasks) -> Iterator:
    """Solve one task after another in this process (Ctrl-C and SIGTERM
    stop the running solve and end the sweep)."""
    for t in tasks:
        yield t.index, solve_task(t, signals=LOCAL_SIGNALS)


def pool_context():
    """The ``fork`` multiprocessing context, or ``None`` where there is none
    (or this process is itself a pool's daemonic worker).

    Never ``spawn`` or ``forkserver``: their workers import the caller's
    ``__main__`` again, so a script that calls :func:`~hybrid_remat.sweep.sweep`
    without an ``if __name__ == "__main__":`` guard (the README's example)
    would run again in every worker, and fail there, for ever.
    """
    import multiprocessing as mp

    if mp.current_process().daemon:
        return None
    try:
        return mp.get_context("fork")
    except ValueError:
        return None


def run_pool(tasks, jobs: int) -> Iterator:
    """A forked process pool of ``jobs`` workers (:func:`pool_context`);
    results in finishing order.  The workers start here, before the caller
    starts threads (a progress bar); they ignore SIGINT and die on SIGTERM,
    and the parent terminates them when it is interrupted."""
    ctx = pool_context()
    if ctx is None:  # no fork: solve in this process rather than re-run the caller's script in workers
        return run_local(tasks)
    pool = ctx.Pool(jobs, initializer=_worker_init)
    return _drain(pool, tasks)


def _drain(pool, tasks) -> Iterator:
    try:
        yield from pool.imap_unordered(_solve_indexed, tasks, chunksize=1)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _ray_solve(task, graph):
    return task.index, solve_task(task, graph)


def run_ray(tasks, address=True, num_cpus: int | None = None) -> Iterator:
    """One Ray task per solve (``num_cpus=1`` each), results streamed back with
    ``ray.wait`` as they finish.  ``address=True`` starts a local runtime
    (``num_cpus`` CPUs) unless one is already initialised; a string connects
    to that cluster.  Graphs go to the object store once each."""
    from ._ray import start_ray
    from .loaders import load_graph

    started = start_ray(address, num_cpus)
    import ray

    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_solve)
    refs: dict = {}
    pending = []
    try:
        for t in tasks:
            key = t.source if isinstance(t.source, str) else id(t.source)
            if key not in refs:
                refs[key] = ray.put(load_graph(t.source) if isinstance(t.source, str) else t.source)
            pending.append(remote.remote(t, refs[key]))
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()


def run_tasks(tasks, *, jobs: int | None = None, ray=None) -> Iterator:
    """Pick the runner: Ray when ``ray`` is set, else a pool of ``jobs``
    processes (default: the CPUs, at most the tasks), else this process."""
    if ray:
        return run_ray(tasks, ray, jobs)
    jobs = jobs if jobs is not None else min(os.cpu_count() or 1, len(tasks))
    if jobs < 1:
        raise HybridRematError(f"jobs must be at least 1, not {jobs}")
    if jobs == 1 or len(tasks) <= 1:
        return run_local(tasks)
    return run_pool(tasks, jobs)


# ------------------------------------------------------------------ progress
def _row_line(row: dict) -> str:
    tdi = row.get("tdi_pct")
    tdi_s = f"TDI {tdi:.3f}%" if isinstance(tdi, float) and tdi == tdi else "no plan"
    gap = row.get("gap")
    gap_s = f" gap {100 * gap:.2f}%" if isinstance(gap, float) and gap == gap else ""
    wall = row.get("wall_s")
    wall_s = f" ({wall:.1f} s)" if isinstance(wall, float) else ""
    return f"{row['graph']} @{row['budget']} {row['solver']}: {row['status']} {tdi_s}{gap_s}{wall_s}"


class _Plain:
    """Progress as one line per finished solve (no rich, or not a terminal)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.count = total, enabled, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def advance(self, row: dict) -> None:
        self.count += 1
        if self.enabled:
            print(f"[{self.count}/{self.total}] {_row_line(row)}", file=sys.stderr, flush=True)

    def interrupted(self, kept: int, out) -> None:
        if self.enabled:
            where = f" in {out}" if out else ""
            print(f"interrupted: kept {kept} of {self.total} rows{where}", file=sys.stderr, flush=True)

    def finished(self, seconds: float, out) -> None:
        if self.enabled:
            where = f", rows in {out}" if out else ""
            print(f"{self.total} solves in {seconds:.1f} s{where}", file=sys.stderr, flush=True)


class _Rich(_Plain):
    """A rich progress bar (count, elapsed, ETA); finished rows print above it."""

    def __init__(self, total: int):
        super().__init__(total, True)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(stderr=True)
        self.progress = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("ETA"), TimeRemainingColumn(), console=self.console, transient=True)
        self.bar = self.progress.add_task("sweep", total=total)

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def advance(self, row: dict) -> None:
        self.count += 1
        self.progress.console.print(f"[{self.count}/{self.total}] {_row_line(row)}", highlight=False,
                                    markup=False)
        self.progress.advance(self.bar)


def progress_reporter(total: int, enabled: bool = True):
    """A rich bar on a terminal (when rich is installed), else plain lines."""
    if enabled and sys.stderr.isatty():
        try:
            return _Rich(total)
        except ImportError:
            pass
    return _Plain(total, enabled)
