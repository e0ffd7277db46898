"""The keep-set plan class: a forward pass that keeps a chosen set of
values for the backward pass, which recomputes the others it needs.

One class, :class:`KeepSetPlanner`, turns a keep set into a plan: a *rule*
gives the compute sequence of the keep set, the plan is the minimal-memory
plan of that sequence (:func:`~hybrid_remat.core.sequence.minimal_plan`:
each value freed after its last use), with its peak and the recomputed
nodes.  Two rules, one class:

* the default, *keep-or-recompute-once* (the block solver and the segment
  chain, :mod:`hybrid_remat.blocks`, :mod:`hybrid_remat.segments`): every
  node is first computed in the reference order (forward phase, then
  backward phase).  A forward value in ``keep`` stays resident from its
  computation to its last use; any other forward value is freed after its
  last forward use and, if a backward node needs it, recomputed right before
  the first such node (its missing inputs first, recursively) and then kept
  to its last use.  So each value is computed at most twice and the plan is
  fixed by ``keep``: its cost is the base cost plus the recomputed nodes'
  costs (:func:`keep_sequence`);
* what eager PyTorch executes (:mod:`hybrid_remat.torch`: its
  ``executable_order``, passed as ``rule``), where in-place ops and the
  runtime's caching decide the sequence.

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
>>> p = Problem.single(g, "100%")
>>> plan, peak, recomputed = KeepSetPlanner(p, "example").plan(keep)
>>> simulate(p, plan).valid, np.flatnonzero(recomputed).tolist()
(True, [1, 3])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .sequence import minimal_plan

__all__ = ["keep_sequence", "keep_sequence_kernel", "KeepSetPlanner"]


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


class KeepSetPlanner:
    """Plans of keep sets on one problem (the class of this module).

    Parameters
    ----------
    problem : Problem
        Its graph and primary device are the plans'.
    solver : str
        The plans' source in their ``meta`` (``{"solver": solver}``).
    rule : callable, optional
        ``rule(keep) -> compute sequence``; default the keep-or-recompute-once
        rule, whose reference order (forward phase, then backward) is
        computed once.

    :meth:`plan` turns a keep set into ``(plan, peak, recomputed)``.  Used by
    the block solver, the segment chain (default rule) and the eager PyTorch
    planner (its executable order as the rule; :meth:`on_graph`).
    """

    def __init__(self, problem, solver: str, *, rule=None):
        self.problem = problem
        self._setup(problem.graph, problem.primary.name, solver, rule)

    @classmethod
    def on_graph(cls, graph, device: str, solver: str, *, rule=None) -> KeepSetPlanner:
        """The planner of ``graph``'s plans on ``device``, without a problem."""
        self = cls.__new__(cls)
        self.problem = None
        self._setup(graph, device, solver, rule)
        return self

    def _setup(self, graph, device: str, solver: str, rule) -> None:
        self.graph, self.device, self.solver, self.rule = graph, device, solver, rule
        self.is_fwd = np.asarray(graph.phase == 0)
        self.order = np.concatenate([np.flatnonzero(self.is_fwd), np.flatnonzero(~self.is_fwd)]).astype(np.int64)

    def sequence(self, keep):
        """``(seq, recomputed)``: the compute sequence of ``keep`` and the
        nodes it computes more than once."""
        g = self.graph
        if self.rule is None:
            return keep_sequence_kernel(self.order, self.is_fwd, np.asarray(keep, dtype=np.bool_), g.pred_ptr,
                                        g.pred_idx)
        seq = np.asarray(self.rule(keep), dtype=np.int64)
        return seq, np.bincount(seq, minlength=g.n) > 1

    def plan(self, keep):
        """``(plan, peak, recomputed)`` of the plan that keeps ``keep``."""
        seq, rec = self.sequence(keep)
        plan, peak = minimal_plan(self.graph, seq, self.device, {"solver": self.solver})
        return plan, peak, rec
