"""Lower bounds that hold for every plan (any order, any schedule).

The staged MILP's bound covers staged plans only (see
:mod:`hybrid_remat.exact.checkmate`).  The *cut bound* here covers every
single-device plan the simulator accepts, at any graph size:

Take any node ``t`` and the moment ``t`` is computed for the first time.
Let ``N(t)`` be its ancestors that have a consumer among ``t``'s
descendants.  Every descendant runs after that moment, so every ``v`` in
``N(t)`` is either resident then or computed again afterwards (its first
computation came before: it is an ancestor of ``t``).  While ``t`` is
computed, its inputs and its output are resident too, so the resident part
``X`` of ``N(t)`` satisfies ``bytes(X) + bytes(inputs of t and t) <= B``
and the plan pays at least ``sum of c_v over N(t) \\ X`` on top of one
computation per node.  The least such sum is a covering knapsack; its LP
value (greedy by cost per byte) bounds it from below.  A stronger version
follows recomputation chains: a value computed after the cut needs its own
inputs then, so each of them is resident at the cut or computed after it
too (:func:`_closure_bound`, a small MILP over ``t``'s ancestors whose dual
bound is used; on large ancestor sets its LP relaxation,
:func:`_closure_lp_bound`, with a dual certificate).  The bound is the best
over the cuts examined; any cut gives a valid bound, so examining fewer
(when time is short) only weakens it.

Scale.  Nothing is ``n x n``: the ancestors and descendants of a cut come
from a graph search (a Numba kernel, ``O(n + m)`` per cut).  Every node is
examined when ``n (n + m)`` fits the work budget (then the bound equals the
dense version of the tests); otherwise the cuts where the reference order
holds the most memory, as many as the budget allows.  The chains model runs
on the best few cuts with the time left.  On graphs with repeated blocks
the same chains cut is solved exactly block by block by the *block bound*
(:mod:`hybrid_remat.bounds.blocks`, registered as ``block_bound``).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.oracle import brute_force
>>> p = Problem.single(chain(6, bytes=1), 3)
>>> lb = cut_lower_bound(p)
>>> p.base_cost <= lb.value <= brute_force(p)[0]
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits
from .cut_models import _closure_bound, _closure_lp_bound, _cover_exact, _cover_lp  # noqa: F401

__all__ = [
    "CutBound", "CutBoundSource", "cut_lower_bound", "partition_lower_bound",
    "ancestor_matrix", "cut_items", "reach", "serial_single_device", "warmup",
]

#: kernel steps per second of :func:`_cut_lp_kernel` (measured 1e8-4e8 on the loaded 2-core machine; conservative)
_STEPS_PER_SECOND = 1e8
#: chains MILP (SCIP) up to this many ancestors; above, its LP relaxation
_MILP_MAX_ANCESTORS = 3000
#: seconds per ancestor of the chains LP (measured 4e-5 to 6e-5 at 39k ancestors under load)
_LP_SECONDS_PER_ANCESTOR = 6e-5


@dataclass
class CutBound:
    """A cut bound: ``value`` bounds every plan's total compute time.

    Attributes
    ----------
    value : float
        ``base cost + extra``.
    extra : float
        The recomputation cost that no plan avoids.
    node : int
        The node ``t`` whose cut gives the bound (-1 when none is binding).
    method : str
        How ``extra`` was obtained at ``node``: ``"lp"`` (the knapsack's LP
        value), ``"knapsack"`` (its optimum), ``"chains"`` (the dual bound
        of the cut with recomputation chains, :func:`_closure_bound`) or
        ``"chains_lp"`` (that model's LP relaxation, :func:`_closure_lp_bound`).
    per_node : ndarray
        The knapsack LP value of every examined node's cut (0 elsewhere).
    examined : int
        How many cuts were examined (``n``: all).
    stats : dict
        Seconds per phase and the chains results.
    """

    value: float
    extra: float
    node: int
    method: str
    per_node: np.ndarray = field(repr=False)
    examined: int = 0
    stats: dict = field(default_factory=dict, repr=False)


def ancestor_matrix(graph) -> np.ndarray:
    """``A[v, u]``: ``u`` is a (strict) ancestor of ``v`` (nodes are in
    topological order).  Dense: for tests and small graphs only.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> ancestor_matrix(chain(3)).astype(int).tolist()
    [[0, 0, 0], [1, 0, 0], [1, 1, 0]]
    """
    n = graph.n
    A = np.zeros((n, n), dtype=bool)
    for v in range(n):
        p = graph.preds(v)
        if p.size:
            A[v, p] = True
            A[v] |= A[p].any(axis=0)
    return A


@njit(cache=True)
def _reach_kernel(ptr, idx, t, stamp, mark, stack):
    """Set ``mark[v] = stamp`` for every ``v`` reachable from ``t`` along
    ``ptr``/``idx`` (``t`` excluded unless on a cycle); return the steps."""
    top = 0
    steps = 0
    for j in range(ptr[t], ptr[t + 1]):
        u = idx[j]
        if mark[u] != stamp:
            mark[u] = stamp
            stack[top] = u
            top += 1
    while top > 0:
        top -= 1
        v = stack[top]
        for j in range(ptr[v], ptr[v + 1]):
            steps += 1
            u = idx[j]
            if mark[u] != stamp:
                mark[u] = stamp
                stack[top] = u
                top += 1
    return steps


def reach(graph, t: int, *, up: bool = True) -> np.ndarray:
    """Boolean mask of ``t``'s strict ancestors (``up``) or descendants,
    by a graph search (``O(n + m)``).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> reach(chain(4), 2).tolist(), reach(chain(4), 2, up=False).tolist()
    ([True, True, False, False], [False, False, False, True])
    """
    n = graph.n
    mark = np.zeros(n, dtype=np.int64)
    ptr, idx = (graph.pred_ptr, graph.pred_idx) if up else (graph.succ_ptr, graph.succ_idx)
    _reach_kernel(ptr, idx, int(t), 1, mark, np.empty(max(n, 1), dtype=np.int64))
    return mark == 1


def cut_items(graph, t: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ancestors, items)`` of the cut at ``t`` as boolean masks: ``items``
    is ``N(t)`` without ``t``'s inputs (the values that must be resident at
    the cut or computed again after it).

    Examples
    --------
    >>> import networkx as nx
    >>> from hybrid_remat.generators import training_graph
    >>> g = training_graph(nx.path_graph(3, create_using=nx.DiGraph))
    >>> np.flatnonzero(cut_items(g, 3)[1]).tolist()   # at the loss: f0, f1 wait for backward
    [0, 1]
    """
    anc = reach(graph, t, up=True)
    desc = reach(graph, t, up=False)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr))
    reads = np.zeros(graph.n, dtype=bool)
    reads[src[desc[graph.succ_idx]]] = True
    items = anc & reads
    items[graph.preds(t)] = False
    return anc, items


