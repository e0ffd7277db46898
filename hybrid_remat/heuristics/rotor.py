"""Rotor-style dynamic programming for heterogeneous training chains
(Beaumont et al. 2019, re-derived for this library's plan semantics).

A *training chain* is what :func:`hybrid_remat.generators.training_graph`
builds from a path: forward nodes ``f_0..f_{L-1}``, a loss ``l`` and
backward nodes ``b_i`` reading ``f_i``, ``f_{i+1}`` (or ``l``) and
``b_{i+1}``.  Index the states ``y_0`` (a virtual empty input), ``y_k =
f_{k-1}`` and ``y_{L+1} = l``, and the gradients ``d_k = b_{k-1}``; ``d_k``
reads ``y_k``, ``y_{k+1}`` and ``d_{k+1}``.

``G(s, t, r, m)`` is the least cost of producing ``d_s`` from ``d_t`` when
``y_s`` is resident, ``y_t`` is resident iff ``r``, and ``m`` bytes are
free for everything else (memory counted after each allocation, as the
simulator does).  For ``t = s + 1`` it computes ``y_t`` (if absent) then
``d_s``; otherwise it advances ``y_s -> y_j`` (freeing the intermediate
states), solves ``G(j, t, r, m - y_s)`` keeping ``y_s`` and then
``G(s, j, 1, m)``; with ``r = 0`` it may also advance to ``y_t`` and solve
``G(s, t, 1, m)``.  Memory is counted in slots (exact when the slot is one
byte); sizes round up, so every schedule found fits.

On training chains :class:`Rotor` returns the optimal plan of this family
(equal to the brute-force optimum in the tests).  On other DAGs it runs the
DP on the linearized forward nodes and uses the states kept during the
first forward pass as a checkpoint set, sweeping the DP budget.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> g = training_graph(nx.path_graph(6, create_using=nx.DiGraph))
>>> p = Problem.single(g, "70%")
>>> plan = Rotor().run(p)
>>> simulate(p, plan).valid
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..budgets import keep_all_peak
from ..interfaces import Heuristic
from ..plan import keep_all_plan
from .checkpoints import forward_nodes, plan_from_checkpoints
from .common import GraphArrays, WorkMeter, finish

__all__ = ["training_chain_layout", "rotor_dp", "rotor_sequence", "Rotor"]

INF = np.inf


def training_chain_layout(graph):
    """``(L, y_nodes, d_nodes)`` if ``graph`` is a training chain (node ids
    of ``y_1..y_{L+1}`` and ``d_1..d_L``), else ``None``."""
    n = graph.n
    if n < 3 or n % 2 == 0:
        return None
    L = (n - 1) // 2
    want = set()
    for i in range(L - 1):
        want.add((i, i + 1))
        want.add((i + 1, 2 * L - i))
        want.add((2 * L - i - 1, 2 * L - i))
    for i in range(L):
        want.add((i, 2 * L - i))
    want.add((L - 1, L))
    want.add((L, L + 1))
    have = {(int(u), int(v)) for u, v in graph.edges().tolist()}
    if have != want:
        return None
    y_nodes = np.arange(L + 1, dtype=np.int64)          # y_k -> node k-1 (y_{L+1} -> loss L)
    d_nodes = np.array([2 * L - (k - 1) for k in range(1, L + 1)], dtype=np.int64)  # d_k -> b_{k-1}
    return L, y_nodes, d_nodes


@njit(cache=True)
def _slots(x, unit):
    return np.int64(np.ceil(x / unit))


@njit(cache=True)
def rotor_dp(ys, yc, ds, dc, M):
    """DP tables for states ``0..N`` (``N = L + 1``).

    Parameters
    ----------
    ys, yc : int64 / float64 (N+1,)
        State sizes (slots) and costs; ``ys[0] = yc[0] = 0``.
    ds, dc : int64 / float64 (N+1,)
        Gradient sizes and costs; ``d_0`` and ``d_N`` have size 0 and
        ``dc[0] = 0``.
    M : int
        Memory in slots.

    Returns
    -------
    cost : float64 (2, N+1, N+1, M+1)
        ``cost[r, s, t, m]``.
    choice : int64 (2, N+1, N+1, M+1)
        Split ``j`` (``t`` means "advance to ``y_t``"), -1 when infeasible.
    """
    N = ys.shape[0] - 1
    pre = np.zeros(N + 1)
    for k in range(1, N + 1):
        pre[k] = pre[k - 1] + yc[k]
    cost = np.full((2, N + 1, N + 1, M + 1), np.inf)
    choice = np.full((2, N + 1, N + 1, M + 1), -1, dtype=np.int64)
    for length in range(1, N + 1):
        for s in range(0, N - length + 1):
            t = s + length
            for r in range(2):
                for m in range(M + 1):
                    if length == 1:
                        # compute y_t if absent, then d_s (nothing for s = 0)
                        ok = True
                        c = 0.0
                        if r == 0:
                            if ys[s] + ds[t] + ys[t] > m:
                                ok = False
                            c += yc[t]
                        if ok and s > 0:
                            if ys[s] + ys[t] + ds[t] + ds[s] > m:
                                ok = False
                            c += dc[s]
                        if ok:
                            cost[r, s, t, m] = c
                            choice[r, s, t, m] = t
                        continue
                    best = np.inf
                    arg = -1
                    hold = ds[t] + (ys[t] if r == 1 else 0)
                    # advance s -> j, peak check incrementally
                    peak = 0
                    for j in range(s + 1, t + 1):
                        # computing y_j from y_{j-1}
                        cur = hold + ys[j] + ys[j - 1] + (ys[s] if j - 1 > s else 0)
                        if cur > peak:
                            peak = cur
                        if peak > m:
                            break
                        adv = pre[j] - pre[s]
                        if j < t:
                            if m - ys[s] < 0:
                                break
                            c1 = cost[r, j, t, m - ys[s]]
                            if c1 == np.inf:
                                continue
                            c2 = cost[1, s, j, m]
                            v = adv + c1 + c2
                        else:
                            if r == 1:
                                break
                            v = adv + cost[1, s, t, m]
                        if v < best:
                            best = v
                            arg = j
                    cost[r, s, t, m] = best
                    choice[r, s, t, m] = arg
    return cost, choice


def rotor_sequence(ys, ds, choice, M):
    """The compute sequence (state/gradient codes: ``k`` for ``y_k``,
    ``-k`` for ``d_k``) of the DP's optimal schedule for ``G(0, N, 0, M)``."""
    N = ys.shape[0] - 1
    out: list[int] = []

    def rec(s, t, r, m):
        j = int(choice[r, s, t, m])
        if j < 0:
            raise RuntimeError("infeasible DP state")
        if t == s + 1:
            if r == 0:
                out.append(t)
            if s > 0:
                out.append(-s)
            return
        out.extend(range(s + 1, j + 1))
        if j < t:
            rec(j, t, r, m - int(ys[s]))
            rec(s, j, 1, m)
        else:
            rec(s, t, 1, m)

    rec(0, N, 0, M)
    return out


