"""The *re-drop* rule: the keep-or-recompute-once class
(:mod:`hybrid_remat.core.keepset`) where chosen values are dropped again
between the backward parts of different stages.

A value ``v`` in ``again`` (a forward value not in ``keep``) that the
backward pass recomputes for a node of stage ``t`` serves the nodes of
stage ``t`` only: a backward node of another stage that reads it (directly
or through a recomputation it triggers) recomputes it once more.  So a
cheap value that distant backward readers need (a U-Net skip: read by the
decoder's backward through the concatenation it feeds, and by the
encoder's) comes back at each of them instead of staying resident
between them; its inputs that are in ``again`` too come back the same way,
from the kept values.

Everything else is the keep-or-recompute-once rule: forward nodes once in
the reference order, a kept value resident to its last use, any other
forward value freed after its last forward use and recomputed right before
the first backward node that needs it (missing inputs first, depth
first).  With ``again`` empty the sequence is :func:`~hybrid_remat.core.keepset.keep_sequence`'s.

The plan is the compute sequence's minimal-memory plan
(:func:`~hybrid_remat.core.sequence.minimal_plan`: each instance freed after
its last reader before the next computation of its node), so an instance
recomputed for stage ``t`` is freed after its last use there.  Its time is
the base time plus the costs of the recomputations, counted with
multiplicity (:meth:`RedropPlanner.plan` returns the counts).

Examples
--------
>>> import networkx as nx
>>> import numpy as np
>>> from hybrid_remat.generators import training_graph
>>> g = training_graph(nx.path_graph(4, create_using=nx.DiGraph))
>>> keep = np.zeros(g.n, dtype=bool); keep[[0, 2, 4]] = True
>>> group = np.zeros(g.n, dtype=np.int64)
>>> seq, count = redrop_sequence(g, keep, np.zeros(g.n, dtype=bool), group)
>>> from hybrid_remat.core.keepset import keep_sequence
>>> seq.tolist() == keep_sequence(g, keep).tolist()          # nothing re-dropped: the keep-set rule
True
>>> group[g.phase != 0] = np.arange(int((g.phase != 0).sum()))   # every backward node a stage of its own
>>> again = ~keep & (g.phase == 0)
>>> seq, count = redrop_sequence(g, keep, again, group)
>>> int(count.sum()) >= 2
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.sequence import minimal_plan

__all__ = ["redrop_sequence_kernel", "redrop_sequence", "from_kept", "RedropPlanner", "PrunedPlans", "warmup"]


@njit(cache=True)
def redrop_sequence_kernel(order, is_fwd, keep, again, group, pred_ptr, pred_idx):
    """``(seq, count)``: the compute sequence of the re-drop rule (module
    docstring) and per node how many times it is recomputed.

    ``order``: every node once, forward nodes first; ``is_fwd``/``keep``/
    ``again``: bool per node; ``group``: int per node (a backward node's
    stage)."""
    n = pred_ptr.shape[0] - 1
    state = np.zeros(n, dtype=np.int8)      # 0 not yet, 1 available, 2 computed and dropped
    inst = np.full(n, -1, dtype=np.int64)   # the group the available instance serves (-1: the forward pass)
    cap = 2 * n + 16
    seq = np.empty(cap, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    stack = np.empty(n + 2, dtype=np.int64)
    on = np.zeros(n, dtype=np.bool_)
    k = 0
    for i in range(order.shape[0]):
        b = order[i]
        if is_fwd[b]:
            seq[k] = b
            k += 1
            state[b] = 1 if keep[b] else 2
            continue
        gb = group[b]
        top = 0
        stack[top] = b
        top += 1
        on[b] = True
        while top > 0:
            v = stack[top - 1]
            pushed = False
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[j]
                if on[u]:
                    continue
                if state[u] == 2 or (state[u] == 1 and again[u] and not keep[u] and inst[u] != gb):
                    stack[top] = u
                    top += 1
                    on[u] = True
                    pushed = True
                    break
            if pushed:
                continue
            top -= 1
            on[v] = False
            if k >= cap:
                cap *= 2
                grown = np.empty(cap, dtype=np.int64)
                grown[:k] = seq[:k]
                seq = grown
            seq[k] = v
            k += 1
            if v != b:
                count[v] += 1
            state[v] = 1
            inst[v] = gb
    return seq[:k].copy(), count


@njit(cache=True)
def _within_kernel(is_fwd, keep, pred_ptr, pred_idx, cap):
    n = pred_ptr.shape[0] - 1
    out = np.zeros(n, dtype=np.bool_)
    stamp = np.full(n, -1, dtype=np.int64)
    stack = np.empty(cap + 2, dtype=np.int64)
    for v in range(n):
        if not is_fwd[v] or keep[v]:
            continue
        stamp[v] = v
        top = 0
        stack[top] = v
        top += 1
        found = 0
        ok = True
        while top > 0 and ok:
            top -= 1
            x = stack[top]
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                if keep[u] or stamp[u] == v:
                    continue
                stamp[u] = v
                found += 1
                if found > cap:
                    ok = False
                    break
                stack[top] = u
                top += 1
        out[v] = ok
    return out


def from_kept(graph, keep, cap: int = 0) -> np.ndarray:
    """The forward values not in ``keep`` that come back from kept values
    through at most ``cap`` other values not kept (bool per node; ``cap =
    0``: every input kept, each comes back at a stage for its own cost).
    Each such value's own missing ancestors are fewer, so they are in the
    set too: a re-dropped value is recomputed from re-dropped ones."""
    return _within_kernel(np.asarray(graph.phase == 0), np.asarray(keep, dtype=np.bool_), graph.pred_ptr,
                          graph.pred_idx, int(cap))


def redrop_sequence(graph, keep, again, group, order=None):
    """``(seq, count)`` of :func:`redrop_sequence_kernel` on ``graph``
    (``order``: default forward nodes, then backward nodes, by index)."""
    is_fwd = np.asarray(graph.phase == 0)
    if order is None:
        order = np.concatenate([np.flatnonzero(is_fwd), np.flatnonzero(~is_fwd)])
    return redrop_sequence_kernel(np.asarray(order, dtype=np.int64), is_fwd, np.asarray(keep, dtype=np.bool_),
                                  np.asarray(again, dtype=np.bool_), np.asarray(group, dtype=np.int64),
                                  graph.pred_ptr, graph.pred_idx)


class RedropPlanner:
    """Plans of the re-drop rule on one problem, the stages of ``group``
    (int per node: a backward node's stage).

    :meth:`plan` turns ``(keep, again)`` into ``(plan, peak, count)``
    (``count``: recomputations per node)."""

    def __init__(self, problem, solver: str, group, *, cap: int = 0):
        g = problem.graph
        self.problem, self.graph, self.solver = problem, g, solver
        self.device = problem.primary.name
        self.is_fwd = np.asarray(g.phase == 0)
        self.order = np.concatenate([np.flatnonzero(self.is_fwd), np.flatnonzero(~self.is_fwd)]).astype(np.int64)
        self.group = np.asarray(group, dtype=np.int64)
        self.cap = int(cap)

    def sequence(self, keep, again):
        g = self.graph
        return redrop_sequence_kernel(self.order, self.is_fwd, np.asarray(keep, dtype=np.bool_),
                                      np.asarray(again, dtype=np.bool_), self.group, g.pred_ptr, g.pred_idx)

    def plan(self, keep, again=None):
        """``(plan, peak, count)`` of the plan of ``keep`` with ``again``
        re-dropped (default :func:`from_kept`)."""
        if again is None:
            again = from_kept(self.graph, keep, self.cap)
        seq, count = self.sequence(keep, again)
        plan, peak = minimal_plan(self.graph, seq, self.device, {"solver": self.solver})
        return plan, peak, count


class PrunedPlans:
    """A planner's plans without the recomputations the budget does not
    need (:func:`~hybrid_remat.pruning.drop_recomputations`, within
    ``limits``): the re-drop rule recomputes at every stage, the budget
    may need it at a few.  :meth:`plan` returns the pruned plan with the
    *unpruned* plan's peak (what the keep set's figures predict: the
    chain solvers' rounds steer the capacity by it) and its counts."""

    def __init__(self, planner, limits):
        self.planner, self.limits = planner, limits
        self.problem = planner.problem

    def plan(self, keep):
        from ..pruning import drop_recomputations

        plan, peak, count = self.planner.plan(keep)
        if peak <= int(self.problem.budgets[0]) and not self.limits.expired():
            plan = drop_recomputations(self.problem, plan, limits=self.limits)
        return plan, peak, count


def warmup() -> None:
    """Compile (or load) this module's kernels on a tiny training graph."""
    from ..generators import chain, training_graph

    g = training_graph(chain(3).to_networkx())
    keep = np.zeros(g.n, dtype=bool)
    redrop_sequence(g, keep, from_kept(g, keep, 1), np.zeros(g.n, dtype=np.int64))
