"""Segment moves for LNS: re-solve one window of the incumbent's compute
sequence, the rest of the plan fixed, at a cost proportional to the window.

A plan is a compute sequence ``seq`` (:mod:`hybrid_remat.core.sequence`).
A *window* is a range ``[lo, hi)`` of its positions.  With everything
outside the window fixed, the window is an independent small problem
(:func:`extract_window`):

* *inputs*: instances computed before ``lo`` and read inside the window
  (sources of the local graph, never recomputed there: their inputs are not
  part of it);
* *window nodes*: the values computed inside, in order of their first
  computation there, with the edges their first computation reads;
* a zero-byte *sink* that reads every value still needed after ``hi``
  (its *exit set*), so that it is resident at the end;
* *background*: the bytes of instances live across the whole window and not
  read inside; the local budget is the budget minus the background.

Why it is exact.  The minimal-memory plan frees an instance after its last
reader.  Replace the window by any local sequence that computes every window
node, keeps the exit set resident at its end and never recomputes an input:
every instance computed before ``lo`` is still read last at the same place
(inputs inside the window, the others outside), so memory before ``lo`` is
unchanged; the values resident at ``hi`` are the same (background + exit
set), so memory after ``hi`` is unchanged; inside, memory is background +
the local sequence's memory.  So the full peak is within budget iff the
local peak is within the local budget, and the cost changes by the local
cost's change.  The one inexact case is a value whose instance from before
the window is read inside *and* that is recomputed inside (its reads are
split between the two instances); such windows are solved all the same and,
as every move, checked on the whole sequence before acceptance (two
``O(K)`` Numba passes, about a millisecond at 100k nodes).

Neighbourhoods (:func:`choose_window`): a window is centred on a position
drawn with probability proportional to the cost of the recomputation there
(windows without recomputations cannot improve: every window node is
computed at least once), and each end moves to the position of least
resident memory near it (low-byte boundaries: few inputs, a small exit
set).  Local solves: the lifetime-splitting kernel from local keep-all
(seeded noise), ruin and recreate of the window's recomputations, DTR
eviction on the local graph, pruning; and, for windows small enough, the
exact window model (:func:`hybrid_remat.exact.decompose.solve_window`, a
staged SCIP model of the local problem warm started with the incumbent's
window, node limit and deadline).

Examples
--------
>>> import numpy as np
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.heuristics.common import GraphArrays, run_executor
>>> p = Problem.single(random_layered(80, seed=2), "60%")
>>> a = GraphArrays.from_problem(p)
>>> res = run_executor(a, score="dtr_eq")
>>> search = SegmentSearch(a, res.seq, seed=0)
>>> c0 = search.cost
>>> for _ in range(20):
...     _ = search.step()
>>> search.cost <= c0, search.check()
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..core.sequence import sequence_peak_kernel, sequence_profile_kernel
from ..graph import csr_from_edges
from .common import GraphArrays, WorkMeter, run_executor
from .lifetime_split import ruin_and_recreate, split_sequence

__all__ = ["LocalWindow", "window_kernel", "extract_window", "splice", "choose_window", "SegmentSearch",
           "WINDOW_POSITIONS", "EXACT_ITEMS"]

#: window lengths (positions) drawn log-uniformly in this range (capped by the sequence)
WINDOW_POSITIONS = (32, 1024)
#: model size (variables + rows, about ``8 n_local^2``) up to which a window is also solved exactly with SCIP
EXACT_ITEMS = 40_000
#: local problems up to this many nodes are also re-planned from local keep-all by lifetime splitting
_FRESH_SPLIT_NODES = 600
#: cost of an input in the local heuristic problem, in multiples of the largest cost (never worth recomputing)
_INPUT_COST = 1e6


@njit(cache=True)
def window_kernel(seq, end, bytes_, pred_ptr, pred_idx, n, lo, hi):
    """Classify the instances around the window ``[lo, hi)`` of ``seq``.

    ``end`` is :func:`~hybrid_remat.core.sequence.last_uses_kernel`'s
    output for ``seq``.  Returns ``(read_pos, read_ptr, inputs, background)``:
    for each window position ``q`` the positions of the instances its node
    reads, ``read_pos[read_ptr[q - lo]:read_ptr[q - lo + 1]]`` (in
    predecessor order); the positions before ``lo`` read inside the window
    (sorted); and the bytes live across the whole window and not read in it.
    """
    last = np.full(n, -1, dtype=np.int64)
    for p in range(lo):
        last[seq[p]] = p
    W = hi - lo
    read_ptr = np.zeros(W + 1, dtype=np.int64)
    tot = 0
    for q in range(lo, hi):
        v = seq[q]
        tot += pred_ptr[v + 1] - pred_ptr[v]
    read_pos = np.empty(tot, dtype=np.int64)
    marked = np.zeros(lo + 1, dtype=np.bool_)
    k = 0
    for q in range(lo, hi):
        v = seq[q]
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            r = last[pred_idx[j]]
            read_pos[k] = r
            k += 1
            if 0 <= r < lo:
                marked[r] = True
        read_ptr[q - lo + 1] = k
        last[v] = q
    n_in = 0
    background = 0
    for p in range(lo):
        if marked[p]:
            n_in += 1
        elif end[p] >= hi:
            background += bytes_[seq[p]]
    inputs = np.empty(n_in, dtype=np.int64)
    i = 0
    for p in range(lo):
        if marked[p]:
            inputs[i] = p
            i += 1
    return read_pos, read_ptr, inputs, background


@dataclass
class LocalWindow:
    """The local problem of a window (see the module docstring).

    ``arrays`` is the local problem for the heuristic kernels (inputs cost
    :data:`_INPUT_COST` times the largest cost); local node ``i < n_inputs``
    is the input at position ``input_pos[i]``, ``n_inputs + j`` the window
    value ``values[j]``, the last node the sink.  ``seq`` is the window as a
    local sequence (inputs first, the sink last); ``cost`` its cost (window
    positions only)."""

    lo: int
    hi: int
    arrays: GraphArrays
    n_inputs: int
    input_pos: np.ndarray
    values: np.ndarray
    seq: np.ndarray
    cost: float
    background: int
    edges: np.ndarray

    @property
    def n_local(self) -> int:
        return self.arrays.n

    def local_cost(self, local_seq) -> float:
        """Cost of a local sequence (its window part)."""
        return float(self.arrays.cost[local_seq[(local_seq >= self.n_inputs) & (local_seq < self.n_local - 1)]].sum())

    def normalise(self, local_seq):
        """``local_seq`` with its inputs first, in order (they are resident
        when the window starts), or ``None`` when it recomputes an input or
        misses a window node or the sink."""
        if local_seq is None:
            return None
        local_seq = np.asarray(local_seq, dtype=np.int64)
        ni = self.n_inputs
        is_in = local_seq < ni
        if int(is_in.sum()) != ni or np.unique(local_seq[is_in]).shape[0] != ni:
            return None
        rest = local_seq[~is_in]
        if np.bincount(rest - ni, minlength=self.n_local - ni).min() == 0:
            return None
        return np.concatenate([np.arange(ni, dtype=np.int64), rest])

    def to_window(self, local_seq) -> np.ndarray:
        """The real nodes of a local sequence's window part."""
        inner = local_seq[(local_seq >= self.n_inputs) & (local_seq < self.n_local - 1)]
        return self.values[inner - self.n_inputs]


