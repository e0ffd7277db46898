"""The Numba kernel of memory-aware HEFT (see :mod:`hybrid_remat.hetero.heft`).

The kernel's data travel in four small records (named tuples of numpy
arrays and scalars, :mod:`hybrid_remat.hetero.heft_state`): the graph
(``G``), the devices (``M``), the variant (``P``) and the state (``S``), so
each helper takes a few arguments.

The helpers allocate nothing and are compiled with ``_nrt=False`` (Numba's
flag for code without reference counting): passing a record of arrays to a
reference-counted function costs an atomic increment and decrement per
array per call, which made the kernel several times slower than the
single-function version it replaces; the kernel itself (which allocates the
state) keeps reference counting.

Work
----
One unit of work is one node placed, one step emitted (a computation,
recomputation, copy or free) or one eviction candidate scored.  Eviction
scans the resident values of the device, or ``scan`` of them drawn at
random (seeded) when more are resident, so a node costs ``O(scan x
degree)`` and the kernel is near-linear in the graph size.  The kernel
stops with :data:`ST_WORK` once it has spent its work budget.

Examples
--------
>>> import numpy as np
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(4, bytes=10).with_costs({"gpu": [1.0] * 4, "cpu": [5.0] * 4})
>>> p = Problem(g, [Device("gpu", "gpu", 20), Device("cpu", "cpu", 100)],
...             [Link("gpu", "cpu", 10.0), Link("cpu", "gpu", 10.0)])
>>> status, aux, k, ops, nodes, devs, dsts, work = heft_kernel(
...     graph_record(g), machine_record(p), params_record(MODE_SERIAL), np.arange(4), 64, 10**6)
>>> int(status), int(k), int(work)
(0, 8, 12)
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.core import cpu as _numba_cpu

from .heft_state import (
    K_BUDGET,
    K_STEPS,
    K_WORK,
    MODE_MAKESPAN,
    MODE_SERIAL,
    SCAN,
    SCORE_NEXT_USE,
    SCORE_STALENESS,
    ST_CAPACITY,
    ST_NO_DEVICE,
    ST_OK,
    ST_STUCK,
    ST_WORK,
    HeftGraph,
    HeftMachine,
    HeftParams,
    HeftState,
    drop,
    emit,
    graph_record,
    machine_record,
    new_state,
    params_record,
    place,
    rand,
    resident_anywhere,
)

#: ``_nrt=False`` is a private Numba option: use it only where this Numba still has it (else plain njit)
_LEAN = {"_nrt": False} if hasattr(_numba_cpu.CPUTargetOptions, "_nrt") else {}

__all__ = [
    "HeftGraph", "HeftMachine", "HeftParams", "HeftState", "heft_kernel", "graph_record", "machine_record",
    "params_record", "MODE_SERIAL", "MODE_MAKESPAN", "SCORE_STALENESS", "SCORE_NEXT_USE", "ST_OK",
    "ST_NO_DEVICE", "ST_CAPACITY", "ST_STUCK", "ST_WORK", "SCAN",
]


# ------------------------------------------------------------ copy / restore
@njit(cache=True, **_LEAN)
def _copy_time(M, s, t, b):
    return M.lat[s, t] + b / M.bw[s, t]


@njit(cache=True, **_LEAN)
def _copy(S, M, G, x, s, t):
    """Copy ``x`` from ``s`` to ``t`` on the ``s -> t`` stream (emitted)."""
    a = S.cstream[s, t]
    if S.ready[s, x] > a:
        a = S.ready[s, x]
    a += _copy_time(M, s, t, G.bytes[x])
    S.cstream[s, t] = a
    S.ready[t, x] = a
    place(S, G, t, x)
    emit(S, 2, x, s, t)


@njit(cache=True, **_LEAN)
def _best_source(S, M, G, u, d):
    """Device holding ``u`` with the cheapest copy to ``d`` (-1: none)."""
    best = -1
    bt = np.inf
    for s in range(S.resident.shape[0]):
        if s != d and S.resident[s, u] and M.bw[s, d] > 0.0:
            c = _copy_time(M, s, d, G.bytes[u])
            if c < bt:
                bt = c
                best = s
    return best


@njit(cache=True, **_LEAN)
def _restore(S, M, G, P, w, d):
    """Cheapest way to get ``w`` back on ``d`` after evicting it:
    ``(cost, target)``; target -1 = drop (recompute or copy back from an
    existing holder), >= 0 = offload to that device first."""
    D = S.resident.shape[0]
    hold = _best_source(S, M, G, w, d)
    if hold >= 0:  # already elsewhere: a copy back is enough
        return _copy_time(M, hold, d, G.bytes[w]), -1
    rc = np.inf
    if M.can_compute[d]:
        rc = M.cost[d, w]
    else:
        for e in range(D):
            if M.can_compute[e] and M.cost[e, w] < rc:
                rc = M.cost[e, w]
    for k in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
        u = G.pred_idx[k]
        if not resident_anywhere(S, u):
            if M.can_compute[d]:
                rc += M.cost[d, u]
            else:
                rc += rc
    best_t = -1
    best = rc
    for t in range(D):
        if t != d and M.bw[d, t] > 0.0 and M.bw[t, d] > 0.0 and M.budget[t] - S.mem[t] >= G.bytes[w]:
            oc = (_copy_time(M, d, t, G.bytes[w]) + _copy_time(M, t, d, G.bytes[w])) * P.offload_weight
            if oc < best:
                best = oc
                best_t = t
    return best, best_t


@njit(cache=True, **_LEAN)
def _next_use(S, G, w):
    nu = 1 << 60
    for k in range(G.succ_ptr[w], G.succ_ptr[w + 1]):
        j = G.succ_idx[k]
        if not S.done[j] and S.pos[j] < nu:
            nu = S.pos[j]
    return nu


# -------------------------------------------------------------- eviction
@njit(cache=True, **_LEAN)
def _pick_victim(S, M, G, P, d):
    """The evictable value on ``d`` with the lowest DTR score (a dead one
    first): ``(victim, score, restore cost, offload target)``; victim -1
    when none.  Scans every resident value of ``d``, or ``P.scan`` drawn
    at random when more are resident; ties go to the lower index."""
    best = -1
    best_score = np.inf
    best_restore = 0.0
    best_t = -1
    dead = -1
    R = S.rcount[d]
    sample = R > P.scan
    tries = P.scan if sample else R
    clock = S.clock[0]
    for i in range(tries):
        w = S.rlist[d, rand(S, R) if sample else i]
        if S.pin[w] > 0 or S.mark[w] or G.bytes[w] <= 0:
            continue
        S.ctr[K_WORK] += 1
        if S.remaining[w] == 0:
            if dead < 0 or w < dead:
                dead = w
            continue
        if dead >= 0:
            continue
        r, t = _restore(S, M, G, P, w, d)
        if P.score_kind == SCORE_STALENESS:
            dist = clock - S.last_use[d, w] + 1.0
        else:
            dist = float(_next_use(S, G, w) - clock) + 1.0
            if dist < 1.0:
                dist = 1.0
        s = r / (G.bytes[w] * dist)
        if s < best_score or (s == best_score and w < best):
            best_score = s
            best = w
            best_restore = r
            best_t = t
    if dead >= 0:
        return dead, -1.0, 0.0, -1
    return best, best_score, best_restore, best_t


@njit(cache=True, **_LEAN)
def _make_room(S, M, G, P, d, need):
    """Evict (offload as copy + free, or drop) victims on ``d`` until
    ``need`` more bytes fit; False when no victim is left."""
    while S.mem[d] + need > M.budget[d]:
        x, sc, r, t = _pick_victim(S, M, G, P, d)
        if x < 0:
            return False
        if t >= 0:
            _copy(S, M, G, x, d, t)
        drop(S, G, d, x)
        emit(S, 1, x, d, -1)
    return True


@njit(cache=True, **_LEAN)
def _eviction_penalty(S, M, G, P, v, d, extra):
    """Restore cost of what ``d`` would evict to fit ``extra`` more bytes
    (a dry run with ``v``'s inputs pinned); ``inf`` when it cannot."""
    if S.mem[d] + extra <= M.budget[d]:
        return 0.0
    for q in range(G.pred_ptr[v], G.pred_ptr[v + 1]):
        S.pin[G.pred_idx[q]] += 1
    freeb = M.budget[d] - S.mem[d]
    nm = 0
    penalty = 0.0
    while freeb < extra:
        w, sc, r, t = _pick_victim(S, M, G, P, d)
        if w < 0:
            penalty = np.inf
            break
        S.mark[w] = True
        S.marked[nm] = w
        nm += 1
        freeb += G.bytes[w]
        penalty += r
    for q in range(nm):
        S.mark[S.marked[q]] = False
    for q in range(G.pred_ptr[v], G.pred_ptr[v + 1]):
        S.pin[G.pred_idx[q]] -= 1
    return penalty


# -------------------------------------------------------- device choice
@njit(cache=True, **_LEAN)
def _device_score(S, M, G, P, v, d):
    """What placing ``v`` on ``d`` costs: the added time (serial mode) or
    the finish time (makespan mode), plus the eviction penalty; ``inf``
    when ``v`` cannot go there."""
    needb = G.bytes[v]
    for q in range(G.pred_ptr[v], G.pred_ptr[v + 1]):
        needb += G.bytes[G.pred_idx[q]]
    if needb > M.budget[d]:
        return np.inf
    D = S.resident.shape[0]
    est = M.cost[d, v]
    extra = G.bytes[v]
    start = S.stream[d]
    for q in range(G.pred_ptr[v], G.pred_ptr[v + 1]):
        u = G.pred_idx[q]
        if S.resident[d, u]:
            if S.ready[d, u] > start:
                start = S.ready[d, u]
            continue
        extra += G.bytes[u]
        s = _best_source(S, M, G, u, d)
        if s >= 0:
            c = _copy_time(M, s, d, G.bytes[u])
            est += c
            a = S.cstream[s, d]
            if S.ready[s, u] > a:
                a = S.ready[s, u]
            if a + c > start:
                start = a + c
        else:
            rc = M.cost[d, u]
            for e in range(D):
                if e != d and M.can_compute[e] and M.bw[e, d] > 0.0:
                    c2 = M.cost[e, u] + _copy_time(M, e, d, G.bytes[u])
                    if c2 < rc:
                        rc = c2
            est += rc
            if S.stream[d] + rc > start:
                start = S.stream[d] + rc
    penalty = _eviction_penalty(S, M, G, P, v, d, extra)
    if P.mode == MODE_SERIAL:
        return est + penalty
    return start + M.cost[d, v] + penalty


@njit(cache=True, **_LEAN)
def _choose_device(S, M, G, P, v):
    best_d = -1
    best_score = np.inf
    for d in range(S.resident.shape[0]):
        if M.can_compute[d]:
            score = _device_score(S, M, G, P, v, d)
            if score < best_score:
                best_score = score
                best_d = d
    return best_d


# ----------------------------------------------------- recomputation set
@njit(cache=True, **_LEAN)
def _sort_prefix(a, m):
    """Sort ``a[:m]`` in place (heapsort: no allocation)."""
    for start in range(m // 2 - 1, -1, -1):
        _sift(a, start, m)
    for end in range(m - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift(a, 0, end)


@njit(cache=True, **_LEAN)
def _sift(a, i, m):
    while True:
        c = 2 * i + 1
        if c >= m:
            return
        if c + 1 < m and a[c + 1] > a[c]:
            c += 1
        if a[i] >= a[c]:
            return
        a[i], a[c] = a[c], a[i]
        i = c


@njit(cache=True, **_LEAN)
def _recompute_set(S, G, v, stamp, need, stack, members):
    """Values ``v`` needs that are resident nowhere, transitively: their
    count, ``members[:count]`` sorted (a topological order)."""
    stack[0] = v
    nst = 1
    nmem = 0
    while nst > 0:
        nst -= 1
        w = stack[nst]
        if w != v:
            members[nmem] = w
            nmem += 1
        for q in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
            u = G.pred_idx[q]
            if need[u] != stamp and not resident_anywhere(S, u):
                need[u] = stamp
                stack[nst] = u
                nst += 1
    _sort_prefix(members, nmem)
    return nmem


@njit(cache=True, **_LEAN)
def _set_bytes(G, members, nmem, seen, stamp):
    """Bytes of the members and all their inputs (each value once): what
    the recomputation set may hold pinned on its device at once."""
    held = 0
    for j in range(nmem):
        w = members[j]
        if seen[w] != stamp:
            seen[w] = stamp
            held += G.bytes[w]
        for q in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
            u = G.pred_idx[q]
            if seen[u] != stamp:
                seen[u] = stamp
                held += G.bytes[u]
    return held


@njit(cache=True, **_LEAN)
def _recompute_device(S, M, G, P, v, d, members, nmem, need, stamp, held):
    """The device that runs the recomputation set: the cheapest (copies of
    its results to ``d`` included) where each member fits with its inputs;
    with ``P.strict`` only devices that can hold the set's ``held`` bytes
    pinned at once qualify, and the largest of those is taken when none is
    cheaper.  ``d`` when none qualifies."""
    rdev = -1
    best_r = np.inf
    roomiest = -1
    for r in range(S.resident.shape[0]):
        if not M.can_compute[r] or (P.strict and held > M.budget[r]):
            continue
        if roomiest < 0 or M.budget[r] > M.budget[roomiest]:
            roomiest = r
        est = 0.0
        ok = True
        for j in range(nmem):
            w = members[j]
            needw = G.bytes[w]
            for q in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
                u = G.pred_idx[q]
                needw += G.bytes[u]
                if need[u] != stamp and not S.resident[r, u]:
                    s2 = _best_source(S, M, G, u, r)
                    if s2 < 0:
                        ok = False
                    else:
                        est += _copy_time(M, s2, r, G.bytes[u])
            if needw > M.budget[r]:
                ok = False
            est += M.cost[r, w]
        if r != d:
            for q in range(G.pred_ptr[v], G.pred_ptr[v + 1]):
                u = G.pred_idx[q]
                if need[u] == stamp:
                    if M.bw[r, d] <= 0.0:
                        ok = False
                    else:
                        est += _copy_time(M, r, d, G.bytes[u])
        if ok and est < best_r:
            best_r = est
            rdev = r
    if rdev < 0:
        rdev = roomiest if P.strict and roomiest >= 0 else d
    return rdev


# ------------------------------------------------------------- execution
@njit(cache=True, **_LEAN)
def _bring_inputs(S, M, G, P, w, dd):
    """Copy ``w``'s inputs that are not on ``dd`` there; the first input
    that cannot come (-1: all came)."""
    for q in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
        u = G.pred_idx[q]
        if S.resident[dd, u]:
            continue
        s = _best_source(S, M, G, u, dd)
        if s < 0 or not _make_room(S, M, G, P, dd, G.bytes[u]):
            return u
        _copy(S, M, G, u, s, dd)
        S.last_use[dd, u] = S.clock[0]
    return -1


@njit(cache=True, **_LEAN)
def _compute(S, M, G, w, dd):
    start = S.stream[dd]
    for q in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
        u = G.pred_idx[q]
        if S.ready[dd, u] > start:
            start = S.ready[dd, u]
        S.last_use[dd, u] = S.clock[0]
    S.stream[dd] = start + M.cost[dd, w]
    S.ready[dd, w] = S.stream[dd]
    place(S, G, dd, w)
    S.last_use[dd, w] = S.clock[0]
    emit(S, 0, w, dd, -1)


@njit(cache=True, **_LEAN)
def _release_inputs(S, G, w, localuse):
    """Unpin ``w``'s inputs whose local uses are over; free the dead ones
    on every device."""
    for q in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
        u = G.pred_idx[q]
        localuse[u] -= 1
        if localuse[u] == 0:
            S.pin[u] -= 1
            if S.remaining[u] == 0:
                for e in range(S.resident.shape[0]):
                    if S.resident[e, u]:
                        drop(S, G, e, u)
                        emit(S, 1, u, e, -1)


@njit(cache=True, **_LEAN)
def _materialize(S, M, G, P, v, d, scratch, stamp):
    """Run ``v``'s recomputation set (on the cheapest device) and then
    ``v`` on ``d``; the node it got stuck on, or -1.  ``stamp`` marks
    this materialization's members in ``need`` (unique per node placed)."""
    need, stack, members, localuse, seen = scratch
    nmem = _recompute_set(S, G, v, stamp, need, stack, members)
    # local uses: how many computations of this materialization read each value
    for j in range(nmem + 1):
        w = v if j == nmem else members[j]
        for q in range(G.pred_ptr[w], G.pred_ptr[w + 1]):
            u = G.pred_idx[q]
            localuse[u] += 1
            if localuse[u] == 1:
                S.pin[u] += 1
    rdev = d
    if nmem > 0:
        held = _set_bytes(G, members, nmem, seen, stamp) if P.strict else 0
        rdev = _recompute_device(S, M, G, P, v, d, members, nmem, need, stamp, held)
    for j in range(nmem + 1):
        w = v if j == nmem else members[j]
        dd = d if j == nmem else rdev
        stuck = _bring_inputs(S, M, G, P, w, dd)
        if stuck >= 0:
            return stuck
        if not _make_room(S, M, G, P, dd, G.bytes[w]):
            return w
        _compute(S, M, G, w, dd)
        if w == v:
            S.done[v] = True
            for q in range(G.pred_ptr[v], G.pred_ptr[v + 1]):
                S.remaining[G.pred_idx[q]] -= 1
        _release_inputs(S, G, w, localuse)
    if S.remaining[v] == 0:
        drop(S, G, d, v)
        emit(S, 1, v, d, -1)
    return -1


# ----------------------------------------------------------------- kernel
@njit(cache=True)
def heft_kernel(G, M, P, order, cap, work_budget):
    """Memory-aware list scheduling; see :mod:`hybrid_remat.hetero.heft`.

    Parameters
    ----------
    G : HeftGraph
    M : HeftMachine
        ``cost`` float64 (D, n) (``inf`` where a device cannot compute),
        ``can_compute`` bool (D), ``budget`` int64 (D), ``bw``/``lat``
        float64 (D, D).
    P : HeftParams
        ``mode`` 0 = serial time, 1 = makespan (earliest finish time);
        ``offload_weight`` multiplies offload round trips when weighing them
        against recomputation; ``score_kind`` 0 = DTR staleness, 1 =
        distance to next use; ``scan`` the eviction scan width; ``seed``;
        ``strict``: run a recomputation set only on a device that can hold
        all its members and their inputs pinned at once (often slower
        sets, but pins no longer fill a small device; the scheduler
        retries a variant that got stuck with it).
    order : int64 (n)
        Topological processing order of first computations.
    cap : int
        Capacity of the step arrays: the kernel stops with
        :data:`ST_CAPACITY` as soon as the plan grows longer.
    work_budget : int
        Work units (nodes placed, steps emitted, eviction candidates
        scored) to spend at most.

    Returns
    -------
    status : int
        :data:`ST_OK`, :data:`ST_NO_DEVICE` (no device can take a node),
        :data:`ST_CAPACITY` (the plan outgrew ``cap``), :data:`ST_STUCK`
        (eviction found nothing to evict) or :data:`ST_WORK` (budget spent).
    aux : int
        The offending node (:data:`ST_NO_DEVICE`, :data:`ST_STUCK`).
    n_steps : int
    op, node, dev, dst : arrays of length ``cap``
    work : int
        Work units spent.
    """
    n = G.bytes.shape[0]
    D = M.cost.shape[0]
    S = new_state(n, D, cap, work_budget, P.seed)
    scratch = (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
               np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    for i in range(n):
        S.pos[order[i]] = i
        S.remaining[i] = G.succ_ptr[i + 1] - G.succ_ptr[i]
    for step in range(n):
        if S.ctr[K_WORK] > S.ctr[K_BUDGET]:
            return ST_WORK, -1, S.ctr[K_STEPS], S.ops, S.nodes, S.devs, S.dsts, S.ctr[K_WORK]
        S.ctr[K_WORK] += 1
        v = order[step]
        S.clock[0] = float(step)
        d = _choose_device(S, M, G, P, v)
        if d < 0:
            return ST_NO_DEVICE, v, S.ctr[K_STEPS], S.ops, S.nodes, S.devs, S.dsts, S.ctr[K_WORK]
        stuck = _materialize(S, M, G, P, v, d, scratch, step + 1)
        if stuck >= 0:
            return ST_STUCK, stuck, S.ctr[K_STEPS], S.ops, S.nodes, S.devs, S.dsts, S.ctr[K_WORK]
        if S.ctr[K_STEPS] > cap:  # a plan this long recomputes a lot: stop here
            return ST_CAPACITY, -1, S.ctr[K_STEPS], S.ops, S.nodes, S.devs, S.dsts, S.ctr[K_WORK]
    k = S.ctr[K_STEPS]
    return ST_OK, -1, k, S.ops, S.nodes, S.devs, S.dsts, S.ctr[K_WORK]
