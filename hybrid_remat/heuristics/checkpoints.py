"""Checkpoint-set heuristics: Chen et al. 2016 sqrt(n) and greedy, linearized and on articulation points.

A *checkpoint set* is a set of forward nodes kept until their last use.
:func:`plan_from_checkpoints` turns one into a schedule: the reference
order runs once; every other forward value is dropped right after its last
reader inside its *segment* (the run of forward nodes up to the next
checkpoint), and later readers (the backward pass) recompute it on demand
from the nearest resident ancestors, keeping the recomputed values until
they are no longer needed.  On graphs without backward nodes every node
counts as forward.

Candidates (Checkmate's two variants): all forward nodes in topological
order ("linearized") or the articulation points of the undirected forward
graph ("AP"; :func:`articulation_points`, with the placeholder source and
sink Checkmate adds, and without Checkmate's master-branch bug that made
every node an articulation point).

Cost.  Building a plan is linear (drop schedule and articulation points are
kernels); Chen's greedy sweeps 60 budgets, each a linear executor run, and
stops the sweep when its limits run out.

Examples
--------
>>> from hybrid_remat.generators import training_graph
>>> import networkx as nx
>>> g = training_graph(nx.path_graph(8, create_using=nx.DiGraph))
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(g, "100%")
>>> plan = ChenSqrtN().run(p)
>>> plan is not None
True
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..graph import FORWARD
from ..interfaces import Heuristic
from .common import GraphArrays, WorkMeter, finish

__all__ = [
    "forward_nodes", "articulation_points", "drop_schedule", "plan_from_checkpoints", "chen_sqrtn_checkpoints",
    "chen_greedy_checkpoints", "ChenSqrtN", "ChenGreedy",
]


def forward_nodes(graph) -> np.ndarray:
    """Forward nodes in topological order (all nodes when none is backward)."""
    fwd = np.flatnonzero(np.asarray(graph.phase) == FORWARD)
    return fwd if fwd.size and fwd.size < graph.n else np.arange(graph.n)


@njit(cache=True)
def _articulation_kernel(adj_ptr, adj):
    """Articulation points of an undirected graph (CSR, no parallel edges):
    an iterative Hopcroft-Tarjan depth-first search over every component."""
    n = adj_ptr.shape[0] - 1
    disc = np.full(n, -1, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    it = adj_ptr[:n].copy()
    stack = np.empty(n, dtype=np.int64)
    is_ap = np.zeros(n, dtype=np.bool_)
    clock = 0
    for s in range(n):
        if disc[s] >= 0:
            continue
        disc[s] = clock
        low[s] = clock
        clock += 1
        top = 0
        stack[0] = s
        root_children = 0
        while top >= 0:
            v = stack[top]
            if it[v] < adj_ptr[v + 1]:
                w = adj[it[v]]
                it[v] += 1
                if disc[w] < 0:
                    parent[w] = v
                    disc[w] = clock
                    low[w] = clock
                    clock += 1
                    top += 1
                    stack[top] = w
                    if v == s:
                        root_children += 1
                elif w != parent[v] and disc[w] < low[v]:
                    low[v] = disc[w]
            else:
                top -= 1
                p = parent[v]
                if p >= 0:
                    if low[v] < low[p]:
                        low[p] = low[v]
                    if p != s and low[v] >= disc[p]:
                        is_ap[p] = True
        if root_children > 1:
            is_ap[s] = True
    return is_ap


def articulation_points(graph) -> np.ndarray:
    """Articulation points of the undirected forward graph, sorted.

    As in Checkmate, a placeholder source joined to the first forward node
    and a placeholder sink joined to the last one are added, so a node
    qualifies only if removing it separates the start from the end (or cuts
    off some other part).  The placeholders themselves are never returned.
    Linear time (:func:`_articulation_kernel`).
    """
    fwd = forward_nodes(graph)
    if fwd.size == 0:
        return fwd
    n = graph.n
    is_fwd = np.zeros(n, dtype=bool)
    is_fwd[fwd] = True
    e = graph.edges()
    e = e[is_fwd[e[:, 0]] & is_fwd[e[:, 1]]] if len(e) else np.zeros((0, 2), dtype=np.int64)
    src, sink = n, n + 1  # the placeholders
    extra = np.array([[src, int(fwd[0])], [int(fwd[-1]), sink]], dtype=np.int64)
    e = np.concatenate([e.astype(np.int64), extra])
    both = np.concatenate([e, e[:, ::-1]])
    order = np.lexsort((both[:, 1], both[:, 0]))
    both = both[order]
    ptr = np.zeros(n + 3, dtype=np.int64)
    np.add.at(ptr, both[:, 0] + 1, 1)
    np.cumsum(ptr, out=ptr)
    is_ap = _articulation_kernel(ptr, np.ascontiguousarray(both[:, 1]))
    return np.flatnonzero(is_ap[:n] & is_fwd).astype(np.int64)


@njit(cache=True)
def _drop_at_kernel(succ_ptr, succ_idx, fwd, is_cp, n):
    """Per node: the reference-order position after which the executor
    drops it (-1: never); see :func:`drop_schedule`."""
    drop_at = np.full(n, -1, dtype=np.int64)
    seg_end = n - 1
    for k in range(fwd.shape[0] - 1, -1, -1):  # walk backwards: the next checkpoint after u is known
        u = fwd[k]
        if is_cp[u]:
            seg_end = u
            continue
        last = -1
        for j in range(succ_ptr[u], succ_ptr[u + 1]):
            if succ_idx[j] <= seg_end:
                last = succ_idx[j]
        drop_at[u] = last if last >= 0 else u
    return drop_at


def drop_schedule(graph, checkpoints) -> tuple[np.ndarray, np.ndarray]:
    """The executor's drop CSR for a checkpoint set: each non-checkpointed
    forward value is dropped after its last reader within its segment (the
    forward nodes up to the next checkpoint)."""
    n = graph.n
    fwd = forward_nodes(graph)
    cps = np.zeros(n, dtype=np.bool_)
    cps[np.asarray(list(checkpoints), dtype=np.int64)] = True
    # checkpoints that are not forward nodes still end segments
    ends = np.union1d(fwd, np.flatnonzero(cps)).astype(np.int64)
    drop_at = _drop_at_kernel(graph.succ_ptr, graph.succ_idx, ends, cps, n)
    drop_at[~np.isin(np.arange(n), fwd)] = -1
    counts = np.bincount(drop_at[drop_at >= 0], minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(counts)
    order = np.argsort(drop_at, kind="stable")
    idx = order[drop_at[order] >= 0].astype(np.int64)
    return ptr, np.ascontiguousarray(idx)


def plan_from_checkpoints(problem, checkpoints, *, solver: str = "checkpoints", a: GraphArrays | None = None,
                          budget=None, meter: WorkMeter | None = None):
    """``(plan or None, cost, peak)`` of a checkpoint set.  With the
    problem's budget the plan is returned only when it fits (verified by the
    simulator); ``budget=np.iinfo(np.int64).max`` measures the peak."""
    a = a or GraphArrays.from_problem(problem)
    meter = meter or WorkMeter()
    drop = drop_schedule(problem.graph, checkpoints)
    res = meter.execute(a, drop=drop, allow_evict=False, budget=budget, max_steps=4 * a.n + 100)
    if not res.ok:
        return None, np.inf, res.peak
    if budget is not None and budget > a.budget:
        return None, res.cost, res.peak
    plan = finish(problem, a, res.seq, solver, n_checkpoints=int(len(list(checkpoints))))
    return plan, res.cost, res.peak


def chen_sqrtn_checkpoints(candidates) -> np.ndarray:
    """Every k-th candidate, k = floor(sqrt(|C|)) (index (i+1) mod k == 0)."""
    c = np.asarray(candidates, dtype=np.int64)
    if c.size == 0:
        return c
    k = max(1, int(math.isqrt(c.size)))
    return c[(np.arange(c.size) + 1) % k == 0]


@njit(cache=True)
def _chen_greedy_kernel(fwd, bytes_, is_cand, b):
    out = np.empty(fwd.shape[0], dtype=np.int64)
    k = 0
    temp = 0
    for v in fwd:
        temp += bytes_[v]
        if is_cand[v] and temp > b:
            out[k] = v
            k += 1
            temp = 0
    return out[:k]


def chen_greedy_checkpoints(graph, candidates, b: float) -> np.ndarray:
    """Chen's greedy: walk the forward nodes accumulating bytes; checkpoint a
    candidate once the running sum exceeds ``b``, then reset."""
    is_cand = np.zeros(graph.n, dtype=np.bool_)
    is_cand[np.asarray(candidates, dtype=np.int64)] = True
    return _chen_greedy_kernel(forward_nodes(graph), np.ascontiguousarray(graph.bytes, dtype=np.int64), is_cand,
                               float(b))


class _ChenBase(Heuristic):
    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})

    def __init__(self, *, use_aps: bool = False, name: str | None = None, rank: float | None = None):
        self.use_aps = bool(use_aps)
        if name:
            self.name = name
        elif use_aps:
            self.name = self.name + "_ap"
        if rank is not None:
            self.rank = rank

    def candidates(self, graph) -> np.ndarray:
        return articulation_points(graph) if self.use_aps else forward_nodes(graph)


class ChenSqrtN(_ChenBase):
    """Chen et al.'s sqrt(n) checkpoints; ``None`` when the plan does not fit.

    Parameters
    ----------
    use_aps : bool
        Candidates are articulation points ("AP" variant) instead of all
        forward nodes ("linearized").
    """

    name = "chen_sqrtn"
    rank = 1.0

    def run(self, problem, *, seed: int = 0, limits=None):
        meter = WorkMeter(limits)
        cps = chen_sqrtn_checkpoints(self.candidates(problem.graph))
        if meter.spent:
            return None
        plan, _, _ = plan_from_checkpoints(problem, cps, solver=self.name, meter=meter)
        return plan


#: graphs up to this many nodes get the full budget sweep of :class:`ChenGreedy`; larger ones a coarser one
SWEEP_NODES = 12_500
#: the coarsest sweep step (8 budgets)
MAX_STEP = 0.375


class ChenGreedy(_ChenBase):
    """Chen's greedy with a budget search: ``b`` sweeps
    ``x * (1 + s)``, ``s`` in ``[-1, 2)`` (step ``step``), ``x`` = the
    activation memory of the sqrt(n) plan; the cheapest plan that fits is
    returned, else ``None`` (also when the limits run out before any fits;
    the sweep stops there with the best so far).  Above
    :data:`SWEEP_NODES` nodes the step grows in proportion (at most
    :data:`MAX_STEP`), so that the sweep's executor runs (linear each) add
    up to about the same work at every size: at 100k nodes 8 budgets
    instead of 60 (1.2-5.8 -> 0.2-0.8 CPU s on four families,
    ``benchmarks/results/heuristic_scaling.md``)."""

    name = "chen_greedy"
    rank = 1.5

    def __init__(self, *, use_aps: bool = False, step: float = 0.05, name: str | None = None,
                 rank: float | None = None):
        super().__init__(use_aps=use_aps, name=name, rank=rank)
        self.step = float(step)

    def run(self, problem, *, seed: int = 0, limits=None):
        g = problem.graph
        meter = WorkMeter(limits)
        a = GraphArrays.from_problem(problem)
        cand = self.candidates(g)
        big = np.iinfo(np.int64).max // 4
        _, _, x = plan_from_checkpoints(problem, chen_sqrtn_checkpoints(cand), a=a, budget=big, meter=meter)
        best, best_cost = None, np.inf
        seen = set()
        step = self.step if g.n <= SWEEP_NODES else max(self.step, min(MAX_STEP, self.step * g.n / SWEEP_NODES))
        for s in np.arange(-1.0, 2.0, step):
            if meter.spent:
                break
            cps = chen_greedy_checkpoints(g, cand, x * (1.0 + s))
            key = cps.tobytes()
            if key in seen:
                continue
            seen.add(key)
            drop = drop_schedule(g, cps)
            res = meter.execute(a, drop=drop, allow_evict=False, max_steps=4 * a.n + 100)
            if res.ok and res.cost < best_cost:
                best, best_cost = cps, res.cost
        if best is None:
            return None
        plan, _, _ = plan_from_checkpoints(problem, best, solver=self.name, a=a, meter=WorkMeter())
        return plan
