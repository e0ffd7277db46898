"""Is there a plan at all?  Bounds on, and the exact value of, the smallest
feasible budget of a single-device problem.

A plan exists under budget ``B`` when some sequence of computations and
frees computes every node at least once with at most ``B`` bytes resident
after each allocation (the simulator's rules).  Three figures, from cheap to
exact:

* :func:`~hybrid_remat.budgets.budget_lower_bound`: the largest node plus
  its inputs.  A lower bound only: bytes ``[10, 1, 10, 1, 1]`` with edges
  ``0->1, 2->3, 1->4, 3->4`` give 11 B, yet every plan needs 12 B.
* :func:`order_bound`: for every node ``v``, consider the order in which its
  inputs were computed last before ``v``: when the last of them is computed,
  all the others are resident, and so are its own inputs.  Minimising the
  largest such figure over the orders of ``v``'s inputs (a subset dynamic
  programme, Numba) gives a bound at least as large (12 B above).
* :func:`check_budget`: an exact search over compute/free orders that
  either finds a plan within ``B`` (simulated) or proves that none exists.
  A plan exists if and only if every sink can be computed from an empty
  memory (a plan computes every node, and computing the sinks one after
  another, each from scratch, is then a plan), so the search handles one
  sink at a time, over the resident sets of its ancestors (a Numba kernel,
  depth first): a move frees down to an inclusion-maximal kept set that
  fits and computes one node, and a set is skipped when it or a set
  keeping one output more was visited (that one can do all this one can).
  Exponential in the worst case (the problem is PSPACE-hard): it runs on
  graphs of up to :data:`EXACT_MAX_NODES` nodes and stops within its
  :class:`~hybrid_remat.limits.Limits` with ``"unknown"``.  On the team's
  2-core machine it settles random DAGs of 20 nodes in well under a
  second and some of 30 (``random_dag(30, p=0.2, seed=2)``: 44 B against an
  order bound of 41 B) in about 6 s.

:func:`smallest_feasible_budget` bisects between :func:`order_bound` and
the best plan found; :class:`FeasibilityBound` (registered as the bound
``feasibility``) returns ``+inf`` when it proves that no plan fits the
budget, which the portfolio reports as status ``infeasible``.

Examples
--------
>>> from hybrid_remat.graph import Graph
>>> from hybrid_remat.budgets import budget_lower_bound
>>> g = Graph.from_arrays([10, 1, 10, 1, 1], [(0, 1), (2, 3), (1, 4), (3, 4)], [1.0] * 5)
>>> budget_lower_bound(g), order_bound(g)
(11, 12)
>>> check_budget(g, 11).status, check_budget(g, 12).status
('infeasible', 'feasible')
>>> smallest_feasible_budget(g).exact
12
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..budgets import budget_lower_bound, keep_all_peak
from ..graph import Graph
from ..interfaces import ALL_PLANS, Bound, BoundResult
from ..limits import UNLIMITED_WORK, Limits
from ..plan import Plan, keep_all_plan, plan_from_order

__all__ = [
    "order_bound", "check_budget", "smallest_feasible_budget", "Feasibility", "BudgetRange",
    "FeasibilityBound", "EXACT_MAX_NODES", "warm_up",
]

#: graphs above this many nodes get the bounds only (the exact search keeps a
#: sink's ancestors in one int64 mask, and would rarely settle more)
EXACT_MAX_NODES = 63
#: inputs per node up to which :func:`order_bound` orders them exactly (2^k k steps)
ORDER_MAX_INPUTS = 14
_MAX_STATES = 2_000_000  # states per sink before the search gives up (about 70 MB)
_KERNEL_RATE = 2e8  # kernel work units per second (4e8-7e8 measured on the 2-core machine), for slices
_SLICE_S = 0.05  # seconds of kernel work between checks of the limits


# ----------------------------------------------------------------- the bound
@njit(cache=True)
def _order_bound_kernel(bytes_, pred_ptr, pred_idx, kmax, work):
    """``(bound, work spent)``; past ``work`` steps only the last-input term
    is used (still a valid bound)."""
    n = bytes_.shape[0]
    best = 0
    spent = 0
    for v in range(n):
        a = pred_ptr[v]
        k = pred_ptr[v + 1] - a
        sp = 0
        for i in range(k):
            sp += bytes_[pred_idx[a + i]]
        lb = sp + bytes_[v]
        if k >= 2:
            # bytes of u's inputs outside v's inputs, for each input u of v
            outside = np.empty(k, dtype=np.int64)
            masks = np.zeros(k, dtype=np.int64)
            last = -1
            for i in range(k):
                u = pred_idx[a + i]
                tot = 0
                inside = 0
                for q in range(pred_ptr[u], pred_ptr[u + 1]):
                    w = pred_idx[q]
                    tot += bytes_[w]
                    for j in range(k):  # is w an input of v?
                        if pred_idx[a + j] == w:
                            if k <= kmax:
                                masks[i] |= np.int64(1) << j
                            inside += bytes_[w]
                            break
                outside[i] = tot - inside
                if last < 0 or outside[i] < last:
                    last = outside[i]
            if sp + last > lb:  # the input computed last sees all the others resident
                lb = sp + last
            size = np.int64(1) << k
            if k <= kmax and spent + size * k <= work:
                spent += size * k
                bsum = np.zeros(size, dtype=np.int64)
                for s in range(1, size):
                    low = s & (-s)
                    j = 0
                    while (np.int64(1) << j) != low:
                        j += 1
                    bsum[s] = bsum[s ^ low] + bytes_[pred_idx[a + j]]
                dp = np.zeros(size, dtype=np.int64)
                for s in range(1, size):
                    m = np.int64(-1)
                    for i in range(k):
                        bit = np.int64(1) << i
                        if s & bit:
                            t = s ^ bit  # resident before input i's last computation
                            here = bsum[s] + outside[i] + bsum[masks[i]] - bsum[masks[i] & t]
                            val = dp[t] if dp[t] > here else here
                            if m < 0 or val < m:
                                m = val
                    dp[s] = m
                if dp[size - 1] > lb:
                    lb = dp[size - 1]
            else:
                spent += k
        else:
            spent += 1
        if lb > best:
            best = lb
    return best, spent


def order_bound(graph: Graph, *, limits: Limits | None = None) -> int:
    """A lower bound on the smallest feasible budget, at least
    :func:`~hybrid_remat.budgets.budget_lower_bound` (module docstring).

    Within ``limits`` (work: DP steps) it orders the inputs of nodes with up
    to :data:`ORDER_MAX_INPUTS` inputs exactly; beyond that it uses the
    last-input term only."""
    work = (limits or Limits()).work_for(2e7)
    value, _ = _order_bound_kernel(graph.bytes, graph.pred_ptr, graph.pred_idx, ORDER_MAX_INPUTS, work)
    return max(int(value), budget_lower_bound(graph))


# ------------------------------------------------------------ exact search
@njit(cache=True)
def _seen_slot(table, key):
    """Slot of ``key`` in the open-addressing hash set ``table`` (-1 = empty):
    where it is, or the empty slot where it would go."""
    mask = table.shape[0] - 1
    i = (key * np.int64(-7046029254386353131)) & mask  # multiplicative hashing
    while table[i] != -1 and table[i] != key:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def _sink_kernel(size, pmask, goal, budget, work, table, qs, qp, qv, todo, counts):
    """Depth-first search over the resident sets of one sink's ancestors
    (local indices ``0..m-1``, ``m <= 62``; the lower the nearer the sink,
    tried first): a move computes a node (inputs resident, itself not) after
    freeing down to an inclusion-maximal kept set that fits ``budget``; a set
    is skipped when it, or a set keeping one output more, was visited (that
    one can do everything this one can).

    The search state lives in the arrays (see :class:`_SinkSearch`) and
    ``counts = [states found, states to expand, state, node, subset]`` (the
    last three: where an expansion stopped inside its subset loop, ``-1``
    when none), so that a search stopped by ``work`` resumes where it
    stopped, between expansions or inside one.  Returns ``(status, sequence, work
    spent)``: status 1 (a set holding ``goal`` is reached; ``sequence`` the
    computations leading there), 0 (proved unreachable), -1 (``work`` ran
    out: call again) or -2 (the arrays are full)."""
    m = size.shape[0]
    max_states = qs.shape[0]
    psize = np.zeros(m, dtype=np.int64)
    for v in range(m):
        for u in range(m):
            if (pmask[v] >> u) & 1:
                psize[v] += size[u]
    tail = counts[0]
    ntodo = counts[1]
    spent = 0
    empty = np.zeros(0, dtype=np.int64)
    resume = counts[2] >= 0  # an expansion stopped in its subset loop (one can hold 2**58 subsets)
    while ntodo > 0 or resume:
        v_first = m - 1
        sub_first = np.int64(-1)
        if resume:
            head = counts[2]
            v_first = counts[3]
            sub_first = counts[4]
            counts[2] = -1
            resume = False
        else:
            if spent > work:  # stop between expansions: the search resumes here
                counts[0] = tail
                counts[1] = ntodo
                return -1, empty, spent
            ntodo -= 1
            head = todo[ntodo]
        R = qs[head]
        mem = 0
        for u in range(m):
            if (R >> u) & 1:
                mem += size[u]
        for v in range(v_first, -1, -1):  # pushed last, expanded first: the nodes nearest the sink
            bit = np.int64(1) << v
            if R & bit or (pmask[v] & R) != pmask[v]:
                continue
            room = budget - size[v] - psize[v]
            if room < 0:
                continue
            others = R & ~pmask[v]
            whole = mem - psize[v] <= room
            sub = others
            if v == v_first and sub_first >= 0:
                sub = sub_first
            while True:  # the maximal subsets of `others` within `room` (all of it when it fits)
                if spent > work:  # stop inside the expansion: it resumes at this subset
                    counts[0] = tail
                    counts[1] = ntodo
                    counts[2] = head
                    counts[3] = v
                    counts[4] = sub
                    return -1, empty, spent
                spent += 1
                ok = True
                if not whole:
                    spent += m
                    smem = 0
                    for u in range(m):
                        if (sub >> u) & 1:
                            smem += size[u]
                    if smem > room:
                        ok = False
                    else:
                        for u in range(m):
                            if (others >> u) & 1 and not (sub >> u) & 1 and size[u] <= room - smem:
                                ok = False  # u would still fit: not maximal
                                break
                if ok:
                    R2 = sub | pmask[v] | bit
                    if R2 & goal == goal:
                        length = 1
                        i = head
                        while qp[i] >= 0:
                            length += 1
                            i = qp[i]
                        seq = np.empty(length, dtype=np.int64)
                        seq[length - 1] = v
                        i = head
                        k = length - 2
                        while qp[i] >= 0:
                            seq[k] = qv[i]
                            k -= 1
                            i = qp[i]
                        return 1, seq, spent
                    slot = _seen_slot(table, R2)
                    skip = table[slot] == R2
                    if not skip:
                        spent += m
                        for u in range(m):
                            if not (R2 >> u) & 1:
                                R3 = R2 | (np.int64(1) << u)
                                if table[_seen_slot(table, R3)] == R3:
                                    skip = True
                                    break
                    if not skip:
                        if tail >= max_states:
                            return -2, empty, spent
                        table[slot] = R2
                        qs[tail] = R2
                        qp[tail] = head
                        qv[tail] = v
                        todo[ntodo] = tail
                        ntodo += 1
                        tail += 1
                if whole or sub == 0:
                    break
                sub = (sub - 1) & others
    return 0, empty, spent


@dataclass
class Feasibility:
    """The answer of :func:`check_budget`.

    ``status``: ``"feasible"`` (``plan`` fits the budget; simulated),
    ``"infeasible"`` (proved: no plan fits) or ``"unknown"`` (limits hit, or
    the graph is above ``max_nodes``).  ``reason`` says how it was decided;
    ``work`` counts search steps."""

    status: str
    plan: Plan | None = None
    reason: str = ""
    work: int = 0


@dataclass
class BudgetRange:
    """The smallest feasible budget lies in ``[lower, upper]``; ``exact`` is
    it when the two meet (else ``None``).  ``plan`` fits ``upper``
    (simulated)."""

    lower: int
    upper: int
    plan: Plan | None = None
    work: int = 0
    stats: dict = field(default_factory=dict)

    @property
    def exact(self) -> int | None:
        return self.upper if self.lower == self.upper else None


class _OutOfLimits(Exception):
    pass


class _SinkSearch:
    """The arrays of one resumable :func:`_sink_kernel` search."""

    def __init__(self, m: int, max_states: int):
        slots = 16
        while slots < 2 * max_states:
            slots *= 2
        self.table = np.full(slots, -1, dtype=np.int64)  # hash set of the states found
        self.qs = np.empty(max_states, dtype=np.int64)  # each state found, its parent and the node computed
        self.qp = np.empty(max_states, dtype=np.int32)
        self.qv = np.empty(max_states, dtype=np.int16)
        self.todo = np.empty(max_states, dtype=np.int32)  # states still to expand (a stack)
        self.qs[0], self.qp[0], self.qv[0], self.todo[0] = 0, -1, -1, 0
        self.table[_seen_slot(self.table, 0)] = 0
        # states found, states to expand, and where a stopped expansion resumes (state, node, subset; -1: none)
        self.counts = np.array([1, 1, -1, 0, 0], dtype=np.int64)


class _Search:
    """The exact search, one sink at a time (:func:`_sink_kernel`, in slices
    of about 0.05 s between which the limits are checked), with a shared work
    count; raises :class:`_OutOfLimits` when the limits run out."""

    def __init__(self, graph: Graph, limits: Limits):
        n = graph.n
        self.n = n
        self.b = [int(x) for x in graph.bytes]
        self.preds = [graph.preds(v).tolist() for v in range(n)]
        anc = [0] * n
        for v in range(n):
            for u in self.preds[v]:
                anc[v] |= (1 << u) | anc[u]
        self.anc = anc
        self.sinks = [v for v in range(n) if graph.succ_ptr[v] == graph.succ_ptr[v + 1]]
        self.limits = limits
        self.cap = limits.work if limits.work is not None else UNLIMITED_WORK
        self.work = 0

    def sink(self, s: int, budget: int) -> list[int] | None:
        """A compute sequence ending with sink ``s`` from an empty memory
        within ``budget``, or ``None`` when none exists."""
        if self.b[s] + sum(self.b[u] for u in self.preds[s]) > budget:
            return None
        if not self.preds[s]:
            return [s]
        nodes = [u for u in range(s - 1, -1, -1) if (self.anc[s] >> u) & 1]  # nearest the sink first
        local = {u: i for i, u in enumerate(nodes)}
        size = np.array([self.b[u] for u in nodes], dtype=np.int64)
        pmask = np.array([sum(1 << local[w] for w in self.preds[u]) for u in nodes], dtype=np.int64)
        goal = sum(1 << local[w] for w in self.preds[s])
        st = _SinkSearch(len(nodes), min(_MAX_STATES, 1 << min(len(nodes), 40)))
        while True:
            if self.limits.expired():
                raise _OutOfLimits
            left = min(self.cap - self.work, self.limits.work_for(_KERNEL_RATE, cap=int(_KERNEL_RATE * _SLICE_S)))
            if left <= 0:
                raise _OutOfLimits
            status, seq, spent = _sink_kernel(size, pmask, goal, int(budget), int(left), st.table, st.qs, st.qp,
                                              st.qv, st.todo, st.counts)
            self.work += int(spent)
            if status == 0:
                return None
            if status == 1:
                return [nodes[int(i)] for i in seq] + [s]
            if status == -2:
                raise _OutOfLimits


def check_budget(graph: Graph, budget: int, *, limits: Limits | None = None,
                 max_nodes: int = EXACT_MAX_NODES) -> Feasibility:
    """Whether some plan of ``graph`` fits ``budget`` bytes on one device.

    Decides by the keep-all peak (fits: feasible), :func:`order_bound`
    (above the budget: infeasible), then the exact search (graphs of up to
    ``max_nodes`` nodes, within ``limits``; work unit: one search step).
    A ``"feasible"`` answer carries a plan the simulator accepted.

    The search uses that a plan exists if and only if every sink can be
    computed from an empty memory (a plan computes every node; doing the
    sinks one after another, each from scratch, is then possible), so it
    searches one sink at a time over resident sets only."""
    limits = limits or Limits()
    budget = int(budget)
    device = graph.cost_kinds[0]
    if keep_all_peak(graph) <= budget:
        return Feasibility("feasible", keep_all_plan(graph, device), "the keep-all plan fits")
    lb = order_bound(graph, limits=limits)
    if budget < lb:
        return Feasibility("infeasible", None, f"every plan needs at least {lb} B (order bound)")
    max_nodes = min(max_nodes, EXACT_MAX_NODES)
    if graph.n > max_nodes:
        return Feasibility("unknown", None, f"no exact search above {max_nodes} nodes")
    search = _Search(graph, limits)
    seq: list[int] = []
    try:
        for s in search.sinks:
            part = search.sink(s, budget)
            if part is None:
                return Feasibility("infeasible", None, f"the exact search proved that sink {s} "
                                   f"({graph.names[s]}) cannot be computed within {budget} B", search.work)
            seq += part
    except _OutOfLimits:
        return Feasibility("unknown", None, "the exact search hit its limits", search.work)
    plan = plan_from_order(graph, seq, device, {"solver": "feasibility"})
    if _peak(graph, plan, budget) is None:  # never expected: the search follows the simulator's rules
        return Feasibility("unknown", None, "the plan found did not pass the simulator", search.work)
    return Feasibility("feasible", plan, "the exact search found a plan", search.work)


def _peak(graph: Graph, plan: Plan, budget: int) -> int | None:
    """The plan's simulated peak if it is valid within ``budget``, else ``None``."""
    from ..problem import Device, Problem
    from ..simulate import simulate

    kind = graph.cost_kinds[0]
    r = simulate(Problem(graph, [Device(kind, kind, int(budget))], check=False), plan)
    return int(r.peak_bytes[kind]) if r.valid else None


