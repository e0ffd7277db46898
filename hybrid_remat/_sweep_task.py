"""One solve of a sweep, as a worker runs it: the task (it pickles), the
row's columns, and :func:`solve_task`, which solves the task and re-simulates
the plan for the row's figures.  Used by :func:`hybrid_remat.sweep.sweep` and
its runners (:mod:`hybrid_remat._sweep_run`); imports neither.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> g = training_graph(nx.path_graph(8, create_using=nx.DiGraph), name="mlp8")
>>> task = SweepTask(0, "mlp8", g, "80%", Solver("dtr", ("dtr",), (), local_search=False), 5.0)
>>> row, doc, detail = solve_task(task)
>>> row["status"], round(row["tdi_pct"], 2)
('optimal', 8.33)
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass, field

from .errors import BudgetError, HybridRematError

__all__ = ["COLUMNS", "Solver", "SweepTask", "solve_task"]

#: the CSV columns, in order (one row per graph, budget and solver)
COLUMNS = (
    "graph", "n", "budget", "budget_bytes", "budget_pct", "solver", "status", "objective_kind", "objective",
    "tdi_pct", "serial_time", "makespan", "peak_bytes", "n_recompute", "lower_bound", "lower_bound_tdi_pct",
    "bound_scope", "bound_source", "class_bound", "gap", "t_first_s", "t_best_s", "wall_s", "found_by", "seed",
    "time_limit", "plan", "error",
)

@dataclass(frozen=True)
class Solver:
    """One solver configuration of a sweep.

    Parameters
    ----------
    label : str
        The ``solver`` column.
    heuristics, formulations : tuple or None
        Passed to :func:`~hybrid_remat.anytime.anytime_solve` (``None``:
        every default one; ``()``: none).
    local_search : bool
        Let ``anytime_solve`` polish the best plan.
    """

    label: str
    heuristics: tuple | None = None
    formulations: tuple | None = None
    local_search: bool = True


@dataclass(frozen=True)
class SweepTask:
    """One solve: what a worker needs (it must pickle)."""

    index: int
    graph: str
    source: object  # a path, or a Graph
    budget: str
    solver: Solver
    time_limit: float
    seed: int = 0
    node_limit: int | None = None
    objective: str = "serial"
    devices: tuple = ()
    detail: bool = False
    options: tuple = field(default=())  # extra anytime_solve keywords as (name, value) pairs


@functools.lru_cache(maxsize=8)
def _load(path: str):
    from .loaders import load_graph

    return load_graph(path)


def _problem(graph, task: SweepTask):
    from .problem import Problem

    if task.devices:
        problem = Problem.from_specs(graph, [f"{graph.cost_kinds[0]}={task.budget}", *task.devices])
    else:
        problem = Problem.single(graph, task.budget)
    return problem.with_objective(task.objective)


def _nan(x) -> float:
    return float(x) if x is not None and math.isfinite(float(x)) else float("nan")


def _solve_kwargs(task: SweepTask, on_improve) -> dict:
    import inspect

    from .anytime import anytime_solve

    wanted = {"heuristics": list(task.solver.heuristics) if task.solver.heuristics is not None else None,
              "formulations": list(task.solver.formulations) if task.solver.formulations is not None else None,
              "on_improve": on_improve, "seed": task.seed, "node_limit": task.node_limit,
              "local_search": task.solver.local_search, "objective": task.objective,
              # the sweep runs its solves in parallel (``jobs``): each solve is one worker
              "workers": 1, **dict(task.options)}
    params = inspect.signature(anytime_solve).parameters
    return {k: v for k, v in wanted.items() if k in params and (v is not None or k in ("heuristics", "formulations"))}


def solve_task(task: SweepTask, graph=None, *, signals=("SIGINT",)) -> tuple[dict, dict | None, dict | None]:
    """Run one solve; return ``(row, plan document or None, detail or None)``.

    The row's figures come from re-simulating the plan.  Budgets below the
    node bound (a lower bound on the smallest feasible budget: no plan fits
    under it) give status ``below_min``; errors of the library
    give status ``error`` (a sweep goes on).  An interrupted solve raises
    :class:`KeyboardInterrupt` (its row would not be the solve asked for;
    ``signals``: those the solve handles, see ``anytime_solve``).
    """
    from .anytime import anytime_solve
    from .plan import plan_to_json
    from .simulate import simulate

    row = {c: None for c in COLUMNS}
    row.update(graph=task.graph, budget=task.budget, solver=task.solver.label, objective_kind=task.objective,
               seed=task.seed, time_limit=task.time_limit)
    try:
        graph = graph if graph is not None else (task.source if not isinstance(task.source, (str, os.PathLike))
                                                 else _load(os.fspath(task.source)))
        row["n"] = graph.n
        from .budgets import keep_all_peak, parse_budget

        peak = keep_all_peak(graph)
        b = parse_budget(task.budget, graph)  # an unreadable budget is an error, not "below_min"
        row.update(budget_bytes=b, budget_pct=100.0 * b / peak if peak else float("nan"))
        try:
            problem = _problem(graph, task)
        except BudgetError as e:
            row.update(status="below_min", error=" ".join(str(e).split()))
            return row, None, None
        events: list = []
        t0 = time.perf_counter()
        kwargs = {"signals": tuple(signals), **_solve_kwargs(task, lambda ev: events.append((ev.seconds, ev.objective)))}
        result = anytime_solve(problem, task.time_limit, **kwargs)
        wall = time.perf_counter() - t0
    except KeyboardInterrupt:
        raise
    except HybridRematError as e:
        row.update(status="error", error=" ".join(str(e).split()))
        return row, None, None
    if result.stats.get("interrupted"):
        raise KeyboardInterrupt
    objective = problem.objective
    lb = _nan(result.lower_bound)
    row.update(status=result.status, wall_s=wall, bound_scope=result.bound_scope, lower_bound=lb,
               lower_bound_tdi_pct=_nan(objective.tdi_pct(problem, lb)) if lb == lb else float("nan"),
               bound_source=getattr(result, "bound_source", None) or "",
               class_bound=_nan(getattr(result, "class_bound", None)), found_by=result.solver or "")
    doc = None
    if result.plan is not None:
        sim = simulate(problem, result.plan)
        if not sim.valid:  # never report a figure the simulator did not confirm
            row.update(status="error", error=f"returned plan is invalid: {sim.error}")
            return row, None, None
        value = objective.value(sim)
        row.update(objective=value, tdi_pct=objective.tdi_pct(problem, value), serial_time=sim.total_time,
                   makespan=sim.makespan, peak_bytes=sim.peak_bytes[problem.primary.name],
                   n_recompute=sim.n_recompute,
                   gap=max(0.0, (value - lb) / value) if value > 0 and lb == lb else float("nan"))
        if abs(value - result.objective) > 1e-9 * max(1.0, abs(value)):
            row["error"] = f"solver reported {result.objective!r}, simulator says {value!r}"
        finite = [(s, o) for s, o in events if math.isfinite(o)]
        row["t_first_s"] = finite[0][0] if finite else float("nan")
        row["t_best_s"] = next((s for s, o in finite if o <= value * (1 + 1e-9)), float("nan"))
        summary = {**result.summary(), **sim.summary(), "objective": objective.name, "objective_value": value,
                   "lower_bound": lb, "gap": row["gap"]}
        doc = plan_to_json(result.plan, problem, summary)
    detail = None
    if task.detail:
        detail = {"history": [tuple(h) for h in result.history],
                  "report": [dict(vars(r)) for r in result.report],
                  "stats": result.stats}
    return row, doc, detail


def _worker_init() -> None:  # pool workers leave Ctrl-C to the parent and die on SIGTERM (its terminate())
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _solve_indexed(task: SweepTask):
    return task.index, solve_task(task)
