"""The improver family: drop recomputations, local search and
ruin-and-recreate (LNS) on one-device plans.

All three are :class:`~hybrid_remat.interfaces.Improver`\\ s: ``improve(problem,
plan, *, seed=0, limits=None, on_incumbent=None, shared=None)`` returns a
plan at most as costly as ``plan`` (``plan`` itself when nothing better was
found), reports each strict improvement with ``on_incumbent(plan, name)`` as
it is found, and returns within ``limits``.  Every plan they hand out passed
the simulator.

* ``drop_recomputations`` (:class:`DropRecomputations`): the plan's compute
  sequence without unread recomputations and without every recomputation
  the budget does not need, most expensive first
  (:func:`hybrid_remat.pruning.drop_recomputations`; near-linear).
* ``local_search`` (:class:`LocalSearch`): prune the plan, add deterministic
  starts (lifetime splitting, DTR eviction, budget continuations), then a
  bounded number of moves (``max_iters``, default 300): mostly *ruin and
  recreate* (drop a random share of the best sequence's recomputations,
  repair the budget violations by lifetime splitting, prune; equal-cost
  results are accepted to walk plateaus), interleaved with fresh randomized
  plans (splitting with seeded score noise; DTR eviction with random
  per-value score weights).  It is also a heuristic: ``run(problem)``
  searches from no plan.
* ``lns`` (:class:`LNS`): the same moves until its limits are spent, and
  with ``shared`` (capability ``"shares_incumbent"``) it restarts from the
  portfolio's incumbent whenever that is better than its own best.  Half of
  its moves are *window moves* (:mod:`.lns_segments`): one window of the
  best sequence (one range, or a value's making and its recomputation with
  the middle fixed) re-solved as an exact local problem, by the heuristic
  kernels and every tenth time by the exact window model (SCIP, node
  limit), at a cost proportional to the window plus two ``O(n)`` Numba
  passes for the full check.  From :data:`WINDOWS_NODES` nodes with a
  deadline (a global move re-reads the whole sequence once per split), the
  deterministic starts of a search from a plan get at most half of the
  time, and then the kind of move (window or global) with the higher cost
  decrease per second so far runs next, each kept at 15 % of the time at
  least (``benchmarks/results/lns_scale.md``).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.limits import Limits
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(random_layered(60, seed=3), "90%")
>>> plan = LocalSearch(max_iters=20).run(p)
>>> plan is None or simulate(p, plan).valid
True
>>> better = LNS().improve(p, plan, limits=Limits(work=2_000_000)) if plan is not None else None
>>> better is None or simulate(p, better).total_time <= simulate(p, plan).total_time
True
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ..errors import PlanError
from ..interfaces import Improver
from ..limits import Limits
from ..pruning import drop_recomputations
from ..simulate import simulate
from .common import GraphArrays, WorkMeter, finish, sequence_of_plan
from .lifetime_split import ruin_and_recreate, split_continuation, split_sequence
from .lns_segments import SegmentSearch

__all__ = ["DropRecomputations", "LocalSearch", "LNS", "FIRST_START_WORK", "plan_order", "PLAN_ORDER_MAX_NODES"]

_SCORES = ("next_use_full", "dtr_eq", "next_use_eq", "dtr", "msps")
#: work units the first deterministic start may use even when the limits are already spent (about 10 ms):
#: a stopped search still returns the plan every search starts from on small graphs
FIRST_START_WORK = 200_000
_SPLIT_SECONDS_PER_N18 = 7.6e-8  # a lifetime-splitting run takes about 7.6e-8 n^1.8 s (LifetimeSplit.predict_seconds)
_FLOOR_SECONDS = 0.01  # about what FIRST_START_WORK buys
#: window moves (lns_segments): half of LNS's moves; from WINDOWS_NODES nodes with a deadline (a global move
#: re-reads the whole sequence per split: seconds at 100k nodes) the kind with more gain per second (each at least
#: _MIN_TIME of the time), and the deterministic
#: starts of a search from a plan at most _STARTS_SHARE of the time
_WINDOW_SHARE = 0.5
WINDOWS_NODES = 5_000
_STARTS_SHARE = 0.5
_MIN_TIME = 0.15
#: every _EXACT_EVERY-th window move is solved by the exact window model (SCIP), with a node limit and at
#: most _EXACT_MAX_S seconds
_EXACT_EVERY = 10
_EXACT_NODES = 300
_EXACT_MAX_S = 2.0
#: improvements found by window moves are reported at most this often (each report simulates the whole plan)
_REPORT_EVERY_S = 0.5
_FAMILY_CAPS = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})


class DropRecomputations(Improver):
    """Drop the recomputations the budget does not need (near-linear,
    deterministic); see :func:`hybrid_remat.pruning.drop_recomputations`."""

    name = "drop_recomputations"
    version = "2"
    capabilities = _FAMILY_CAPS
    rank = 1.0

    def improve(self, problem, plan, *, seed: int = 0, limits=None, on_incumbent=None, shared=None):
        if plan is None:
            return None
        out = drop_recomputations(problem, plan, limits=limits)
        if out is not plan and on_incumbent is not None:
            if simulate(problem, out).total_time < simulate(problem, plan).total_time:
                on_incumbent(out, self.name)
        return out


def _window_turn(spent_s: dict, gain: dict) -> bool:
    """Whether the next move is a window move: the kind with the higher
    cost decrease per second so far, each kind kept at :data:`_MIN_TIME`
    of the time at least (both start equal)."""
    tw, tg = spent_s["windows"], spent_s["global"]
    total = tw + tg
    if total <= 0 or tw < _MIN_TIME * total:
        return True
    if tg < _MIN_TIME * total:
        return False
    return gain["windows"] / tw >= gain["global"] / tg


class LocalSearch(Improver):
    """Improve plans with ruin-and-recreate moves (see the module docstring).

    Parameters
    ----------
    time_limit : float or None
        Seconds one call spends at most (on top of ``limits``; default 1 s;
        ``None``: only ``limits``).
    max_iters : int or None
        Moves of the improvement loop (default 300); ``None``: until the
        limits.  With a move or work budget and no deadline the result is
        deterministic for a seed.
    """

    name = "local_search"
    version = "2"
    capabilities = _FAMILY_CAPS
    rank = 50.0

    def __init__(self, time_limit: float | None = 1.0, *, max_iters: int | None = 300, name: str | None = None,
                 rank: float | None = None):
        self.time_limit = None if time_limit is None else float(time_limit)
        self.max_iters = max_iters
        if name:
            self.name = name
        if rank is not None:
            self.rank = rank

    def run(self, problem, *, seed: int = 0, limits=None):
        """Search from no plan (the heuristic ``local_search``)."""
        return self.improve(problem, None, seed=seed, limits=limits)

    def _segment_share(self, n: int) -> float:
        """Share of window moves (none: the local search moves only)."""
        return 0.0

    @staticmethod
    def _exact_limits(lim):
        """Limits of one exact window solve: a node limit, and with a deadline
        at most a quarter of the time left (:data:`_EXACT_MAX_S`)."""
        if math.isfinite(lim.deadline):
            return replace(lim.share(min(_EXACT_MAX_S, 0.25 * lim.left())), nodes=_EXACT_NODES, work=None)
        return Limits(nodes=_EXACT_NODES, stop=lim.stop)

    def _limits(self, limits):
        lim = limits if limits is not None else Limits()
        return lim.share(self.time_limit) if self.time_limit is not None else lim

    def improve(self, problem, plan=None, *, seed: int = 0, limits=None, on_incumbent=None, shared=None,
                max_iters: int | None = -1):
        """A plan at most as costly as ``plan`` (``plan`` itself when nothing
        better was found; ``None`` only if ``plan`` is ``None`` and no
        feasible plan was found).

        ``limits`` bounds time and work (and the object's ``time_limit``,
        the tighter applies); ``max_iters`` overrides the move budget
        (``-1``: the object's).  ``on_incumbent(plan, name)`` receives each
        strict improvement over ``plan`` as it is found.

        From a plan, the search runs in the plan's order (the order of its
        first computations, :func:`plan_order`): its fresh plans (splitting,
        DTR eviction) follow that order instead of the graph's, so that a
        plan found in another order (``memory_order``) is improved in it."""
        order = plan_order(problem, plan)
        if order is None:
            return self._search(problem, plan, seed=seed, limits=limits, on_incumbent=on_incumbent,
                                shared=shared, max_iters=max_iters)
        from ..core.reductions import plan_to_original, plan_to_relabelled, relabel

        q, _ = relabel(problem, order)
        back = None if on_incumbent is None else (lambda p, name: on_incumbent(plan_to_original(p, order), name))
        start = plan_to_relabelled(plan, order)
        out = self._search(q, start, seed=seed, limits=limits, on_incumbent=back,
                           shared=None if shared is None else _Relabelled(shared, order), max_iters=max_iters)
        return plan if out is None or out is start else plan_to_original(out, order)

    def _search(self, problem, plan=None, *, seed: int = 0, limits=None, on_incumbent=None, shared=None,
                max_iters: int | None = -1):
        """:meth:`improve` in the problem's own order."""
        lim = self._limits(limits)
        moves = self.max_iters if max_iters == -1 else max_iters
        a = GraphArrays.from_problem(problem)
        meter = WorkMeter(lim)
        base_plan, base_cost = None, math.inf
        best_seq, best_cost = None, math.inf
        reported = {"cost": math.inf}
        last_report = [time.perf_counter()]

        def report():
            if best_seq is None or best_cost >= min(reported["cost"], base_cost) - 1e-12:
                return
            if on_incumbent is None:
                return
            out = finish(problem, a, best_seq, self.name, seed=seed)
            if out is None:
                return
            reported["cost"] = best_cost
            on_incumbent(out, self.name)

        def consider(seq):
            nonlocal best_seq, best_cost
            if seq is None:
                return
            c = float(a.cost[seq].sum())
            if c < best_cost - 1e-12:
                best_seq, best_cost = seq, c
                report()

        if plan is not None:
            res = simulate(problem, plan)
            if res.valid:
                base_plan, base_cost = plan, res.total_time
                try:
                    consider(meter.prune(a, sequence_of_plan(plan)))
                except PlanError:
                    pass
        # a whole lifetime-splitting run that cannot finish in the time left is not started (large graphs)
        split_slow = _SPLIT_SECONDS_PER_N18 * float(a.n) ** 1.8 > max(lim.left(), _FLOOR_SECONDS)
        seg_share = self._segment_share(a.n)
        by_time = seg_share and a.n >= WINDOWS_NODES and math.isfinite(lim.deadline)
        if by_time and best_seq is not None:
            # large graphs with a plan: the starts (whole heuristic runs) get at most half of the time
            start_meter = WorkMeter(replace(lim.share(_STARTS_SHARE * lim.left()), work=None))
            self._starts(a, start_meter, seed, consider, lambda: best_seq is not None, split_slow)
        else:
            self._starts(a, meter, seed, consider, lambda: best_seq is not None, split_slow)
        spent_s = {"windows": 0.0, "global": 0.0}
        gain = {"windows": 0.0, "global": 0.0}
        rng = np.random.default_rng(seed)
        seg_rng = np.random.default_rng([seed, 7])
        windows = None  # the window search (lns_segments), on best_seq
        n_windows = 0
        it = 0
        while not meter.spent and (moves is None or it < moves):
            it += 1
            if shared is not None:
                inc = self._shared_start(problem, a, meter, shared, best_cost)
                if inc is not None:
                    best_seq, best_cost = inc
                    reported["cost"] = min(reported["cost"], best_cost)  # the portfolio has it already
            if by_time:  # large graphs: the kind of move with the higher gain per second (a global move costs O(n))
                window_move = best_seq is not None and _window_turn(spent_s, gain)
            else:
                window_move = bool(seg_share) and best_seq is not None and seg_rng.random() < seg_share
            t_move = time.perf_counter()
            if window_move:
                if windows is None:
                    windows = SegmentSearch(a, best_seq, seed=seed)
                elif windows.seq is not best_seq:
                    windows.reset(best_seq)
                n_windows += 1
                if n_windows % _EXACT_EVERY == 0:
                    improved = windows.step_exact(meter, limits=self._exact_limits(lim))
                else:
                    improved = windows.step(meter)
                if improved:
                    gain["windows"] += best_cost - windows.cost
                    best_seq, best_cost = windows.seq, windows.cost
                    if time.perf_counter() - last_report[0] >= _REPORT_EVERY_S:
                        report()
                        last_report[0] = time.perf_counter()
                spent_s["windows"] += time.perf_counter() - t_move
                continue
            cost_before = best_cost
            if best_seq is not None and it % 5:
                # ruin and recreate: drop some recomputations, repair by splitting;
                # equal-cost moves are accepted to walk plateaus
                cand = ruin_and_recreate(a, best_seq, rng, frac=float(rng.uniform(0.05, 0.5)),
                                         pick=int(rng.integers(3)), noise=float(rng.uniform(0.0, 0.5)), meter=meter)
                if cand is not None and float(a.cost[cand].sum()) <= best_cost + 1e-12:
                    better = float(a.cost[cand].sum()) < best_cost - 1e-12
                    best_seq, best_cost = cand, float(a.cost[cand].sum())
                    if better:
                        report()
            elif it % 3 and not split_slow:
                consider(split_sequence(a, noise=float(rng.uniform(0.1, 0.8)), seed=int(rng.integers(1 << 30)),
                                        pick=int(rng.integers(3)), max_splits=int(rng.integers(2, 6)), meter=meter))
            else:
                w = np.exp(rng.normal(0.0, float(rng.uniform(0.2, 1.5)), a.n))
                sc = _SCORES[int(rng.integers(len(_SCORES)))]
                r = meter.execute(a, score=sc, weights=w, seed=int(rng.integers(1 << 30)))
                if r.ok:
                    consider(meter.prune(a, r.seq))
            spent_s["global"] += time.perf_counter() - t_move
            gain["global"] += max(0.0, cost_before - best_cost) if math.isfinite(cost_before) else 0.0
        if best_seq is None or best_cost >= base_cost - 1e-12:
            return base_plan
        report()  # window improvements not reported yet
        meta = {f"window_{k}": int(v) for k, v in windows.stats.items()} if windows is not None else {}
        out = finish(problem, a, best_seq, self.name, seed=seed, iterations=it, **meta)
        return out if out is not None else base_plan

    @staticmethod
    def _starts(a, meter, seed, consider, have_plan, split_slow: bool) -> None:
        """Deterministic starts while the limits allow (the first one with
        at least :data:`FIRST_START_WORK` units).  When a lifetime-splitting
        run cannot finish in the time left (``split_slow``, large graphs),
        only the near-linear DTR starts run, the cheapest eviction first."""

        def dtr_starts(scores=_SCORES[:2]):
            for sc in scores:
                if meter.spent:
                    return
                r = meter.execute(a, score=sc, seed=seed)
                if r.ok:
                    consider(meter.prune(a, r.seq))

        if split_slow:
            dtr_starts(("size",) + _SCORES[:2])
            return
        meter.floor = FIRST_START_WORK
        consider(split_sequence(a, seed=seed, pick=0, meter=meter))
        meter.floor = 0
        for pick in (1, 2):
            if meter.spent:
                return
            consider(split_sequence(a, seed=seed, pick=pick, meter=meter))
        dtr_starts()
        for pick in (0, 1, 2):
            if meter.spent:
                return
            seq = split_continuation(a, seed=seed, pick=pick, meter=meter)
            consider(seq)
            if seq is None:
                break
        # nothing fits yet: finer continuations while the limits allow
        for n_steps, pick in ((16, 0), (16, 1), (16, 2), (32, 0), (32, 1), (32, 2), (64, 0)):
            if have_plan() or meter.spent:
                return
            consider(split_continuation(a, n_steps=n_steps, seed=seed, pick=pick, meter=meter))

    @staticmethod
    def _shared_start(problem, a, meter, shared, best_cost):
        """``(sequence, cost)`` of the portfolio's incumbent when it beats
        ``best_cost``, else ``None``."""
        try:
            if not shared.incumbent_value() < best_cost - 1e-12:
                return None
            inc = shared.incumbent()
            if inc is None or not problem.is_single_device:
                return None
            seq = meter.prune(a, sequence_of_plan(inc))
        except PlanError:
            return None
        return seq, float(a.cost[seq].sum())


