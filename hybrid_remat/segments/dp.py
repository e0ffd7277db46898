"""The chain DP's kernel: options per stage, in forward order, of least
total extra time under the prefix-memory rows (:func:`~.solver.chain_dp`).

State ``p`` is a bucket of the held prefix (``capacity / H`` bytes wide);
each bucket keeps the cheapest partial choice that reaches it *with its
exact prefix*, so the rows ``prefix + inside_k <= capacity`` are checked
on exact sums, never on rounded ones.  (Rounding each stage's held bytes up
to a bucket, as before, overcounted by up to one bucket per stage: with
thousands of stages, a U-Net at 100k nodes, the DP found nothing that fit.)
Buckets only merge partial choices of nearly equal prefix: the result fits
the measured figures exactly and is optimal when every bucket holds one
prefix value (integer figures and ``capacity / H`` = 1, the tests' case).

Examples
--------
>>> import numpy as np
>>> held = np.array([[2.0, 1.0], [2.0, 1.0]]); inside = held + 1; extra = np.array([[0.0, 1.0], [0.0, 2.0]])
>>> chain_dp_kernel(held, inside, extra, 4.0, 4).tolist()      # the cheaper stage drops its value
[1, 0]
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["chain_dp_kernel"]


@njit(cache=True)
def chain_dp_kernel(held, inside, extra, capacity, H):
    """The options (``int64`` array, one per stage) of least total
    ``extra`` with ``prefix_k + inside[k, o_k] <= capacity`` and the final
    prefix at most ``capacity`` (``prefix_k``: the sum of ``max(held, 0)``
    of the stages before ``k``), over ``H + 1`` prefix buckets (module
    docstring); an empty array when none fits.  ``inf`` in ``extra`` marks
    an option a stage lacks."""
    S, n_opt = held.shape
    unit = capacity / H
    inf = np.inf
    f_cost = np.full(H + 1, inf)
    f_ex = np.zeros(H + 1)
    f_cost[0] = 0.0
    back_o = np.full((S, H + 1), -1, dtype=np.int16)
    back_p = np.zeros((S, H + 1), dtype=np.int32)
    for s in range(S):
        g_cost = np.full(H + 1, inf)
        g_ex = np.zeros(H + 1)
        any_ok = False
        for p in range(H + 1):
            c = f_cost[p]
            if c == inf:
                continue
            e = f_ex[p]
            for o in range(n_opt):
                x = extra[s, o]
                if not np.isfinite(x) or not np.isfinite(held[s, o]):
                    continue
                if e + inside[s, o] > capacity:
                    continue
                ne = e + max(held[s, o], 0.0)
                if ne > capacity:
                    continue
                b = int(ne / unit)
                if b > H:
                    b = H
                nc = c + x
                if nc < g_cost[b] or (nc == g_cost[b] and ne < g_ex[b]):
                    g_cost[b] = nc
                    g_ex[b] = ne
                    back_o[s, b] = o
                    back_p[s, b] = p
                    any_ok = True
        if not any_ok:
            return np.empty(0, dtype=np.int64)
        f_cost = g_cost
        f_ex = g_ex
    end = 0
    for p in range(H + 1):
        if f_cost[p] < f_cost[end]:
            end = p
    choice = np.zeros(S, dtype=np.int64)
    for s in range(S - 1, -1, -1):
        choice[s] = back_o[s, end]
        end = back_p[s, end]
    return choice
