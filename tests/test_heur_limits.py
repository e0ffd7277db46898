"""Work budgets: every heuristic, improver and kernel stops when its work
budget is spent, with nothing or a valid plan, and the same work gives the
same result (no wall-clock limit is asserted here)."""

from __future__ import annotations

import numpy as np
import pytest

from hybrid_remat.core.sequence import prune_kernel, sequence_peak_kernel
from hybrid_remat.generators import random_layered
from hybrid_remat.heuristics import builtin_heuristics, builtin_improvers
from hybrid_remat.heuristics.common import GraphArrays, empty_drop, run_executor
from hybrid_remat.heuristics.executor import STATUS_WORK_SPENT, execute_kernel
from hybrid_remat.heuristics.lifetime_split import SPLIT_OK, SPLIT_WORK_SPENT, split_kernel
from hybrid_remat.heuristics.local_search import LocalSearch
from hybrid_remat.limits import UNLIMITED_WORK, Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _problem(pct="75%", n=80, seed=2):
    return Problem.single(random_layered(n, seed=seed), pct)


def _deterministic(h):
    """The registered object, or a copy without its own time cap (the caps are deadlines)."""
    if h.name == "local_search":
        return LocalSearch(time_limit=None, max_iters=6)
    return h


HEURISTICS = [_deterministic(h) for h in builtin_heuristics()]


@pytest.mark.parametrize("h", HEURISTICS, ids=[h.name for h in HEURISTICS])
def test_a_spent_work_budget_gives_none_or_a_valid_plan_and_repeats(h):
    p = _problem()
    assert "honours_limits" in h.capabilities and "deterministic" in h.capabilities
    for work in (0, 1, 300, 30_000, 3_000_000):
        a = h.run(p, seed=0, limits=Limits(work=work))
        b = h.run(p, seed=0, limits=Limits(work=work))
        assert (a is None and b is None) or a == b, (h.name, work)
        if a is not None:
            r = simulate(p, a)
            assert r.valid, (h.name, work, r.error)


@pytest.mark.parametrize("h", HEURISTICS, ids=[h.name for h in HEURISTICS])
def test_a_set_stop_flag_returns_at_once_with_none_or_a_valid_plan(h):
    import threading

    p = _problem()
    stop = threading.Event()
    stop.set()
    plan = h.run(p, seed=0, limits=Limits(stop=stop))
    assert plan is None or simulate(p, plan).valid


@pytest.mark.parametrize("imp", builtin_improvers(), ids=[i.name for i in builtin_improvers()])
def test_improvers_never_worsen_report_strict_gains_and_repeat_with_a_work_budget(imp):
    p = _problem("80%")
    start = HEURISTICS[[h.name for h in HEURISTICS].index("dtr_lru")].run(p)
    assert start is not None
    base = simulate(p, start).total_time
    assert "honours_limits" in imp.capabilities
    for work in (0, 1000, 2_000_000):
        seen = []
        lim = Limits(work=work, nodes=20)
        out = imp.improve(p, start, seed=1, limits=lim, on_incumbent=lambda pl, src, seen=seen: seen.append((pl, src)))
        again = imp.improve(p, start, seed=1, limits=lim)
        assert out == again, (imp.name, work)
        r = simulate(p, out)
        assert r.valid and r.total_time <= base + 1e-9
        costs = [simulate(p, pl).total_time for pl, _ in seen]
        assert all(src == imp.name for _, src in seen)
        assert all(c < base - 1e-12 for c in costs) and all(x > y for x, y in zip(costs, costs[1:]))


def test_lns_restarts_from_a_better_shared_incumbent():
    from hybrid_remat.heuristics.local_search import LNS

    p = _problem("80%")
    poor = HEURISTICS[[h.name for h in HEURISTICS].index("dtr_lru")].run(p)
    good = LocalSearch(time_limit=None, max_iters=30).improve(p, poor, seed=3)
    assert simulate(p, good).total_time < simulate(p, poor).total_time

    class Shared:
        def incumbent(self):
            return good

        def incumbent_value(self):
            return simulate(p, good).total_time

        def lower_bound(self):
            return -np.inf

    out = LNS(max_iters=1).improve(p, poor, seed=0, shared=Shared())  # one move, after the restart
    assert simulate(p, out).total_time <= simulate(p, good).total_time + 1e-9


def test_kernels_stop_when_their_work_is_spent_and_keep_their_prefix():
    p = _problem("80%")
    a = GraphArrays.from_problem(p)
    dptr, didx = empty_drop(a.n)
    w = np.ones(a.n)
    args = (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx, w,
            1, True, 0, 20 * a.n, 2048, 256)
    go = np.zeros(1, dtype=np.uint8)  # the stop flag, never set here
    full = execute_kernel(*args, UNLIMITED_WORK, go)
    assert full[0] == 0 and full[5] > 10
    part = execute_kernel(*args, np.int64(full[5] // 2), go)
    assert part[0] == STATUS_WORK_SPENT and part[5] <= full[5] // 2 + a.n
    assert np.array_equal(part[1], full[1][:len(part[1])]) and np.array_equal(part[2], full[2][:len(part[2])])
    assert not run_executor(a, work=full[5] // 2).ok
    sargs = (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), 0.0, 0, a.n + 10,
             3, 0, np.arange(a.n, dtype=np.int64))
    status, seq, used = split_kernel(*sargs, UNLIMITED_WORK)
    assert status == SPLIT_OK and used > 2 * a.n
    status2, _, used2 = split_kernel(*sargs, np.int64(used // 2))
    # it stops within one iteration of the budget: an iteration counts its passes over the sequence (profile,
    # positions, the log K rows of the range-maximum table) and the inputs its candidates read
    K, edges = len(seq), int(a.pred_ptr[-1])
    one_iteration = K * (int(np.log2(K)) + 2) + 2 * K * (edges // a.n + 1) + K + 2 * 65 * edges
    assert status2 == SPLIT_WORK_SPENT and used2 <= used // 2 + one_iteration
    # a partial prune is still within the budget
    long = np.sort(np.concatenate([np.arange(a.n), np.arange(a.n)]), kind="stable")
    act = np.ones(long.size, dtype=np.bool_)
    peak = sequence_peak_kernel(long, act, a.bytes, a.pred_ptr, a.pred_idx)
    _, d_all, u_all = prune_kernel(long, act.copy(), a.bytes, a.cost, a.pred_ptr, a.pred_idx, np.int64(peak),
                                   UNLIMITED_WORK)
    act_half, d_half, u_half = prune_kernel(long, act.copy(), a.bytes, a.cost, a.pred_ptr, a.pred_idx,
                                            np.int64(peak), np.int64(u_all // 2))
    assert 0 < d_half < d_all and u_half < u_all
    assert sequence_peak_kernel(long, act_half, a.bytes, a.pred_ptr, a.pred_idx) <= peak