def _chain_arrays(L, ybytes, ycost, dbytes, dcost, unit):
    N = L + 1
    ys = np.zeros(N + 1, dtype=np.int64)
    yc = np.zeros(N + 1)
    ds = np.zeros(N + 1, dtype=np.int64)
    dc = np.zeros(N + 1)
    ys[1:] = np.ceil(np.asarray(ybytes, dtype=np.float64) / unit).astype(np.int64)
    yc[1:] = ycost
    ds[1:N] = np.ceil(np.asarray(dbytes, dtype=np.float64) / unit).astype(np.int64)
    dc[1:N] = dcost
    return ys, yc, ds, dc


class Rotor(Heuristic):
    """Optimal (persistent-checkpoint) schedules for training chains; a
    DP-guided checkpoint set on other DAGs.

    Parameters
    ----------
    slots : int
        Memory discretization on chains (exact when the budget is at most
        ``slots`` bytes).
    max_stages : int
        Longest training chain solved exactly (the DP is cubic in it).
    dag_stages, dag_slots : int
        Stages and memory slots of the DP on other DAGs.
    """

    name = "rotor"
    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})
    rank = 4.0

    def __init__(self, *, slots: int = 400, max_stages: int = 60, dag_stages: int = 30, dag_slots: int = 200, name: str | None = None,
                 rank: float | None = None):
        self.slots = int(slots)
        self.max_stages = int(max_stages)
        self.dag_stages = int(dag_stages)
        self.dag_slots = int(dag_slots)
        if name:
            self.name = name
        if rank is not None:
            self.rank = rank

    def run(self, problem, *, seed: int = 0, limits=None):
        """The chain DP's plan on training chains (bounded size: the DP runs
        to its end), else the best checkpoint plan of the budget sweep done
        within ``limits``."""
        g = problem.graph
        if keep_all_peak(g) <= problem.budgets[0]:
            return keep_all_plan(g, problem.primary.name)  # nothing to recompute: optimal
        meter = WorkMeter(limits)
        if meter.spent:
            return None
        a = GraphArrays.from_problem(problem)
        layout = training_chain_layout(g) if g.n <= 2 * self.max_stages + 1 else None
        if layout is not None and layout[0] + 1 <= self.max_stages:
            return self._run_chain(problem, a, layout)
        return self._run_dag(problem, a, meter)

    def _run_chain(self, problem, a, layout):
        L, y_nodes, d_nodes = layout
        B = a.budget
        unit = max(1.0, B / self.slots)
        M = int(B // unit)
        ys, yc, ds, dc = _chain_arrays(L, a.bytes[y_nodes], a.cost[y_nodes], a.bytes[d_nodes], a.cost[d_nodes], unit)
        cost, choice = rotor_dp(ys, yc, ds, dc, M)
        if not np.isfinite(cost[0, 0, L + 1, M]):
            return None
        codes = rotor_sequence(ys, ds, choice, M)
        seq = np.array([y_nodes[c - 1] if c > 0 else d_nodes[-c - 1] for c in codes], dtype=np.int64)
        return finish(problem, a, seq, self.name, dp_cost=float(cost[0, 0, L + 1, M]))

    def _run_dag(self, problem, a, meter):
        g = problem.graph
        fwd = forward_nodes(g)
        if fwd.size < 2 or fwd.size == g.n:
            return None  # no backward pass to reverse
        # group the forward nodes into at most max_stages stages of equal count
        k = int(np.ceil(fwd.size / self.dag_stages))
        groups = [fwd[i:i + k] for i in range(0, fwd.size, k)]
        L = len(groups) - 1 if len(groups) > 1 else 1
        groups = groups[: L + 1]
        yb = np.array([a.bytes[gr[-1]] for gr in groups], dtype=np.float64)
        yc = np.array([a.cost[gr].sum() for gr in groups])
        db = yb[:L]
        dc = yc[:L] * 2.0
        best, best_cost = None, np.inf
        for frac in (1.0, 0.8, 0.6, 0.45, 0.3, 0.2):
            if meter.spent:
                break
            B = a.budget * frac
            unit = max(1.0, B / self.dag_slots)
            M = int(B // unit)
            ys, ycs, ds, dcs = _chain_arrays(L, yb, yc, db, dc, unit)
            cost, choice = rotor_dp(ys, ycs, ds, dcs, M)
            if not np.isfinite(cost[0, 0, L + 1, M]):
                continue
            codes = rotor_sequence(ys, ds, choice, M)
            # states stored during the first forward pass: the top-level split points
            kept = []
            s, t, r, m = 0, L + 1, 0, M
            while t > s + 1:
                j = int(choice[r, s, t, m])
                if j >= t:
                    break
                kept.append(j)
                m -= int(ys[s])
                s = j
            cps = [int(groups[j - 1][-1]) for j in kept if 1 <= j <= len(groups)]
            del codes
            plan, c, _ = plan_from_checkpoints(problem, cps, solver=self.name, a=a, meter=meter)
            if plan is not None and c < best_cost:
                best, best_cost = plan, c
        return best
