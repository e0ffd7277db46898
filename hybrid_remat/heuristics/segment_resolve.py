"""Segment-wise re-solve: improve a large plan one segment at a time, each
segment's window re-solved exactly with the rest of the plan fixed.

``segment_resolve`` (:class:`SegmentResolve`) is an improver for plans too
large for any whole-graph model (100k nodes).  It works on the plan's
compute sequence ``seq`` (:mod:`hybrid_remat.core.sequence`) and reuses the
exact local problems of LNS's window moves (:mod:`.lns_segments`): with
everything outside a window fixed, the window is an independent small
problem whose budget is what the rest of the plan leaves.

Neighbourhoods by segment (:func:`segment_windows`).  The sequence is cut
into *segments* of about ``length`` positions, each end at the position of
least resident memory near it (low-byte boundaries).  A window can only
gain where the plan pays for a recomputation inside it, so every candidate
is scored by what the plan loses there against the trivial bound (each
node once):

* a *single* window, one segment: the cost of the computations in it of a
  value already computed earlier in the same segment;
* a *pair*, a segment of the forward order and its backward part: the
  segment where values are made and the later segment where they are
  recomputed (the middle fixed), scored by the cost of those
  recomputations (the local problem may keep the value instead).

Candidates are visited by decreasing score; a window already tried on the
same contents is not tried again, and when every candidate has been tried
the segments move by half a segment and change length (round robin over
offsets and lengths) until a whole cycle improves nothing (then the search
stops: converged).

Re-solve.  Each window's local problem
(:func:`~.lns_segments.extract_window`) is solved by the cheap local
kernels (pruning, ruin and recreate, lifetime splitting, DTR eviction) and,
when its model is small enough (:data:`MAX_ITEMS`), by the exact window
model (:func:`~.lns_segments.exact_window`: the staged SCIP model of the
local problem through :mod:`hybrid_remat.scip`, freed after each solve, a
node limit per window and at most a share of the time left).  The best
local sequence is spliced back; the whole sequence is checked (peak within
the budget, every node computed: two ``O(K)`` Numba passes) before it
replaces the incumbent, and every plan reported or returned has passed the
simulator (:func:`~.common.finish`).  So a window move never makes the plan
worse, and the improver returns ``plan`` itself when nothing better was
found.

It is registered with the other improvers (``builtin_improvers``) but runs only when named
(``run_by_default = False``, see :class:`SegmentResolve`).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.limits import Limits
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> from hybrid_remat.heuristics.local_search import LocalSearch
>>> p = Problem.single(random_layered(80, seed=2), "90%")
>>> start = LocalSearch(max_iters=2).run(p)
>>> better = SegmentResolve().improve(p, start, limits=Limits(nodes=20))
>>> simulate(p, better).valid, simulate(p, better).total_time <= simulate(p, start).total_time
(True, True)
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ..errors import PlanError
from ..interfaces import Improver
from ..limits import Limits
from ..simulate import simulate
from .common import GraphArrays, WorkMeter, finish, sequence_of_plan
from .lns_segments import SegmentSearch, exact_window, extract_window

__all__ = ["SegmentResolve", "segment_windows", "segment_bounds", "MAX_ITEMS", "SEGMENT_POSITIONS"]

#: model size (variables + rows, about ``8 n_local^2``) up to which a window is also solved exactly with SCIP
MAX_ITEMS = 20_000
#: segment lengths (positions) of the round robin, cycled; the first fits the exact model on most graphs
SEGMENT_POSITIONS = (32, 24, 48, 16, 64)
#: SCIP node limit of one window's exact solve, and the most seconds (and share of the time left) it may take
#: (the seconds also without a deadline: a root LP can be slow; node-limited solves end well before)
EXACT_NODES = 30
_EXACT_MAX_S, _EXACT_SHARE = 2.0, 0.25
#: improvements are reported at most this often (each report simulates the whole plan)
_REPORT_EVERY_S = 0.5
_CAPS = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic",
                   "shares_incumbent"})


def segment_bounds(mem_at: np.ndarray, length: int, offset: int = 0) -> np.ndarray:
    """Segment starts of a sequence of ``len(mem_at)`` positions: about
    ``length`` positions each, every inner boundary moved to the least
    resident memory within a quarter length of where it would fall; the
    first segment is ``offset`` positions long (round robin shifts).

    Returns the boundaries, ``0`` first and ``K`` last.

    Examples
    --------
    >>> segment_bounds(np.array([5, 1, 5, 5, 0, 5, 5, 5]), 4).tolist()
    [0, 4, 8]
    """
    K = int(mem_at.shape[0])
    length = max(2, int(length))
    slack = max(1, length // 4)
    out = [0]
    s = 0
    nxt = int(offset) if 0 < offset < length else length
    while s + nxt < K:
        lo, hi = max(s + 1, s + nxt - slack), min(K, s + nxt + slack + 1)
        b = lo + int(np.argmin(mem_at[lo:hi])) if hi > lo else s + nxt
        out.append(b)
        s, nxt = b, length
    out.append(K)
    return np.asarray(out, dtype=np.int64)


def segment_windows(seq: np.ndarray, cost: np.ndarray, mem_at: np.ndarray, length: int, offset: int = 0):
    """Candidate windows over the segments of ``seq`` (see the module
    docstring), best first: a list of ``(score, window)`` where ``window``
    is ``(lo, hi)`` (one segment) or ``(a0, a1, b0, b1)`` (a segment and the
    later one where its values are recomputed); only windows with a
    positive score (a recomputation they could save).

    Examples
    --------
    >>> seq = np.array([0, 1, 2, 0, 3, 1, 4])
    >>> w = segment_windows(seq, np.ones(5), np.zeros(7, np.int64), 3)
    >>> w                      # value 1 made in the first segment, recomputed in the last; 0 in the next
    [(1.0, (0, 2, 4, 7)), (1.0, (0, 4))]
    """
    seq = np.asarray(seq, dtype=np.int64)
    K = seq.shape[0]
    if K == 0:
        return []
    bounds = segment_bounds(mem_at, length, offset)
    tile = np.searchsorted(bounds, np.arange(K), side="right") - 1
    order = np.argsort(seq, kind="stable")
    sv = seq[order]
    same = np.zeros(K, dtype=bool)
    same[1:] = sv[1:] == sv[:-1]
    prev = np.full(K, -1, dtype=np.int64)
    prev[order[1:][same[1:]]] = order[:-1][same[1:]]  # previous position of the same value
    first_of = np.empty(K, dtype=np.int64)            # first position of the value at each position
    grp_start = np.flatnonzero(~same)
    grp = np.cumsum(~same) - 1
    first_of[order] = order[grp_start[grp]]
    rec = np.flatnonzero(prev >= 0)
    c = cost[seq[rec]].astype(np.float64)
    out = []
    local = tile[prev[rec]] == tile[rec]
    if local.any():
        s = np.bincount(tile[rec[local]], weights=c[local], minlength=bounds.shape[0] - 1)
        for t in np.flatnonzero(s > 0).tolist():
            out.append((float(s[t]), (int(bounds[t]), int(bounds[t + 1]))))
    far = tile[first_of[rec]] != tile[rec]
    if far.any():
        ta, tb = tile[first_of[rec[far]]], tile[rec[far]]
        key = ta * (bounds.shape[0]) + tb
        uk, inv = np.unique(key, return_inverse=True)
        s = np.bincount(inv, weights=c[far])
        for k, sc in zip(uk.tolist(), s.tolist()):
            a_, b_ = divmod(k, bounds.shape[0])
            if b_ > a_ + 1:  # adjacent segments: one window of both
                out.append((float(sc), (int(bounds[a_]), int(bounds[a_ + 1]), int(bounds[b_]), int(bounds[b_ + 1]))))
            else:
                out.append((float(sc), (int(bounds[a_]), int(bounds[b_ + 1]))))
    out.sort(key=lambda x: (-x[0], x[1]))
    return out


class SegmentResolve(Improver):
    """Re-solve the incumbent one segment at a time (see the module docstring).

    Parameters
    ----------
    exact_nodes : int
        SCIP node limit of one window's exact solve.
    max_items : int
        Model size up to which a window is solved exactly (``0``: the local
        kernels only).
    lengths : tuple of int
        Segment lengths of the round robin (positions of the sequence).

    The node limit of ``limits`` (``Limits(nodes=k)``) counts windows; with a
    node or work budget and no deadline the result is deterministic for a
    seed.
    """

    name = "segment_resolve"
    version = "1"
    capabilities = _CAPS
    rank = 22.0
    #: registered, run when named (``anytime_solve(..., improvers=[..., "segment_resolve"])``): in the default
    #: portfolio it took time from LNS at 100k (decoder_varied 100k, 20 s: gap 0.758 % with it, 0.556 % without, load
    #: 2.0 / 1.5; benchmarks/results/segment_resolve_s30.md)
    run_by_default = False

    def __init__(self, *, exact_nodes: int = EXACT_NODES, max_items: int = MAX_ITEMS,
                 lengths: tuple = SEGMENT_POSITIONS):
        self.exact_nodes = int(exact_nodes)
        self.max_items = int(max_items)
        self.lengths = tuple(int(x) for x in lengths)

    def _exact_limits(self, lim: Limits) -> Limits:
        if math.isfinite(lim.deadline):
            return replace(lim.share(min(_EXACT_MAX_S, _EXACT_SHARE * lim.left())), nodes=self.exact_nodes,
                           work=None)
        return Limits.seconds(_EXACT_MAX_S, nodes=self.exact_nodes, stop=lim.stop)

    def improve(self, problem, plan, *, seed: int = 0, limits=None, on_incumbent=None, shared=None):
        if plan is None:
            return None
        base = simulate(problem, plan)
        if not base.valid or not problem.is_single_device:
            return plan
        lim = limits if limits is not None else Limits()
        a = GraphArrays.from_problem(problem)
        meter = WorkMeter(lim)
        try:
            seq = meter.prune(a, sequence_of_plan(plan))
        except PlanError:
            return plan
        search = SegmentSearch(a, seq, seed=seed)
        if not search.check():
            return plan
        stats = {"windows": 0, "exact": 0, "improved": 0, "exact_improved": 0, "cycles": 0}
        best = {"reported": base.total_time}
        last_report = [time.perf_counter()]

        def report(force=False):
            if on_incumbent is None or search.cost >= best["reported"] - 1e-12 * max(1.0, best["reported"]):
                return
            if not force and time.perf_counter() - last_report[0] < _REPORT_EVERY_S:
                return
            out = finish(problem, a, search.seq, self.name, seed=seed)
            last_report[0] = time.perf_counter()
            if out is not None:
                best["reported"] = search.cost
                on_incumbent(out, self.name)

        max_windows = lim.nodes
        tried: set = set()
        turn, quiet_turns = 0, 0
        cands: list = []
        while not meter.spent and not lim.expired() and (max_windows is None or stats["windows"] < max_windows):
            if shared is not None:
                inc = _shared_start(problem, a, meter, shared, search.cost)
                if inc is not None:
                    search.reset(inc)
                    best["reported"] = min(best["reported"], search.cost)
                    cands = []
            if not cands:
                length = self.lengths[turn % len(self.lengths)]
                offset = (length // 2) * ((turn // len(self.lengths)) % 2)
                cands = [w for _, w in segment_windows(search.seq, a.cost, search.mem_at, length, offset)
                         if _key(search.seq, w) not in tried]
                turn += 1
                if not cands:
                    quiet_turns += 1
                    if quiet_turns >= 2 * len(self.lengths):
                        break  # a whole cycle of offsets and lengths without a window to try: converged
                    continue
                stats["cycles"] = turn
            win = cands.pop(0)
            tried.add(_key(search.seq, win))
            stats["windows"] += 1
            if self._resolve(search, win, meter, lim, stats):
                quiet_turns = 0
                stats["improved"] += 1
                cands = []  # positions moved: the segments are recomputed on the new sequence
                report()
        report(force=True)
        if search.cost >= base.total_time - 1e-12 * max(1.0, base.total_time):
            return plan
        out = finish(problem, a, search.seq, self.name, seed=seed, **{f"resolve_{k}": int(v) for k, v in stats.items()})
        if out is None or simulate(problem, out).total_time >= base.total_time:
            return plan
        return out

    def _resolve(self, search: SegmentSearch, win, meter: WorkMeter, lim: Limits, stats: dict) -> bool:
        """Re-solve one window of ``search``'s sequence; ``True`` when it improved."""
        local = extract_window(search.a, search.seq, search.end, search.mem_at, *win)
        if local is None:
            return False
        target = local.cost - 1e-9 * max(1.0, local.cost)
        best, best_c, exact = None, target, False
        for c in search._local_candidates(local, meter):
            c = local.normalise(c)
            if c is not None and local.local_cost(c) < best_c:
                best, best_c = c, local.local_cost(c)
        if self.max_items and 8 * local.n_local ** 2 <= self.max_items and not lim.expired():
            stats["exact"] += 1
            cand = local.normalise(exact_window(local, limits=self._exact_limits(lim)))
            if cand is not None and local.local_cost(cand) < best_c:
                best, best_c, exact = cand, local.local_cost(cand), True
        if best is None:
            return False
        ok = search._accept(local, best, exact=exact)
        if ok and exact:
            stats["exact_improved"] += 1
        return ok

    def warmup(self) -> None:
        """Compile (or load) the window kernels on a tiny problem."""
        from ..generators import random_layered
        from ..problem import Problem
        from .local_search import LocalSearch

        p = Problem.single(random_layered(30, seed=0), "90%")
        plan = LocalSearch(max_iters=2).run(p)
        if plan is not None:
            self.improve(p, plan, limits=Limits(nodes=2))


def _key(seq: np.ndarray, win) -> tuple:
    """A window by its contents (positions move when another window changes)."""
    if len(win) == 2:
        return (seq[win[0]:win[1]].tobytes(),)
    a0, a1, b0, b1 = win
    return (seq[a0:a1].tobytes(), seq[b0:b1].tobytes(), b0 - a1)


def _shared_start(problem, a, meter, shared, cost):
    """The portfolio's incumbent as a pruned sequence when it beats ``cost``, else ``None``."""
    try:
        if not shared.incumbent_value() < cost - 1e-12 * max(1.0, cost):
            return None
        inc = shared.incumbent()
        if inc is None:
            return None
        seq = meter.prune(a, sequence_of_plan(inc))
    except PlanError:
        return None
    return seq if float(a.cost[seq].sum()) < cost else None
