"""Numba kernels shared by the single-device heuristics.

:func:`execute_kernel` runs the graph's nodes in the reference order under a
memory budget.  Before a node runs, its evicted inputs are recomputed on
demand (recursively, DTR style); when memory is short the resident, unpinned
value with the lowest *score* is evicted.  A value no later node reads is
freed at once ("banished").  An optional per-node ``drop_at`` index frees a
value right after a given node of the reference order (checkpoint
heuristics drop non-checkpointed values after their last use inside their
segment).

:func:`sequence_plan_kernel` turns a compute sequence (recomputations
allowed) into explicit ``compute``/``free`` steps, freeing each value right
after its last use in the sequence, and returns the peak; this is the
minimal-memory plan of that sequence (the same semantics as
:func:`hybrid_remat.plan.plan_from_order`).  :func:`prune_kernel` drops
recomputations from a sequence while the peak stays within the budget.

All kernels take numpy arrays (int64 / float64 / bool) and keep their
helpers in this module.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "SCORE_DTR", "SCORE_DTR_EQ", "SCORE_LRU", "SCORE_SIZE", "SCORE_MSPS", "SCORE_NEXT_USE", "SCORE_NEXT_USE_EQ",
    "SCORE_DTR_FULL", "SCORE_NEXT_USE_FULL", "SCORE_NAMES", "STATUS_OK", "STATUS_NO_VICTIM", "STATUS_STEP_LIMIT", "STATUS_OVER_BUDGET",
    "execute_kernel", "sequence_plan_kernel", "sequence_peak_kernel", "prune_kernel",
]

SCORE_DTR = 0          # cost / (bytes * staleness)           (h_DTR^local)
SCORE_DTR_EQ = 1       # (cost + evicted class cost) / (bytes * staleness)   (h_DTR^eq)
SCORE_LRU = 2          # last access (evict the stalest)
SCORE_SIZE = 3         # 1 / bytes (evict the largest)
SCORE_MSPS = 4         # (cost + evicted class cost) / bytes
SCORE_NEXT_USE = 5     # cost / (bytes * distance to next use)    (offline: the future order is known)
SCORE_NEXT_USE_EQ = 6  # (cost + evicted class cost) / (bytes * distance to next use)
SCORE_DTR_FULL = 7     # (cost of u + every absent ancestor it needs) / (bytes * staleness)
SCORE_NEXT_USE_FULL = 8  # (cost of u + every absent ancestor it needs) / (bytes * distance to next use)
SCORE_NAMES = ("dtr", "dtr_eq", "lru", "size", "msps", "next_use", "next_use_eq", "dtr_full", "next_use_full")
CLOSURE_CAP = 48

STATUS_OK = 0
STATUS_NO_VICTIM = 1     # memory short and nothing evictable
STATUS_STEP_LIMIT = 2    # thrashing: more steps than allowed
STATUS_OVER_BUDGET = 3   # eviction disabled and the budget was exceeded


@njit(cache=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True)
def _union(parent, cls_cost, a, b):
    ra = _find(parent, a)
    rb = _find(parent, b)
    if ra != rb:
        parent[rb] = ra
        cls_cost[ra] += cls_cost[rb]


@njit(cache=True)
def _eq_cost(u, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, evicted, parent, cls_cost, roots):
    """cost[u] plus the class cost of each distinct evicted neighbour class."""
    c = cost[u]
    nr = 0
    for side in range(2):
        if side == 0:
            lo, hi, idx = pred_ptr[u], pred_ptr[u + 1], pred_idx
        else:
            lo, hi, idx = succ_ptr[u], succ_ptr[u + 1], succ_idx
        for j in range(lo, hi):
            w = idx[j]
            if evicted[w]:
                r = _find(parent, w)
                seen = False
                for q in range(nr):
                    if roots[q] == r:
                        seen = True
                        break
                if not seen and nr < roots.shape[0]:
                    roots[nr] = r
                    nr += 1
                    c += cls_cost[r]
    return c


@njit(cache=True)
def _closure_cost(u, cost, pred_ptr, pred_idx, resident, stamp, mark, work, big, last_use, horizon):
    """cost[u] plus the cost of every ancestor needed to recompute it that
    is absent now or freed (last reader before target ``horizon``) by then
    (``big`` when more than ``CLOSURE_CAP`` nodes would be needed)."""
    c = cost[u]
    top = 0
    work[top] = u
    top += 1
    count = 0
    while top > 0:
        top -= 1
        x = work[top]
        for j in range(pred_ptr[x], pred_ptr[x + 1]):
            w = pred_idx[j]
            if mark[w] == stamp or (resident[w] and last_use[w] >= horizon):
                continue
            mark[w] = stamp
            c += cost[w]
            count += 1
            if count > CLOSURE_CAP:
                return big + c
            work[top] = w
            top += 1
    return c


@njit(cache=True)
def _next_use(u, t, succ_idx, succ_ptr, next_ptr, n):
    """Distance (>= 1) from target ``t`` to ``u``'s next reader in the reference order."""
    p = next_ptr[u]
    end = succ_ptr[u + 1]
    while p < end and succ_idx[p] < t:
        p += 1
    next_ptr[u] = p
    if p < end:
        return succ_idx[p] - t + 1
    return 2 * n + 1


