"""Sweeps: the same solve over many graphs, budgets and solvers, as tidy rows.

:func:`sweep` runs one :func:`~hybrid_remat.anytime.anytime_solve` per
(graph, budget, solver) on a local process pool (default) or on Ray
(``ray=True`` or a cluster address; extra ``[ray]``), streams each row back
as its solve finishes, writes the CSV and the plans beside it, and returns
the rows (a pandas DataFrame when pandas is installed, else a list of
dicts).  Every figure of a row comes from re-simulating the returned plan
with :func:`~hybrid_remat.simulate.simulate`; the lower bound and its scope
are the solver's.

Solvers (``solvers=``, CLI ``--solver``):

* ``portfolio``: ``anytime_solve`` with every default heuristic and
  formulation (restricted by ``heuristics=`` / ``formulations=`` like
  ``hybrid-remat solve``);
* ``heuristics``: the portfolio without exact formulations;
* the name of a registered heuristic: that heuristic alone (no polish);
* the name of a registered formulation: the default heuristics, then that
  formulation.

A :class:`Solver` object gives full control (heuristic objects must pickle
for the process pool and Ray).

Where the solves run: ``jobs=1`` in this process; else a forked process
pool (workers ignore Ctrl-C; the parent terminates them; never ``spawn``,
whose workers would run the caller's script again: the README's example
needs no ``__main__`` guard).  With ``ray=True``
a local Ray runtime of ``jobs`` CPUs is started (its workers import this
process's ``hybrid_remat``) and shut down afterwards; with an address the
cluster's nodes need ``hybrid_remat`` installed.  Each solve is one Ray task
(``num_cpus=1``); graphs travel once each through the object store, so their
paths need not exist on the nodes.  Solves run side by side share the
machine: time-limited results depend on the load, results under node limits
or of deterministic heuristics do not (tests/test_sweep.py checks that this
process, the pool and Ray give the same rows).

Examples
--------
>>> from hybrid_remat.sweep import parse_budgets
>>> parse_budgets("90%,80%,...,50%")
['90%', '80%', '70%', '60%', '50%']
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> g = training_graph(nx.path_graph(8, create_using=nx.DiGraph), name="mlp8")
>>> rows = sweep([g], "80%,40%,10%", solvers=["dtr"], jobs=1)
>>> records = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
>>> [(r["budget"], r["status"], round(r["tdi_pct"], 2)) for r in records]
[('80%', 'optimal', 8.33), ('40%', 'feasible', 50.0), ('10%', 'below_min', nan)]
"""

from __future__ import annotations

import csv
import math
import os
import re
import time
from collections.abc import Iterable, Sequence

from ._sweep_task import COLUMNS, Solver, SweepTask, _load
from .errors import BudgetError, HybridRematError

__all__ = ["Solver", "SweepTask", "COLUMNS", "DEFAULT_BUDGETS", "parse_budgets", "parse_solver", "sweep",
           "read_csv", "write_csv", "plan_path_for"]

DEFAULT_BUDGETS = ("90%", "80%", "70%", "60%", "50%", "40%", "30%")

_NUMERIC = {"n", "budget_bytes", "budget_pct", "objective", "tdi_pct", "serial_time", "makespan", "peak_bytes",
            "n_recompute", "lower_bound", "lower_bound_tdi_pct", "class_bound", "gap", "t_first_s", "t_best_s",
            "wall_s", "seed", "time_limit"}
_INTEGER = {"n", "budget_bytes", "peak_bytes", "n_recompute", "seed"}


# ------------------------------------------------------------------ parsing
_PCT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*%\s*$")


def parse_budgets(text: str | Sequence) -> list[str]:
    """``"90%,80%,...,30%"`` -> the list of budget specs.

    ``...`` continues the step of the two percentages before it up to the
    one after it.  Other specs (``"2GiB"``, bytes) pass through.

    Raises
    ------
    BudgetError
        An ellipsis without two percentages before it and one after it.
    """
    parts = [p.strip() for p in (text.split(",") if isinstance(text, str) else map(str, text))]
    parts = [p for p in parts if p]
    out: list[str] = []
    for i, p in enumerate(parts):
        if p not in ("...", "\u2026"):
            out.append(p)
            continue
        nums = [_PCT.match(x) for x in (out[-2:] if len(out) >= 2 else []) + parts[i + 1:i + 2]]
        if len(nums) != 3 or not all(nums):
            raise BudgetError(f"budget list {text!r}: '...' needs two percentages before it and one after it")
        a, b, end = (float(m.group(1)) for m in nums)
        step = b - a
        if step == 0 or (end - b) * step < 0:
            raise BudgetError(f"budget list {text!r}: '...' cannot go from {b:g}% to {end:g}% in steps of {step:g}")
        x = b + step
        while (end - x) * step > 1e-9:
            out.append(f"{round(x, 6):g}%")
            x += step
    if not out:
        raise BudgetError("no budgets given")
    return out