#: above this many nodes a search from a plan stays in the graph's order (relabelling the problem builds a
#: new graph: about a second at 100k nodes, out of a short polish share)
PLAN_ORDER_MAX_NODES = 30_000


def plan_order(problem, plan) -> np.ndarray | None:
    """The order of ``plan``'s first computations, when it is a topological
    order of every node that differs from the graph's own and the graph has
    at most :data:`PLAN_ORDER_MAX_NODES` nodes (single device); else ``None``.

    Examples
    --------
    >>> from hybrid_remat.graph import Graph
    >>> from hybrid_remat.plan import plan_from_order
    >>> from hybrid_remat.problem import Problem
    >>> g = Graph.from_arrays([1, 1, 1], [(0, 2), (1, 2)], [1.0] * 3)
    >>> p = Problem.single(g, 3)
    >>> plan_order(p, plan_from_order(g, [1, 0, 2])).tolist()
    [1, 0, 2]
    >>> plan_order(p, plan_from_order(g, [0, 1, 2])) is None
    True
    """
    n = problem.graph.n
    if plan is None or not problem.is_single_device or n > PLAN_ORDER_MAX_NODES:
        return None
    nodes = np.asarray(plan.node)[np.asarray(plan.op) == 0]
    _, first = np.unique(nodes, return_index=True)
    if first.size != n:
        return None
    order = nodes[np.sort(first)].astype(np.int64)
    if np.array_equal(order, np.arange(n)):
        return None
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    e = problem.graph.edges()
    if len(e) and np.any(pos[e[:, 0]] >= pos[e[:, 1]]):
        return None
    return order


