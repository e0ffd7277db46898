"""Issue 24.1: the chain-of-cuts bound (several memory constraints at once)
holds for every plan (brute force) and is stronger than the single cut
where a recomputed value must be kept until a later cut."""

import networkx as nx
import numpy as np

from hybrid_remat import plugins
from hybrid_remat.bounds.cut import cut_lower_bound
from hybrid_remat.bounds.multicut import MAX_NODES, multicut_lower_bound, spread_cuts
from hybrid_remat.budgets import budget_lower_bound, keep_all_peak
from hybrid_remat.generators import chain, random_layered, training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem


def _training(rng, layers):
    fw = nx.path_graph(layers, create_using=nx.DiGraph)
    for i in fw:
        fw.nodes[i]["bytes"], fw.nodes[i]["cost"] = int(rng.integers(1, 6)), float(rng.integers(1, 10))
    return training_graph(fw)


def test_it_is_registered_over_every_plan():
    src = plugins.bounds()["multicut_bound"]
    r = src.bound(Problem.single(training_graph(nx.path_graph(5, create_using=nx.DiGraph)), 6))
    assert r.scope == "all plans" and r.value > 19.0


def test_never_above_the_optimum_and_stronger_than_one_cut():
    rng = np.random.default_rng(0)
    stronger = 0
    for _ in range(8):
        g = _training(rng, 4)
        for B in range(budget_lower_bound(g), keep_all_peak(g)):
            p = Problem.single(g, B)
            opt = brute_force(p)[0]
            for milp in (True, False):
                mb = multicut_lower_bound(p, milp=milp, limits=Limits(nodes=500))
                assert p.base_cost <= mb.value <= opt * (1 + 1e-9), (mb, opt)
            stronger += mb.value > cut_lower_bound(p).value + 1e-6
    assert stronger >= 1


def test_random_dags_and_rescaled_costs_stay_below_the_optimum():
    rng = np.random.default_rng(1)
    for k in range(12):
        g = random_layered(int(rng.integers(5, 9)), seed=k) if k % 2 else _training(rng, 3)
        if g.n > 9:
            continue
        g = g.with_costs({kind: g.cost(kind) * 10.0 ** rng.uniform(-12, 12) for kind in g.cost_kinds})
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        p = Problem.single(g, int(rng.integers(lo, hi + 1)))
        opt = brute_force(p)[0]
        assert multicut_lower_bound(p, limits=Limits(nodes=200)).value <= opt * (1 + 1e-9)


def test_an_expired_limit_or_a_large_graph_gives_the_trivial_bound():
    p = Problem.single(training_graph(nx.path_graph(5, create_using=nx.DiGraph)), 6)
    assert multicut_lower_bound(p, limits=Limits(deadline=0.0)).value == p.base_cost
    big = Problem.single(chain(MAX_NODES + 1, bytes=1), 2)
    mb = multicut_lower_bound(big)
    assert mb.value == big.base_cost and "skipped" in mb.stats


def test_spread_cuts_keep_the_heaviest_half_and_spread_the_rest():
    rng = np.random.default_rng(3)
    for _ in range(30):
        m = int(rng.integers(1, 60))
        w = rng.uniform(0, 1, m) * (rng.uniform(0, 1, m) < 0.7)
        k = int(rng.integers(1, 45))
        keep = spread_cuts(w, k)
        assert keep.size == min(k, m) and np.all(np.diff(keep) > 0) and 0 <= keep.min() and keep.max() < m
        heavy = np.argsort(-w, kind="stable")[:min(k, m) // 2]
        assert set(heavy.tolist()) <= set(keep.tolist())
        if m > k >= 4:   # the rest reaches both ends of what the heaviest left (spread, not clustered)
            rest = np.setdiff1d(np.arange(m), heavy)
            assert rest[0] in keep and rest[-1] in keep


def test_short_spread_chains_stay_below_the_optimum():
    # few cuts: the short chain and the long one differ, the best of them is kept
    rng = np.random.default_rng(5)
    for _ in range(6):
        g = _training(rng, 5)
        B = int(rng.integers(budget_lower_bound(g), keep_all_peak(g)))
        p = Problem.single(g, B)
        opt = brute_force(p)[0]
        mb = multicut_lower_bound(p, max_cuts=4, limits=Limits(nodes=300))
        assert p.base_cost <= mb.value <= opt * (1 + 1e-9)



def test_expired_limits_return_at_once_with_no_work(monkeypatch):
    """A time limit is a promise: with no time left, no screen, no model, no LP."""
    from hybrid_remat.bounds import multicut as M

    p = Problem.single(training_graph(nx.path_graph(8, create_using=nx.DiGraph)), 9)

    def boom(*a, **kw):
        raise AssertionError("work done after the deadline")

    monkeypatch.setattr(M, "_screen", boom)
    monkeypatch.setattr(M, "_certified_lp", boom)
    r = M.multicut_lower_bound(p, limits=Limits(deadline=0.0))
    assert r.method == "none" and r.value == p.base_cost and r.stats["skipped"] == "no time left"


def test_a_stop_during_the_build_ends_it_within_a_batch_of_rows(monkeypatch):
    """The model's Python loops look at the clock every ``_CHECK_EVERY`` rows
    (here 16): a stop flag set while a cut's rows are added ends the build
    within that many rows, long before the model is complete."""
    import threading

    from hybrid_remat.bounds import cut_chains
    from hybrid_remat.bounds import multicut as M
    from hybrid_remat.bounds.cut_chains import cut_chain, spread_cuts

    g = random_layered(60, seed=2)
    p = Problem.single(g, int(max(budget_lower_bound(g), 0.6 * keep_all_peak(g))))
    w = M._screen(p, 10**9)
    path = cut_chain(g, w, g.n + 1)
    chain = [path[i] for i in spread_cuts(w[path], 6).tolist()]
    full = M._model(p, chain, Limits())
    total = full[1].shape[0]
    assert total > 200
    monkeypatch.setattr(M, "_CHECK_EVERY", 16)
    stop = threading.Event()
    added = []
    real = cut_chains.SparseRows.add

    def add(self, cols, vals, rhs):
        added.append(1)
        if len(added) == 50:
            stop.set()
        real(self, cols, vals, rhs)

    monkeypatch.setattr(cut_chains.SparseRows, "add", add)
    assert M._model(p, chain, Limits(stop=stop)) is None
    assert len(added) <= 50 + 16 + 1 < total
