"""The suffix moment bound of ``benchmarks/rl_bound_probe.py`` (a probe, not
registered): never above the all-plans brute force on the bounds battery's
rescaled instances (costs 1e-12..1e12 s, bytes to 5e17), not trivial there,
and weaker, never invalid, when its work budget stops it early."""

import math

import networkx as nx

from benchmarks.bounds_battery import BOUND_RTOL, rescaled_instances
from benchmarks.rl_bound_probe import check, positions, suffix_moment_lower_bound
from hybrid_remat.generators import training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem


def test_never_above_the_brute_force_and_not_trivial():
    r = check(150, seed=5)
    assert r["with_plan"] > 100 and not r["violations"]
    tight = 0
    for p in rescaled_instances(150, seed=5):
        opt = brute_force(p)[0]
        lb = suffix_moment_lower_bound(p)
        tight += math.isfinite(opt) and lb.extra > 0 and lb.value >= opt * (1 - BOUND_RTOL)
    assert tight >= 3   # it proves the optimum of some instances with recomputation


def test_training_chain_and_budget_sweep():
    g = training_graph(nx.path_graph(5, create_using=nx.DiGraph))
    gains = 0
    for budget in range(6, 12):
        p = Problem.single(g, budget)
        opt = brute_force(p)[0]
        lb = suffix_moment_lower_bound(p)
        assert p.base_cost <= lb.value and (lb.value <= opt * (1 + BOUND_RTOL) or math.isinf(opt))
        gains += lb.extra > 0
    assert gains >= 1


def test_a_stopped_run_is_weaker_never_larger():
    p = Problem.single(training_graph(nx.path_graph(5, create_using=nx.DiGraph)), 6)
    full = suffix_moment_lower_bound(p)
    cut = suffix_moment_lower_bound(p, limits=Limits(work=3))
    assert p.base_cost <= cut.value <= full.value <= brute_force(p)[0]


def test_the_bound_is_below_the_node_order_class_value():
    p = Problem.single(training_graph(nx.path_graph(5, create_using=nx.DiGraph)), 6)
    rows = positions(p, range(p.graph.n))
    assert max(r["bound_tdi"] for r in rows) > 0
    assert all(r["bound_tdi"] <= r["order_tdi"] + 1e-9 for r in rows if math.isfinite(r["order_tdi"]))
