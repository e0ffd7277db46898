"""Lifetime splitting: start from keep-all and split live ranges until the
plan fits.

The plan is a compute sequence whose minimal-memory plan frees each value
right after its last reader (:func:`~hybrid_remat.heuristics.executor.sequence_plan_kernel`).
While some position ``P`` is over budget, pick a value ``u`` live across
``P`` but not read there and *split* its live range: its instance now ends
at its last reader before ``P`` and ``u`` is recomputed right before its
next reader after ``P`` (its own inputs are kept alive until then if they
would be freed earlier).  The value chosen minimises
``cost(u) / relieved excess`` (with optional seeded noise), preferring
splits whose input extensions push no position over the budget.

This is the sequence-space analogue of Moccasin's retention intervals and
is strong on wide DAGs (random layered graphs), where on-demand eviction
cascades.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .executor import _last_uses

__all__ = ["split_kernel"]


@njit(cache=True)
def _profile(seq, K, bytes_, pred_ptr, pred_idx, n):
    active = np.ones(K, dtype=np.bool_)
    end = _last_uses(seq[:K], active, pred_ptr, pred_idx, n)
    release = np.zeros(K, dtype=np.int64)
    for pos in range(K):
        release[end[pos]] += bytes_[seq[pos]]
    mem_at = np.empty(K, dtype=np.int64)
    mem = 0
    for pos in range(K):
        mem += bytes_[seq[pos]]
        mem_at[pos] = mem
        mem -= release[pos]
    return end, mem_at, release


@njit(cache=True)
def _csr_positions(seq, K, pred_ptr, pred_idx, n):
    """Per node: the positions computing it and the positions reading it."""
    icnt = np.zeros(n + 1, dtype=np.int64)
    rcnt = np.zeros(n + 1, dtype=np.int64)
    for p in range(K):
        y = seq[p]
        icnt[y + 1] += 1
        for j in range(pred_ptr[y], pred_ptr[y + 1]):
            rcnt[pred_idx[j] + 1] += 1
    for v in range(n):
        icnt[v + 1] += icnt[v]
        rcnt[v + 1] += rcnt[v]
    ifill = icnt[:n].copy()
    rfill = rcnt[:n].copy()
    inst = np.empty(icnt[n], dtype=np.int64)
    rd = np.empty(rcnt[n], dtype=np.int64)
    for p in range(K):
        y = seq[p]
        inst[ifill[y]] = p
        ifill[y] += 1
        for j in range(pred_ptr[y], pred_ptr[y + 1]):
            u = pred_idx[j]
            rd[rfill[u]] = p
            rfill[u] += 1
    return icnt, inst, rcnt, rd


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
                 max_splits, pick, init):
    """Return ``(ok, seq)``: a compute sequence whose minimal-memory plan
    peaks within ``budget`` (``ok``), or the last sequence tried.  Gives up
    after ``max_iter`` splits or once the sequence is ``4n`` long; a value
    is split at most ``max_splits`` times (breaks cycles).  ``pick`` chooses
    the over-budget position to relieve: 0 the first, 1 the highest, 2 the
    last.  ``init`` is the starting compute sequence (``0..n-1``: keep-all;
    any valid sequence, e.g. a plan for a larger budget, also works)."""
    n = bytes_.shape[0]
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
        end, mem_at, release = _profile(seq, K, bytes_, pred_ptr, pred_idx, n)
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
            return True, seq[:K].copy()
        icnt, inst, rcnt, rd = _csr_positions(seq, K, pred_ptr, pred_idx, n)
        tab = _sparse_max(mem_at)
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
            return False, seq[:K].copy()
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
    return False, seq[:K].copy()
