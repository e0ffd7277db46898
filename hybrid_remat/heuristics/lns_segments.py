"""Segment moves for LNS: re-solve one window of the incumbent's compute
sequence, the rest of the plan fixed, at a cost proportional to the window.

A plan is a compute sequence ``seq`` (:mod:`hybrid_remat.core.sequence`).
A *window* is a range ``[a0, a1)`` of its positions, or two ranges
``[a0, a1)`` and ``[b0, b1)`` with the *middle* ``[a1, b0)`` fixed (a segment
of the forward order where values are made, and the backward part where they
are read or recomputed).  With everything outside fixed, the window is an
independent small problem (:func:`extract_window`, :func:`~.lns_kernels.window_kernel`):

* *inputs*: instances computed before ``a0`` that the window reads, or that
  are freed inside it or in the middle (sources of the local graph, never
  recomputed there: their inputs are not part of it);
* *window values*: the nodes computed in the ranges, in order of their first
  computation there, with the edges their first computation reads; a value
  made in the first range may be recomputed in the second (that is how a
  window trades a checkpoint for a recomputation);
* with a middle, *junction* nodes between the ranges, one per stretch of the
  middle that ends at the last middle read of a local instance: each reads
  the local instances the middle still reads after its stretch starts, and
  its bytes are the most memory the middle holds in its stretch besides the
  local instances; then the middle's instances read from ``b0`` on
  (sources, fixed);
* a zero-byte *sink* that reads every instance still needed after the window;
* *background*: the bytes live across the whole window and not read in it;
  the local budget is the budget minus the background.

Why it is exact.  The minimal-memory plan frees an instance after its last
reader.  Replace the ranges by a local sequence that computes every window
value, keeps the sink's reads resident at its end and never recomputes an
input: every instance from before ``a0`` is still read last at the same
place, so memory before ``a0`` is unchanged; the values resident after the
window are the same, so memory after it is unchanged; inside the ranges,
memory is the background plus the local sequence's memory.  In the middle,
memory at a position is at most its stretch's junction's (the local
instances resident there are those the junction reads or that stay resident
across it, the rest is fixed), with equality for the incumbent: one range is
exact and two ranges are a safe restriction (exact up to the maximum over a
stretch).  The one inexact case, a
value read from an instance before the window (or the middle) and also
computed inside, is avoided by ending the range before that computation.
Every accepted move is also checked on the whole sequence (two ``O(K)``
Numba passes, about a millisecond at 100k nodes) before it replaces the
incumbent, and every plan handed out passes the simulator.

Neighbourhoods (:func:`choose_window`): a window is centred on a position
drawn with probability proportional to the cost of the recomputation there
(windows without recomputations cannot improve: every window value is
computed at least once); half of the time, when that value was made far
earlier, a second range is centred where it was made; each end moves to the
position of least resident memory near it (low-byte boundaries: few inputs,
a small exit set).  Local solves: pruning, ruin and recreate of the window's
recomputations, the lifetime-splitting kernel from local keep-all (small
windows) and DTR eviction on the local graph; and, for windows small
enough, the exact window model
(:func:`hybrid_remat.exact.decompose.solve_window`: the staged SCIP model of
the local problem, every window value free, warm started with the
incumbent's window, node limit and deadline).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.heuristics.common import GraphArrays, sequence_of_plan
>>> from hybrid_remat.heuristics.local_search import LocalSearch
>>> p = Problem.single(random_layered(80, seed=2), "90%")
>>> a = GraphArrays.from_problem(p)
>>> search = SegmentSearch(a, sequence_of_plan(LocalSearch(max_iters=2).run(p)), seed=0)
>>> c0 = search.cost
>>> for _ in range(20):
...     _ = search.step()
>>> search.cost <= c0, search.check()
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.sequence import sequence_peak_kernel, sequence_profile_kernel
from ..graph import csr_from_edges
from .common import GraphArrays, WorkMeter, run_executor
from .lifetime_split import ruin_and_recreate, split_sequence
from .lns_kernels import window_kernel

__all__ = ["LocalWindow", "extract_window", "splice", "choose_window", "SegmentSearch",
           "WINDOW_POSITIONS", "EXACT_ITEMS"]

#: window lengths (positions) drawn log-uniformly in this range (capped by the sequence)
WINDOW_POSITIONS = (32, 1024)
#: model size (variables + rows, about ``8 n_local^2``) up to which a window is also solved exactly with SCIP
EXACT_ITEMS = 40_000
#: local problems up to this many nodes are also re-planned from local keep-all by lifetime splitting
_FRESH_SPLIT_NODES = 600
#: cost of an input in the local heuristic problem, in multiples of the largest cost (never worth recomputing)
_INPUT_COST = 1e6


#: kinds of local nodes
_VALUE, _PRE, _JUNCTION, _MID, _SINK = 0, 1, 2, 3, 4


@dataclass
class LocalWindow:
    """The local problem of a window (see the module docstring).

    ``arrays`` is the local problem for the heuristic kernels (inputs cost
    :data:`_INPUT_COST` times the largest cost).  Local nodes, in order:
    the inputs from before the window (``n_inputs``), the values first
    computed in the first range, the junction (a middle only), the middle's
    instances read from ``b0`` on, the values first computed in the second
    range, the sink; ``kind`` and ``real`` (the real node of a value, -1
    else) describe them.  ``seq`` is the window as a local sequence; ``cost``
    its cost (window positions only)."""

    ranges: tuple
    arrays: GraphArrays
    n_inputs: int
    kind: np.ndarray
    real: np.ndarray
    first_second: int
    seq: np.ndarray
    cost: float
    background: int
    edges: np.ndarray

    @property
    def lo(self) -> int:
        return self.ranges[0]

    @property
    def hi(self) -> int:
        return self.ranges[3]

    @property
    def n_local(self) -> int:
        return self.arrays.n

    def local_cost(self, local_seq) -> float:
        """Cost of a local sequence (its window values)."""
        return float(self.arrays.cost[local_seq[self.kind[local_seq] == _VALUE]].sum())

    def normalise(self, local_seq):
        """``local_seq`` in the window's layout (inputs first, in order; the
        junction once, the middle's instances right after it), or ``None``
        when it recomputes an input, misses a node, or computes a value of the
        second range before the junction."""
        if local_seq is None:
            return None
        local_seq = np.asarray(local_seq, dtype=np.int64)
        kinds = self.kind[local_seq]
        fixed = kinds != _VALUE
        if int(fixed.sum()) != int((self.kind != _VALUE).sum()) or np.unique(local_seq[fixed]).shape[0] != int(
                fixed.sum()):
            return None
        vals = local_seq[~fixed]
        if np.unique(vals).shape[0] != int((self.kind == _VALUE).sum()):
            return None
        pre = np.flatnonzero(self.kind == _PRE)
        mid = np.flatnonzero(self.kind == _MID)
        sink = np.flatnonzero(self.kind == _SINK)
        junction = np.flatnonzero(self.kind == _JUNCTION)
        if junction.size == 0:
            return np.concatenate([pre, vals, sink])
        at = np.flatnonzero(kinds == _JUNCTION)
        if not np.array_equal(local_seq[at], junction) or at[-1] - at[0] != junction.size - 1:
            return None  # the junctions in order, nothing between them (the middle is fixed)
        jpos, jend = int(at[0]), int(at[-1]) + 1
        before = local_seq[:jpos][kinds[:jpos] == _VALUE]
        after = local_seq[jend:][kinds[jend:] == _VALUE]
        if (before >= self.first_second).any() or (kinds[:jpos] == _MID).any():
            return None
        return np.concatenate([pre, before, junction, mid, after, sink])

    def parts(self, local_seq):
        """The real nodes of a normalised local sequence: before and after the junction."""
        kinds = self.kind[local_seq]
        j = np.flatnonzero(kinds == _JUNCTION)
        cut = int(j[0]) if j.size else local_seq.shape[0]
        first = local_seq[:cut][kinds[:cut] == _VALUE]
        second = local_seq[cut:][kinds[cut:] == _VALUE]
        return self.real[first], self.real[second]


def extract_window(a: GraphArrays, seq, end, mem_at, a0: int, a1: int, b0: int | None = None,
                   b1: int | None = None) -> LocalWindow | None:
    """The local problem of ``seq[a0:a1]`` (and ``seq[b0:b1]``, the middle
    fixed); ``None`` when the budget left by the background is negative or
    the ranges shrink to nothing."""
    if b0 is None:
        b0 = b1 = a1
    for _ in range(4):
        out = window_kernel(seq, end, mem_at, a.bytes, a.pred_ptr, a.pred_idx, a.n, int(a0), int(a1), int(b0),
                            int(b1))
        read_pos, read_ptr, pre, mid_pos, jread, jlast, background, base = out
        win_pos = np.concatenate([np.arange(a0, a1), np.arange(b0, b1)]).astype(np.int64)
        win = seq[win_pos]
        values, first = np.unique(win, return_index=True)
        clash = np.isin(values, np.concatenate([seq[pre], seq[mid_pos]]))
        if not clash.any():
            break
        # a value whose instance from before (or from the middle) is read in the window and that is computed
        # in it: end the range before that computation (the local problem is then exact)
        f = int(win_pos[int(first[clash].min())])
        if f < a1:
            if a1 == b0:
                a1 = b0 = b1 = f
            else:
                a1 = f
        else:
            b1 = f
        if a1 - a0 < 1 or (b0 > a1 and b1 - b0 < 1):
            return None
    else:
        return None
    local_budget = a.budget - int(background)
    if local_budget < 0:
        return None
    order = np.argsort(first, kind="stable")
    values, first = values[order], first[order]
    n_first_a = int((first < (a1 - a0)).sum())
    has_mid = b0 > a1
    n_pre, n_mid = pre.shape[0], mid_pos.shape[0]
    ids_a = n_pre + np.arange(n_first_a)
    j_id = n_pre + n_first_a
    # junctions: one per stretch of the middle ending at a last read of a local instance (and one after the last
    # such read), each as large as the most the middle holds besides the local instances in its stretch
    cuts = np.unique(jlast) - a1 if has_mid else np.zeros(0, np.int64)
    if has_mid:
        bounds = np.concatenate([[0], cuts + 1])
        bounds = bounds[bounds < base.shape[0]]
        j_bytes = np.maximum.reduceat(base, bounds) - int(background)  # the background is counted apart
        j_end = np.concatenate([bounds[1:] - 1, [base.shape[0] - 1]])  # last middle offset of each stretch
    else:
        j_bytes = j_end = np.zeros(0, np.int64)
    n_j = j_bytes.shape[0]
    mid0 = j_id + n_j
    first_second = mid0 + n_mid
    ids_b = first_second + np.arange(values.shape[0] - n_first_a)
    sink = first_second + values.shape[0] - n_first_a
    n_loc = sink + 1
    val_id = dict(zip(values.tolist(), np.concatenate([ids_a, ids_b]).tolist()))
    pre_id = {int(p): i for i, p in enumerate(pre.tolist())}
    mid_id = {int(q): mid0 + i for i, q in enumerate(mid_pos.tolist())}

    def inst_id(r):
        if r < a0:
            return pre_id[r]
        if a1 <= r < b0:
            return mid_id[r]
        return val_id[int(seq[r])]

    src, dst = [], []
    for k in first.tolist():
        me = val_id[int(win[k])]
        for r in read_pos[read_ptr[k]:read_ptr[k + 1]].tolist():
            src.append(inst_id(r))
            dst.append(me)
    for r, last_read in zip(jread.tolist(), jlast.tolist()):
        # read by the junction of the stretch that holds its last middle read: resident up to there
        src.append(inst_id(r))
        dst.append(j_id + int(np.searchsorted(j_end, last_read - a1)))
    for p in pre.tolist():
        if end[p] >= b1:
            src.append(pre_id[p])
            dst.append(sink)
    for q in mid_pos.tolist():
        if end[q] >= b1:
            src.append(mid_id[q])
            dst.append(sink)
    for k in np.flatnonzero(end[win_pos] >= b1).tolist():
        src.append(val_id[int(win[k])])
        dst.append(sink)
    src_a, dst_a = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if src_a.size:
        e = np.unique(np.stack([src_a, dst_a], axis=1), axis=0)
        src_a, dst_a = e[:, 0].copy(), e[:, 1].copy()
    kind = np.full(n_loc, _VALUE, dtype=np.int8)
    kind[:n_pre] = _PRE
    kind[j_id:j_id + n_j] = _JUNCTION
    kind[mid0:mid0 + n_mid] = _MID
    kind[sink] = _SINK
    real = np.full(n_loc, -1, dtype=np.int64)
    real[ids_a] = values[:n_first_a]
    real[ids_b] = values[n_first_a:]
    bytes_loc = np.zeros(n_loc, dtype=np.int64)
    bytes_loc[:n_pre] = a.bytes[seq[pre]]
    bytes_loc[mid0:mid0 + n_mid] = a.bytes[seq[mid_pos]]
    bytes_loc[kind == _VALUE] = a.bytes[real[kind == _VALUE]]
    bytes_loc[j_id:j_id + n_j] = j_bytes
    big = _INPUT_COST * max(1.0, float(a.cost.max()) if a.cost.size else 1.0)
    cost_loc = np.zeros(n_loc, dtype=np.float64)
    cost_loc[(kind == _PRE) | (kind == _MID)] = big
    cost_loc[kind == _VALUE] = a.cost[real[kind == _VALUE]]
    pred_ptr, pred_idx = csr_from_edges(n_loc, dst_a, src_a)
    succ_ptr, succ_idx = csr_from_edges(n_loc, src_a, dst_a)
    arrays = GraphArrays(bytes=bytes_loc, cost=cost_loc, pred_ptr=pred_ptr, pred_idx=pred_idx, succ_ptr=succ_ptr,
                         succ_idx=succ_idx, budget=int(local_budget), device=a.device,
                         phase=np.zeros(n_loc, dtype=np.int8))
    loc_a = np.fromiter((val_id[int(v)] for v in seq[a0:a1].tolist()), dtype=np.int64, count=a1 - a0)
    loc_b = np.fromiter((val_id[int(v)] for v in seq[b0:b1].tolist()), dtype=np.int64, count=b1 - b0)
    middle = np.arange(j_id, mid0 + n_mid, dtype=np.int64)
    local_seq = np.concatenate([np.arange(n_pre), loc_a, middle, loc_b, [sink]]).astype(np.int64)
    edges = np.stack([src_a, dst_a], axis=1) if src_a.size else np.zeros((0, 2), np.int64)
    return LocalWindow((int(a0), int(a1), int(b0), int(b1)), arrays, n_pre, kind, real, int(first_second),
                       local_seq, float(a.cost[win].sum()), int(background), edges)


def splice(seq, window: LocalWindow, local_seq) -> np.ndarray:
    """``seq`` with its window replaced by ``local_seq``'s (normalised) values."""
    a0, a1, b0, b1 = window.ranges
    first, second = window.parts(local_seq)
    return np.concatenate([seq[:a0], first, seq[a1:b0], second, seq[b1:]])