@njit(cache=True)
def _cut_lp_kernel(ts, pred_ptr, pred_idx, succ_ptr, succ_idx, order, cost, size, budget, work):
    """The knapsack LP of the cut at each node of ``ts`` (in that order).

    ``order``: the nodes of positive size by cost per byte (stable).  Returns
    ``(value, need, examined, steps)``; ``value``/``need`` are per node
    (``inf``: no plan fits), ``examined`` counts the leading ``ts`` done
    before ``work`` steps ran out.  Bytes are summed in int64 (exact: the
    graph's total is at most :data:`~hybrid_remat.graph.MAX_TOTAL_BYTES`),
    so a cut whose items cover the excess is never declared uncoverable by
    float round-off (sums above 2**53 bytes)."""
    n = size.shape[0]
    value = np.zeros(n)
    need_out = np.zeros(n, dtype=np.int64)
    anc = np.zeros(n, dtype=np.int64)
    desc = np.zeros(n, dtype=np.int64)
    pmark = np.zeros(n, dtype=np.int64)
    stack = np.empty(max(n, 1), dtype=np.int64)
    steps = 0
    done = 0
    for k in range(ts.shape[0]):
        if steps >= work:
            break
        t = ts[k]
        stamp = k + 1
        steps += _reach_kernel(pred_ptr, pred_idx, t, stamp, anc, stack)
        steps += _reach_kernel(succ_ptr, succ_idx, t, stamp, desc, stack)
        need = np.int64(size[t])
        for j in range(pred_ptr[t], pred_ptr[t + 1]):
            u = pred_idx[j]
            if pmark[u] != stamp:
                pmark[u] = stamp
                need += size[u]
        # item bytes: ancestors (not inputs of t) read by a descendant
        total = np.int64(0)
        count = 0
        for v in range(t):
            if anc[v] != stamp or pmark[v] == stamp:
                continue
            for j in range(succ_ptr[v], succ_ptr[v + 1]):
                steps += 1
                if desc[succ_idx[j]] == stamp:
                    total += size[v]
                    count += 1
                    break
        steps += t
        need += total - budget
        done = k + 1
        if need <= 0 or count == 0:
            continue
        need_out[t] = need
        cum = np.int64(0)
        val = 0.0
        covered = False
        for i in range(order.shape[0]):
            v = order[i]
            steps += 1
            if v >= t or anc[v] != stamp or pmark[v] == stamp:
                continue
            item = False
            for j in range(succ_ptr[v], succ_ptr[v + 1]):
                steps += 1
                if desc[succ_idx[j]] == stamp:
                    item = True
                    break
            if not item:
                continue
            s = size[v]
            if cum + s >= need:
                val += cost[v] * (float(need - cum) / float(s))
                covered = True
                break
            cum += s
            val += cost[v]
        value[t] = val if covered else np.inf
    return value, need_out, done, steps