@njit(cache=True)
def _grow(a, k):
    if k < a.shape[0]:
        return a
    b = np.empty(2 * a.shape[0] + 16, dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True)
def execute_kernel(bytes_, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, budget, drop_ptr, drop_idx, weights,
                   score_kind, allow_evict, seed, max_steps):
    """Run nodes ``0..n-1`` as targets under ``budget`` with on-demand recomputation.

    Parameters
    ----------
    bytes_ : int64 (n,)
    cost : float64 (n,)
    pred_ptr, pred_idx, succ_ptr, succ_idx : int64 CSR (successors sorted)
    budget : int
    drop_ptr, drop_idx : int64 CSR over targets
        Values to drop (if resident, unpinned and still needed later) right
        after target ``t`` completes: ``drop_idx[drop_ptr[t]:drop_ptr[t+1]]``.
    weights : float64 (n,)
        Multipliers of each value's eviction score (1 = plain heuristic).
    score_kind : int
        One of the ``SCORE_*`` codes.
    allow_evict : bool
        ``False``: never evict under memory pressure; exceeding the budget
        fails with ``STATUS_OVER_BUDGET``.
    seed : int
        Seeds the tiny random tie-breaking noise.
    max_steps : int
        Give up (``STATUS_STEP_LIMIT``) beyond this many steps.

    Returns
    -------
    status, op (int8), node (int64), peak (int64), total_cost (float64)
    """
    n = bytes_.shape[0]
    np.random.seed(seed)
    noise = 1.0 + 1e-9 * np.random.random(n)
    resident = np.zeros(n, dtype=np.bool_)
    done = np.zeros(n, dtype=np.bool_)
    evicted = np.zeros(n, dtype=np.bool_)
    lock = np.zeros(n, dtype=np.int64)
    support = np.zeros(n, dtype=np.int64)  # evicted readers still needed later
    remaining = np.empty(n, dtype=np.int64)
    for v in range(n):
        remaining[v] = succ_ptr[v + 1] - succ_ptr[v]
    next_ptr = succ_ptr[:n].copy()
    last_access = np.zeros(n, dtype=np.int64)
    parent = np.arange(n)
    cls_cost = np.zeros(n, dtype=np.float64)
    roots = np.empty(64, dtype=np.int64)
    stack = np.empty(n + 1, dtype=np.int64)
    mark = np.zeros(n, dtype=np.int64)
    work = np.empty(n + 1, dtype=np.int64)
    stamp = 0
    big = 1e3 * (cost.sum() + 1.0)
    last_use = np.arange(n)
    for v in range(n):
        if succ_ptr[v + 1] > succ_ptr[v]:
            last_use[v] = succ_idx[succ_ptr[v + 1] - 1]
    out_op = np.empty(4 * n + 16, dtype=np.int8)
    out_node = np.empty(4 * n + 16, dtype=np.int64)
    k = 0
    mem = 0
    peak = 0
    total = 0.0
    clock = 0
    for t in range(n):
        stack[0] = t
        sp = 1
        for j in range(pred_ptr[t], pred_ptr[t + 1]):
            lock[pred_idx[j]] += 1
        while sp > 0:
            x = stack[sp - 1]
            missing = -1
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                if not resident[u]:
                    missing = u
                    break
            if missing >= 0:
                stack[sp] = missing
                sp += 1
                for j in range(pred_ptr[missing], pred_ptr[missing + 1]):
                    lock[pred_idx[j]] += 1
                continue
            need = bytes_[x]
            while mem + need > budget:
                if not allow_evict:
                    return STATUS_OVER_BUDGET, out_op[:k], out_node[:k], peak, total
                best = -1
                best_score = np.inf
                for u in range(n):
                    if not resident[u] or lock[u] > 0 or bytes_[u] == 0:
                        continue
                    if score_kind == SCORE_LRU:
                        s = float(last_access[u] + 1)
                    elif score_kind == SCORE_SIZE:
                        s = 1.0 / bytes_[u]
                    else:
                        if score_kind == SCORE_DTR or score_kind == SCORE_NEXT_USE:
                            c = cost[u]
                        elif score_kind == SCORE_DTR_FULL:
                            stamp += 1
                            c = _closure_cost(u, cost, pred_ptr, pred_idx, resident, stamp, mark, work, big,
                                              last_use, 0)
                        elif score_kind == SCORE_NEXT_USE_FULL:
                            stamp += 1
                            horizon = t + _next_use(u, t, succ_idx, succ_ptr, next_ptr, n) - 1
                            c = _closure_cost(u, cost, pred_ptr, pred_idx, resident, stamp, mark, work, big,
                                              last_use, horizon)
                        else:
                            c = _eq_cost(u, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, evicted, parent,
                                         cls_cost, roots)
                        if score_kind == SCORE_DTR or score_kind == SCORE_DTR_EQ or score_kind == SCORE_DTR_FULL:
                            s = c / (bytes_[u] * float(clock - last_access[u] + 1))
                        elif score_kind == SCORE_MSPS:
                            s = c / bytes_[u]
                        else:
                            dist = _next_use(u, t, succ_idx, succ_ptr, next_ptr, n)
                            if support[u] > 0:
                                for j in range(succ_ptr[u], succ_ptr[u + 1]):
                                    w = succ_idx[j]
                                    if evicted[w] and remaining[w] > 0:
                                        dw = _next_use(w, t, succ_idx, succ_ptr, next_ptr, n)
                                        if dw < dist:
                                            dist = dw
                            s = c / (bytes_[u] * float(dist))
                    s = s * weights[u] * noise[u]
                    if s < best_score:
                        best_score = s
                        best = u
                if best < 0:
                    return STATUS_NO_VICTIM, out_op[:k], out_node[:k], peak, total
                resident[best] = False
                mem -= bytes_[best]
                evicted[best] = True
                for j in range(pred_ptr[best], pred_ptr[best + 1]):
                    support[pred_idx[j]] += 1
                for side in range(2):
                    if side == 0:
                        lo, hi, idx = pred_ptr[best], pred_ptr[best + 1], pred_idx
                    else:
                        lo, hi, idx = succ_ptr[best], succ_ptr[best + 1], succ_idx
                    for j in range(lo, hi):
                        if evicted[idx[j]]:
                            _union(parent, cls_cost, best, idx[j])
                cls_cost[_find(parent, best)] += cost[best]
                out_op = _grow(out_op, k)
                out_node = _grow(out_node, k)
                out_op[k] = 1
                out_node[k] = best
                k += 1
            # compute x
            out_op = _grow(out_op, k)
            out_node = _grow(out_node, k)
            out_op[k] = 0
            out_node[k] = x
            k += 1
            if k > max_steps:
                return STATUS_STEP_LIMIT, out_op[:k], out_node[:k], peak, total
            resident[x] = True
            mem += need
            if mem > peak:
                peak = mem
            total += cost[x]
            if evicted[x]:
                evicted[x] = False
                cls_cost[_find(parent, x)] -= cost[x]
                for j in range(pred_ptr[x], pred_ptr[x + 1]):
                    support[pred_idx[j]] -= 1
            clock += 1
            last_access[x] = clock
            sp -= 1
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                last_access[u] = clock
                lock[u] -= 1
                if sp == 0:
                    remaining[u] -= 1
            if sp == 0:
                done[x] = True
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                if resident[u] and done[u] and remaining[u] == 0 and lock[u] == 0 and support[u] == 0:
                    resident[u] = False
                    mem -= bytes_[u]
                    out_op = _grow(out_op, k)
                    out_node = _grow(out_node, k)
                    out_op[k] = 1
                    out_node[k] = u
                    k += 1
            if done[x] and remaining[x] == 0 and lock[x] == 0 and support[x] == 0:
                resident[x] = False
                mem -= bytes_[x]
                out_op = _grow(out_op, k)
                out_node = _grow(out_node, k)
                out_op[k] = 1
                out_node[k] = x
                k += 1
        for j in range(drop_ptr[t], drop_ptr[t + 1]):
            u = drop_idx[j]
            if resident[u] and lock[u] == 0 and remaining[u] > 0:
                resident[u] = False
                mem -= bytes_[u]
                evicted[u] = True
                for j2 in range(pred_ptr[u], pred_ptr[u + 1]):
                    support[pred_idx[j2]] += 1
                out_op = _grow(out_op, k)
                out_node = _grow(out_node, k)
                out_op[k] = 1
                out_node[k] = u
                k += 1
    return STATUS_OK, out_op[:k], out_node[:k], peak, total


