"""Issue 20 / 24.1: the frontier chain bound (chain of cuts over every node,
set cuts for incomparable siblings) holds for every plan (brute force on
many tiny graphs, costs rescaled 1e-12..1e12, bytes up to 5e17) and reaches
the optimum where the cut-type bounds stop short."""

import networkx as nx
import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.bounds.cut import cut_lower_bound
from hybrid_remat.bounds.frontier_chain import MAX_NODES, expand_chain, frontier_chain_lower_bound, set_chain
from hybrid_remat.bounds.multicut import cut_chain
from hybrid_remat.budgets import budget_lower_bound, keep_all_peak
from hybrid_remat.core.sequence import minimal_plan
from hybrid_remat.families import random_layered_training
from hybrid_remat.generators import chain, random_layered, training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate
from hybrid_remat.testing import check_bound
from hybrid_remat.testing.instances import rescaled


def _training(rng, layers, skip=False):
    fw = nx.path_graph(layers, create_using=nx.DiGraph)
    if skip and layers > 2:
        fw.add_edge(0, layers - 1)
    for i in fw:
        fw.nodes[i]["bytes"], fw.nodes[i]["cost"] = int(rng.integers(1, 6)), float(rng.integers(1, 10))
    return training_graph(fw)


def _random_chain(g, rng):
    """A random path to a sink, widened into sets."""
    v = int(rng.integers(0, max(1, g.n // 3)))
    path = [v]
    while g.succs(path[-1]).size:
        path.append(int(rng.choice(g.succs(path[-1]))))
    return set_chain(g, path, int(rng.integers(1, 4)))


def _instances(seed, count):
    rng = np.random.default_rng(seed)
    out, k = [], 0
    while len(out) < count:
        k += 1
        g = random_layered(int(rng.integers(5, 10)), seed=seed * 1000 + k) if k % 3 == 2 else \
            _training(rng, int(rng.integers(3, 6)), skip=k % 3 == 1)
        if g.n > 11:
            continue
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        if lo >= hi:
            continue
        out.append((g, rng))
    return out


def test_it_is_registered_over_every_plan_and_passes_the_battery():
    src = plugins.bounds()["frontier_chain_bound"]
    r = src.bound(Problem.single(training_graph(nx.path_graph(5, create_using=nx.DiGraph)), 6))
    assert r.scope == "all plans" and r.value >= 20.0 - 1e-9
    check_bound(src)


@pytest.mark.parametrize("seed", [0, 1])
def test_never_above_the_optimum_on_default_and_random_set_chains(seed):
    above = 0
    for g, rng in _instances(seed, 14):
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        for B in sorted({lo, (lo + hi) // 2, hi - 1}):
            p = Problem.single(g, B)
            opt = brute_force(p)[0]
            chains = [None, _random_chain(g, rng), _random_chain(g, rng)]
            for ch in chains:
                for milp in (True, False):
                    r = frontier_chain_lower_bound(p, chain=ch, milp=milp, limits=Limits(nodes=300))
                    above += not (p.base_cost * (1 - 1e-12) <= r.value <= opt * (1 + 1e-9))
                    assert r.value <= opt * (1 + 1e-9), (g.name, B, ch, r, opt)
    assert above == 0


def test_rescaled_costs_and_huge_bytes_stay_below_the_optimum():
    rng = np.random.default_rng(7)
    for k, (g, _) in enumerate(_instances(3, 10)):
        g = rescaled(g, rng, huge_bytes=bool(k % 2))
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        p = Problem.single(g, int(rng.integers(lo, hi + 1)))
        opt = brute_force(p)[0]
        r = frontier_chain_lower_bound(p, chain=_random_chain(g, rng), limits=Limits(nodes=300))
        assert p.base_cost * (1 - 1e-12) <= r.value <= opt * (1 + 1e-9), (k, r, opt)


def test_set_cuts_reach_the_optimum_where_single_cuts_stop_short():
    # rl_small's 25-node random layered graph at 70 %: every cut-type bound stops at 5.485 % TDI, the
    # optimum (this plan: the exact state search reaches it too) is 7.293 %: two sibling gradients are held at the later of their
    # first computations, which only a set cut sees
    p = Problem.single(random_layered_training(24, seed=0, layer_width=2), "70%")
    seq = list(range(18)) + [6, 18, 19, 20, 21, 22, 0, 1, 23, 24]   # recomputes n6, n0, n1
    plan, _ = minimal_plan(p.graph, seq, p.primary.name)
    sim = simulate(p, plan)
    assert sim.valid
    opt = sim.total_time
    single = frontier_chain_lower_bound(p, max_set=1, limits=Limits(nodes=2000)).value
    sets = frontier_chain_lower_bound(p, limits=Limits(nodes=2000)).value
    cut = cut_lower_bound(p).value
    assert max(single, cut) < opt * (1 - 1e-3)
    assert opt * (1 - 1e-6) <= sets <= opt * (1 + 1e-9)


def test_chain_helpers():
    g = training_graph(nx.path_graph(3, create_using=nx.DiGraph))
    path = cut_chain(g, np.ones(g.n), 10)
    assert expand_chain(set_chain(g, path, 1)) == [((t,), 1) for t in path]


def test_an_expired_limit_or_a_large_graph_gives_the_trivial_bound():
    p = Problem.single(training_graph(nx.path_graph(5, create_using=nx.DiGraph)), 6)
    assert frontier_chain_lower_bound(p, limits=Limits(deadline=0.0)).value == p.base_cost
    big = Problem.single(chain(MAX_NODES + 1, bytes=1), 2)
    r = frontier_chain_lower_bound(big)
    assert r.value == big.base_cost and "skipped" in r.stats