@njit(cache=True)
def _reference_memory(size, pred_ptr, pred_idx, succ_ptr, succ_idx):
    """Memory while each node is computed in the reference order, every
    value kept from its computation to its last consumer: an upper bound on
    the bytes a cut there concerns (its ranking screens the cuts)."""
    n = size.shape[0]
    diff = np.zeros(n + 1)
    for v in range(n):
        last = v
        for j in range(succ_ptr[v], succ_ptr[v + 1]):
            if succ_idx[j] > last:
                last = succ_idx[j]
        diff[v] += size[v]
        diff[last + 1] -= size[v]
    out = np.empty(n)
    run = 0.0
    for v in range(n):
        run += diff[v]
        out[v] = run
    return out


def _strengthen(g, top, per_node, needs, cost, size, B, closure, limits, stats) -> dict:
    """Bounds of the cuts at ``top`` beyond their knapsack LP: ``{t: (value,
    method)}`` (a later value of the same ``t`` replaces an earlier one only
    when larger).

    Without a deadline (deterministic): the exact knapsack (``closure=False``)
    or the chains MILP, its LP relaxation above ``3000`` ancestors.  With a
    deadline: first the chains LP of every cut (cheap, ~2 s at 37k
    ancestors), then the MILP on the cuts small enough, best first, each with
    part of the time left."""
    found: dict = {}
    log = stats.setdefault("strengthened", [])

    def record(t, val, how):
        log.append((int(t), how, val))
        if val is not None and (t not in found or found[t][0] is None or val > found[t][0]):
            found[t] = (val, how)

    items_of = {}

    def items(t):
        if t not in items_of:
            items_of[t] = cut_items(g, t)
        return items_of[t]

    timed = math.isfinite(limits.deadline)
    if not closure:
        for t in top:
            if limits.expired():
                break
            it = items(t)[1]
            record(t, _cover_exact(cost[it], size[it], needs[t], limits=limits), "knapsack")
        return found
    if timed:
        for t in top:
            if limits.expired():
                break
            anc, it = items(t)
            if _LP_SECONDS_PER_ANCESTOR * anc.sum() > limits.left():
                continue
            record(t, _closure_lp_bound(g, t, anc, it, cost, size, B, limits=limits), "chains_lp")
        top = sorted(top, key=lambda t: -(found.get(t, (None,))[0] or 0.0))
    for t in top:
        if limits.expired():
            break
        anc, it = items(t)
        if anc.sum() <= _MILP_MAX_ANCESTORS:
            lim = limits.share(0.6 * limits.left()) if timed else limits
            record(t, _closure_bound(g, t, anc, it, cost, size, B, limits=lim), "chains")
        elif not timed:
            record(t, _closure_lp_bound(g, t, anc, it, cost, size, B, limits=limits), "chains_lp")
    return found


