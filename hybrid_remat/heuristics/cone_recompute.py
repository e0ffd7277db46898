"""Cone recomputation: the lowest-memory plan of training graphs, for budgets
where the eviction heuristics find nothing.

The forward pass runs once in the reference order, each value freed after
its last forward reader; the backward nodes run once, in the reference
order.  Before each backward node every forward input that is not resident
is recomputed together with its missing ancestors (its *cone*, in index
order, a topological order) and kept for ``horizon`` more stages; gradients
are never recomputed.  No checkpoint is held through the backward, so the
memory is the gradients alive plus one cone's working set; the price is
time: a cone can be most of the forward pass (quadratic in the graph).  The
compute sequence's minimal-memory plan is then pruned of the recomputations
the budget does not need (:func:`hybrid_remat.core.sequence.prune_kernel`,
within the time left) and checked by the simulator.

What it is for: a first plan where every other heuristic thrashes or runs
out of evictable values.  On the 10k-node random layered training graph at
35 % of the keep-all peak it gives a valid plan (horizon 0, peak 33.9 %)
when given a minute (45.1 s at load 5.5 on 2 cores, TDI 91816 %;
``benchmarks/results/tight_standalone_10k35_s32.md``), where no heuristic
plans; with 10 s it stops without one.  At 2k nodes it plans at 40 % only
(5352 % TDI in 1.6 s; its class needs 38.5 % there,
``benchmarks/results/tight_floor_s32.md``), where ``dtr_next_use`` gives
30.1 %.  Its plans cost tens of thousands of %
TDI: they are a start for the improvers, not a result.  It runs only when
named (``run_by_default = False``: quadratic in the graph, never for the
portfolio's first phase); at 100k nodes it gives up within its limits (a
build longer than a third of what the time left allows is not finished).
Graphs without backward nodes get the keep-all plan when it fits, else
nothing.

Examples
--------
>>> from hybrid_remat.families import FAMILIES
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(FAMILIES["random_layered"](200, 0), "75%")
>>> plan = ConeRecompute().run(p)
>>> plan is not None and simulate(p, plan).valid
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.sequence import sequence_peak_kernel
from ..graph import FORWARD
from ..interfaces import Heuristic
from .common import GraphArrays, WorkMeter, finish

__all__ = ["cone_plan_kernel", "cone_sequence", "same_phase_last_reader", "ConeRecompute", "BUILD_RATE",
           "HORIZONS", "MAX_LEN"]

#: sequence positions built per CPU second (about 4e6 measured at 2k-10k nodes on random layered graphs at
#: load 6 on 2 cores, so a conservative 2e6): the length cap that keeps a build within the time left
BUILD_RATE = 2e6
#: the longest sequence built (400 MB of positions), whatever the limits
MAX_LEN = 50_000_000
#: the horizons tried, in this order (the cheapest plan that fits is kept): 0 has the lowest peak on random layered graphs (38.5 / 38.8 / 42.3 % of
#: keep-all at 2k nodes for 0 / 1 / 2, 33.9 / 37.3 / 36.2 % at 10k), a longer one builds a shorter sequence
HORIZONS = (0, 1, 2)


@njit(cache=True)
def cone_plan_kernel(pred_ptr, pred_idx, once, first_until, horizon, max_len):
    """``(seq, ok)``: the cone plan's compute sequence.

    Stages run in index order; at stage ``t`` every input of ``t`` not
    marked resident is recomputed with its non-resident ancestors (sorted by
    index) and marked resident for ``horizon`` more stages; node ``t`` then
    runs and stays resident until stage ``first_until[t]`` (at least
    ``horizon`` stages), or for ever when ``once[t]``.  Empty and
    ``ok = False`` when the sequence would pass ``max_len``.
    """
    n = pred_ptr.shape[0] - 1
    seq = np.empty(max(max_len, 0), dtype=np.int64)
    until = np.full(n, -1, dtype=np.int64)
    mark = np.full(n, -1, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    cone = np.empty(n, dtype=np.int64)
    k = 0
    for t in range(n):
        nc = 0
        top = -1
        for j in range(pred_ptr[t], pred_ptr[t + 1]):
            u = pred_idx[j]
            if until[u] < t and mark[u] != t:
                mark[u] = t
                top += 1
                stack[top] = u
        while top >= 0:
            x = stack[top]
            top -= 1
            cone[nc] = x
            nc += 1
            for j in range(pred_ptr[x], pred_ptr[x + 1]):
                u = pred_idx[j]
                if until[u] < t and mark[u] != t:
                    mark[u] = t
                    top += 1
                    stack[top] = u
        if k + nc + 1 > max_len:
            return seq[:0], False
        c = np.sort(cone[:nc])
        for i in range(nc):
            seq[k] = c[i]
            k += 1
            until[c[i]] = t + horizon
        seq[k] = t
        k += 1
        until[t] = n + 1 if once[t] else max(t + horizon, first_until[t])
    return seq[:k], True


def same_phase_last_reader(graph) -> np.ndarray:
    """Each node's last reader of its own phase (itself when none): how long
    its first computation stays resident in the cone plan."""
    ph = np.asarray(graph.phase)
    out = np.arange(graph.n, dtype=np.int64)
    sp, si = graph.succ_ptr, graph.succ_idx
    dst = si
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(sp))
    keep = ph[dst] == ph[src]
    np.maximum.at(out, src[keep], dst[keep])
    return out


def cone_sequence(graph, horizon: int, max_len: int):
    """``(seq, ok)``: :func:`cone_plan_kernel` on ``graph`` (backward-phase
    nodes computed once)."""
    once = np.asarray(graph.phase) != FORWARD
    return cone_plan_kernel(graph.pred_ptr, graph.pred_idx, once, same_phase_last_reader(graph), int(horizon),
                            int(max_len))


class ConeRecompute(Heuristic):
    """Backward in the reference order, each missing forward input recomputed
    from scratch with its cone (module docstring); run only when named."""

    name = "cone_recompute"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})
    rank = 7.0
    run_by_default = False

    def warmup(self) -> None:
        """Compile (or load) the kernel on a two-node graph, outside any time limit."""
        ptr, idx = np.array([0, 0, 1], dtype=np.int64), np.array([0], dtype=np.int64)
        cone_plan_kernel(ptr, idx, np.array([False, True]), np.array([1, 1], dtype=np.int64), 0, 8)

    def run(self, problem, *, seed: int = 0, limits=None):
        """The keep-all plan when it fits, else the cheapest pruned cone plan
        of the horizons in :data:`HORIZONS` whose peak fits (tried in that
        order while time is left), or ``None`` (nothing fits, no backward
        nodes, or the time ran out: a build is stopped when it passes a third
        of what the time left allows)."""
        if not problem.is_single_device:
            return None
        g = problem.graph
        a = GraphArrays.from_problem(problem)
        ref = np.arange(g.n, dtype=np.int64)
        ones = np.ones(g.n, dtype=np.bool_)
        if sequence_peak_kernel(ref, ones, a.bytes, a.pred_ptr, a.pred_idx) <= a.budget:
            return finish(problem, a, ref, self.name)
        if not (np.asarray(g.phase) != FORWARD).any():
            return None
        meter = WorkMeter(limits, floor=4 * g.n)
        best = None             # (cost, horizon, sequence) of the cheapest pruned sequence that fits
        for h in HORIZONS:
            if meter.spent:
                break
            # a third of the time left: the peak, the prune, the plan and its simulation follow
            cap = max(min(meter.budget(BUILD_RATE) // 3, MAX_LEN, g.n * (g.n + 1)), min(4 * g.n, MAX_LEN))
            seq, ok = cone_sequence(g, h, cap)
            meter.take(seq.shape[0] if ok else cap)
            if not ok:
                continue         # too long for the time left: a longer horizon builds a shorter sequence
            peak = sequence_peak_kernel(seq, np.ones(seq.shape[0], dtype=np.bool_), a.bytes, a.pred_ptr, a.pred_idx)
            if peak > a.budget:
                continue
            if not meter.spent:
                seq = meter.prune(a, seq)
            cost = float(a.cost[seq].sum())
            if best is None or cost < best[0]:
                best = (cost, h, seq)
        if best is None:
            return None
        return finish(problem, a, best[2], self.name, horizon=best[1])
