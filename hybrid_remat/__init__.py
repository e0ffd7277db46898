"""hybrid_remat: rematerialization and CPU/GPU placement planning.

Load a graph, state the devices and budgets, and get a plan that the
simulator has verified::

    >>> import hybrid_remat as hr
    >>> g = hr.generators.chain(6, bytes=10)
    >>> p = hr.Problem.single(g, "100%")
    >>> r = hr.simulate(p, hr.keep_all_plan(g, "cost"))
    >>> r.valid, r.peak_bytes["cost"]
    (True, 20)
"""

from . import generators, plot
from .anytime import Result, SolveInterrupted, anytime_solve
from .budgets import keep_all_peak, min_feasible_budget, parse_budget
from .errors import BudgetError, GraphError, HybridRematError, PlanError, PluginError, SolverError
from .graph import Graph
from .hookspecs import hookimpl
from .loaders import load_graph
from .plan import Plan, keep_all_plan, plan_from_rs, read_plan, rs_from_plan, write_plan
from .problem import Device, Link, Problem
from .simulate import SimulationResult, simulate
from .sweep import sweep

__version__ = "0.1.0"

__all__ = [
    "generators", "anytime_solve", "Result", "SolveInterrupted", "keep_all_peak", "min_feasible_budget", "parse_budget",
    "BudgetError", "GraphError", "HybridRematError", "PlanError", "PluginError", "SolverError",
    "Graph", "hookimpl", "load_graph", "Plan", "keep_all_plan", "plan_from_rs", "read_plan",
    "rs_from_plan", "write_plan", "Device", "Link", "Problem", "SimulationResult", "simulate", "plot", "sweep",
]
