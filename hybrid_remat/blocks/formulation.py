"""The block solver and the block bound as a registered formulation
(``blocks``): SCIP on one block of each kind, whatever the depth.

``solve`` runs :func:`~hybrid_remat.blocks.solver.solve_blocks` (a
simulator-checked plan of the block-structured class) with most of its
limits, then :func:`~hybrid_remat.bounds.blocks.block_lower_bound` (a bound
over every plan) with the rest; ``status`` is ``optimal`` only when the plan
reaches that bound.  Applicable to single-device problems whose graph has at
least two repeated blocks (:func:`~hybrid_remat.blocks.detect.detect_blocks`)
covering half of it, or several runs of blocks that do together: those it
solves as the segment chain whose kinds are the runs (:func:`solve_chain`,
the ``segments`` formulation's solve: one block of each run by SCIP).

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> fw = nx.DiGraph()
>>> for i in range(5):
...     fw.add_node(i, bytes=3 if i % 2 else 1, cost=1.0 + i % 2)
...     if i:
...         fw.add_edge(i - 1, i)
>>> r = BlocksFormulation().solve(Problem.single(training_graph(fw), 11))
>>> r.status, r.objective, r.lower_bound
('optimal', 23.0, 23.0)
"""

from __future__ import annotations

import math

from ..interfaces import ALL_PLANS, Formulation, FormulationResult
from ..scip import check_bound
from .detect import missing_structure
from .solver import solve_blocks
from .structure import RemembersBlocks, coverage, runs_chain

__all__ = ["BlocksFormulation", "result_with_bound", "solve_chain"]

#: the segment chain's bound is skipped with less time left than this (seconds)
MIN_BOUND_S = 0.5


class BlocksFormulation(RemembersBlocks, Formulation):
    """Exact per-block trade-offs combined across the chain of blocks; the
    block bound proves what it can (module docstring)."""

    name = "blocks"
    version = "1"
    capabilities = frozenset({"dag", "single_device", "needs_budget", "serial", "exact", "honours_limits"})
    rank = 8.0
    bound_scope = ALL_PLANS

    #: the smallest share of the graph's nodes the repeated blocks must cover;
    #: below it the prologue/epilogue is solved as one piece and is the whole
    #: problem (a U-Net at 100k nodes: 544 blocks, a 45k-node prologue, no
    #: plan in 8 s), which the ``segments`` formulation cuts instead
    min_coverage = 0.5

    def applicable(self, problem) -> tuple[bool, str]:
        ok, why = super().applicable(problem)
        if not ok:
            return ok, why
        bs = self.structure(problem.graph)
        covered = coverage(problem.graph, bs)
        if covered < self.min_coverage and self.runs_chain(problem.graph) is None:
            return False, (f"the repeated blocks cover {100 * covered:.0f} % of the nodes (< "
                           f"{100 * self.min_coverage:.0f} %), and so do the runs of the segment chain: "
                           "the segments formulation cuts the rest")
        return True, ""

    def runs_chain(self, graph):
        """The segment chain of several runs of blocks that cover
        :attr:`min_coverage` of the nodes together where one run does not
        (:func:`~hybrid_remat.bounds.blocks.runs_chain`); else ``None``."""
        return runs_chain(graph, self.structure(graph), self.min_coverage)

    def predict_seconds(self, problem) -> float:
        """About 3 s of SCIP (the staircases, independent of depth) and a few
        simulations of the whole graph (measured: 0.15 s each at 100k nodes),
        the block solver's staircase refinement and the plans rebuilt after
        it included (:class:`~hybrid_remat.blocks.solver.LayerFront`; decoder
        tracer 10k at 30 %: first plan 0.4 s, refinement done with its five
        plans 2.2 s, load 3.4); the solver plans anytime, so a shorter share
        gives a coarser plan, not none.
        Several runs (the segment chain): a first plan after one simulation
        and a DP plan after three (measured on U-Nets: 0.3 s and 3.5 s at
        100k nodes on a loaded machine, 0.2 s and 3 s at 10k)."""
        if self.runs_chain(problem.graph) is not None:
            return 0.5 + 3e-5 * problem.graph.n
        return 3.0 + 6e-6 * problem.graph.n

    def warmup(self) -> None:
        """Compile the re-drop class's kernels (:mod:`hybrid_remat.segments.redrop`) outside every limit."""
        from ..segments.redrop import warmup

        warmup()

    def solve(self, problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent=None,
              on_bound=None) -> FormulationResult:
        lim = self.limits_of(limits)
        ch = self.runs_chain(problem.graph)
        if ch is not None:          # several runs of blocks: each a kind of the segment chain
            return solve_chain(problem, ch, lim, on_incumbent=on_incumbent, on_bound=on_bound)
        bs = self.structure(problem.graph)
        if bs is None or bs.n_blocks < 2:
            why = missing_structure(problem.graph, "no repeated blocks")
            return FormulationResult("no_solution", stats={"skipped": why})
        from ..bounds.blocks import block_lower_bound  # here: the bound reads this package's detector

        left = lim.left()
        r = solve_blocks(problem, structure=bs, on_incumbent=on_incumbent,
                         limits=lim.share(0.75 * left) if math.isfinite(left) else lim)
        bb = block_lower_bound(problem, structure=bs, limits=lim, target=r.objective)
        if on_bound is not None and bb.node >= 0:
            on_bound(bb.value)
        stats = {"solver": r.stats, "bound": {"node": bb.node, **bb.stats}, "blocks": bs.n_blocks}
        return result_with_bound(r, bb, stats)


def result_with_bound(r, bb, stats: dict) -> FormulationResult:
    """The formulation's result from a chain solve ``r`` (plan, simulated
    objective) and a block bound ``bb`` over every plan: ``optimal`` when the
    plan reaches the bound within SCIP's tolerance; a bound above the
    simulated plan is dropped (:func:`~hybrid_remat.scip.check_bound`)."""
    if r.plan is None:
        return FormulationResult("no_solution", lower_bound=bb.value, stats=stats)
    tol = bb.tolerance + 1e-9 * abs(r.objective)
    bound, note = check_bound(bb.value, r.objective, tol)
    if note:
        stats["bound_note"] = note
    proved = r.objective - bound <= tol
    return FormulationResult("optimal" if proved else "feasible", r.plan, r.objective,
                             r.objective if proved else bound, stats)


def solve_chain(problem, ch, lim, *, on_incumbent=None, on_bound=None, menu_executor=None) -> FormulationResult:
    """A segment chain's plan (:func:`~hybrid_remat.segments.solver.solve_segments`,
    most of ``lim``; its menus on ``menu_executor``) and its bound over every plan
    (:func:`~hybrid_remat.bounds.segments.segment_lower_bound`, the rest)."""
    from ..bounds.blocks import BlockBound
    from ..bounds.segments import segment_lower_bound
    from ..segments.solver import solve_segments

    left = lim.left()
    r = solve_segments(problem, chain=ch, on_incumbent=on_incumbent, menu_executor=menu_executor,
                       limits=lim.share(0.7 * left) if math.isfinite(left) else lim)
    if lim.left() < MIN_BOUND_S:       # its cut screen alone takes about that long at 100k nodes
        bb = BlockBound(problem.base_cost, 0.0, -1, {"skipped": f"under {MIN_BOUND_S:g} s left"})
    else:
        bb = segment_lower_bound(problem, ch, limits=lim, target=r.objective)
    if on_bound is not None and bb.node >= 0:
        on_bound(bb.value)
    stats = {"solver": r.stats, "bound": {"node": bb.node, **bb.stats}, "chain": ch.describe()}
    return result_with_bound(r, bb, stats)