def cut_lower_bound(problem, *, exact_nodes: int = 5, closure: bool = True, limits: Limits | None = None,
                    max_seconds: float | None = None) -> CutBound:
    """The cut bound of a single-device problem (see the module docstring).

    Parameters
    ----------
    problem : Problem
        Single device (a second memory could hold what the bound drops).
    exact_nodes : int
        Strengthen the cuts of this many nodes with the best LP values.
    closure : bool
        For those nodes, solve the cut with recomputation chains
        (:func:`_closure_bound`, which contains the knapsack, or its LP
        relaxation above ``3000`` ancestors); ``False``: the knapsack alone.
    limits : Limits, optional
        Deadline and work budget (kernel steps of the cut screening).  When
        they stop it early the bound is weaker, never invalid.
    max_seconds : float, optional
        Return within this many seconds even when ``limits`` allow more (the
        registered bound: :attr:`CutBoundSource.max_seconds`): the screening
        then examines the cuts that hold the most memory first and the
        chains models run only where predicted to fit.

    Returns
    -------
    CutBound

    Raises
    ------
    ValueError
        On a multi-device problem.
    """
    from ..limits import now

    if not problem.is_single_device:
        raise ValueError("the cut bound covers single-device problems only")
    limits = limits or Limits()
    if max_seconds is not None:
        limits = limits.share(max_seconds)
    t0 = now()
    g = problem.graph
    n = g.n
    cost = np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.ascontiguousarray(g.bytes, dtype=np.int64)
    B = int(problem.budgets[0])
    base = float(cost.sum())
    ref = _reference_memory(size, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx)
    ts = np.flatnonzero(ref > B)
    ts = ts[np.argsort(-ref[ts], kind="stable")]          # the most memory first
    pos = np.flatnonzero(size > 0)
    order = pos[np.argsort(cost[pos] / size[pos], kind="stable")]
    # the screening takes at most a third of the time: the chains models at the best cuts gain more
    screen = limits.share(0.35 * limits.left() if math.isfinite(limits.left()) else None)
    work = screen.work_for(_STEPS_PER_SECOND)
    per_node, needs, done, steps = _cut_lp_kernel(ts, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx, order,
                                                  cost, size, B, work)
    examined = n - ts.size + int(done)        # cuts with no excess memory need no examination
    stats = {"screen_s": now() - t0, "screen_steps": int(steps), "candidates": int(ts.size)}
    best_t = int(per_node.argmax()) if n and per_node.max() > 0 else -1
    extra, method = (float(per_node[best_t]), "lp") if best_t >= 0 else (0.0, "knapsack")
    if best_t >= 0 and math.isfinite(extra) and exact_nodes > 0:
        top = [t for t in np.argsort(-per_node, kind="stable")[:exact_nodes].tolist() if per_node[t] > 0]
        found = _strengthen(g, top, per_node, needs, cost, size, B, closure, limits, stats)
        for t, (val, how) in found.items():
            if val is not None and val >= extra - 1e-12 * abs(extra):
                extra, best_t, method = max(val, extra), int(t), how
    stats["seconds"] = now() - t0
    return CutBound(base + extra, extra, best_t, method, per_node, examined, stats)


def warmup() -> None:
    """Compile or load the cut bound's Numba kernels (call it outside any time limit)."""
    from ..generators import chain
    from ..problem import Problem

    cut_lower_bound(Problem.single(chain(4, bytes=1), 2), exact_nodes=0)
    cut_items(chain(3), 1)


