"""Plans of the *keep-or-recompute-once* class for the chain solvers: the
class itself (the keep set -> compute sequence rule and
:class:`~hybrid_remat.core.keepset.KeepSetPlanner`, shared with the eager
PyTorch planner) lives in :mod:`hybrid_remat.core.keepset` and is
re-exported here; :func:`capacity_rounds` is the block solver's and the
segment chain's repair loop around it.

Examples
--------
>>> import networkx as nx
>>> import numpy as np
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> g = training_graph(nx.path_graph(4, create_using=nx.DiGraph))
>>> keep = np.zeros(g.n, dtype=bool); keep[[0, 2, 4]] = True   # f0, f2 and the loss
>>> seq = keep_sequence(g, keep)
>>> seq.tolist()            # f1 and f3 are recomputed before the backward nodes that read them
[0, 1, 2, 3, 4, 3, 5, 6, 1, 7, 8]
>>> plan = sequence_plan(g, seq, "cost")[0]
>>> simulate(Problem.single(g, "100%"), plan).valid
True
"""

from __future__ import annotations

from ..core.keepset import KeepSetPlanner, keep_sequence, keep_sequence_kernel
from ..core.sequence import minimal_plan

__all__ = ["keep_sequence", "sequence_plan", "keep_sequence_kernel", "KeepSetPlanner", "capacity_rounds"]


#: the minimal-memory plan of a compute sequence (one kernel for the whole library: core/sequence.py)
sequence_plan = minimal_plan


def capacity_rounds(problem, planner: KeepSetPlanner, base: int, choose, least, *, limits, max_rounds: int,
                    on_incumbent=None, source: str = "", note=None):
    """The chain solvers' repair loop: ``choose(capacity)`` picks a keep set
    from measured figures for the memory left above ``base`` (``(keep,
    info)`` or ``None``), the plan is simulated, and the capacity is lowered
    by what the plan's peak overshot, or raised once by the room it left.
    ``least()``: the least-memory keep set, tried once when nothing fits the
    figures.  Returns ``(plan, value, info, rounds)`` of the best valid plan
    (``None, inf, None, rounds`` when none was), each round as a dict
    (``note(sim, info)`` adds to it)."""
    import math

    from ..simulate import simulate

    B = int(problem.budgets[0])
    capacity = float(B - base)
    best = (None, math.inf, None)
    rounds = []
    raised = False
    for _ in range(max_rounds):
        if limits.expired() or capacity <= 0:
            break
        got = choose(capacity)
        if got is None:
            if rounds:
                break
            got = least()
        keep, info = got
        plan, peak, _ = planner.plan(keep)
        sim = simulate(problem, plan)
        rounds.append({"capacity": capacity, "peak": int(peak), "valid": bool(sim.valid),
                       **(note(sim, info) if note is not None else {})})
        if sim.valid:
            value = problem.objective.value(sim)
            if value < best[1]:
                best = (plan, value, info)
                if on_incumbent is not None:
                    on_incumbent(plan, source)
            if raised or B - peak <= 1e-3 * B:
                break
            raised = True           # the measured figures were pessimistic: once, use the room left
            capacity += B - peak
            continue
        if raised:
            break
        capacity -= max(1, peak - B)
    return (*best, rounds)
