"""Keep-all: the reference order with no rematerialization."""

from __future__ import annotations

from ..budgets import keep_all_peak
from ..interfaces import Heuristic
from ..plan import keep_all_plan
from ..simulate import simulate

__all__ = ["KeepAll"]


class KeepAll(Heuristic):
    """Run every node once in the reference order, freeing each output after
    its last reader.  Feasible only when the keep-all peak fits (linear
    time; ``limits`` are not needed)."""

    name = "keep_all"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits", "deterministic"})
    rank = 0.0

    def run(self, problem, *, seed: int = 0, limits=None):
        if not problem.is_single_device or keep_all_peak(problem.graph) > problem.budgets[0]:
            return None
        plan = keep_all_plan(problem.graph, problem.primary.name)
        return plan if simulate(problem, plan).valid else None
