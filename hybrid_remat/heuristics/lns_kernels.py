"""The Numba kernel of LNS's window moves (:mod:`.lns_segments`): which
instances around a window of a compute sequence its local problem holds.

Examples
--------
>>> import numpy as np
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.core.sequence import sequence_profile_kernel
>>> g = chain(4, bytes=1)
>>> seq = np.array([0, 1, 2, 3])
>>> end, mem, _ = sequence_profile_kernel(seq, np.ones(4, dtype=np.bool_), g.bytes.astype(np.int64), g.pred_ptr,
...                                       g.pred_idx)
>>> out = window_kernel(seq, end, mem, g.bytes.astype(np.int64), g.pred_ptr, g.pred_idx, 4, 2, 4, 4, 4)
>>> out[2].tolist()  # node 1 (position 1) is read inside the window [2, 4)
[1]
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["window_kernel"]


@njit(cache=True)
def window_kernel(seq, end, mem_at, bytes_, pred_ptr, pred_idx, n, a0, a1, b0, b1):
    """Classify the instances around the window ``[a0, a1) + [b0, b1)`` of
    ``seq`` (the middle ``[a1, b0)`` stays fixed; ``a1 == b0``: one range).

    ``end`` and ``mem_at`` are :func:`~hybrid_remat.core.sequence.sequence_profile_kernel`'s
    outputs for ``seq``.  Returns ``(read_pos, read_ptr, pre, mid, jread,
    jlast, background, base)``: for the ``k``-th window position the positions
    of the instances its node reads, ``read_pos[read_ptr[k]:read_ptr[k + 1]]``;
    the positions before ``a0`` of the instances the local problem holds
    (read in the window, or freed inside it or in the middle); the middle's
    instances still needed from ``b0`` on; the positions before ``a1`` of
    local instances the middle reads and the middle's last reader of each;
    the bytes live across the whole window and not read in it; and the
    memory at each middle position besides the local instances.
    """
    last = np.full(n, -1, dtype=np.int64)
    for p in range(a0):
        last[seq[p]] = p
    W = (a1 - a0) + (b1 - b0)
    read_ptr = np.zeros(W + 1, dtype=np.int64)
    tot = 0
    for q in range(a0, b1):
        if a1 <= q < b0:
            continue
        v = seq[q]
        tot += pred_ptr[v + 1] - pred_ptr[v]
    read_pos = np.empty(tot, dtype=np.int64)
    marked = np.zeros(a0 + 1, dtype=np.bool_)
    jmark = np.zeros(a1 + 1, dtype=np.bool_)
    jlast = np.full(a1 + 1, -1, dtype=np.int64)
    k = 0
    w = 0
    for q in range(a0, b1):
        v = seq[q]
        mid = a1 <= q < b0
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            r = last[pred_idx[j]]
            if mid:
                if 0 <= r < a1:
                    jmark[r] = True
                    jlast[r] = q
                continue
            read_pos[k] = r
            k += 1
            if 0 <= r < a0:
                marked[r] = True
        if not mid:
            w += 1
            read_ptr[w] = k
        last[v] = q
    n_pre = 0
    background = 0
    for p in range(a0):
        if end[p] < a0:
            continue
        if marked[p] or jmark[p] or end[p] < b1:
            n_pre += 1
        else:
            background += bytes_[seq[p]]
    pre = np.empty(n_pre, dtype=np.int64)
    i = 0
    for p in range(a0):
        if end[p] >= a0 and (marked[p] or jmark[p] or end[p] < b1):
            pre[i] = p
            i += 1
    n_mid = 0
    for q in range(a1, b0):
        if end[q] >= b0:
            n_mid += 1
    mid_pos = np.empty(n_mid, dtype=np.int64)
    i = 0
    for q in range(a1, b0):
        if end[q] >= b0:
            mid_pos[i] = q
            i += 1
    n_j = 0
    for p in range(a1):
        if jmark[p]:
            n_j += 1
    jread = np.empty(n_j, dtype=np.int64)
    jlast_out = np.empty(n_j, dtype=np.int64)
    i = 0
    for p in range(a1):
        if jmark[p]:
            jread[i] = p
            jlast_out[i] = jlast[p]
            i += 1
    base = np.zeros(b0 - a1, dtype=np.int64)
    if b0 > a1:
        # the middle's memory besides the local instances (those computed before a1 and live into the middle)
        diff = np.zeros(b0 - a1 + 1, dtype=np.int64)
        for i in range(n_pre):
            p = pre[i]
            if end[p] >= a1:
                diff[0] += bytes_[seq[p]]
                diff[min(end[p], b0 - 1) - a1 + 1] -= bytes_[seq[p]]
        for p in range(a0, a1):
            if end[p] >= a1:
                diff[0] += bytes_[seq[p]]
                diff[min(end[p], b0 - 1) - a1 + 1] -= bytes_[seq[p]]
        local = 0
        for q in range(a1, b0):
            local += diff[q - a1]
            base[q - a1] = mem_at[q] - local
    return read_pos, read_ptr, pre, mid_pos, jread, jlast_out, background, base