def extract_window(a: GraphArrays, seq, end, lo: int, hi: int) -> LocalWindow | None:
    """The local problem of ``seq[lo:hi]`` (``None`` when the budget left
    by the background is negative)."""
    read_pos, read_ptr, input_pos, background = window_kernel(seq, end, a.bytes, a.pred_ptr, a.pred_idx, a.n,
                                                              int(lo), int(hi))
    win = seq[lo:hi]
    values, first = np.unique(win, return_index=True)
    conflict = np.isin(values, seq[input_pos])
    if conflict.any():
        # a value read from before the window and recomputed inside: end the window before that recomputation
        # (fewer window values and inputs, so no new conflict; the local problem is then exact)
        hi = lo + int(first[conflict].min())
        if hi - lo < 2:
            return None
        read_pos, read_ptr, input_pos, background = window_kernel(seq, end, a.bytes, a.pred_ptr, a.pred_idx, a.n,
                                                                  int(lo), int(hi))
        win = seq[lo:hi]
        values, first = np.unique(win, return_index=True)
    local_budget = a.budget - int(background)
    if local_budget < 0:
        return None
    order = np.argsort(first, kind="stable")
    values, first = values[order], first[order]
    ni, nv = input_pos.shape[0], values.shape[0]
    n_loc = ni + nv + 1
    # local id of the instance at each position that is read: inputs by position, window instances by value
    val_id = {int(v): ni + j for j, v in enumerate(values.tolist())}
    in_id = {int(p): i for i, p in enumerate(input_pos.tolist())}
    src, dst = [], []
    for j, q in enumerate(first.tolist()):
        for r in read_pos[read_ptr[q]:read_ptr[q + 1]].tolist():
            src.append(in_id[r] if r < lo else val_id[int(seq[r])])
            dst.append(ni + j)
    sink = n_loc - 1
    for i, p in enumerate(input_pos.tolist()):
        if end[p] >= hi:
            src.append(i)
            dst.append(sink)
    exit_q = np.flatnonzero(end[lo:hi] >= hi)
    for q in exit_q.tolist():
        src.append(val_id[int(win[q])])
        dst.append(sink)
    src_a, dst_a = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if src_a.size:
        e = np.unique(np.stack([src_a, dst_a], axis=1), axis=0)
        src_a, dst_a = e[:, 0].copy(), e[:, 1].copy()
    bytes_loc = np.concatenate([a.bytes[seq[input_pos]], a.bytes[values], [0]]).astype(np.int64)
    big = _INPUT_COST * max(1.0, float(a.cost.max()) if a.cost.size else 1.0)
    cost_loc = np.concatenate([np.full(ni, big), a.cost[values], [0.0]]).astype(np.float64)
    pred_ptr, pred_idx = csr_from_edges(n_loc, dst_a, src_a)
    succ_ptr, succ_idx = csr_from_edges(n_loc, src_a, dst_a)
    arrays = GraphArrays(bytes=bytes_loc, cost=cost_loc, pred_ptr=pred_ptr, pred_idx=pred_idx, succ_ptr=succ_ptr,
                         succ_idx=succ_idx, budget=int(local_budget), device=a.device,
                         phase=np.zeros(n_loc, dtype=np.int8))
    loc_of_val = np.fromiter((val_id[int(v)] for v in win.tolist()), dtype=np.int64, count=win.shape[0])
    local_seq = np.concatenate([np.arange(ni, dtype=np.int64), loc_of_val, [sink]]).astype(np.int64)
    return LocalWindow(int(lo), int(hi), arrays, ni, input_pos, values, local_seq, float(a.cost[win].sum()),
                       int(background), np.stack([src_a, dst_a], axis=1) if src_a.size else np.zeros((0, 2), np.int64))


