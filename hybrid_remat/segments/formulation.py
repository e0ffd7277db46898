"""The segment-chain solver and its bound as a registered formulation
(``segments``): any single-device training graph, with or without
repetition.

``solve`` runs :func:`~hybrid_remat.segments.solver.solve_segments` (a
simulator-checked plan of the keep-or-recompute-once class) with most of its
limits, then :func:`~hybrid_remat.bounds.segments.segment_lower_bound` (a
bound over every plan) with the rest; ``status`` is ``optimal`` only when the
plan reaches that bound.  The menus are independent tasks
(:func:`~hybrid_remat.segments.menus.menu_tasks`): they run on the
portfolio's workers where it has more than one, or on Ray tasks with
``SegmentsFormulation(RayMenus(address))`` (:mod:`~hybrid_remat.segments.menu_exec`).

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> g = training_graph(nx.path_graph(6, create_using=nx.DiGraph))
>>> r = SegmentsFormulation().solve(Problem.single(g, "70%"))
>>> r.status in ("optimal", "feasible"), r.lower_bound <= r.objective
(True, True)
"""

from __future__ import annotations

from ..blocks.detect import missing_structure
from ..blocks.formulation import solve_chain
from ..interfaces import ALL_PLANS, Formulation, FormulationResult
from .chain import segment_chain

__all__ = ["SegmentsFormulation"]


class SegmentsFormulation(Formulation):
    """A chain of segments (repeated blocks share menus), menus exact where
    small, combined by a DP; the partition's cut bound proves what it can."""

    name = "segments"
    version = "1"
    capabilities = frozenset({"dag", "single_device", "needs_budget", "serial", "exact", "honours_limits"})
    rank = 8.5
    bound_scope = ALL_PLANS

    def __init__(self, menu_executor=None):
        #: where the menus run (:mod:`.menu_exec`: ``RayMenus("auto")`` for a Ray cluster); ``None``: the
        #: portfolio's workers where it runs on more than one (``Limits.workers``), else this process
        self.menu_executor = menu_executor

    def chain(self, graph):
        """The graph's chain (:func:`~hybrid_remat.segments.chain.segment_chain`), kept with the graph."""
        return graph.derived("segment_chain", segment_chain)

    def applicable(self, problem) -> tuple[bool, str]:
        from ..bounds.cut import serial_single_device

        ok, why = serial_single_device(problem)
        if not ok:
            return ok, why
        if self.chain(problem.graph) is None:
            return False, missing_structure(problem.graph, "not a training graph (no backward phase after the forward phase)")
        return True, ""

    def predict_seconds(self, problem) -> float:
        """Seconds to the first DP plan (a useful result: the solver is
        anytime): greedy menus (a few ms per menu; exact ones only within
        a share of the time) and about five simulations of the whole graph.
        (It predicted all the exact menus before, 0.2 s per segment: 62 s
        at 32k nodes of layers that all differ, so the scheduler never
        started it there.)"""
        ch = self.chain(problem.graph)
        segments = 0 if ch is None else int((ch.kind < 0).sum()) + len(ch.runs)
        return 1.0 + 0.005 * segments + 2e-5 * problem.graph.n

    def constructs_on(self, problem) -> bool:
        """Whether it runs with the heuristics (a constructor, the scheduler's first pass): where most stages
        are segments of their own, so that no block solver plans the graph (layers that all differ: its
        plan, 3.85 % TDI in 6 s at 32k nodes, is what the heuristics and LNS do not reach in 20 s)."""
        ch = self.chain(problem.graph)
        return ch is not None and float((ch.kind < 0).mean()) > 0.5

    def warmup(self) -> None:
        """Compile the re-drop class's kernels (:mod:`hybrid_remat.segments.redrop`) outside every limit."""
        from ..segments.redrop import warmup

        warmup()

    def solve(self, problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent=None,
              on_bound=None) -> FormulationResult:
        lim = self.limits_of(limits)
        ok, why = self.applicable(problem)
        if not ok:
            return FormulationResult("no_solution", stats={"skipped": why})
        return solve_chain(problem, self.chain(problem.graph), lim, on_incumbent=on_incumbent, on_bound=on_bound,
                           menu_executor=self.menu_executor)