def serial_single_device(problem, *, max_nodes: int | None = None, why_larger: str = "") -> tuple[bool, str]:
    """``(True, "")`` for a single-device problem with the serial objective
    (what the cut and block bounds cover) of at most ``max_nodes`` nodes (no
    limit when None), else ``(False, why)``; ``why_larger`` is added to the
    reason a larger graph is declined."""
    if not problem.is_single_device:
        return False, "single device only"
    if problem.objective.name != "serial":
        return False, "serial time only"
    if max_nodes is not None and problem.graph.n > max_nodes:
        return False, f"more than {max_nodes} nodes{why_larger}"
    return True, ""


def partition_lower_bound(problem, parts, *, exact_nodes: int = 2, limits: Limits | None = None
                          ) -> tuple[float, list[float]]:
    """A bound for the whole from the parts of a partition of the nodes.

    Each part's *induced* problem (its nodes and the edges among them; inputs
    from other parts are free and take no memory; the same budget) is a
    relaxation of the whole restricted to the part: projecting any valid plan
    on a part gives a valid plan of the part's problem, no costlier than the
    plan's own computations of the part's nodes.  So the parts' cut bounds
    add up: ``base + sum of the parts' extras`` bounds every plan.  It is weak
    when every part fits the budget on its own (then it is the trivial bound),
    which is why the whole graph's cut bound is computed as well.

    Returns
    -------
    (value, extras)
        The bound and each part's extra cost.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> p = Problem.single(chain(6, bytes=1), 2)
    >>> partition_lower_bound(p, [[0, 1, 2], [3, 4, 5]])[0] == p.base_cost
    True
    """
    from ..graph import Graph
    from ..problem import Problem

    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    kind = problem.primary.kind
    B = int(problem.budgets[0])
    seen = np.zeros(g.n, dtype=bool)
    extras = []
    e = g.edges()
    for part in parts:
        nodes = np.unique(np.asarray(part, dtype=np.int64))
        if seen[nodes].any():
            raise ValueError("the parts overlap")
        seen[nodes] = True
        local = np.full(g.n, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        inside = (local[e[:, 0]] >= 0) & (local[e[:, 1]] >= 0) if len(e) else np.zeros(0, bool)
        sub = Graph.from_arrays(g.bytes[nodes], [(int(local[u]), int(local[v])) for u, v in e[inside]],
                                {kind: cost[nodes]}, name=f"{g.name}[part]")
        sp = Problem.single(sub, B, kind=kind)
        extras.append(cut_lower_bound(sp, exact_nodes=exact_nodes, limits=limits).extra)
    return float(cost.sum() + sum(extras)), extras


class CutBoundSource(Bound):
    """The cut bound as a registered :class:`~hybrid_remat.interfaces.Bound`
    (``cut_bound``, scope: every plan).

    It returns within the ``limits`` it is given and within
    :attr:`max_seconds` (2.5 s) however long those are: the cut screening
    takes a work budget derived from the deadline, the chains models the
    time left.  At 2k nodes that covers every cut and the chains models of
    the best five; at 100k the cuts that hold the most memory (the best are
    among them) and the chains LP only where predicted to fit (the block
    and segment bounds carry the large repeated graphs).  Serial time only
    (its bound is a bound on the sum of compute times).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = CutBoundSource().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value >= 6.0
    ('all plans', True)
    """

    name = "cut_bound"
    version = "3"
    #: seconds the registered bound takes at most (issue 20: under 3 s at 100k nodes)
    max_seconds = 2.5
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 5.0
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        return serial_single_device(problem)

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        cb = cut_lower_bound(problem, limits=limits, max_seconds=self.max_seconds)
        return BoundResult(cb.value, ALL_PLANS, {"extra": cb.extra, "node": cb.node, "method": cb.method,
                                                 "examined": cb.examined, "seconds": cb.stats.get("seconds")})

