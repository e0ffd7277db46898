"""segment_resolve (hybrid_remat.heuristics.segment_resolve): every spliced
plan passes the simulator, a plan never gets worse, the flat optimum is
reached where brute force knows it, and it registers like the other
improvers.  Node limits only (windows and SCIP nodes), no wall clock."""

import networkx as nx
import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import chain, random_layered, training_graph
from hybrid_remat.heuristics.local_search import LocalSearch
from hybrid_remat.heuristics.segment_resolve import SegmentResolve, segment_bounds, segment_windows
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.plan import plan_from_order
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _mid_budget(g, frac=0.5):
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    return int(lo + frac * (hi - lo))


def test_segment_bounds_cover_the_sequence():
    mem = np.random.default_rng(0).integers(0, 100, 500)
    for length in (2, 7, 32):
        for offset in (0, length // 2):
            b = segment_bounds(mem, length, offset)
            assert b[0] == 0 and b[-1] == 500 and (np.diff(b) > 0).all()


def test_windows_hold_the_recomputations_they_score():
    seq = np.array([0, 1, 2, 3, 0, 4, 1, 5, 2, 6])
    cost = np.arange(1.0, 8.0)
    for score, w in segment_windows(seq, cost, np.zeros(seq.shape[0], np.int64), 3):
        assert score > 0
        pos = np.concatenate([np.arange(w[0], w[1])] + ([np.arange(w[2], w[3])] if len(w) == 4 else []))
        vals = seq[pos]
        assert len(np.unique(vals)) < len(vals)  # some value computed twice inside: a saving is possible


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_never_worse_and_valid(seed):
    g = random_layered(60, seed=seed)
    p = Problem.single(g, _mid_budget(g, 0.3))
    start = LocalSearch(max_iters=1).run(p, seed=seed)
    assert start is not None
    seen = []
    out = SegmentResolve(exact_nodes=20).improve(p, start, seed=seed, limits=Limits(nodes=6),
                                                 on_incumbent=lambda plan, src: seen.append(plan))
    s0, s1 = simulate(p, start), simulate(p, out)
    assert s1.valid and s1.total_time <= s0.total_time + 1e-9
    last = s0.total_time
    for plan in seen:                       # every reported plan passed the simulator and improves
        r = simulate(p, plan)
        assert r.valid and r.total_time < last
        last = r.total_time


def test_reaches_brute_force_optimum_on_a_chain():
    g = chain(5, bytes=1)
    p = Problem.single(g, 3)
    opt = brute_force(p)[0]
    start = plan_from_order(g, [0, 1, 2, 0, 1, 3, 0, 1, 2, 4], "cost")   # recomputes for nothing
    assert simulate(p, start).valid and simulate(p, start).total_time > opt
    out = SegmentResolve(exact_nodes=200).improve(p, start, limits=Limits(nodes=40))
    assert simulate(p, out).valid
    assert simulate(p, out).total_time == pytest.approx(opt)


@pytest.mark.parametrize("n", [3, 4])
def test_reaches_brute_force_optimum_on_training_chains(n):
    g = training_graph(nx.path_graph(n, create_using=nx.DiGraph))
    p = Problem.single(g, min_feasible_budget(g))
    opt = brute_force(p)[0]
    start = LocalSearch(max_iters=1).run(p)
    out = SegmentResolve(exact_nodes=200).improve(p, start, limits=Limits(nodes=40))
    assert simulate(p, out).valid
    assert simulate(p, out).total_time <= simulate(p, start).total_time + 1e-9
    assert simulate(p, out).total_time == pytest.approx(opt)


def test_returns_the_plan_when_nothing_to_gain():
    g = chain(6, bytes=1)
    p = Problem.single(g, keep_all_peak(g))
    start = plan_from_order(g, list(range(6)), "cost")
    assert SegmentResolve().improve(p, start, limits=Limits(nodes=5)) is start


def test_registered_like_the_other_improvers():
    imp = plugins.improvers()["segment_resolve"]
    assert isinstance(imp, SegmentResolve) and "honours_limits" in imp.capabilities
    assert imp.run_by_default is False  # runs when named (benchmarks/results/segment_resolve_s30.md)
