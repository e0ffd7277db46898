"""Which part of a graph the block components work on: applicability
(:func:`blocks_applicable`), the share in repeated blocks (:func:`coverage`),
the partition the block bound groups by (:func:`block_partition`: the
repeated blocks, else the segment chain), the chain of several runs the
``blocks`` formulation solves (:func:`runs_chain`), and detection once per
graph (:class:`RemembersBlocks`).  The bound itself is
:mod:`hybrid_remat.bounds.blocks`; nothing here imports it.
"""

from __future__ import annotations

from .detect import BlockStructure, detect_blocks, missing_structure

__all__ = ["MIN_COVERAGE", "RemembersBlocks", "block_partition", "blocks_applicable", "coverage", "runs_chain"]

#: below this share of the nodes in repeated blocks, the block bound groups by the segment chain instead
#: (:func:`block_partition`): a U-Net's 45k-node prologue as one group gave the trivial bound in 8 s
MIN_COVERAGE = 0.5


def blocks_applicable(problem, structure: BlockStructure | None = None) -> tuple[bool, str]:
    """Single device, serial objective, at least two repeated blocks
    (``structure``: the graph's, when already detected)."""
    from ..bounds.cut import serial_single_device

    ok, why = serial_single_device(problem)
    if not ok:
        return ok, why
    bs = structure if structure is not None else problem.graph.derived("blocks", detect_blocks)
    if bs is None or bs.n_blocks < 2:
        return False, missing_structure(problem.graph, "no repeated blocks")
    return True, ""


def coverage(graph, bs) -> float:
    """The share of ``graph``'s nodes in the blocks of ``bs`` (0 for none)."""
    return 0.0 if bs is None else (bs.fwd.size + bs.bwd.size) / max(1, graph.n)


def block_partition(graph, bs=None):
    """The groups the block bound uses on ``graph``: its repeated blocks
    (``bs``, detected when not given) where they cover at least
    :data:`MIN_COVERAGE` of the nodes, else the segment chain (several runs
    and segments of their own cut where few bytes cross), else ``bs``.  Any
    partition gives a bound over every plan (module docstring, step 2)."""
    bs = bs if bs is not None else graph.derived("blocks", detect_blocks)
    if coverage(graph, bs) >= MIN_COVERAGE:
        return bs
    from ..segments.chain import segment_chain

    ch = graph.derived("segment_chain", segment_chain)
    return ch if ch is not None else bs


def runs_chain(graph, bs=None, min_coverage: float = MIN_COVERAGE):
    """The segment chain when the blocks of ``bs`` cover less than
    ``min_coverage`` of the nodes but the chain's runs together cover that
    much (U-Net levels, ResNet stages: several runs of repeated blocks, each
    a kind of its own); else ``None``."""
    bs = bs if bs is not None else graph.derived("blocks", detect_blocks)
    if coverage(graph, bs) >= min_coverage:
        return None
    ch = block_partition(graph, bs)
    if not hasattr(ch, "runs") or not ch.runs:
        return None
    in_runs = sum(ch.stage_nodes(s).size for s in range(ch.n_stages) if ch.kind[s] >= 0)
    return ch if in_runs >= min_coverage * graph.n else None


class RemembersBlocks:
    """Detection once per graph, shared by every block component: the
    structure is kept with the graph (:meth:`~hybrid_remat.graph.Graph.derived`;
    a component is asked ``applicable`` then run).  ``applicable``:
    :func:`blocks_applicable`."""

    def applicable(self, problem) -> tuple[bool, str]:
        return blocks_applicable(problem, self.structure(problem.graph))

    def structure(self, graph) -> BlockStructure | None:
        """The graph's blocks (:func:`~hybrid_remat.blocks.detect.detect_blocks`)."""
        return graph.derived("blocks", detect_blocks)