def _around(rng, K, centre, length, mem_at):
    """``(lo, hi)`` of about ``length`` positions holding ``centre``, each end
    moved to the least resident memory within a quarter length."""
    length = max(2, min(K, int(length)))
    lo = max(0, centre - int(rng.integers(0, length)))
    hi = min(K, lo + length)
    slack = max(1, length // 4)

    def low_point(x, a_, b_):
        a_, b_ = max(0, a_), min(K, b_)
        if b_ <= a_:
            return x
        return a_ + int(np.argmin(mem_at[a_:b_]))

    lo2 = low_point(lo, lo - slack, min(lo + slack, centre + 1)) if lo > 0 else 0
    hi2 = low_point(hi - 1, max(hi - slack, centre), hi + slack) + 1 if hi < K else K
    if hi2 - lo2 < 2 or not lo2 <= centre < hi2:
        return lo, hi
    return lo2, hi2


def choose_window(rng, cost, seq, recomputed, mem_at, *, length: int | None = None, pair: float = 0.5):
    """A window around a recomputation drawn by cost, its ends at low
    resident memory: ``(lo, hi)``, or with probability ``pair`` (when the
    recomputed value was first computed far earlier) ``(a0, a1, b0, b1)``,
    a second range around that first computation (the segment of the
    forward order where the value is made and its backward part where it is
    recomputed); ``None`` when the sequence recomputes nothing."""
    K = seq.shape[0]
    rec = np.flatnonzero(recomputed)
    if rec.size == 0:
        return None
    w = cost[seq[rec]] + 1e-12
    centre = int(rng.choice(rec, p=w / w.sum()))
    lo_w, hi_w = WINDOW_POSITIONS
    if length is None:
        length = int(np.exp(rng.uniform(np.log(lo_w), np.log(hi_w))))
    if rng.random() < pair:
        made = int(np.flatnonzero(seq[:centre] == seq[centre])[0])
        half = max(2, length // 2)
        if centre - made > 2 * half:
            a0, a1 = _around(rng, K, made, half, mem_at)
            b0, b1 = _around(rng, K, centre, half, mem_at)
            if a1 < b0:
                return a0, a1, b0, b1
    return _around(rng, K, centre, length, mem_at)


class SegmentSearch:
    """Window moves on one compute sequence (see the module docstring).

    Parameters
    ----------
    a : GraphArrays
        The problem.
    seq : array of int
        A compute sequence whose minimal-memory plan fits ``a.budget``.
    seed : int

    Attributes
    ----------
    seq, cost : the current sequence and its cost (never worse than the start)
    stats : dict of counters (moves, improved, exact, exact_improved, rejected)
    """

    def __init__(self, a: GraphArrays, seq, *, seed: int = 0):
        self.a = a
        self.rng = np.random.default_rng(seed)
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
        local = extract_window(self.a, self.seq, self.end, self.mem_at, *win)
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
        # one range only: the exact model is not given a junction node (a sink with a large size)
        win = choose_window(self.rng, self.a.cost, self.seq, self.recomputed, self.mem_at,
                            length=int(self.rng.integers(max(4, side // 4), max(5, side // 2))), pair=0.0)
        if win is None:
            return False
        self.stats["exact"] += 1
        local = extract_window(self.a, self.seq, self.end, self.mem_at, *win)
        if local is None or 8 * local.n_local ** 2 > EXACT_ITEMS:
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
    the sink fixed as in the incumbent, every window node free), or ``None``
    (also when no registered ``decomposed`` formulation offers
    ``solve_window``: the exact models are found through the registry, never
    imported from here)."""
    from .. import plugins
    from ..core.sequence import minimal_plan, sequence_of_plan
    from ..graph import Graph
    from ..problem import Problem

    solver = getattr(plugins.formulations().get("decomposed"), "solve_window", None)
    la = local.arrays
    if solver is None or (local.kind == _JUNCTION).any():
        return None
    cost = la.cost.copy()
    cost[local.kind != _VALUE] = 0.0  # fixed in the model; a huge constant would only spoil the objective's scale
    active = np.ones(local.seq.shape[0], dtype=np.bool_)
    if sequence_peak_kernel(local.seq, active, la.bytes, la.pred_ptr, la.pred_idx) > la.budget:
        return None  # the model is warm started from the incumbent's window: it must fit (see the junction)
    g = Graph.from_arrays(la.bytes, [tuple(e) for e in local.edges.tolist()], {"cost": cost}, name="window")
    p = Problem.single(g, int(la.budget))
    plan, _ = minimal_plan(g, local.seq, p.primary.name)
    free = np.flatnonzero(local.kind == _VALUE)
    better, _ = solver(p, plan, free, limits=limits)
    if better is plan:
        return None
    return np.ascontiguousarray(sequence_of_plan(better), dtype=np.int64)

