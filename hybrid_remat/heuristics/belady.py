"""The ``belady`` eviction run in a kernel of its own, for speed.

:func:`belady_kernel` computes step for step what
:func:`~hybrid_remat.heuristics.executor.execute_kernel` computes with
``score_kind=SCORE_BELADY`` and eviction allowed (the same steps, peak, cost
and work units; ``tests/test_heur_belady_kernel.py`` compares them on every
family), without the bookkeeping the other scores need (the resident list,
the union-find classes, the access clock) and with no helper function in its
loops: in Numba every array passed to a function, inlined or not, is
counted up and down again (atomic ``NRT_incref`` / ``NRT_decref``); those
took 40 % of a ``belady`` run's samples under ``perf`` at 100k nodes
(random layered, 50 %), spent mostly in the next-use-and-closure key
(about twenty arrays per key, one key per edge read).  Here the key, the
heap's push and pop and the step output are written out where they are
used.

Stopping.  The kernel reads ``stop[0]`` (a one-element ``uint8`` array) at
every computation and returns :data:`~hybrid_remat.heuristics.executor.STATUS_STOPPED`
with the sequence so far once it is non-zero: a caller sets it from another
thread at its deadline (the kernel releases the GIL;
:class:`~hybrid_remat.heuristics.common.WorkMeter`), so a run ends at its
deadline on a loaded machine too, whatever the work budget says.

Examples
--------
>>> import numpy as np
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.heuristics.common import GraphArrays, empty_drop
>>> from hybrid_remat.problem import Problem
>>> a = GraphArrays.from_problem(Problem.single(random_layered(200, seed=1), "80%"))
>>> dptr, didx = empty_drop(a.n)
>>> stop = np.zeros(1, dtype=np.uint8)
>>> args = (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx,
...         np.ones(a.n), 0, 10 * a.n, np.int64(1 << 62))
>>> status, op, node, peak, cost, used = belady_kernel(*args, stop)
>>> int(status), bool(peak <= a.budget)
(0, True)
>>> stop[0] = 1                      # set before the call: it returns at once, nothing computed
>>> status, op, node, peak, cost, used = belady_kernel(*args, stop)
>>> int(status), len(op)
(5, 0)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .executor import (
    BELADY_CAP,
    BELADY_REKEYS,
    STATUS_NO_VICTIM,
    STATUS_OK,
    STATUS_STEP_LIMIT,
    STATUS_STOPPED,
    STATUS_WORK_SPENT,
)

__all__ = ["belady_kernel", "MAX_STEPS_PER_NODE", "HEAP_SLOTS"]

#: ``max_steps`` is taken as at most ``MAX_STEPS_PER_NODE n + 1000`` (the output is allocated once, at that size)
MAX_STEPS_PER_NODE = 64
#: heap slots per node; a full heap drops its stale entries (:func:`_compact`)
HEAP_SLOTS = 2


@njit(cache=True)
def _compact(hk, hu, hv, hn, ver, resident):
    """Drop the heap's stale entries (an older version, or a value no longer
    resident) and restore the heap order in place; the new size.  The live
    entries, at most one per value, pop in the same order as before."""
    m = 0
    for i in range(hn):
        u = hu[i]
        if hv[i] == ver[u] and resident[u]:
            hk[m], hu[m], hv[m] = hk[i], u, hv[i]
            m += 1
    for s in range(m // 2 - 1, -1, -1):
        lk, lu, lv = hk[s], hu[s], hv[s]
        i = s
        while True:
            c = 2 * i + 1
            if c >= m:
                break
            if c + 1 < m and (hk[c + 1] < hk[c] or (hk[c + 1] == hk[c] and hu[c + 1] < hu[c])):
                c += 1
            if not (hk[c] < lk or (hk[c] == lk and hu[c] < lu)):
                break
            hk[i], hu[i], hv[i] = hk[c], hu[c], hv[c]
            i = c
        hk[i], hu[i], hv[i] = lk, lu, lv
    return m


@njit(cache=True, nogil=True)
def belady_kernel(bytes_, cost, pred_ptr, pred_idx, succ_ptr, succ_idx, budget, drop_ptr, drop_idx, weights,
                  seed, max_steps, work_budget, stop):
    """``execute_kernel(..., score_kind=SCORE_BELADY, allow_evict=True, ...)`` (same arguments but the score, the
    eviction switch and the sampling sizes), plus ``stop`` (``uint8 (1,)``): non-zero makes it return
    ``STATUS_STOPPED`` at its next computation.

    Returns
    -------
    status, op (int8), node (int64), peak (int64), total_cost (float64), used (int64)
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
    last_use = np.arange(n)
    for v in range(n):
        remaining[v] = succ_ptr[v + 1] - succ_ptr[v]
        if remaining[v] > 0:
            last_use[v] = succ_idx[succ_ptr[v + 1] - 1]
    next_ptr = succ_ptr[:n].copy()
    stack = np.empty(n + 1, dtype=np.int64)
    mark = np.zeros(n, dtype=np.int64)
    work = np.empty(n + 1, dtype=np.int64)
    stamp = 0
    big = 1e3 * (cost.sum() + 1.0)
    far = 2 * n + 1
    max_steps = min(max_steps, MAX_STEPS_PER_NODE * n + 1000)
    # no array is ever replaced (a replaced one is counted up and down at every turn of the loops around it): the
    # output holds every step (at most max_steps up to a computation, then at most n frees and evictions before
    # the next); the heap, its live entries (at most one per value) after a compaction
    out_op = np.empty(max_steps + n + 16, dtype=np.int8)
    out_node = np.empty(max_steps + n + 16, dtype=np.int64)
    pace = (max_steps - 1000) / n if max_steps > 1000 and n > 0 else -1.0
    hk = np.empty(HEAP_SLOTS * n + 1024, dtype=np.float64)
    hu = np.empty(HEAP_SLOTS * n + 1024, dtype=np.int64)
    hv = np.empty(HEAP_SLOTS * n + 1024, dtype=np.int64)
    hn = 0
    ver = np.zeros(n, dtype=np.int64)
    hkey = np.zeros(n, dtype=np.float64)  # key of each value's latest heap entry
    parked = np.zeros(n, dtype=np.bool_)  # its latest entry left the heap while it was pinned
    k = 0
    mem = 0
    peak = 0
    total = 0.0
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
                if not resident[pred_idx[j]]:
                    missing = pred_idx[j]
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
                best = -1
                rekeys = 0
                while hn > 0:
                    used += 1
                    # pop the smallest entry (moved to index hn)
                    hn -= 1
                    lk, lu, lv = hk[hn], hu[hn], hv[hn]
                    hk[hn], hu[hn], hv[hn] = hk[0], hu[0], hv[0]
                    i = 0
                    while True:
                        c = 2 * i + 1
                        if c >= hn:
                            break
                        if c + 1 < hn and (hk[c + 1] < hk[c] or (hk[c + 1] == hk[c] and hu[c + 1] < hu[c])):
                            c += 1
                        if not (hk[c] < lk or (hk[c] == lk and hu[c] < lu)):
                            break
                        hk[i], hu[i], hv[i] = hk[c], hu[c], hv[c]
                        i = c
                    if hn > 0:
                        hk[i], hu[i], hv[i] = lk, lu, lv
                    u = hu[hn]
                    if hv[hn] != ver[u] or not resident[u]:
                        continue  # stale
                    if lock[u] > 0:
                        parked[u] = True  # pinned: back with the same key when its last pin goes
                        continue
                    if rekeys < BELADY_REKEYS and hn > 0:
                        rekeys += 1
                        used += 1
                        stamp += 1
                        # ---- key of u at target t (as below)
                        p = next_ptr[u]
                        end = succ_ptr[u + 1]
                        while p < end and succ_idx[p] < t:
                            p += 1
                        next_ptr[u] = p
                        dist = succ_idx[p] - t + 1 if p < end else far
                        if support[u] > 0:
                            for j in range(succ_ptr[u], succ_ptr[u + 1]):
                                w = succ_idx[j]
                                if evicted[w] and remaining[w] > 0:
                                    p = next_ptr[w]
                                    end = succ_ptr[w + 1]
                                    while p < end and succ_idx[p] < t:
                                        p += 1
                                    next_ptr[w] = p
                                    dw = succ_idx[p] - t + 1 if p < end else far
                                    if dw < dist:
                                        dist = dw
                        horizon = t + dist - 1
                        cc = cost[u]
                        work[0] = u
                        top = 1
                        count = 0
                        while top > 0:
                            top -= 1
                            y = work[top]
                            for j in range(pred_ptr[y], pred_ptr[y + 1]):
                                w = pred_idx[j]
                                if mark[w] == stamp or (resident[w] and last_use[w] >= horizon):
                                    continue
                                mark[w] = stamp
                                cc += cost[w]
                                count += 1
                                if count > BELADY_CAP:
                                    break
                                work[top] = w
                                top += 1
                            if count > BELADY_CAP:
                                cc = big + cc
                                break
                        key = cc / (bytes_[u] * float(dist)) * weights[u] * noise[u]
                        # ----
                        if key > hk[0]:
                            ver[u] += 1
                            hkey[u] = key
                            # ---- push (key, u, ver[u])
                            if hn >= hk.shape[0]:
                                hn = _compact(hk, hu, hv, hn, ver, resident)
                            i = hn
                            while i > 0:
                                par = (i - 1) // 2
                                if not (key < hk[par] or (key == hk[par] and u < hu[par])):
                                    break
                                hk[i], hu[i], hv[i] = hk[par], hu[par], hv[par]
                                i = par
                            hk[i], hu[i], hv[i] = key, u, ver[u]
                            hn += 1
                            # ----
                            continue
                    best = u
                    break
                if used >= work_budget:
                    return STATUS_WORK_SPENT, out_op[:k], out_node[:k], peak, total, used
                if best < 0:
                    return STATUS_NO_VICTIM, out_op[:k], out_node[:k], peak, total, used
                resident[best] = False
                mem -= bytes_[best]
                evicted[best] = True
                for j in range(pred_ptr[best], pred_ptr[best + 1]):
                    support[pred_idx[j]] += 1
                out_op[k] = 1
                out_node[k] = best
                k += 1
            # compute x
            out_op[k] = 0
            out_node[k] = x
            k += 1
            used += 3
            if k > max_steps or (pace > 0.0 and k > 1000.0 + pace * (t + 1)):
                return STATUS_STEP_LIMIT, out_op[:k], out_node[:k], peak, total, used
            if used >= work_budget:
                return STATUS_WORK_SPENT, out_op[:k], out_node[:k], peak, total, used
            resident[x] = True
            mem += need
            if mem > peak:
                peak = mem
            total += cost[x]
            if evicted[x]:
                evicted[x] = False
                for j in range(pred_ptr[x], pred_ptr[x + 1]):
                    support[pred_idx[j]] -= 1
            sp -= 1
            # x (when it has bytes) is keyed at t, then each value target t read and keeps, at t + 1; a value whose
            # last pin went is pushed back with its key
            jr = pred_ptr[x] - 1 if bytes_[x] > 0 else pred_ptr[x]
            while jr < pred_ptr[x + 1]:
                is_x = jr < pred_ptr[x]
                mode = 0  # 1: a fresh key, then pushed; 2: pushed with its kept key
                tt = t
                if is_x:
                    u = x
                    ver[x] += 1
                    mode = 1
                else:
                    u = pred_idx[jr]
                    lock[u] -= 1
                    if sp == 0 and bytes_[u] > 0 and resident[u] and not (
                            remaining[u] == 1 and support[u] == 0 and lock[u] == 0 and done[u]):
                        ver[u] += 1
                        tt = t + 1
                        mode = 1
                    elif lock[u] == 0 and parked[u]:
                        parked[u] = False
                        if resident[u]:
                            mode = 2
                jr += 1
                if mode == 1:
                    used += 1
                    stamp += 1
                    # ---- key of u at target tt
                    p = next_ptr[u]
                    end = succ_ptr[u + 1]
                    while p < end and succ_idx[p] < tt:
                        p += 1
                    next_ptr[u] = p
                    dist = succ_idx[p] - tt + 1 if p < end else far
                    if support[u] > 0:
                        for j in range(succ_ptr[u], succ_ptr[u + 1]):
                            w = succ_idx[j]
                            if evicted[w] and remaining[w] > 0:
                                p = next_ptr[w]
                                end = succ_ptr[w + 1]
                                while p < end and succ_idx[p] < tt:
                                    p += 1
                                next_ptr[w] = p
                                dw = succ_idx[p] - tt + 1 if p < end else far
                                if dw < dist:
                                    dist = dw
                    horizon = tt + dist - 1
                    cc = cost[u]
                    work[0] = u
                    top = 1
                    count = 0
                    while top > 0:
                        top -= 1
                        y = work[top]
                        for j in range(pred_ptr[y], pred_ptr[y + 1]):
                            w = pred_idx[j]
                            if mark[w] == stamp or (resident[w] and last_use[w] >= horizon):
                                continue
                            mark[w] = stamp
                            cc += cost[w]
                            count += 1
                            if count > BELADY_CAP:
                                break
                            work[top] = w
                            top += 1
                        if count > BELADY_CAP:
                            cc = big + cc
                            break
                    hkey[u] = cc / (bytes_[u] * float(dist)) * weights[u] * noise[u]
                    # ----
                    parked[u] = False if is_x else lock[u] > 0
                    if parked[u]:
                        mode = 0
                if mode != 0:
                    key = hkey[u]
                    # ---- push (key, u, ver[u])
                    if hn >= hk.shape[0]:
                        hn = _compact(hk, hu, hv, hn, ver, resident)
                    i = hn
                    while i > 0:
                        par = (i - 1) // 2
                        if not (key < hk[par] or (key == hk[par] and u < hu[par])):
                            break
                        hk[i], hu[i], hv[i] = hk[par], hu[par], hv[par]
                        i = par
                    hk[i], hu[i], hv[i] = key, u, ver[u]
                    hn += 1
                    # ----
                if not is_x and sp == 0:
                    remaining[u] -= 1
            if sp == 0:
                done[x] = True
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                if resident[u] and done[u] and remaining[u] == 0 and lock[u] == 0 and support[u] == 0:
                    resident[u] = False
                    mem -= bytes_[u]
                    out_op[k] = 1
                    out_node[k] = u
                    k += 1
            if done[x] and remaining[x] == 0 and lock[x] == 0 and support[x] == 0:
                resident[x] = False
                mem -= bytes_[x]
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
                out_op[k] = 1
                out_node[k] = u
                k += 1
    return STATUS_OK, out_op[:k], out_node[:k], peak, total, used
