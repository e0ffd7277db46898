"""Lifetime splitting: start from keep-all and split live ranges until the
plan fits (the kernel and the registered planner ``split``).

The plan is a compute sequence whose minimal-memory plan frees each value
right after its last reader (:mod:`hybrid_remat.core.sequence`).  While
some position ``P`` is over budget, pick a value ``u`` live across ``P``
but not read there and *split* its live range: its instance now ends at its
last reader before ``P`` and ``u`` is recomputed right before its next
reader after ``P`` (its own inputs are kept alive until then if they would
be freed earlier).  The value chosen minimises ``cost(u) / relieved
excess`` (with optional seeded noise), preferring splits whose input
extensions push no position over the budget.

This is the sequence-space analogue of Moccasin's retention intervals and
is strong on wide DAGs (random layered graphs), where on-demand eviction
cascades.

Cost.  Each split re-reads the whole sequence (``O(K log K)``) and the
number of splits grows with the graph, so a run is quadratic in the graph
size (``benchmarks/results/heuristic_scaling.md``).  Every run takes a work
budget (positions visited) and gives up when it is spent: at 100k nodes the
planner returns ``None`` within its limits rather than run for minutes.

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(random_layered(60, seed=3), "90%")
>>> plan = LifetimeSplit().run(p)
>>> plan is None or simulate(p, plan).valid
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.sequence import positions_kernel, sequence_peak_kernel, sequence_profile_kernel
from ..interfaces import Heuristic
from .common import GraphArrays, WorkMeter, finish

__all__ = [
    "split_kernel", "split_sequence", "split_continuation", "ruin_and_recreate", "LifetimeSplit", "SPLIT_OK",
    "SPLIT_FAILED", "SPLIT_WORK_SPENT", "SPLIT_RATE",
]

SPLIT_OK = 0
SPLIT_FAILED = 1
SPLIT_WORK_SPENT = 2
#: split work units per CPU second (positions visited, inputs read by the profile and candidate passes, the
#: range-maximum table's log K rows): 2.7e8-7.2e8 measured at 10k-32k nodes on six families of
#: :mod:`hybrid_remat.families` (random layered graphs the slowest), so a conservative 2e8.  Counting
#: positions alone undercounted random layered graphs 5x: a 20 s limit ran 37 s at 32k nodes
SPLIT_RATE = 2e8


@njit(cache=True)
def _live_end(w, q, icnt, inst, end):
    """End of the latest instance of ``w`` computed before position ``q`` (-1: none)."""
    lo = icnt[w]
    hi = icnt[w + 1]
    # last inst < q
    k = np.searchsorted(inst[lo:hi], q) - 1
    if k < 0:
        return -1
    return end[inst[lo + k]]


@njit(cache=True)
def _sparse_max(x):
    """Sparse table for range-maximum queries on ``x``."""
    K = x.shape[0]
    levels = 1
    while (1 << levels) <= K:
        levels += 1
    tab = np.empty((levels, K), dtype=np.int64)
    tab[0] = x
    for lv in range(1, levels):
        h = 1 << (lv - 1)
        for i in range(K):
            j = i + h
            tab[lv, i] = tab[lv - 1, i] if j >= K or tab[lv - 1, i] >= tab[lv - 1, j] else tab[lv - 1, j]
    return tab


@njit(cache=True)
def _range_max(tab, lo, hi):
    """max of x[lo:hi] (``-1`` for an empty range)."""
    if hi <= lo:
        return -1
    lv = 0
    while (1 << (lv + 1)) <= hi - lo:
        lv += 1
    a = tab[lv, lo]
    b = tab[lv, hi - (1 << lv)]
    return a if a >= b else b


@njit(cache=True)
def split_kernel(bytes_, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, budget, noise_scale, seed, max_iter,
                 max_splits, pick, init, work_budget):
    """Return ``(status, seq, used)``: ``SPLIT_OK`` and a compute sequence
    whose minimal-memory plan peaks within ``budget``, or ``SPLIT_FAILED``
    / ``SPLIT_WORK_SPENT`` and the last sequence tried; ``used`` work units.
    Gives up after ``max_iter`` splits, once the sequence is ``4n`` long, or
    when ``work_budget`` units are spent (one per position visited: each
    split re-reads the sequence, ``O(K log K)``); a value is split at most
    ``max_splits`` times (breaks cycles).  ``pick`` chooses the over-budget
    position to relieve: 0 the first, 1 the highest, 2 the last.  ``init``
    is the starting compute sequence (``0..n-1``: keep-all; any valid
    sequence, e.g. a plan for a larger budget, also works)."""
    n = bytes_.shape[0]
    used = 0
    np.random.seed(seed)
    K = init.shape[0]
    cap = max(2 * n + 16, K + 16)
    seq = np.empty(cap, dtype=np.int64)
    seq[:K] = init
    reads = np.zeros(n, dtype=np.bool_)
    n_split = np.zeros(n, dtype=np.int64)
    mark = np.zeros(n, dtype=np.int64)
    stamp = 0
    work = np.empty(n + 1, dtype=np.int64)
    clos = np.empty(n + 1, dtype=np.int64)
    best_clos = np.empty(n + 1, dtype=np.int64)
    it = 0
    while it < max_iter:
        it += 1
        used += K
        if used >= work_budget:
            return SPLIT_WORK_SPENT, seq[:K].copy(), used
        active = np.ones(K, dtype=np.bool_)
        end, mem_at, release = sequence_profile_kernel(seq[:K], active, bytes_, pred_ptr, pred_idx)
        P = -1
        worst = budget
        for pos in range(K):
            if mem_at[pos] > worst:
                P = pos
                if pick == 0:
                    break
                if pick == 1:
                    worst = mem_at[pos]
        if P < 0:
            return SPLIT_OK, seq[:K].copy(), used
        used += P
        icnt, inst, _, rcnt, rd = positions_kernel(seq[:K], active, pred_ptr, pred_idx, n)
        tab = _sparse_max(mem_at)
        # the profile and position passes read every step's inputs; the table has log K rows
        used += tab.size + 2 * K * (pred_ptr[n] // max(n, 1) + 1)
        over_n = np.zeros(K + 1, dtype=np.int64)
        over_s = np.zeros(K + 1, dtype=np.float64)
        for pos in range(K):
            ex = mem_at[pos] - budget
            over_n[pos + 1] = over_n[pos] + (1 if ex > 0 else 0)
            over_s[pos + 1] = over_s[pos] + (ex if ex > 0 else 0)
        x = seq[P]
        for j in range(pred_ptr[x], pred_ptr[x + 1]):
            reads[pred_idx[j]] = True
        run_end = P + 1
        while run_end < K and mem_at[run_end] > budget:
            run_end += 1
        best_n = 0
        best_q = -1
        best_score = np.inf
        best_safe = False
        for i in range(P):
            if end[i] <= P:
                continue
            u = seq[i]
            if reads[u] or bytes_[u] == 0 or n_split[u] >= max_splits:
                continue
            r0 = rcnt[u]
            r1 = rcnt[u + 1]
            k = np.searchsorted(rd[r0:r1], P, side="right")
            if r0 + k >= r1:
                continue
            q_read = rd[r0 + k]
            a = rd[r0 + k - 1] if k > 0 else i
            if a < i:
                a = i
            for pass_ in range(2):
                # insertion point: right before the next reader, or (pass 1) right after
                # the over-budget run around P when that comes earlier
                if pass_ == 0:
                    q = q_read
                else:
                    if run_end >= q_read or run_end <= P:
                        break
                    q = run_end
                # relieved excess on (a, q), approximately sum(min(excess, bytes))
                benefit = min(float(bytes_[u]) * (over_n[q] - over_n[a + 1]), over_s[q] - over_s[a + 1])
                if benefit <= 0.0:
                    continue
                # memory right before q without u's old instance
                base_q = mem_at[q - 1] - release[q - 1] - bytes_[u]
                # option A: keep u's inputs alive until q (if no position goes over)
                safe = True
                ext = 0
                used += pred_ptr[u + 1] - pred_ptr[u]
                for j in range(pred_ptr[u], pred_ptr[u + 1]):
                    w = pred_idx[j]
                    e_w = _live_end(w, q, icnt, inst, end)
                    if e_w >= q:
                        continue
                    ext += bytes_[w]
                    lo = e_w + 1
                    mid = max(lo, min(a + 1, q))
                    if _range_max(tab, lo, mid) + bytes_[w] > budget:
                        safe = False
                        break
                    if _range_max(tab, mid, q) + bytes_[w] - bytes_[u] > budget:
                        safe = False
                        break
                if safe and base_q + ext + bytes_[u] > budget:
                    safe = False
                if safe:
                    c = cost[u]
                    nc = 1
                    clos[0] = u
                else:
                    # option B: recompute every input not alive at q, recursively
                    stamp += 1
                    c = cost[u]
                    nc = 1
                    clos[0] = u
                    mark[u] = stamp
                    top = 1
                    work[0] = u
                    while top > 0 and nc <= 64:
                        top -= 1
                        y = work[top]
                        used += pred_ptr[y + 1] - pred_ptr[y]
                        for j in range(pred_ptr[y], pred_ptr[y + 1]):
                            w = pred_idx[j]
                            if mark[w] == stamp:
                                continue
                            mark[w] = stamp
                            if _live_end(w, q, icnt, inst, end) >= q:
                                continue
                            clos[nc] = w
                            nc += 1
                            c += cost[w]
                            work[top] = w
                            top += 1
                    if nc > 64:
                        continue
                    tmp = 0
                    for z in range(nc):
                        tmp += bytes_[clos[z]]
                    safe = base_q + tmp <= budget
                score = c / benefit
                if noise_scale > 0.0:
                    score *= np.exp(noise_scale * np.random.standard_normal())
                if (safe and not best_safe) or (safe == best_safe and score < best_score):
                    best_safe = safe
                    best_score = score
                    best_q = q
                    best_n = nc
                    best_clos[:nc] = clos[:nc]
        for j in range(pred_ptr[x], pred_ptr[x + 1]):
            reads[pred_idx[j]] = False
        if best_n == 0 or K + best_n > max(4 * n + 16, init.shape[0] + n):
            return SPLIT_FAILED, seq[:K].copy(), used
        ins = np.sort(best_clos[:best_n])
        n_split[best_clos[0]] += 1
        if K + best_n > cap:
            cap = 2 * (K + best_n)
            bigger = np.empty(cap, dtype=np.int64)
            bigger[:K] = seq[:K]
            seq = bigger
        for p in range(K - 1, best_q - 1, -1):
            seq[p + best_n] = seq[p]
        for z in range(best_n):
            seq[best_q + z] = ins[z]
        K += best_n
    return SPLIT_FAILED, seq[:K].copy(), used


def split_sequence(a: GraphArrays, *, noise: float = 0.0, seed: int = 0, max_iter: int | None = None,
                   max_splits: int = 3, pick: int = 0, init=None, budget=None, meter: WorkMeter | None = None):
    """Run the splitting kernel from ``init`` (default keep-all); the pruned
    compute sequence or ``None`` (also when ``meter``'s budget runs out)."""
    meter = meter or WorkMeter()
    if meter.spent:
        return None
    it = a.n + 100 if max_iter is None else int(max_iter)
    b = a.budget if budget is None else int(budget)
    start = np.arange(a.n, dtype=np.int64) if init is None else np.ascontiguousarray(init, dtype=np.int64)
    status, seq, used = split_kernel(a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(b),
                                     float(noise), int(seed), it, int(max_splits), int(pick), start,
                                     np.int64(meter.budget(SPLIT_RATE)))
    meter.take(used)
    if status != SPLIT_OK:
        return None
    return meter.prune(a, seq, budget=b)


def split_continuation(a: GraphArrays, *, n_steps: int = 8, seed: int = 0, pick: int = 0, noise: float = 0.0,
                       meter: WorkMeter | None = None):
    """Budget continuation: lower the budget from the keep-all peak to the
    target in ``n_steps`` equal steps, repairing the previous plan by
    splitting at each step; the final sequence or ``None``."""
    seq = np.arange(a.n, dtype=np.int64)
    peak = int(sequence_peak_kernel(seq, np.ones(a.n, dtype=np.bool_), a.bytes, a.pred_ptr, a.pred_idx))
    if peak <= a.budget:
        return seq
    for k in range(1, n_steps + 1):
        b = a.budget + (peak - a.budget) * (n_steps - k) // n_steps
        seq = split_sequence(a, init=seq, budget=b, seed=seed + k, pick=pick, noise=noise, meter=meter)
        if seq is None:
            return None
    return seq


#: recomputations one ruin may drop: each costs about one split (a pass over the sequence) to repair, so the
#: cap ``max(32, RUIN_WORK // n)`` bounds a move to ``O(RUIN_WORK log n)`` positions on large graphs (no cap
#: below about 1k nodes at the usual shares)
RUIN_WORK = 2_000_000


def ruin_and_recreate(a: GraphArrays, seq, rng, *, frac: float = 0.2, pick: int = 0, noise: float = 0.3,
                      meter: WorkMeter | None = None):
    """Drop a random share ``frac`` of ``seq``'s recomputations (at most
    ``max(32, RUIN_WORK // n)``) and repair with the splitting kernel; the
    new pruned sequence or ``None``."""
    seq = np.asarray(seq, dtype=np.int64)
    seen = np.zeros(a.n, dtype=bool)
    rec = []
    for pos, v in enumerate(seq.tolist()):
        if seen[v]:
            rec.append(pos)
        seen[v] = True
    if not rec:
        return None
    k = min(max(1, int(round(frac * len(rec)))), max(32, RUIN_WORK // max(1, a.n)))
    drop = rng.choice(np.asarray(rec), size=min(k, len(rec)), replace=False)
    keep = np.ones(seq.size, dtype=bool)
    keep[drop] = False
    return split_sequence(a, init=seq[keep], seed=int(rng.integers(1 << 30)), pick=pick, noise=noise, meter=meter)


class LifetimeSplit(Heuristic):
    """Split live ranges of keep-all until the plan fits.

    Parameters
    ----------
    restarts : int
        Extra runs with seeded noise on the split scores and another choice
        of the relieved position (the best plan is kept).
    noise : float
        Log-normal noise scale of those runs.
    continuation_runs : int
        Runs of the budget continuation (keep-all repaired at budgets
        stepping down to the target), one per choice of relieved position.
        When the first direct run and the first continuation both fail, the
        heuristic gives up (this bounds the work on hopeless budgets).
    """

    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})

    def __init__(self, *, restarts: int = 2, noise: float = 0.3, continuation_runs: int = 2, name: str = "split",
                 rank: float = 3.0):
        self.restarts = int(restarts)
        self.continuation_runs = int(continuation_runs)
        self.noise = float(noise)
        self.name = name
        self.rank = rank

    def predict_seconds(self, problem) -> float:
        """Seconds of a run without limits: ``7.6e-8 n^1.8`` (fitted at 1k-10k
        nodes, ``benchmarks/results/heuristic_scaling.md``)."""
        return 7.6e-8 * float(problem.graph.n) ** 1.8

    def run(self, problem, *, seed: int = 0, limits=None):
        """The cheapest plan of the runs that fit (``None``: none did, or
        ``limits`` ran out first; the runs done by then count)."""
        a = GraphArrays.from_problem(problem)
        meter = WorkMeter(limits)
        best, best_cost = None, np.inf

        def keep(seq):
            nonlocal best, best_cost
            if seq is not None and float(a.cost[seq].sum()) < best_cost:
                best, best_cost = seq, float(a.cost[seq].sum())

        # one direct run and one continuation; more runs only if one of them fits
        keep(split_sequence(a, seed=seed * 1000, pick=0, meter=meter))
        if self.continuation_runs > 0:
            keep(split_continuation(a, seed=seed, pick=0, meter=meter))
        if best is None:
            return None
        for r in range(1, self.restarts + 1):
            keep(split_sequence(a, noise=self.noise, seed=seed * 1000 + r, pick=r % 3, meter=meter))
        for pick in range(1, self.continuation_runs):
            keep(split_continuation(a, seed=seed, pick=pick % 3, meter=meter))
        return finish(problem, a, best, self.name, seed=seed)