class _Relabelled:
    """The portfolio's incumbent (``shared``) in a relabelled numbering."""

    def __init__(self, shared, order):
        self.shared, self.order = shared, order

    def incumbent_value(self):
        return self.shared.incumbent_value()

    def incumbent(self):
        from ..core.reductions import plan_to_relabelled

        inc = self.shared.incumbent()
        return None if inc is None else plan_to_relabelled(inc, self.order)


class LNS(LocalSearch):
    """Ruin and recreate until the limits are spent, restarting from the
    portfolio's incumbent (``shared``) whenever it is better than its own.

    ``max_iters`` (default ``None``: no move limit) makes runs
    deterministic for a seed (tests)."""

    name = "lns"
    version = "2"
    capabilities = _FAMILY_CAPS | {"shares_incumbent"}
    rank = 20.0

    #: moves when neither the limits nor ``max_iters`` bound the search
    UNBOUNDED_MOVES = 1000

    def __init__(self, *, max_iters: int | None = None, name: str | None = None, rank: float | None = None):
        super().__init__(None, max_iters=max_iters, name=name, rank=rank)

    def _segment_share(self, n: int) -> float:
        """Window moves (:mod:`.lns_segments`): half of the moves (of the
        time from :data:`WINDOWS_NODES` nodes with a deadline)."""
        return _WINDOW_SHARE

    def warmup(self) -> None:
        """Compile (or load) the kernels of the moves, window moves included, on a tiny problem."""
        from ..generators import random_layered
        from ..problem import Problem

        p = Problem.single(random_layered(30, seed=0), "90%")
        plan = LocalSearch(max_iters=2).run(p)
        if plan is not None:
            a = GraphArrays.from_problem(p)
            windows = SegmentSearch(a, sequence_of_plan(plan), seed=0)
            for _ in range(4):
                windows.step()

    def improve(self, problem, plan=None, *, seed: int = 0, limits=None, on_incumbent=None, shared=None,
                max_iters: int | None = -1):
        moves = self.max_iters if max_iters == -1 else max_iters
        lim = self._limits(limits)
        if moves is None and lim.nodes is not None:  # a node limit counts moves, with or without a deadline
            moves = lim.nodes
        if moves is None and lim.deterministic and lim.work is None:
            moves = self.UNBOUNDED_MOVES
        return super().improve(problem, plan, seed=seed, limits=lim, on_incumbent=on_incumbent, shared=shared,
                               max_iters=moves)