def splice(seq, window: LocalWindow, local_seq) -> np.ndarray:
    """``seq`` with its window replaced by ``local_seq``'s window part."""
    return np.concatenate([seq[:window.lo], window.to_window(local_seq), seq[window.hi:]])


def choose_window(rng, cost, seq, recomputed, mem_at, *, length: int | None = None):
    """``(lo, hi)``: a window around a recomputation drawn by cost, its ends
    moved to the least resident memory within a quarter length; ``None``
    when the sequence recomputes nothing."""
    K = seq.shape[0]
    rec = np.flatnonzero(recomputed)
    if rec.size == 0:
        return None
    w = cost[seq[rec]] + 1e-12
    centre = int(rng.choice(rec, p=w / w.sum()))
    lo_w, hi_w = WINDOW_POSITIONS
    if length is None:
        length = int(np.exp(rng.uniform(np.log(lo_w), np.log(hi_w))))
    length = max(2, min(K, int(length)))
    lo = max(0, centre - int(rng.integers(1, length)))
    hi = min(K, lo + length)
    slack = max(1, length // 4)

    def low_point(x, a_, b_):
        a_, b_ = max(0, a_), min(K, b_)
        if b_ <= a_:
            return x
        return a_ + int(np.argmin(mem_at[a_:b_]))

    lo2 = low_point(lo, lo - slack, min(lo + slack, centre)) if lo > 0 else 0
    hi2 = low_point(hi - 1, max(hi - slack, centre + 1), hi + slack) + 1 if hi < K else K
    if hi2 - lo2 < 2:
        return lo, hi
    return lo2, hi2


class SegmentSearch:
    """Window moves on one compute sequence (see the module docstring).

    Parameters
    ----------
    a : GraphArrays
        The problem.
    seq : array of int
        A compute sequence whose minimal-memory plan fits ``a.budget``.
    seed : int
    exact : bool
        Also solve small windows with the exact window model (SCIP).
    problem : Problem, optional
        Needed for the exact model's device name only (defaults from ``a``).

    Attributes
    ----------
    seq, cost : the current sequence and its cost (never worse than the start)
    stats : dict of counters (moves, improved, exact, exact_improved, rejected)
    """

    def __init__(self, a: GraphArrays, seq, *, seed: int = 0, exact: bool = True):
        self.a = a
        self.rng = np.random.default_rng(seed)
        self.exact = bool(exact)
        self.stats = {"moves": 0, "improved": 0, "exact": 0, "exact_improved": 0, "rejected": 0}
        self.reset(seq)

    def reset(self, seq) -> None:
        """Start from ``seq`` (two ``O(K)`` passes)."""
        self.seq = np.ascontiguousarray(seq, dtype=np.int64)
        self.cost = float(self.a.cost[self.seq].sum())
        active = np.ones(self.seq.shape[0], dtype=np.bool_)
        self.end, self.mem_at, _ = sequence_profile_kernel(self.seq, active, self.a.bytes, self.a.pred_ptr,
                                                           self.a.pred_idx)
        first = np.zeros(self.seq.shape[0], dtype=bool)
        first[np.unique(self.seq, return_index=True)[1]] = True
        self.recomputed = ~first

    def check(self) -> bool:
        """The current sequence computes every node and fits the budget (a full check)."""
        active = np.ones(self.seq.shape[0], dtype=np.bool_)
        peak = sequence_peak_kernel(self.seq, active, self.a.bytes, self.a.pred_ptr, self.a.pred_idx)
        return bool(peak <= self.a.budget and np.unique(self.seq).shape[0] == self.a.n)

    def step(self, meter: WorkMeter | None = None) -> bool:
        """One window move; ``True`` when it improved the sequence."""
        meter = meter or WorkMeter()
        win = choose_window(self.rng, self.a.cost, self.seq, self.recomputed, self.mem_at)
        if win is None:
            return False
        self.stats["moves"] += 1
        local = extract_window(self.a, self.seq, self.end, *win)
        if local is None:
            return False
        cands = self._local_candidates(local, meter)
        best, best_c = None, local.cost - 1e-9 * max(1.0, local.cost)
        for c in cands:
            c = local.normalise(c)
            if c is None:
                continue
            cc = local.local_cost(c)
            if cc < best_c:
                best, best_c = c, cc
        if best is None:
            return False
        return self._accept(local, best, exact=False)

    def step_exact(self, meter: WorkMeter | None = None, limits=None) -> bool:
        """One window move solved by the exact window model (a small window)."""
        from ..limits import Limits

        meter = meter or WorkMeter()
        side = int(np.sqrt(EXACT_ITEMS / 8.0))
        win = choose_window(self.rng, self.a.cost, self.seq, self.recomputed, self.mem_at,
                            length=int(self.rng.integers(max(4, side // 3), side)))
        if win is None:
            return False
        self.stats["exact"] += 1
        local = extract_window(self.a, self.seq, self.end, *win)
        if local is None or 8 * local.n_local ** 2 > 2 * EXACT_ITEMS:
            return False
        lim = limits if limits is not None else Limits(nodes=200)
        cand = exact_window(local, limits=lim)
        cand = local.normalise(cand)
        if cand is None:
            return False
        if local.local_cost(cand) >= local.cost - 1e-9 * max(1.0, local.cost):
            return False
        return self._accept(local, cand, exact=True)

    def _local_candidates(self, local: LocalWindow, meter: WorkMeter):
        la = local.arrays
        rng = self.rng
        out = [meter.prune(la, local.seq)]
        out.append(ruin_and_recreate(la, local.seq, rng, frac=float(rng.uniform(0.1, 0.7)), pick=int(rng.integers(3)),
                                     noise=float(rng.uniform(0.0, 0.5)), meter=meter))
        if la.n <= _FRESH_SPLIT_NODES:  # lifetime splitting from local keep-all: quadratic in the window
            out.append(split_sequence(la, noise=float(rng.uniform(0.0, 0.6)), seed=int(rng.integers(1 << 30)),
                                      pick=int(rng.integers(3)), meter=meter))
        if rng.random() < 0.5:
            r = run_executor(la, score=("dtr_eq", "next_use_full", "dtr")[int(rng.integers(3))],
                             weights=np.exp(rng.normal(0.0, 0.5, la.n)), seed=int(rng.integers(1 << 30)),
                             work=meter.budget(2e6))
            meter.take(r.used)
            if r.ok:
                out.append(meter.prune(la, r.seq))
        return out

    def _accept(self, local: LocalWindow, local_seq, *, exact: bool) -> bool:
        new = splice(self.seq, local, local_seq)
        active = np.ones(new.shape[0], dtype=np.bool_)
        peak = sequence_peak_kernel(new, active, self.a.bytes, self.a.pred_ptr, self.a.pred_idx)
        new_cost = float(self.a.cost[new].sum())
        if peak > self.a.budget or new_cost >= self.cost - 1e-12 * max(1.0, self.cost):
            self.stats["rejected"] += 1
            return False
        self.reset(new)
        self.stats["improved"] += 1
        if exact:
            self.stats["exact_improved"] += 1
        return True


def exact_window(local: LocalWindow, *, limits=None):
    """The exact window model's best local sequence for ``local`` (inputs and
    the sink fixed as in the incumbent, every window node free), or ``None``."""
    from ..core.sequence import minimal_plan, sequence_of_plan
    from ..exact.decompose import solve_window
    from ..graph import Graph
    from ..problem import Problem

    la = local.arrays
    ni = local.n_inputs
    cost = la.cost.copy()
    cost[:ni] = 0.0  # fixed in the model; a huge constant would only spoil the objective's scale
    g = Graph.from_arrays(la.bytes, [tuple(e) for e in local.edges.tolist()], {"cost": cost}, name="window")
    p = Problem.single(g, int(la.budget))
    plan, peak = minimal_plan(g, local.seq, p.primary.name)
    if peak > la.budget:
        return None
    free = np.arange(ni, la.n - 1)
    better, _ = solve_window(p, plan, free, limits=limits)
    if better is plan:
        return None
    return np.ascontiguousarray(sequence_of_plan(better), dtype=np.int64)

