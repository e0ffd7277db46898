"""Issue 24.1: the state-search bound (A* over resident and computed sets)
equals the all-plans brute force where it finishes, never exceeds it when
stopped (states or deadline), on instances rescaled over 24 orders of
magnitude; registered through the bounds hook."""

import math

import networkx as nx
import pytest

from benchmarks.bounds_battery import rescaled_instances
from hybrid_remat import plugins
from hybrid_remat.bounds.state_search import MAX_NODES, StateSearchBound, state_search_bound
from hybrid_remat.generators import chain, training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem

RTOL = 1e-9


def _same(a, b):
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= RTOL * max(abs(a), abs(b)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_where_it_finishes_and_below_the_optimum_when_stopped(seed):
    checked = 0
    for p in rescaled_instances(150, seed=seed, max_nodes=9):
        opt = brute_force(p)[0]
        full = state_search_bound(p)
        assert full.exact and _same(full.value, opt), (full.value, opt)
        for cap in (5, 60):
            r = state_search_bound(p, max_states=cap)
            assert r.value <= opt + RTOL * abs(opt), (cap, r.value, opt)
            assert not r.exact or _same(r.value, opt)
        checked += 1
    assert checked == 150


def test_the_frontier_bound_rises_with_the_states_and_stays_below_the_optimum():
    p = Problem.single(training_graph(nx.path_graph(8, create_using=nx.DiGraph)), 6)
    opt = state_search_bound(p)
    assert opt.exact
    vals = [state_search_bound(p, max_states=k).value for k in (10, 100, 1000)]
    assert p.base_cost <= vals[0] <= vals[1] <= vals[2] <= opt.value


def test_a_passed_deadline_gives_a_valid_bound():
    p = Problem.single(training_graph(nx.path_graph(5, create_using=nx.DiGraph)), 6)
    r = state_search_bound(p, limits=Limits(deadline=0.0))
    assert not r.exact and r.stats["stopped"] == "deadline"
    assert p.base_cost <= r.value <= brute_force(p)[0]


def test_registered_and_scoped():
    src = plugins.bounds()["state_search_bound"]
    assert isinstance(src, StateSearchBound)
    p = Problem.single(chain(6, bytes=1), 3)
    assert src.applicable(p) == (True, "")
    r = src.bound(p, limits=Limits(nodes=100))
    assert r.scope == "all plans" and r.value == 6.0 and r.stats["exact"]
    big = Problem.single(chain(MAX_NODES + 1, bytes=1), 3)
    assert not src.applicable(big)[0]


def test_no_plan_fits_gives_infinity():
    """Budgets at the node bound without any plan (the battery has them): ``+inf``, exact."""
    found = 0
    for p in rescaled_instances(400, seed=3):
        if math.isinf(brute_force(p)[0]):
            r = state_search_bound(p)
            assert r.exact and math.isinf(r.value)
            found += 1
    assert found > 0
