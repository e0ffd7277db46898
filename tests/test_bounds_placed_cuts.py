"""Issue 24.1: the placed chain-of-cuts bound never exceeds the all-plans
optimum (brute force on rescaled tiny instances; the state search on MLP
training chains in miniature), is at least the chain-of-cuts bound on the
same chain, and closes most of its gap on the miniature MLPs."""

import math

import pytest

from benchmarks.bounds_battery import mini_mlp, rescaled_instances
from hybrid_remat import plugins
from hybrid_remat.bounds.multicut import multicut_lower_bound
from hybrid_remat.bounds.placed_cuts import PlacedCutsBound, placed_cuts_lower_bound
from hybrid_remat.bounds.state_search import state_search_bound
from hybrid_remat.budgets import budget_lower_bound, keep_all_peak
from hybrid_remat.errors import BudgetError
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem

RTOL = 1e-9


@pytest.mark.parametrize("seed", [0, 1])
def test_never_above_the_brute_force_optimum_on_rescaled_instances(seed):
    checked = 0
    for p in rescaled_instances(120, seed=seed, max_nodes=7):
        opt = brute_force(p)[0]
        r = placed_cuts_lower_bound(p, limits=Limits(nodes=200))
        assert r.value <= opt + RTOL * abs(opt), (r.value, opt)
        assert r.value >= p.base_cost * (1 - RTOL)
        checked += 1
    assert checked == 120


def test_on_miniature_mlps_between_the_chain_of_cuts_bound_and_the_optimum():
    g = mini_mlp(3)
    gains = 0
    for B in range(budget_lower_bound(g), keep_all_peak(g) + 1):
        try:
            p = Problem.single(g, B)
        except BudgetError:
            continue
        exact = state_search_bound(p)
        assert exact.exact
        placed = placed_cuts_lower_bound(p).value
        multi = multicut_lower_bound(p).value
        assert placed <= exact.value * (1 + RTOL)
        assert placed >= multi * (1 - 1e-6)
        gains += placed > multi * (1 + 1e-6)
        if math.isfinite(exact.value) and exact.value > p.base_cost:  # reached here (SCIP's gap limit aside)
            assert placed >= exact.value * (1 - 1e-6)
    assert gains >= 2


def test_a_passed_deadline_gives_the_base_cost():
    p = Problem.single(mini_mlp(3), 7)
    r = placed_cuts_lower_bound(p, limits=Limits(deadline=0.0))
    assert r.value == p.base_cost


def test_registered_and_scoped():
    src = plugins.bounds()["placed_cuts_bound"]
    assert isinstance(src, PlacedCutsBound)
    p = Problem.single(mini_mlp(3), 6)
    assert src.applicable(p) == (True, "")
    r = src.bound(p, limits=Limits(nodes=500))
    assert r.scope == "all plans" and r.value <= state_search_bound(p).value * (1 + RTOL)
