"""What of the plugin touches OR-Tools: imported on the first solve, not when the plugin loads (importing
``ortools.sat.python.cp_model`` takes ~0.45 s, which every first ``anytime_solve`` of a process paid before any
CP-SAT model was built)."""

from __future__ import annotations

import math
import threading
import time

from ortools.sat.python import cp_model

from hybrid_remat.simulate import simulate

__all__ = ["cp_model", "Stream", "FirstFit", "set_workers", "new_solver", "STATUS"]


class Stream(cp_model.CpSolverSolutionCallback):
    """Decodes, simulates and reports every improving solution."""

    def __init__(self, model, on_incumbent, t0: float, source: str):
        super().__init__()
        self.model, self.on_incumbent, self.t0, self.source = model, on_incumbent, t0, source
        self.best_plan, self.best_time, self.n_solutions, self.n_invalid = None, math.inf, 0, 0
        self.history: list[tuple[float, float]] = []

    def on_solution_callback(self) -> None:
        self.n_solutions += 1
        plan = self.model.decode(self.value)
        r = simulate(self.model.problem, plan)
        if not r.valid:
            self.n_invalid += 1
            return
        if self.best_plan is None or r.total_time < self.best_time - 1e-12 * max(1.0, abs(self.best_time)):
            self.best_plan, self.best_time = plan, r.total_time
            self.history.append((time.perf_counter() - self.t0, r.total_time))
            if self.on_incumbent is not None:
                self.on_incumbent(plan, self.source)


class FirstFit(cp_model.CpSolverSolutionCallback):
    """Phase 1: stop at the first solution whose decoded plan fits the budget."""

    def __init__(self, model, stop: threading.Event | None):
        super().__init__()
        self.model, self.plan = model, None
        self.n_solutions = 0

    def on_solution_callback(self) -> None:
        self.n_solutions += 1
        if self.objective_value > self.model.budget_units:
            return
        plan = self.model.decode(self.value)
        if simulate(self.model.problem, plan).valid:
            self.plan = plan
            self.stop_search()


def set_workers(prm, threads: int, interleave: int) -> None:
    """``threads`` CP-SAT workers; with one thread and ``interleave > 1``,
    that many subsolvers (LNS among them) interleaved deterministically in
    the one thread."""
    threads = max(1, int(threads))
    if threads == 1 and interleave > 1:
        prm.num_workers = int(interleave)
        prm.interleave_search = True
    else:
        prm.num_workers = threads


def new_solver(threads: int, interleave: int, seed: int, seconds: float, presolve: bool, node_limit) -> cp_model.CpSolver:
    """A CP-SAT solver that leaves SIGINT to Python (``catch_sigint_signal``
    off: CP-SAT's own handler swallows Ctrl-C and leaves ``SIG_DFL`` behind)."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    set_workers(prm, threads, interleave)
    prm.random_seed = int(seed)
    if math.isfinite(seconds):
        prm.max_time_in_seconds = max(0.05, float(seconds))
    prm.cp_model_presolve = bool(presolve)
    if node_limit is not None:
        prm.max_number_of_conflicts = int(node_limit)
    prm.log_search_progress = False
    prm.catch_sigint_signal = False
    return solver


STATUS = {
    cp_model.OPTIMAL: "OPTIMAL", cp_model.FEASIBLE: "FEASIBLE", cp_model.INFEASIBLE: "INFEASIBLE",
    cp_model.MODEL_INVALID: "MODEL_INVALID", cp_model.UNKNOWN: "UNKNOWN",
}