def smallest_feasible_budget(graph: Graph, *, limits: Limits | None = None,
                             max_nodes: int = EXACT_MAX_NODES) -> BudgetRange:
    """Bounds on the smallest budget at which a plan exists, exact when the
    search settles it within ``limits`` (``.exact``).

    The smallest budget is the largest over the sinks of the smallest
    budget that computes the sink from an empty memory; each is found by
    bisection, starting from :func:`order_bound`.  ``plan`` fits ``upper``
    (simulated)."""
    limits = limits or Limits()
    device = graph.cost_kinds[0]
    lo = order_bound(graph, limits=limits)
    hi = keep_all_peak(graph)
    best = BudgetRange(lo, hi, keep_all_plan(graph, device))
    if lo >= hi or graph.n > min(max_nodes, EXACT_MAX_NODES):
        best.lower = min(lo, hi)
        return best
    search = _Search(graph, limits)
    seq: list[int] = []
    probes = 0
    try:
        for s in search.sinks:
            part = search.sink(s, lo)
            probes += 1
            if part is None:  # this sink needs more than lo: bisect (lo, hi], raising lo as budgets are refuted
                lo, b = lo + 1, hi
                while lo < b:
                    mid = (lo + b) // 2
                    probes += 1
                    found = search.sink(s, mid)
                    if found is None:
                        lo = mid + 1
                    else:
                        part, b = found, mid
                if part is None:
                    part = search.sink(s, lo)
            seq += part
    except _OutOfLimits:
        best.lower, best.work, best.stats = lo, search.work, {"probes": probes, "settled": False}
        return best
    plan = plan_from_order(graph, seq, device, {"solver": "feasibility"})
    peak = _peak(graph, plan, lo)
    best.work, best.stats = search.work, {"probes": probes, "settled": peak is not None}
    if peak is not None:  # the simulator confirms a plan within lo: lo is the smallest feasible budget
        best.lower = best.upper = peak
        best.plan = plan
    return best