def parse_solver(spec, heuristics=None, formulations=None) -> Solver:
    """A solver name (or :class:`Solver`) -> :class:`Solver`; see the module
    docstring for the names.

    Raises
    ------
    HybridRematError
        An unknown name.
    """
    if isinstance(spec, Solver):
        return spec
    from . import plugins

    hs = tuple(heuristics) if heuristics else None
    fs = tuple(formulations) if formulations is not None else None
    if spec == "portfolio":
        label = "portfolio" if hs is None and fs is None else \
            f"portfolio[{','.join(map(str, (hs or ()) + (fs or ())))}]"
        return Solver(label, hs, fs)
    if spec == "heuristics":
        return Solver("heuristics" if hs is None else f"heuristics[{','.join(map(str, hs))}]", hs, ())
    if spec in plugins.heuristics():
        return Solver(spec, (spec,), (), local_search=False)
    if spec in plugins.formulations():
        return Solver(spec, hs, (spec,))
    known = sorted(set(plugins.heuristics()) | set(plugins.formulations()))
    raise HybridRematError(f"unknown solver {spec!r}: use portfolio, heuristics or one of {', '.join(known)}")


def _stem(path: str) -> str:
    b = os.path.basename(str(path))
    for ext in (".json.gz", ".json", ".gz"):
        if b.endswith(ext):
            return b[: -len(ext)]
    return b


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text).replace("%", "pct")).strip("_") or "x"


def plan_path_for(plans_dir: str, task: SweepTask) -> str:
    """Where the plan of ``task`` is written: ``<plans_dir>/<graph>__<budget>__<solver>.json``."""
    return os.path.join(plans_dir, f"{_slug(task.graph)}__{_slug(task.budget)}__{_slug(task.solver.label)}.json")


# ------------------------------------------------------------------ CSV
def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        if v != v:
            return ""
        return repr(v)
    return v


def write_csv(path: str, rows: Iterable[dict]) -> None:
    """Write rows (dicts with :data:`COLUMNS`) as CSV."""
    tmp = f"{path}.part"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _cell(r.get(k)) for k in COLUMNS})
    os.replace(tmp, path)