@njit(cache=True)
def _last_uses(seq, active, pred_ptr, pred_idx, n):
    """For each position, the position after which the instance computed
    there is freed (its last reader in the sequence, or itself)."""
    K = seq.shape[0]
    end = np.empty(K, dtype=np.int64)
    alive_until = np.full(n, -1, dtype=np.int64)
    for pos in range(K - 1, -1, -1):
        if not active[pos]:
            end[pos] = -1
            continue
        v = seq[pos]
        end[pos] = alive_until[v] if alive_until[v] >= 0 else pos
        alive_until[v] = -1
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[j]
            if alive_until[u] < 0:
                alive_until[u] = pos
    return end


@njit(cache=True)
def sequence_peak_kernel(seq, active, bytes_, pred_ptr, pred_idx):
    """Peak memory of the minimal-memory plan of ``seq[active]``."""
    n = bytes_.shape[0]
    K = seq.shape[0]
    end = _last_uses(seq, active, pred_ptr, pred_idx, n)
    release = np.zeros(K, dtype=np.int64)
    for pos in range(K):
        if active[pos]:
            release[end[pos]] += bytes_[seq[pos]]
    mem = 0
    peak = 0
    for pos in range(K):
        if active[pos]:
            mem += bytes_[seq[pos]]
            if mem > peak:
                peak = mem
        mem -= release[pos]
    return peak


