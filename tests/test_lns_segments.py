"""Window moves of LNS (hybrid_remat.heuristics.lns_segments): the local
problem of a window is exact, moves never worsen the plan, every plan is
valid, runs repeat per seed, and an expired deadline stops the search."""

import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.core.sequence import sequence_profile_kernel
from hybrid_remat.generators import random_layered
from hybrid_remat.heuristics import local_search
from hybrid_remat.heuristics.common import GraphArrays, WorkMeter, finish, sequence_of_plan
from hybrid_remat.heuristics.lns_kernels import window_kernel
from hybrid_remat.heuristics.lns_segments import (
    SegmentSearch,
    choose_window,
    exact_window,
    extract_window,
    splice,
)
from hybrid_remat.heuristics.local_search import LNS, LocalSearch
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _start(seed=1, n=200):
    g = random_layered(n, seed=seed)
    p = Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)
    plan = LocalSearch(max_iters=3).run(p)
    a = GraphArrays.from_problem(p)
    return p, a, plan, WorkMeter().prune(a, sequence_of_plan(plan))


def _profile(a, seq):
    return sequence_profile_kernel(seq, np.ones(seq.shape[0], dtype=np.bool_), a.bytes, a.pred_ptr, a.pred_idx)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_window_is_an_exact_local_problem(seed):
    """The local sequence's memory plus the background is the plan's memory
    at every window position (at the junction of two ranges, at least the
    middle's), and splicing the local sequence back gives the plan itself."""
    p, a, plan, seq = _start(seed)
    end, mem_at, _ = _profile(a, seq)
    recomputed = np.ones(seq.shape[0], dtype=bool)
    recomputed[np.unique(seq, return_index=True)[1]] = False
    rng = np.random.default_rng(seed)
    checked = {2: 0, 4: 0}
    for _ in range(120):
        win = choose_window(rng, a.cost, seq, recomputed, mem_at, length=int(rng.integers(3, 150)))
        local = extract_window(a, seq, end, mem_at, *win)
        if local is None:
            continue
        a0, a1, b0, b1 = local.ranges
        checked[2 if a1 == b0 else 4] += 1
        _, loc_mem, _ = _profile(local.arrays, local.seq)
        ni, na = local.n_inputs, a1 - a0
        assert np.array_equal(loc_mem[ni:ni + na] + local.background, mem_at[a0:a1])
        if b0 > a1:
            n_mid, n_j = int((local.kind == 3).sum()), int((local.kind == 2).sum())
            assert loc_mem[ni + na:ni + na + n_j].max() + local.background == mem_at[a1:b0].max()
            second = ni + na + n_j + n_mid
            assert np.array_equal(loc_mem[second:second + b1 - b0] + local.background, mem_at[b0:b1])
        assert np.array_equal(splice(seq, local, local.seq), seq)
        norm = local.normalise(local.seq)
        assert np.array_equal(norm, local.seq) and local.local_cost(norm) == pytest.approx(local.cost)
    assert checked[2] > 20 and checked[4] > 10


def test_window_kernel_agrees_with_its_python_version():
    p, a, plan, seq = _start(3, n=80)
    end, mem_at, _ = _profile(a, seq)
    K = seq.shape[0]
    for r in ((0, 10, 10, 10), (5, 40, 40, 40), (20, K, K, K), (3, 20, 40, 70), (0, 5, K - 20, K)):
        got = window_kernel(seq, end, mem_at, a.bytes, a.pred_ptr, a.pred_idx, a.n, *r)
        ref = window_kernel.py_func(seq, end, mem_at, a.bytes, a.pred_ptr, a.pred_idx, a.n, *r)
        for x, y in zip(got, ref):
            assert np.array_equal(np.asarray(x), np.asarray(y))


def test_window_moves_never_worsen_keep_every_plan_valid_and_repeat_per_seed():
    p, a, plan, seq = _start(2)
    runs = []
    for _ in range(2):
        s = SegmentSearch(a, seq, seed=5)
        costs = [s.cost]
        for k in range(40):
            if k % 10 == 9:
                s.step_exact(limits=Limits(nodes=50))
            else:
                s.step()
            costs.append(s.cost)
            assert s.check()
        assert all(x >= y for x, y in zip(costs, costs[1:]))
        out = finish(p, a, s.seq, "lns")
        assert out is not None and simulate(p, out).valid
        assert simulate(p, out).total_time <= simulate(p, plan).total_time + 1e-9
        runs.append(s.seq)
    assert np.array_equal(runs[0], runs[1])


def test_the_exact_window_model_returns_a_valid_local_sequence_or_nothing():
    p, a, plan, seq = _start(4, n=120)
    end, mem_at, _ = _profile(a, seq)
    recomputed = np.ones(seq.shape[0], dtype=bool)
    recomputed[np.unique(seq, return_index=True)[1]] = False
    rng = np.random.default_rng(0)
    for _ in range(3):
        local = extract_window(a, seq, end, mem_at, *choose_window(rng, a.cost, seq, recomputed, mem_at, length=20))
        if local is None:
            continue
        out = exact_window(local, limits=Limits(nodes=50))
        if out is not None:
            norm = local.normalise(out)
            assert norm is not None and local.local_cost(norm) < local.cost
            _, loc_mem, _ = _profile(local.arrays, norm)
            assert loc_mem.max() <= local.arrays.budget


def test_lns_with_windows_on_a_large_graph_path(monkeypatch):
    """The large-graph path (time split between window and global moves,
    starts on a share) with a move budget never worsens; an already expired
    deadline returns the given plan untouched."""
    monkeypatch.setattr(local_search, "WINDOWS_NODES", 50)
    p, a, plan, seq = _start(5)
    base = simulate(p, plan).total_time
    out = LNS(max_iters=30).improve(p, plan, seed=1, limits=Limits.seconds(600.0))
    assert simulate(p, out).valid and simulate(p, out).total_time <= base + 1e-9
    assert out is plan or out.meta["window_moves"] > 0  # window moves ran
    expired = Limits(deadline=0.0)
    assert expired.expired()
    assert LNS().improve(p, plan, seed=1, limits=expired) is plan
