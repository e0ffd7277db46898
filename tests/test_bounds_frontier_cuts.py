"""Issue 24.1: the frontier cut bound never exceeds the all-plans optimum
(brute force on tiny instances with costs and bytes rescaled), is at least
the cut bound's chains model at its cut on a graph with a side value, gives
the base cost past its deadline and is registered with scope "all plans"."""

import pytest

from benchmarks.bounds_battery import mini_mlp, rescaled_instances
from hybrid_remat import plugins
from hybrid_remat.bounds.frontier_cuts import FrontierCutsBound, frontier_cuts_lower_bound
from hybrid_remat.bounds.state_search import state_search_bound
from hybrid_remat.graph import Graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem

RTOL = 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_never_above_the_brute_force_optimum_on_rescaled_instances(seed):
    checked = 0
    for p in rescaled_instances(150, seed=seed, max_nodes=7):
        opt = brute_force(p)[0]
        r = frontier_cuts_lower_bound(p, limits=Limits(nodes=200))
        assert r.value <= opt + RTOL * abs(opt), (r.value, opt)
        assert r.value >= p.base_cost * (1 - RTOL)
        checked += 1
    assert checked == 150


def test_a_side_value_read_at_the_end_counts():
    # 0-1-2-4 with a 3-byte side value 3 (costly) read by the last node: at cut 2 the value 3 is either
    # resident (3 bytes) or not yet computed (then 0 is needed later) or recomputed
    g = Graph.from_arrays([2, 1, 1, 3, 1], [(0, 1), (1, 2), (2, 4), (0, 3), (3, 4)], [4.0, 1, 1, 5, 1])
    for B in (6, 7, 8):
        p = Problem.single(g, B)
        opt = brute_force(p)[0]
        v = frontier_cuts_lower_bound(p, limits=Limits(nodes=500)).value
        assert p.base_cost <= v <= opt * (1 + RTOL)


def test_on_miniature_mlps_never_above_the_exact_optimum():
    g = mini_mlp(3)
    for B in (6, 7, 8):
        p = Problem.single(g, B)
        exact = state_search_bound(p)
        assert frontier_cuts_lower_bound(p, limits=Limits(nodes=500)).value <= exact.value * (1 + RTOL)


def test_a_passed_deadline_gives_the_base_cost():
    p = Problem.single(mini_mlp(3), 7)
    r = frontier_cuts_lower_bound(p, limits=Limits(deadline=0.0))
    assert r.value == p.base_cost


def test_registered_and_scoped():
    src = plugins.bounds()["frontier_cuts_bound"]
    assert isinstance(src, FrontierCutsBound)
    p = Problem.single(mini_mlp(3), 6)
    assert src.applicable(p) == (True, "")
    r = src.bound(p, limits=Limits(nodes=500))
    assert r.scope == "all plans" and r.value <= state_search_bound(p).value * (1 + RTOL)
