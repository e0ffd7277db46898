"""A bound over every plan from a segment chain: the block bound
(:mod:`hybrid_remat.bounds.blocks`) with the chain's stages as the groups.

Why it is valid.  The block bound's proof (steps 1-3 in
:mod:`hybrid_remat.bounds.blocks`) starts from the cut bound at a node ``t``,
a relaxation of EVERY plan (not only of the keep-or-recompute-once class the
segment solver searches), and drops the recomputation rows between groups:
which nodes form a group is never used, so any partition of the nodes gives
a valid bound; here the groups are the stages of the chain (segments of
their own, and blocks of a run, which share one staircase per kind and per
class of costs, step 4 there).  Staircases stopped by the limits keep
weaker but valid items, so the bound stays valid whatever the limits.

What is not a bound.  The chain DP's value (:func:`~.solver.chain_dp`)
is the least extra time of the keep-or-recompute-once class *as measured*
by simulations of mixed options: no bound over every plan nor over the
class, never reported as either.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.oracle import brute_force
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.segments.chain import segment_chain
>>> fw = nx.DiGraph([(0, 1), (1, 2), (0, 2), (2, 3), (3, 4)])
>>> for v in fw:
...     fw.nodes[v].update(bytes=1 + v % 3, cost=1.0 + v)
>>> g = training_graph(fw)
>>> p = Problem.single(g, 13)
>>> lb = segment_lower_bound(p, segment_chain(g, segment_size=2))
>>> p.base_cost <= lb.value <= brute_force(p)[0]
True
"""

from __future__ import annotations

from ..limits import Limits
from .blocks import BlockBound, block_lower_bound

__all__ = ["segment_lower_bound"]


def segment_lower_bound(problem, chain, *, cuts: int = 3, limits: Limits | None = None,
                        target: float = float("inf")) -> BlockBound:
    """The bound over every plan of the chain's partition (module docstring)
    at the ``cuts`` best cuts; stops at ``target``."""
    return block_lower_bound(problem, structure=chain, cuts=cuts, limits=limits, target=target)