def read_csv(path: str) -> list[dict]:
    """Read a sweep CSV back (numbers as numbers, empty cells as ``nan``/``None``)."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row = {}
            for k, v in r.items():
                if k in _NUMERIC:
                    row[k] = (int(v) if k in _INTEGER else float(v)) if v != "" else (None if k in _INTEGER
                                                                                      else float("nan"))
                else:
                    row[k] = v
            out.append(row)
    return out


def _frame(rows: list[dict]):
    try:
        import pandas as pd
    except ImportError:
        return rows
    return pd.DataFrame(rows, columns=list(COLUMNS))


# ------------------------------------------------------------------ the driver
def _tasks(graphs, budgets, solvers, *, time_limit, seed, node_limit, objective, devices, detail, options):
    tasks = []
    for g in graphs:
        if isinstance(g, (str, os.PathLike)):
            label, source = _stem(os.fspath(g)), os.fspath(g)
        else:
            label, source = g.name, g
        for b in budgets:
            for s in solvers:
                tasks.append(SweepTask(len(tasks), label, source, str(b), s, float(time_limit), int(seed), node_limit,
                                       objective, tuple(devices), bool(detail), tuple(sorted(options.items()))))
    return tasks


def sweep(graphs, budgets=DEFAULT_BUDGETS, *, time_limit: float = 10.0, solvers=("portfolio",), heuristics=None,
          formulations=None, objective: str = "serial", devices=(), seed: int = 0, node_limit: int | None = None,
          jobs: int | None = None, ray=None, out: str | None = None, plans: bool = True, force: bool = False,
          plot: str | None = None, progress: bool = False, detail: bool = False, solve_options: dict | None = None):
    """Solve every (graph, budget, solver); return the rows.

    Parameters
    ----------
    graphs : list of paths or Graph
    budgets : str or list
        Specs for the first device (``"80%"``, ``"2GiB"``, bytes); a string
        is read by :func:`parse_budgets`.
    time_limit : float
        Seconds per solve (``anytime_solve``'s limit).
    solvers : list of str or Solver
        See the module docstring; ``heuristics`` / ``formulations`` restrict
        the ``portfolio`` and ``heuristics`` solvers.
    objective : {"serial", "makespan"}
    devices : list of str
        Extra devices after the budgeted one, e.g. ``["cpu=64GiB"]``.
    seed, node_limit : int
        Passed to ``anytime_solve``: with deterministic solvers (heuristics,
        node limits) the rows do not depend on where they ran.
    jobs : int, optional
        Parallel solves (default: the number of CPUs, at most the number of
        solves); ``1`` solves in this process.
    ray : bool or str, optional
        Run on Ray: ``True`` starts a local runtime with ``jobs`` CPUs, a
        string is a cluster address (``"auto"``, ``"ray://host:10001"``).
    out : str, optional
        CSV path; plans go to ``<out stem>_plans/`` beside it (``plans=False``:
        none).  Existing files are refused unless ``force``.
    plot : str, optional
        Write the Pareto figure (:func:`hybrid_remat.plot.pareto`) there.
    progress : bool
        A progress bar with ETA on stderr (rich when installed).
    detail : bool
        Add each solve's ``history``, ``report`` and ``stats`` to the Python
        rows (not to the CSV).
    solve_options : dict, optional
        Extra keywords for ``anytime_solve`` (those it accepts).

    Returns
    -------
    pandas.DataFrame or list of dict
        One row per solve in (graph, budget, solver) order.  Ctrl-C keeps the
        rows done (CSV written) and re-raises :class:`KeyboardInterrupt`.
    """
    from .objective import get_objective

    objective = get_objective(objective).name
    graphs = [graphs] if isinstance(graphs, (str, os.PathLike)) else list(graphs)
    if isinstance(budgets, str):
        budgets = parse_budgets(budgets)
    _check_inputs(graphs, budgets, devices, time_limit, jobs, out, plot)
    solver_objs = [parse_solver(s, heuristics, formulations) for s in solvers]
    if len({s.label for s in solver_objs}) != len(solver_objs):
        raise HybridRematError(f"solver labels repeat: {[s.label for s in solver_objs]}")
    tasks = _tasks(graphs, budgets, solver_objs, time_limit=time_limit, seed=seed, node_limit=node_limit,
                   objective=objective, devices=devices, detail=detail, options=solve_options or {})
    plans_dir = None
    if out is not None:
        plans_dir = os.path.splitext(out)[0] + "_plans" if plans else None
        targets = [out] + ([plot] if plot else [])
        if plans_dir is not None:
            targets += [plan_path_for(plans_dir, t) for t in tasks]
        clash = [p for p in targets if os.path.exists(p)]
        if clash and not force:
            more = f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""
            raise FileExistsError(f"{clash[0]} exists{more}; pass force=True (CLI: --force) to overwrite")
    elif plot and os.path.exists(plot) and not force:
        raise FileExistsError(f"{plot} exists; pass force=True (CLI: --force) to overwrite")
    from ._sweep_run import progress_reporter, run_tasks

    done: dict[int, dict] = {}
    details: dict[int, dict] = {}
    reporter = progress_reporter(len(tasks), enabled=progress)
    t0 = time.perf_counter()
    try:
        results = run_tasks(tasks, jobs=jobs, ray=ray)  # a pool forks here, before the progress bar's thread
        with reporter:
            for index, (row, doc, det) in results:
                if doc is not None and plans_dir is not None:
                    os.makedirs(plans_dir, exist_ok=True)
                    path = plan_path_for(plans_dir, tasks[index])
                    _write_json(path, doc)
                    row["plan"] = os.path.relpath(path, os.path.dirname(os.path.abspath(out)))
                done[index] = row
                if det is not None:
                    details[index] = det
                if out is not None:
                    write_csv(out, [done[i] for i in sorted(done)])
                reporter.advance(row)
    except KeyboardInterrupt:
        if out is not None:
            write_csv(out, [done[i] for i in sorted(done)])
        reporter.interrupted(len(done), out)
        raise
    rows = [done[i] for i in sorted(done)]
    if out is not None:
        write_csv(out, rows)
    reporter.finished(time.perf_counter() - t0, out)
    if plot:
        from .plot import pareto

        pareto(rows, path=plot, overwrite=True)
    if detail:
        return [dict(done[i], **details.get(i, {})) for i in sorted(done)]
    return _frame(rows)


def _check_inputs(graphs, budgets, devices, time_limit, jobs, out, plot) -> None:
    """Everything that can be wrong before the first solve (a sweep that
    fails after hours of solving, or writes its errors as rows, is worse)."""
    from .budgets import parse_budget_spec
    from .errors import GraphError

    if not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit) and time_limit > 0):
        raise HybridRematError(f"time_limit must be a finite positive number of seconds, not {time_limit!r}")
    if jobs is not None and jobs < 1:
        raise HybridRematError(f"jobs must be at least 1, not {jobs}")
    if not budgets:
        raise BudgetError("no budgets given")
    for b in budgets:
        parse_budget_spec(b)
    for d in devices:
        name, eq, size = str(d).partition("=")
        if not eq:
            raise BudgetError(f"device {d!r} has no size: write {name}=SIZE")
        parse_budget_spec(size)
    for path, what in ((out, "out"), (plot, "plot")):
        folder = os.path.dirname(os.fspath(path)) if path else ""
        if path and folder and not os.path.isdir(folder):
            raise HybridRematError(f"{what} {path}: the directory {folder} does not exist")
    if plot:
        from .plot import FORMATS

        if os.path.splitext(plot)[1].lower() not in FORMATS:
            raise HybridRematError(f"plot {plot}: cannot tell the figure format; use one of {', '.join(FORMATS)}")
    if not graphs:
        raise GraphError("no graphs given")
    for g in graphs:
        graph = _load(os.fspath(g)) if isinstance(g, (str, os.PathLike)) else g
        for d in devices:
            name = str(d).partition("=")[0].strip()
            if name not in graph.costs and name not in ("host", "storage"):
                raise BudgetError(f"device {name!r} is not a cost kind of graph {graph.name!r} "
                                  f"({', '.join(graph.cost_kinds)})")


def _write_json(path: str, doc: dict) -> None:
    import json

    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

