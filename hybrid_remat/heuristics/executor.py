"""Numba kernels shared by the single-device heuristics.

:func:`execute_kernel` runs the graph's nodes in the reference order under a
memory budget.  Before a node runs, its evicted inputs are recomputed on
demand (recursively, DTR style); when memory is short the resident, unpinned
value with the lowest *score* is evicted.  A value no later node reads is
freed at once ("banished").  An optional per-node ``drop_at`` index frees a
value right after a given node of the reference order (checkpoint
heuristics drop non-checkpointed values after their last use inside their
segment).

Cost.  Scores that only change when their value is used (``lru``,
``size``) keep the resident values in a heap (lazy deletion): the victim is
exact and costs ``O(log n)``.  ``belady`` keeps ``next_use_full``'s score in
a heap too: a value is keyed when it is computed and when its target reads
it, and a popped victim is keyed afresh (at most :data:`BELADY_REKEYS`
times per eviction) and goes back when the next entry now comes first; its
closure stops at :data:`BELADY_CAP` ancestors.  For the others (they change with time) the
resident values are kept in a list; a victim is the best of all of them
while they are at most ``scan_all``, else the best of ``sample`` drawn at
random (seeded; DTR's own sampling), so an eviction costs
``O(min(resident, scan_all))`` score evaluations and a run is near-linear
in the graph size.  A work budget (three units per step, one per scored
candidate and per heap entry taken) bounds the run: ``STATUS_WORK_SPENT`` with the
sequence so far.

Speed.  The helpers are inlined into :func:`execute_kernel` (``inline="always"``): called as functions
they took and dropped a reference to every array they were passed or returned (Numba's atomic
``NRT_incref``/``NRT_decref``: 40-48 % of a ``belady`` run's samples under ``perf`` at 100k nodes);
inlined, the same run is about 25 % faster, step for step the same (0.80-0.83 instead of 1.07-1.14 CPU s
on the 100k-node random layered graph at 50 %, load 5.7).

Deadlines.  :func:`execute_kernel` releases the GIL (``nogil=True``) and reads its ``stop`` flag (a one-element
``uint8`` array) at every computation: set by a watching thread at the caller's deadline
(:func:`~hybrid_remat.heuristics.common.stop_flag`), it ends the run with ``STATUS_STOPPED`` and the sequence so
far.  (A work budget sized by a measured rate alone overran on a loaded or niced machine: ``dtr_eq`` and
``dtr_next_use`` at 100k nodes ended 1.7-2.5 s after their deadline on the ResNet stages at 30 %, load 6.)  The
``belady`` score runs in a kernel of its own, :func:`~hybrid_remat.heuristics.belady.belady_kernel`: the same
steps, 3-5x faster.

The kernels take numpy arrays (int64 / float64 / bool).  The minimal-memory
plan of the compute sequence they produce is
:mod:`hybrid_remat.core.sequence`'s.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "SCORE_DTR", "SCORE_DTR_EQ", "SCORE_LRU", "SCORE_SIZE", "SCORE_MSPS", "SCORE_NEXT_USE", "SCORE_NEXT_USE_EQ",
    "SCORE_DTR_FULL", "SCORE_NEXT_USE_FULL", "SCORE_BELADY", "SCORE_NAMES", "BELADY_CAP", "BELADY_REKEYS", "STATUS_OK", "STATUS_NO_VICTIM", "STATUS_STEP_LIMIT",
    "STATUS_OVER_BUDGET", "STATUS_WORK_SPENT", "STATUS_STOPPED", "execute_kernel",
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
SCORE_BELADY = 9       # SCORE_NEXT_USE_FULL kept in a heap: keyed when used, re-keyed lazily when it is the victim
SCORE_NAMES = ("dtr", "dtr_eq", "lru", "size", "msps", "next_use", "next_use_eq", "dtr_full", "next_use_full",
               "belady")
#: the closure of a ``belady`` key stops (counts as too dear) beyond this many ancestors
BELADY_CAP = 8
#: fresh keys computed per eviction (``belady``) before the top of the heap is taken as it is
BELADY_REKEYS = 8
CLOSURE_CAP = 48

STATUS_OK = 0
STATUS_NO_VICTIM = 1     # memory short and nothing evictable
STATUS_STEP_LIMIT = 2    # thrashing: more steps than allowed
STATUS_OVER_BUDGET = 3   # eviction disabled and the budget was exceeded
STATUS_WORK_SPENT = 4    # the work budget ran out
STATUS_STOPPED = 5       # the caller's stop flag was set (its deadline)


@njit(cache=True, inline="always")
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _closure_cost(u, cost, pred_ptr, pred_idx, resident, stamp, mark, work, big, last_use, horizon, cap):
    """cost[u] plus the cost of every ancestor needed to recompute it that
    is absent now or freed (last reader before target ``horizon``) by then
    (``big`` when more than ``cap`` nodes would be needed)."""
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
            if count > cap:
                return big + c
            work[top] = w
            top += 1
    return c


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _grow(a, k):
    if k < a.shape[0]:
        return a
    b = np.empty(2 * a.shape[0] + 16, dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True, inline="always")
def _emit(out_op, out_node, k, op, node):
    """Append step ``(op, node)`` at ``k`` (arrays grown as needed): ``(out_op, out_node, k + 1)``."""
    out_op = _grow(out_op, k)
    out_node = _grow(out_node, k)
    out_op[k] = op
    out_node[k] = node
    return out_op, out_node, k + 1


@njit(cache=True, inline="always")
def _res_add(res_list, res_at, n_res, u):
    res_at[u] = n_res
    res_list[n_res] = u
    return n_res + 1


@njit(cache=True, inline="always")
def _res_remove(res_list, res_at, n_res, u):
    k = res_at[u]
    last = res_list[n_res - 1]
    res_list[k] = last
    res_at[last] = k
    res_at[u] = -1
    return n_res - 1


@njit(cache=True, inline="always")
def _heap_less(hk, hu, i, j):
    return hk[i] < hk[j] or (hk[i] == hk[j] and hu[i] < hu[j])


@njit(cache=True, inline="always")
def _heap_swap(hk, hu, hv, i, j):
    hk[i], hk[j] = hk[j], hk[i]
    hu[i], hu[j] = hu[j], hu[i]
    hv[i], hv[j] = hv[j], hv[i]


@njit(cache=True, inline="always")
def _heap_push(hk, hu, hv, hn, key, u, ver):
    """Push ``(key, u)`` (version ``ver``); returns the arrays (grown when
    full) and the new size."""
    if hn >= hk.shape[0]:
        hk = _grow(hk, hn)
        hu = _grow(hu, hn)
        hv = _grow(hv, hn)
    hk[hn] = key
    hu[hn] = u
    hv[hn] = ver
    i = hn
    while i > 0:
        par = (i - 1) // 2
        if not _heap_less(hk, hu, i, par):
            break
        _heap_swap(hk, hu, hv, i, par)
        i = par
    return hk, hu, hv, hn + 1


@njit(cache=True, inline="always")
def _heap_pop(hk, hu, hv, hn):
    """Remove the smallest entry (moved to index ``hn - 1``); returns the new size."""
    hn -= 1
    _heap_swap(hk, hu, hv, 0, hn)
    i = 0
    while True:
        c = 2 * i + 1
        if c >= hn:
            break
        if c + 1 < hn and _heap_less(hk, hu, c + 1, c):
            c += 1
        if not _heap_less(hk, hu, c, i):
            break
        _heap_swap(hk, hu, hv, i, c)
        i = c
    return hn


@njit(cache=True)
def _score(u, t, clock, score_kind, bytes_, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, n, resident, evicted,
           parent, cls_cost, roots, stamp, mark, work, big, last_use, last_access, next_ptr, support, remaining):
    """Eviction score of resident ``u`` (lower: evict first) before target ``t``."""
    if score_kind == SCORE_LRU:
        return float(last_access[u] + 1)
    if score_kind == SCORE_SIZE:
        return 1.0 / bytes_[u]
    if score_kind == SCORE_DTR or score_kind == SCORE_NEXT_USE:
        c = cost[u]
    elif score_kind == SCORE_DTR_FULL:
        c = _closure_cost(u, cost, pred_ptr, pred_idx, resident, stamp, mark, work, big, last_use, 0, CLOSURE_CAP)
    elif score_kind == SCORE_NEXT_USE_FULL:
        horizon = t + _next_use(u, t, succ_idx, succ_ptr, next_ptr, n) - 1
        c = _closure_cost(u, cost, pred_ptr, pred_idx, resident, stamp, mark, work, big, last_use, horizon,
                          CLOSURE_CAP)
    else:
        c = _eq_cost(u, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, evicted, parent, cls_cost, roots)
    if score_kind == SCORE_DTR or score_kind == SCORE_DTR_EQ or score_kind == SCORE_DTR_FULL:
        return c / (bytes_[u] * float(clock - last_access[u] + 1))
    if score_kind == SCORE_MSPS:
        return c / bytes_[u]
    dist = _next_use(u, t, succ_idx, succ_ptr, next_ptr, n)
    if support[u] > 0:
        for j in range(succ_ptr[u], succ_ptr[u + 1]):
            w = succ_idx[j]
            if evicted[w] and remaining[w] > 0:
                dw = _next_use(w, t, succ_idx, succ_ptr, next_ptr, n)
                if dw < dist:
                    dist = dw
    return c / (bytes_[u] * float(dist))


@njit(cache=True, inline="always")
def _belady_key(u, t, cost, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, next_ptr, n, resident, evicted,
                remaining, support, stamp, mark, work, big, last_use, weights, noise):
    """Heap key of resident ``u`` at target ``t`` (``belady``): the
    ``next_use_full`` score, (cost of ``u`` and of every ancestor its
    recomputation needs by its next use) / (bytes x distance to that use),
    the next use being that of an evicted reader ``u`` must help recompute
    when it comes first."""
    dist = _next_use(u, t, succ_idx, succ_ptr, next_ptr, n)
    if support[u] > 0:
        for j in range(succ_ptr[u], succ_ptr[u + 1]):
            w = succ_idx[j]
            if evicted[w] and remaining[w] > 0:
                dw = _next_use(w, t, succ_idx, succ_ptr, next_ptr, n)
                if dw < dist:
                    dist = dw
    c = _closure_cost(u, cost, pred_ptr, pred_idx, resident, stamp, mark, work, big, last_use, t + dist - 1,
                      BELADY_CAP)
    return c / (bytes_[u] * float(dist)) * weights[u] * noise[u]


@njit(cache=True, nogil=True)
def execute_kernel(bytes_, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, budget, drop_ptr, drop_idx, weights,
                   score_kind, allow_evict, seed, max_steps, scan_all, sample, work_budget, stop):
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
        Seeds the tiny random tie-breaking noise and the sampling.
    max_steps : int
        Give up (``STATUS_STEP_LIMIT``) beyond this many steps, and
        (``allow_evict``, ``max_steps > 1000``) beyond
        ``1000 + (max_steps - 1000) (t + 1) / n`` of them at target ``t``.
    scan_all, sample : int
        Candidates scored per eviction (time-dependent scores): every
        resident value while there are at most ``scan_all``, else ``sample``
        drawn at random.
    work_budget : int
        Give up (``STATUS_WORK_SPENT``) after this many work units (three
        per step, one per scored candidate or heap entry taken).
    stop : uint8 (1,)
        Read at every computation: non-zero returns ``STATUS_STOPPED`` (set
        by another thread at the caller's deadline; the GIL is released).

    Returns
    -------
    status, op (int8), node (int64), peak (int64), total_cost (float64), used (int64)
    """
    n = bytes_.shape[0]
    np.random.seed(seed)
    noise = 1.0 + 1e-9 * np.random.random(n)
    resident = np.zeros(n, dtype=np.bool_)
    res_list = np.empty(n, dtype=np.int64)
    res_at = np.full(n, -1, dtype=np.int64)
    n_res = 0
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
    # thrashing gives up in proportion to the progress: beyond 1000 + (max_steps - 1000) (t + 1) / n steps at
    # target t (evicting runs; a run that thrashes from the middle stops there, not after max_steps)
    pace = (max_steps - 1000) / n if allow_evict and max_steps > 1000 and n > 0 else -1.0
    belady = score_kind == SCORE_BELADY
    static = score_kind == SCORE_LRU or score_kind == SCORE_SIZE or belady  # keyed on use: a heap
    hk = np.empty(n + 16, dtype=np.float64)
    hu = np.empty(n + 16, dtype=np.int64)
    hv = np.empty(n + 16, dtype=np.int64)
    hn = 0
    ver = np.zeros(n, dtype=np.int64)
    hkey = np.zeros(n, dtype=np.float64)  # key of each value's latest heap entry
    parked = np.zeros(n, dtype=np.bool_)  # its latest entry left the heap while it was pinned
    k = 0
    mem = 0
    peak = 0
    total = 0.0
    clock = 0
    used = 0
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
            if stop[0] != 0:
                return STATUS_STOPPED, out_op[:k], out_node[:k], peak, total, used
            need = bytes_[x]
            while mem + need > budget:
                if not allow_evict:
                    return STATUS_OVER_BUDGET, out_op[:k], out_node[:k], peak, total, used
                best = -1
                best_score = np.inf
                if static:
                    rekeys = 0
                    while hn > 0:
                        used += 1
                        hn = _heap_pop(hk, hu, hv, hn)
                        u = hu[hn]
                        if hv[hn] != ver[u] or not resident[u]:
                            continue  # stale
                        if lock[u] > 0:
                            # pinned: out of the heap until its last pin goes (then pushed back with the same
                            # key and version), instead of popped and pushed back at every eviction meanwhile
                            parked[u] = True
                            continue
                        if belady and rekeys < BELADY_REKEYS and hn > 0:
                            # its key may be stale (ancestors evicted, a reader evicted, time passed): a fresh
                            # one; back into the heap when the next entry now comes first
                            rekeys += 1
                            used += 1
                            stamp += 1
                            key = _belady_key(u, t, cost, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, next_ptr,
                                              n, resident, evicted, remaining, support, stamp, mark, work, big,
                                              last_use, weights, noise)
                            if key > hk[0]:
                                ver[u] += 1
                                hkey[u] = key
                                hk, hu, hv, hn = _heap_push(hk, hu, hv, hn, key, u, ver[u])
                                continue
                        best = u
                        break
                else:
                    sampled = n_res > scan_all
                    n_try = sample if sampled else n_res
                    used += n_try
                    for q in range(n_try):
                        if sampled:
                            u = res_list[int(np.random.random() * n_res)]
                        else:
                            u = res_list[q]
                        if lock[u] > 0 or bytes_[u] == 0:
                            continue
                        stamp += 1
                        s = _score(u, t, clock, score_kind, bytes_, cost, pred_ptr, pred_idx, succ_ptr, succ_idx,
                                   n, resident, evicted, parent, cls_cost, roots, stamp, mark, work, big, last_use,
                                   last_access, next_ptr, support, remaining)
                        s = s * weights[u] * noise[u]
                        if s < best_score or (s == best_score and u < best):
                            best_score = s
                            best = u
                    if best < 0 and sampled:  # every sampled value was pinned: look at all of them
                        used += n_res
                        for q in range(n_res):
                            u = res_list[q]
                            if lock[u] > 0 or bytes_[u] == 0:
                                continue
                            stamp += 1
                            s = _score(u, t, clock, score_kind, bytes_, cost, pred_ptr, pred_idx, succ_ptr,
                                       succ_idx, n, resident, evicted, parent, cls_cost, roots, stamp, mark, work,
                                       big, last_use, last_access, next_ptr, support, remaining)
                            s = s * weights[u] * noise[u]
                            if s < best_score or (s == best_score and u < best):
                                best_score = s
                                best = u
                if used >= work_budget:
                    return STATUS_WORK_SPENT, out_op[:k], out_node[:k], peak, total, used
                if best < 0:
                    return STATUS_NO_VICTIM, out_op[:k], out_node[:k], peak, total, used
                resident[best] = False
                n_res = _res_remove(res_list, res_at, n_res, best)
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
                out_op, out_node, k = _emit(out_op, out_node, k, 1, best)
            # compute x
            out_op, out_node, k = _emit(out_op, out_node, k, 0, x)
            used += 3  # a step's own bookkeeping costs about three scored candidates
            if k > max_steps or (pace > 0.0 and k > 1000.0 + pace * (t + 1)):
                return STATUS_STEP_LIMIT, out_op[:k], out_node[:k], peak, total, used
            if used >= work_budget:
                return STATUS_WORK_SPENT, out_op[:k], out_node[:k], peak, total, used
            resident[x] = True
            n_res = _res_add(res_list, res_at, n_res, x)
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
            if static and bytes_[x] > 0:
                ver[x] += 1
                if belady:
                    used += 1
                    stamp += 1
                    key = _belady_key(x, t, cost, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, next_ptr, n,
                                      resident, evicted, remaining, support, stamp, mark, work, big, last_use,
                                      weights, noise)
                else:
                    key = (float(clock + 1) if score_kind == SCORE_LRU else 1.0 / bytes_[x]) * weights[x] * noise[x]
                hkey[x] = key
                parked[x] = False
                hk, hu, hv, hn = _heap_push(hk, hu, hv, hn, key, x, ver[x])
            sp -= 1
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                last_access[u] = clock
                if score_kind == SCORE_LRU and bytes_[u] > 0:
                    ver[u] += 1
                    hkey[u] = float(clock + 1) * weights[u] * noise[u]
                    parked[u] = False
                    hk, hu, hv, hn = _heap_push(hk, hu, hv, hn, hkey[u], u, ver[u])
                lock[u] -= 1
                if belady and sp == 0 and bytes_[u] > 0 and resident[u] and not (
                        remaining[u] == 1 and support[u] == 0 and lock[u] == 0 and done[u]):
                    # target t read it (and it is not freed just below): keyed again by its next use after t
                    ver[u] += 1
                    used += 1
                    stamp += 1
                    hkey[u] = _belady_key(u, t + 1, cost, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, next_ptr,
                                          n, resident, evicted, remaining, support, stamp, mark, work, big,
                                          last_use, weights, noise)
                    parked[u] = lock[u] > 0
                    if not parked[u]:
                        hk, hu, hv, hn = _heap_push(hk, hu, hv, hn, hkey[u], u, ver[u])
                elif lock[u] == 0 and parked[u]:
                    parked[u] = False
                    if resident[u]:
                        hk, hu, hv, hn = _heap_push(hk, hu, hv, hn, hkey[u], u, ver[u])
                if sp == 0:
                    remaining[u] -= 1
            if sp == 0:
                done[x] = True
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                if resident[u] and done[u] and remaining[u] == 0 and lock[u] == 0 and support[u] == 0:
                    resident[u] = False
                    n_res = _res_remove(res_list, res_at, n_res, u)
                    mem -= bytes_[u]
                    out_op, out_node, k = _emit(out_op, out_node, k, 1, u)
            if done[x] and remaining[x] == 0 and lock[x] == 0 and support[x] == 0:
                resident[x] = False
                n_res = _res_remove(res_list, res_at, n_res, x)
                mem -= bytes_[x]
                out_op, out_node, k = _emit(out_op, out_node, k, 1, x)
        for j in range(drop_ptr[t], drop_ptr[t + 1]):
            u = drop_idx[j]
            if resident[u] and lock[u] == 0 and remaining[u] > 0:
                resident[u] = False
                n_res = _res_remove(res_list, res_at, n_res, u)
                mem -= bytes_[u]
                evicted[u] = True
                for j2 in range(pred_ptr[u], pred_ptr[u + 1]):
                    support[pred_idx[j2]] += 1
                out_op, out_node, k = _emit(out_op, out_node, k, 1, u)
    return STATUS_OK, out_op[:k], out_node[:k], peak, total, used