@njit(cache=True)
def sequence_plan_kernel(seq, active, bytes_, pred_ptr, pred_idx):
    """``(op, node, peak)`` of the minimal-memory plan of ``seq[active]``:
    compute in order, free each value right after its last reader."""
    n = bytes_.shape[0]
    K = seq.shape[0]
    end = _last_uses(seq, active, pred_ptr, pred_idx, n)
    # bucket frees by position (CSR)
    cnt = np.zeros(K + 1, dtype=np.int64)
    for pos in range(K):
        if active[pos]:
            cnt[end[pos] + 1] += 1
    for pos in range(K):
        cnt[pos + 1] += cnt[pos]
    fill = cnt[:K].copy()
    frees = np.empty(cnt[K], dtype=np.int64)
    for pos in range(K):
        if active[pos]:
            frees[fill[end[pos]]] = seq[pos]
            fill[end[pos]] += 1
    m = 0
    for pos in range(K):
        if active[pos]:
            m += 1
    total = m + cnt[K]
    op = np.empty(total, dtype=np.int8)
    node = np.empty(total, dtype=np.int64)
    k = 0
    mem = 0
    peak = 0
    for pos in range(K):
        if active[pos]:
            op[k] = 0
            node[k] = seq[pos]
            k += 1
            mem += bytes_[seq[pos]]
            if mem > peak:
                peak = mem
        a = cnt[pos]
        b = cnt[pos + 1]
        # frees in node order for determinism
        seg = np.sort(frees[a:b])
        for q in range(seg.shape[0]):
            op[k] = 1
            node[k] = seg[q]
            k += 1
            mem -= bytes_[seg[q]]
    return op, node, peak


@njit(cache=True)
def prune_kernel(seq, active, bytes_, cost, pred_ptr, pred_idx, budget, max_tries):
    """Drop recomputations (non-first occurrences) from ``seq`` while the
    peak stays within ``budget``; most expensive first.  Modifies and
    returns ``active``; also returns how many were dropped."""
    n = bytes_.shape[0]
    K = seq.shape[0]
    seen = np.zeros(n, dtype=np.bool_)
    cand = np.empty(K, dtype=np.int64)
    nc = 0
    for pos in range(K):
        if not active[pos]:
            continue
        v = seq[pos]
        if seen[v]:
            cand[nc] = pos
            nc += 1
        seen[v] = True
    cand = cand[:nc]
    key = np.empty(nc, dtype=np.float64)
    for i in range(nc):
        key[i] = -cost[seq[cand[i]]]
    order = np.argsort(key, kind="mergesort")
    dropped = 0
    tries = 0
    for i in range(nc):
        if tries >= max_tries:
            break
        pos = cand[order[i]]
        if cost[seq[pos]] <= 0.0:
            continue
        tries += 1
        active[pos] = False
        if sequence_peak_kernel(seq, active, bytes_, pred_ptr, pred_idx) <= budget:
            dropped += 1
        else:
            active[pos] = True
    return active, dropped
