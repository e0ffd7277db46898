"""The minimal-memory plan of a compute sequence, its memory profile, and
pruning.

A *compute sequence* lists node computations in order (recomputations
allowed).  Its *minimal-memory plan* computes in that order and frees each
value right after its last reader before the node's next computation (or
right away when nothing reads it).  Every single-device planner of the
library ends in this plan: it is what :func:`hybrid_remat.plan.plan_from_order`
builds, what the keep-all peak measures (the sequence ``0..n-1``), and what
the heuristics' sequences are scored by.  The kernels here are the one
implementation:

* :func:`last_uses_kernel`: the position after which each instance is freed
  (:func:`held_last_uses_kernel`: with extra reads, ``holds``);
* :func:`sequence_profile_kernel`: memory after each position's allocation;
* :func:`sequence_peak_kernel` and :func:`sequence_plan_kernel`: the peak,
  and the plan's ``compute``/``free`` steps (:func:`plan_of_ends_kernel`);
* :func:`prune_kernel`: drop recomputations, most expensive first, while
  the peak stays within a budget (each try is an exact peak check, done in
  ``O(degree x log K)`` with a segment tree, so the whole pass is
  near-linear);
* :func:`unread_kernel`: drop recomputations whose value nobody reads
  (repeatedly, as that frees their inputs' readers).

Memory is counted after each allocation, exactly as
:func:`hybrid_remat.simulate.simulate` counts it.  Kernels take numpy arrays
(int64 CSR of predecessors, int64 sizes, float64 costs) and a boolean
``active`` mask (positions that are switched off are ignored).
:func:`drop_recomputations` is the plan-level improver built on them.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> g = chain(3, bytes=1)
>>> plan, peak = minimal_plan(g, [0, 1, 2])
>>> [s.op for s in plan.steps()], peak
(['compute', 'compute', 'free', 'compute', 'free', 'free'], 2)
>>> remove_unread(g, [0, 1, 0, 2])
[0, 1, 2]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import PlanError
from ..limits import UNLIMITED_WORK

__all__ = [
    "last_uses_kernel", "held_last_uses_kernel", "sequence_profile_kernel", "sequence_peak_kernel",
    "sequence_plan_kernel", "plan_of_ends_kernel",
    "prune_kernel", "unread_kernel", "positions_kernel", "check_sequence", "minimal_plan", "sequence_peak", "sequence_of_plan",
    "prune", "remove_unread", "PRUNE_RATE",
]

#: prune work units (one per try and per input of the tried node) per CPU second: 2.2e6-3.4e6 measured at
#: 1k-100k nodes on the repeated llama graphs, so a conservative 1.5e6
PRUNE_RATE = 1.5e6
_NEG = -(1 << 60)  # the value of a switched-off position in the segment tree


# ------------------------------------------------------------------ kernels
@njit(cache=True)
def last_uses_kernel(seq, active, pred_ptr, pred_idx, n):
    """For each active position, the position after which the instance
    computed there is freed (its last reader in the sequence, or itself);
    -1 for inactive positions."""
    return held_last_uses_kernel(seq, active, pred_ptr, pred_idx, n, np.zeros(seq.shape[0] + 1, dtype=np.int64),
                                 np.zeros(0, dtype=np.int64))


@njit(cache=True)
def held_last_uses_kernel(seq, active, pred_ptr, pred_idx, n, hold_ptr, hold_idx):
    """:func:`last_uses_kernel` with extra reads: ``hold_idx[hold_ptr[p]:
    hold_ptr[p + 1]]`` are values that must stay resident up to position
    ``p`` (read there before the node at ``p`` is computed)."""
    K = seq.shape[0]
    end = np.empty(K, dtype=np.int64)
    alive_until = np.full(n, -1, dtype=np.int64)
    for pos in range(K - 1, -1, -1):
        for j in range(hold_ptr[pos], hold_ptr[pos + 1]):
            u = hold_idx[j]
            if alive_until[u] < 0:
                alive_until[u] = pos
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
def sequence_profile_kernel(seq, active, bytes_, pred_ptr, pred_idx):
    """``(end, mem_at, release)``: each instance's last use, the memory right
    after each position's allocation (inactive positions allocate nothing),
    and the bytes freed right after each position."""
    n = bytes_.shape[0]
    K = seq.shape[0]
    end = last_uses_kernel(seq, active, pred_ptr, pred_idx, n)
    release = np.zeros(K, dtype=np.int64)
    for pos in range(K):
        if active[pos]:
            release[end[pos]] += bytes_[seq[pos]]
    mem_at = np.empty(K, dtype=np.int64)
    mem = 0
    for pos in range(K):
        if active[pos]:
            mem += bytes_[seq[pos]]
        mem_at[pos] = mem
        mem -= release[pos]
    return end, mem_at, release


@njit(cache=True)
def sequence_peak_kernel(seq, active, bytes_, pred_ptr, pred_idx):
    """Peak memory of the minimal-memory plan of ``seq[active]``."""
    end, mem_at, release = sequence_profile_kernel(seq, active, bytes_, pred_ptr, pred_idx)
    peak = 0
    for pos in range(seq.shape[0]):
        if active[pos] and mem_at[pos] > peak:
            peak = mem_at[pos]
    return peak


@njit(cache=True)
def sequence_plan_kernel(seq, active, bytes_, pred_ptr, pred_idx):
    """``(op, node, peak)`` of the minimal-memory plan of ``seq[active]``:
    compute in order, free each value right after its last reader (frees
    after one position in node order)."""
    end = last_uses_kernel(seq, active, pred_ptr, pred_idx, bytes_.shape[0])
    return plan_of_ends_kernel(seq, active, end, bytes_)


@njit(cache=True)
def plan_of_ends_kernel(seq, active, end, bytes_):
    """``(op, node, peak)``: compute ``seq[active]`` in order and free each
    instance right after position ``end[pos]`` (frees after one position in
    node order)."""
    K = seq.shape[0]
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
    op = np.empty(m + cnt[K], dtype=np.int8)
    node = np.empty(m + cnt[K], dtype=np.int64)
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
        seg = np.sort(frees[cnt[pos]:cnt[pos + 1]])
        for q in range(seg.shape[0]):
            op[k] = 1
            node[k] = seg[q]
            k += 1
            mem -= bytes_[seg[q]]
    return op, node, peak


@njit(cache=True)
def positions_kernel(seq, active, pred_ptr, pred_idx, n):
    """CSR per node of the positions computing it (``icnt``/``inst``, with
    ``ipos[p]`` the index of ``p`` in its node's row) and of the positions
    reading it (``rcnt``/``rd``), all positions in increasing order."""
    K = seq.shape[0]
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
    ipos = np.empty(K, dtype=np.int64)
    rd = np.empty(rcnt[n], dtype=np.int64)
    for p in range(K):
        y = seq[p]
        inst[ifill[y]] = p
        ipos[p] = ifill[y]
        ifill[y] += 1
        for j in range(pred_ptr[y], pred_ptr[y + 1]):
            u = pred_idx[j]
            rd[rfill[u]] = p
            rfill[u] += 1
    return icnt, inst, ipos, rcnt, rd


@njit(cache=True)
def _st_apply(t, d, size, p, value):
    t[p] += value
    if p < size:
        d[p] += value


@njit(cache=True)
def _st_build(t, d, p):
    while p > 1:
        p >>= 1
        a = t[2 * p]
        b = t[2 * p + 1]
        t[p] = (a if a > b else b) + d[p]


@njit(cache=True)
def _st_add(t, d, size, lo, hi, value):
    """Add ``value`` on positions ``[lo, hi)``; ``t[1]`` stays the maximum."""
    if lo >= hi:
        return
    lo += size
    hi += size
    l0 = lo
    r0 = hi - 1
    while lo < hi:
        if lo & 1:
            _st_apply(t, d, size, lo, value)
            lo += 1
        if hi & 1:
            hi -= 1
            _st_apply(t, d, size, hi, value)
        lo >>= 1
        hi >>= 1
    _st_build(t, d, l0)
    _st_build(t, d, r0)


@njit(cache=True)
def _latest_active_before(rows, lo, hi, p, active):
    """The last entry of the sorted ``rows[lo:hi]`` below ``p`` whose
    position is active (-1: none), and the entries stepped over."""
    k = lo + np.searchsorted(rows[lo:hi], p) - 1
    steps = 0
    while k >= lo and not active[rows[k]]:
        k -= 1
        steps += 1
    return (rows[k] if k >= lo else -1), steps


@njit(cache=True)
def prune_kernel(seq, active, bytes_, cost, pred_ptr, pred_idx, budget, work):
    """Drop recomputations (active non-first occurrences of positive cost)
    from ``seq`` while the peak of ``seq[active]`` stays within ``budget``;
    most expensive first (ties by position), one exact peak check each.

    Dropping position ``p`` of ``v`` lets ``v``'s previous instance live
    until ``p``'s readers are done and ends ``p``'s own reads early; the
    memory profile is updated in a segment tree (range add, global max) and
    rolled back when the peak passes the budget.

    Parameters
    ----------
    work : int
        Work budget: one unit per try and per input of the tried node (and
        per switched-off position skipped in a lookup).  The pass stops when
        it is spent.

    Returns
    -------
    active : bool (K,)
        The mask, modified in place.
    dropped : int
    used : int
        Work units spent (``used >= work``: stopped by the budget).
    """
    n = bytes_.shape[0]
    K = seq.shape[0]
    used = 0
    if K == 0:
        return active, 0, used
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
    if nc == 0:
        return active, 0, used
    cand = cand[:nc]
    key = np.empty(nc, dtype=np.float64)
    for i in range(nc):
        key[i] = -cost[seq[cand[i]]]
    order = np.argsort(key, kind="mergesort")
    end, mem_at, _ = sequence_profile_kernel(seq, active, bytes_, pred_ptr, pred_idx)
    icnt, inst, ipos, rcnt, rd = positions_kernel(seq, active, pred_ptr, pred_idx, n)
    size = 1
    while size < K:
        size *= 2
    t = np.full(2 * size, _NEG, dtype=np.int64)
    d = np.zeros(size, dtype=np.int64)
    for q in range(K):
        t[size + q] = mem_at[q] if active[q] else mem_at[q] + _NEG
    for p in range(size - 1, 0, -1):
        a = t[2 * p]
        b = t[2 * p + 1]
        t[p] = a if a > b else b
    maxdeg = 0
    for v in range(n):
        if pred_ptr[v + 1] - pred_ptr[v] > maxdeg:
            maxdeg = pred_ptr[v + 1] - pred_ptr[v]
    ch_lo = np.empty(maxdeg + 2, dtype=np.int64)   # the range adds of one try, to roll back
    ch_hi = np.empty(maxdeg + 2, dtype=np.int64)
    ch_val = np.empty(maxdeg + 2, dtype=np.int64)
    pe_j = np.empty(maxdeg, dtype=np.int64)        # the inputs' instances whose end moves, and where to
    pe_end = np.empty(maxdeg, dtype=np.int64)
    dropped = 0
    for i in range(nc):
        if used >= work:
            break
        p = cand[order[i]]
        v = seq[p]
        if cost[v] <= 0.0:
            continue
        used += 1 + pred_ptr[v + 1] - pred_ptr[v]
        prev, steps = _latest_active_before(inst, icnt[v], icnt[v + 1], p, active)
        used += steps
        if prev < 0:
            continue
        nch = 0
        npe = 0
        ep = end[p]
        if ep > p and end[prev] + 1 < p:  # v's previous instance now lives until p's readers are done
            ch_lo[nch] = end[prev] + 1
            ch_hi[nch] = p
            ch_val[nch] = bytes_[v]
            nch += 1
        ch_lo[nch] = p          # p allocates nothing any more
        ch_hi[nch] = p + 1
        ch_val[nch] = _NEG
        nch += 1
        for jj in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[jj]
            j, steps = _latest_active_before(inst, icnt[u], icnt[u + 1], p, active)
            used += steps
            if j < 0 or end[j] != p:
                continue
            r, steps = _latest_active_before(rd, rcnt[u], rcnt[u + 1], p, active)
            used += steps
            new_end = r if r > j else j
            pe_j[npe] = j
            pe_end[npe] = new_end
            npe += 1
            ch_lo[nch] = new_end + 1
            ch_hi[nch] = p + 1
            ch_val[nch] = -bytes_[u]
            nch += 1
        for c in range(nch):
            _st_add(t, d, size, ch_lo[c], ch_hi[c], ch_val[c])
        if t[1] <= budget:
            active[p] = False
            dropped += 1
            if ep > p:
                end[prev] = ep
            for c in range(npe):
                end[pe_j[c]] = pe_end[c]
        else:
            for c in range(nch - 1, -1, -1):
                _st_add(t, d, size, ch_lo[c], ch_hi[c], -ch_val[c])
    return active, dropped, used


@njit(cache=True)
def unread_kernel(seq, active, pred_ptr, pred_idx, succ_ptr):
    """Switch off every active recomputation (not a node's first active
    occurrence) whose value nobody reads, of a node that has readers in the
    graph; repeatedly, as that takes reads off its inputs.  Returns
    ``(active, removed)`` (``active`` modified in place)."""
    n = succ_ptr.shape[0] - 1
    K = seq.shape[0]
    off = np.zeros(K + 1, dtype=np.int64)
    for p in range(K):
        v = seq[p]
        off[p + 1] = off[p] + (pred_ptr[v + 1] - pred_ptr[v] if active[p] else 0)
    read_of = np.empty(off[K], dtype=np.int64)   # the instance each read takes
    latest = np.full(n, -1, dtype=np.int64)
    seen = np.zeros(n, dtype=np.bool_)
    first = np.zeros(K, dtype=np.bool_)
    readers = np.zeros(K, dtype=np.int64)
    for p in range(K):
        if not active[p]:
            continue
        v = seq[p]
        k = off[p]
        for jj in range(pred_ptr[v], pred_ptr[v + 1]):
            j = latest[pred_idx[jj]]
            read_of[k] = j
            k += 1
            if j >= 0:
                readers[j] += 1
        latest[v] = p
        first[p] = not seen[v]
        seen[v] = True
    stack = np.empty(K, dtype=np.int64)
    top = 0
    for p in range(K):
        v = seq[p]
        if active[p] and not first[p] and readers[p] == 0 and succ_ptr[v + 1] > succ_ptr[v]:
            stack[top] = p
            top += 1
    removed = 0
    while top > 0:
        top -= 1
        p = stack[top]
        active[p] = False
        removed += 1
        for k in range(off[p], off[p + 1]):
            j = read_of[k]
            if j < 0:
                continue
            readers[j] -= 1
            w = seq[j]
            if readers[j] == 0 and active[j] and not first[j] and succ_ptr[w + 1] > succ_ptr[w]:
                stack[top] = j
                top += 1
    return active, removed


# ------------------------------------------------------------------ wrappers
def check_sequence(seq, n: int) -> np.ndarray:
    """``seq`` as a contiguous int64 array of node indices.

    Raises
    ------
    PlanError
        A node outside ``0..n-1``.
    """
    s = np.ascontiguousarray(seq, dtype=np.int64).reshape(-1)
    if s.size and (s.min() < 0 or s.max() >= n):
        bad = int(s[(s < 0) | (s >= n)][0])
        raise PlanError(f"compute sequence names node {bad}, which is not in the graph (0..{n - 1})")
    return s


def _arrays(graph):
    return (np.ascontiguousarray(graph.bytes, dtype=np.int64), graph.pred_ptr, graph.pred_idx)


def minimal_plan(graph, seq, device: str = "gpu", meta: dict | None = None, *, holds: dict | None = None):
    """``(plan, peak)``: the minimal-memory plan of the compute sequence
    ``seq`` on ``graph`` (anything with ``bytes``, ``pred_ptr``,
    ``pred_idx``), one device named ``device``.

    ``holds`` (``{position: [nodes]}``): extra reads, values that must stay
    resident up to that position of ``seq`` (e.g. a runtime's saved inputs).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> g = chain(3, bytes=1)
    >>> minimal_plan(g, [0, 1, 2])[1], minimal_plan(g, [0, 1, 2], holds={2: [0]})[1]
    (2, 3)
    """
    from .plans import Plan

    b, pp, pi = _arrays(graph)
    s = check_sequence(seq, b.shape[0])
    active = np.ones(s.shape[0], dtype=np.bool_)
    end = held_last_uses_kernel(s, active, pp, pi, b.shape[0], *_holds_csr(holds or {}, s.shape[0], b.shape[0]))
    op, node, peak = plan_of_ends_kernel(s, active, end, b)
    return Plan.single_device(op, node, device, meta), int(peak)


def _holds_csr(holds: dict, K: int, n: int):
    """``{position: [nodes]}`` as a CSR over positions ``0..K-1``."""
    counts = np.zeros(K + 1, dtype=np.int64)
    for pos, us in holds.items():
        if not 0 <= int(pos) < K:
            raise PlanError(f"a hold at position {pos} is outside the sequence (0..{K - 1})")
        counts[int(pos) + 1] += len(us)
    ptr = np.cumsum(counts)
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    for pos, us in holds.items():
        idx[ptr[int(pos)]:ptr[int(pos)] + len(us)] = check_sequence(us, n)
    return ptr, idx


def sequence_peak(graph, seq) -> int:
    """Peak bytes of the minimal-memory plan of ``seq``."""
    b, pp, pi = _arrays(graph)
    s = check_sequence(seq, b.shape[0])
    return int(sequence_peak_kernel(s, np.ones(s.shape[0], dtype=np.bool_), b, pp, pi))


def sequence_of_plan(plan) -> np.ndarray:
    """The compute sequence of a one-device plan without copies.

    Raises
    ------
    PlanError
        Copies or several devices.
    """
    from .plans import OP_COMPUTE, OP_COPY

    if (plan.op == OP_COPY).any() or len(set(plan.device.tolist())) > 1:
        raise PlanError("only one-device plans without copies have a compute sequence")
    return plan.node[plan.op == OP_COMPUTE].copy()


def prune(graph, seq, cost, budget: int, *, work: int = UNLIMITED_WORK) -> tuple[np.ndarray, bool]:
    """``(pruned sequence, budget spent)``: :func:`prune_kernel` on ``seq``."""
    b, pp, pi = _arrays(graph)
    s = check_sequence(seq, b.shape[0])
    active = np.ones(s.shape[0], dtype=np.bool_)
    active, _, used = prune_kernel(s, active, b, np.ascontiguousarray(cost, dtype=np.float64), pp, pi,
                                   np.int64(budget), np.int64(work))
    return s[active], bool(used >= work)


def remove_unread(graph, seq) -> list[int]:
    """Drop computations (not first ones) whose value is never read before
    the node's next computation; repeat until none is left."""
    s = check_sequence(seq, graph.n)
    active, _ = unread_kernel(s, np.ones(s.shape[0], dtype=np.bool_), graph.pred_ptr, graph.pred_idx,
                              graph.succ_ptr)
    return s[active].tolist()
