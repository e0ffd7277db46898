"""Plans of the *keep-or-recompute-once* class: a forward pass that keeps a
chosen set of values for the backward pass, which recomputes every other
value it needs once, just in time.

The class (used by the block solver, :mod:`hybrid_remat.blocks.solver`):
every node is first computed in the reference order (forward phase, then
backward phase).  A forward value in ``keep`` stays resident from its
computation to its last use; any other forward value is freed after its last
forward use and, if a backward node needs it, recomputed right before the
first such node (its missing inputs first, recursively) and then kept to its
last use.  So each value is computed at most twice and the plan is fixed by
``keep``: its cost is the base cost plus the recomputed nodes' costs, its
memory what the simulator counts for the minimal-memory plan of the compute
sequence.

Examples
--------
>>> import networkx as nx
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

import numpy as np
from numba import njit

from ..core.sequence import minimal_plan

__all__ = ["keep_sequence", "sequence_plan", "keep_sequence_kernel", "KeepSetPlanner", "capacity_rounds"]


@njit(cache=True)
def keep_sequence_kernel(order, is_fwd, keep, pred_ptr, pred_idx):
    """The compute sequence of ``keep`` (see the module docstring).

    ``order``: every node once, forward nodes first (a topological order);
    ``is_fwd``/``keep``: bool per node.  Returns ``(seq, recomputed)`` where
    ``recomputed`` marks the nodes computed twice."""
    n = pred_ptr.shape[0] - 1
    state = np.zeros(n, dtype=np.int8)      # 0 not yet, 1 available, 2 computed and dropped
    seq = np.empty(2 * n, dtype=np.int64)
    rec = np.zeros(n, dtype=np.bool_)
    stack = np.empty(2 * n + 2, dtype=np.int64)
    k = 0
    for i in range(order.shape[0]):
        b = order[i]
        if is_fwd[b]:
            seq[k] = b
            k += 1
            state[b] = 1 if keep[b] else 2
            continue
        # backward node: make its inputs available (depth-first, inputs before their consumer)
        top = 0
        stack[top] = b
        top += 1
        while top > 0:
            v = stack[top - 1]
            pushed = False
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[j]
                if state[u] == 2:
                    stack[top] = u
                    top += 1
                    pushed = True
                    break
            if pushed:
                continue
            top -= 1
            seq[k] = v
            k += 1
            if v != b:
                rec[v] = True
            state[v] = 1
    return seq[:k].copy(), rec


def keep_sequence(graph, keep, order=None) -> np.ndarray:
    """The compute sequence of the plan that keeps ``keep`` (bool per node;
    only forward nodes matter); ``order``: default the node order."""
    is_fwd = np.asarray(graph.phase == 0)
    if order is None:
        order = np.concatenate([np.flatnonzero(is_fwd), np.flatnonzero(~is_fwd)])
    seq, _ = keep_sequence_kernel(np.asarray(order, dtype=np.int64), is_fwd, np.asarray(keep, dtype=np.bool_),
                                  graph.pred_ptr, graph.pred_idx)
    return seq


#: the minimal-memory plan of a compute sequence (one kernel for the whole library: core/sequence.py)
sequence_plan = minimal_plan


class KeepSetPlanner:
    """Plans of keep sets on one problem (the class of this module): the
    reference order (forward phase, then backward) is computed once;
    :meth:`plan` turns a keep set into ``(plan, peak, recomputed)``.  Used by
    the block solver and the segment chain; ``solver`` names the plans'
    source in their ``meta``."""

    def __init__(self, problem, solver: str):
        g = problem.graph
        self.problem = problem
        self.solver = solver
        self.is_fwd = np.asarray(g.phase == 0)
        self.order = np.concatenate([np.flatnonzero(self.is_fwd), np.flatnonzero(~self.is_fwd)]).astype(np.int64)

    def plan(self, keep):
        """``(plan, peak, recomputed)`` of the plan that keeps ``keep``."""
        g = self.problem.graph
        seq, rec = keep_sequence_kernel(self.order, self.is_fwd, keep, g.pred_ptr, g.pred_idx)
        plan, peak = sequence_plan(g, seq, self.problem.primary.name, {"solver": self.solver})
        return plan, peak, rec


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
