"""Revolve (Griewank & Walther, binomial checkpointing): closed form and DP.

For a chain of ``l`` steps reversed with ``s`` snapshot slots (the initial
state stored; each step's last forward fused with its adjoint), the minimal
number of forward steps is ``t(l, s) = r*l - beta(s+1, r-1)`` with
``beta(s, r) = C(s+r, s)`` and ``r = min{r : beta(s, r) >= l}``.  The DP
``t(1, s) = 0``, ``t(l, 0) = inf`` (l > 1),
``t(l, s) = min_{1<=j<l} j + t(l-j, s-1) + t(j, s)`` gives the same numbers
and generalizes to per-step costs (:func:`revolve_dp_costs`).

Examples
--------
>>> revolve_closed_form(10, 2), int(revolve_dp(10, 2)[10, 2])
(20, 20)
"""

from __future__ import annotations

from math import comb

import numpy as np
from numba import njit

__all__ = ["beta", "revolve_closed_form", "revolve_dp", "revolve_dp_costs"]


def beta(s: int, r: int) -> int:
    """``C(s + r, s)``: the longest chain reversible with ``s`` snapshots and
    at most ``r`` forward evaluations of each step (0 for negative args)."""
    if s < 0 or r < 0:
        return 0
    return comb(s + r, s)


def revolve_closed_form(length: int, s: int) -> int:
    """Minimal forward steps to reverse ``length`` steps with ``s >= 1`` snapshots."""
    if length <= 1:
        return 0
    if s < 1:
        raise ValueError("revolve needs at least one snapshot for more than one step")
    r = 0
    while beta(s, r) < length:
        r += 1
    return r * length - beta(s + 1, r - 1)


@njit(cache=True)
def revolve_dp(L, S):
    """Table ``t[l, s]`` (0 <= l <= L, 0 <= s <= S) of the revolve DP, unit step costs."""
    t = np.full((L + 1, S + 1), np.inf)
    for s in range(S + 1):
        t[0, s] = 0.0
        if L >= 1:
            t[1, s] = 0.0
    for s in range(1, S + 1):
        for m in range(2, L + 1):
            best = np.inf
            for j in range(1, m):
                v = j + t[m - j, s - 1] + t[j, s]
                if v < best:
                    best = v
            t[m, s] = best
    return t


@njit(cache=True)
def revolve_dp_costs(step_cost, S):
    """Heterogeneous revolve: ``T[a, b, s]`` = minimal forward cost to reverse
    steps ``a..b-1`` (the state before step ``a`` stored) with ``s`` free
    snapshots, when step ``i`` costs ``step_cost[i]``.  Equals
    :func:`revolve_dp` on unit costs."""
    L = step_cost.shape[0]
    pre = np.zeros(L + 1)
    for i in range(L):
        pre[i + 1] = pre[i] + step_cost[i]
    T = np.full((L + 1, L + 1, S + 1), np.inf)
    for a in range(L + 1):
        for s in range(S + 1):
            T[a, a, s] = 0.0
            if a + 1 <= L:
                T[a, a + 1, s] = 0.0
    for s in range(1, S + 1):
        for length in range(2, L + 1):
            for a in range(0, L - length + 1):
                b = a + length
                best = np.inf
                for j in range(a + 1, b):
                    v = (pre[j] - pre[a]) + T[j, b, s - 1] + T[a, j, s]
                    if v < best:
                        best = v
                T[a, b, s] = best
    return T