class FeasibilityBound(Bound):
    """The bound ``feasibility``: ``+inf`` when no plan fits the budget.

    It proves infeasibility with :func:`order_bound` or the exact search of
    :func:`check_budget` (single device; the search takes at most
    ``time_share`` of the time left, or the work budget of deterministic
    limits); otherwise it says nothing (``-inf``) and ``stats`` tells why
    (``status``: feasible or unknown).
    An all-plans bound of ``+inf`` makes the portfolio report
    ``infeasible``."""

    name = "feasibility"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "serial", "makespan", "needs_budget",
                              "honours_limits", "deterministic"})
    rank = 1.0
    infeasibility_only = True

    #: share of the time left that the exact search may use (the heuristics find plans faster)
    time_share = 0.25

    def bound(self, problem, *, limits=None) -> BoundResult:
        if not problem.is_single_device:
            return BoundResult(-math.inf, ALL_PLANS, {"status": "unknown", "reason": "single-device problems only"})
        limits = limits or Limits()
        if math.isfinite(limits.left()):
            limits = limits.share(max(0.5, self.time_share * limits.left()))
        res = check_budget(problem.graph, int(problem.budgets[0]), limits=limits)
        value = math.inf if res.status == "infeasible" else -math.inf
        return BoundResult(value, ALL_PLANS, {"status": res.status, "reason": res.reason, "work": res.work})


def warm_up() -> None:
    """Compile (or load from the cache) the Numba kernels of this module, so
    that the first real call does not spend its time limit compiling."""
    from ..graph import Graph

    g = Graph.from_arrays([2, 1, 2, 1, 1], [(0, 1), (2, 3), (1, 4), (3, 4)], [1.0] * 5)
    check_budget(g, 4)
