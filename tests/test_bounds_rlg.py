"""Issue 24 (RLG instances, order classes): the search for an order without
recomputation and the bound it proves over every plan, and the fixed-order
class bound, checked against the brute force on tiny graphs (costs rescaled
over 24 orders of magnitude, bytes up to 5e17)."""

import math

import numpy as np
import pytest
from test_exact_checkmate import tiny_problems  # noqa: E402  (tests/ is on sys.path)

from benchmarks._common import moccasin_graph
from benchmarks.bounds_battery import rescaled_instances
from hybrid_remat.bounds.order_search import RecomputeBound, recompute_lower_bound, search_orders
from hybrid_remat.exact.checkmate.order_bound import FixedOrderBoundSource, fixed_order_lower_bound
from hybrid_remat.heuristics.order_search import no_recompute_plan
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _instances():
    return tiny_problems(80, seed=3, nmax=7) + rescaled_instances(80, seed=5, max_nodes=6)


def test_the_recompute_bound_never_exceeds_the_brute_force_optimum():
    proved = 0
    for p in _instances():
        opt = brute_force(p)[0]
        lb, stats = recompute_lower_bound(p, limits=Limits(work=10**6))
        if not math.isfinite(opt):
            continue
        assert p.base_cost <= lb <= opt * (1 + 1e-12), (lb, opt, stats)
        proved += lb > p.base_cost
    assert proved > 0  # the bound says something on some of them


def test_a_search_without_an_order_means_every_plan_recomputes():
    for p in _instances():
        opt = brute_force(p)[0]
        res = search_orders(p)
        if res.status == "found":
            plan = no_recompute_plan(p)
            sim = simulate(p, plan)
            assert sim.valid and sim.total_time == pytest.approx(p.base_cost, rel=1e-12)
            assert opt == pytest.approx(p.base_cost, rel=1e-12)
        else:
            assert res.status == "none"
            assert opt > p.base_cost * (1 + 1e-15) or not math.isfinite(opt)


def test_the_fixed_order_bound_never_exceeds_the_frontier_optimum():
    for p in _instances():
        frontier = brute_force(p, "frontier")[0]
        if not math.isfinite(frontier):
            continue
        fb = fixed_order_lower_bound(p, node_limit=500)
        assert fb.value <= frontier * (1 + 1e-9), (fb.value, frontier, fb.stats)
        assert fb.value <= brute_force(p, "staged")[0] * (1 + 1e-9)


def test_the_sources_report_their_scopes():
    p = tiny_problems(1, seed=0)[0]
    assert RecomputeBound().bound(p, limits=Limits(work=10**5)).scope == "all plans"
    assert FixedOrderBoundSource().bound(p, limits=Limits(nodes=100)).scope == "staged"


def test_the_search_honours_a_state_limit():
    p = tiny_problems(1, seed=1, nmax=7)[0]
    assert search_orders(p, max_states=0).status in ("stopped", "found")


@pytest.mark.skipif(not moccasin_graph("rlg_n100").exists(), reason="the Moccasin graphs are not present")
def test_rlg1_fits_without_recomputation_in_another_order():
    from hybrid_remat.loaders import load_graph

    g = load_graph(moccasin_graph("rlg_n100"))
    for frac in ("90%", "80%"):
        p = Problem.single(g, frac)
        plan = no_recompute_plan(p, limits=Limits(work=10**6))
        sim = simulate(p, plan)
        assert sim.valid and sim.total_time == pytest.approx(float(np.sum(p.cost_matrix[0])))


def test_searched_orders_give_valid_plans_or_none():
    from hybrid_remat.heuristics.order_search import SearchedOrder

    for p in tiny_problems(15, seed=4, nmax=7):
        plan = SearchedOrder().run(p, limits=Limits(work=10**5))
        if plan is not None:
            sim = simulate(p, plan)
            assert sim.valid and sim.total_time >= brute_force(p)[0] * (1 - 1e-12)
