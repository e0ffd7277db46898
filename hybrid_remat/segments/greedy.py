"""A fast heuristic menu for one stage: drop held values one at a time,
each time the one that frees the most bytes per second of the time its
drop *adds* (its own recomputation and that of its inputs not held and not
recomputed already), in the keep-or-recompute-once class of
:mod:`hybrid_remat.blocks.staircase`'s closure model.

The ratio greedy of :func:`~.menus.greedy_menu` ranks each value by its own
cost once; dropping a value whose inputs are dropped already costs their
recomputation too, which that ranking ignores.  Every point this kernel
returns is a held set with its exact extra time in the class (the same sum
as :func:`~.menus._recomputed`), so it is a feasible point of the closure
model (never a bound); the plan built from it is checked by the simulator.

Examples
--------
>>> import numpy as np
>>> # a -> b -> c, all needed; b is big and cheap: dropped first
>>> ptr = np.array([0, 0, 1, 2]); idx = np.array([0, 1])
>>> needed = np.ones(3, dtype=bool); fixed = np.zeros(3, dtype=bool)
>>> order, held, extra = marginal_drops(ptr, idx, needed, fixed, np.array([4.0, 1.0, 2.0]), np.array([1, 8, 1]))
>>> order.tolist(), held.tolist(), extra.tolist()
([1, 2, 0], [10, 2, 1, 0], [0.0, 1.0, 3.0, 7.0])
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["marginal_drops", "marginal_front"]


@njit(cache=True)
def marginal_drops(pred_ptr, pred_idx, needed, fixed, cost, size):
    """``(order, held, extra)``: the values dropped in turn (``int64``) and
    the held bytes / extra time before the first drop and after each
    (module docstring).  Candidates: needed values not fixed; values of no
    size are never dropped (they free nothing)."""
    k = needed.shape[0]
    x = needed | fixed
    r = np.zeros(k, dtype=np.bool_)
    stamp = np.zeros(k, dtype=np.int64)
    stack = np.empty(k, dtype=np.int64)
    order = np.empty(k, dtype=np.int64)
    held = np.empty(k + 1, dtype=np.int64)
    extra = np.empty(k + 1, dtype=np.float64)
    h = 0
    for v in range(k):
        if x[v]:
            h += size[v]
    held[0] = h
    extra[0] = 0.0
    e = 0.0
    tick = 0
    n = 0
    while True:
        best = -1
        best_score = -1.0
        best_add = 0.0
        for c in range(k):
            if not x[c] or fixed[c] or not needed[c] or size[c] <= 0:
                continue
            tick += 1
            add = cost[c]
            stamp[c] = tick
            top = 0
            stack[top] = c
            top += 1
            while top > 0:
                top -= 1
                v = stack[top]
                for q in range(pred_ptr[v], pred_ptr[v + 1]):
                    j = pred_idx[q]
                    if x[j] or r[j] or stamp[j] == tick:
                        continue
                    stamp[j] = tick
                    add += cost[j]
                    stack[top] = j
                    top += 1
            score = np.inf if add <= 0.0 else size[c] / add   # a free drop first
            if score > best_score:
                best_score = score
                best = c
                best_add = add
        if best < 0:
            break
        x[best] = False
        r[best] = True
        top = 0
        stack[top] = best
        top += 1
        while top > 0:
            top -= 1
            v = stack[top]
            for q in range(pred_ptr[v], pred_ptr[v + 1]):
                j = pred_idx[q]
                if x[j] or r[j]:
                    continue
                r[j] = True
                stack[top] = j
                top += 1
        h -= size[best]
        e += best_add
        order[n] = best
        n += 1
        held[n] = h
        extra[n] = e
    return order[:n], held[:n + 1], extra[:n + 1]


def marginal_front(preds, needed, fixed, cost, size, *, n_options: int = 16) -> list:
    """``[(held, extra, x)]``: at most ``n_options`` points of the drop
    sequence (:func:`marginal_drops`), spread evenly over its held bytes."""
    k = len(preds)
    ptr = np.zeros(k + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(p) for p in preds])
    idx = np.array([j for p in preds for j in p], dtype=np.int64)
    needed = np.asarray(needed, dtype=bool)
    fixed = np.asarray(fixed, dtype=bool)
    order, held, extra = marginal_drops(ptr, idx, needed, fixed, np.asarray(cost, dtype=np.float64),
                                        np.asarray(size, dtype=np.int64))
    targets = np.linspace(held[0], held[-1], max(2, n_options))
    picks = np.unique(np.searchsorted(-held, -targets, side="left").clip(0, held.size - 1))
    x0 = needed | fixed
    out = []
    for i in picks.tolist():
        x = x0.copy()
        x[order[:i]] = False
        out.append((int(held[i]), float(extra[i]), x))
    return out
