"""The registered cut bound's own time cap (``max_seconds``) weakens the
bound at most, never makes it invalid."""

import networkx as nx
import pytest

from hybrid_remat.bounds.cut import CutBoundSource, cut_lower_bound
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import random_dag, training_graph
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem


def _graphs():
    yield training_graph(nx.path_graph(3, create_using=nx.DiGraph))
    for seed in range(3):
        yield random_dag(7, p=0.4, seed=seed)


@pytest.mark.parametrize("g", list(_graphs()), ids=lambda g: g.name)
def test_a_capped_cut_bound_stays_below_the_optimum(g):
    p = Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)
    opt = brute_force(p)[0]
    full = cut_lower_bound(p)
    for cap in (0.0, 1e-3, 60.0):
        cb = cut_lower_bound(p, max_seconds=cap)
        assert p.base_cost - 1e-9 <= cb.value <= full.value + 1e-9 <= opt + 2e-9


def test_the_registered_bound_declares_its_cap():
    assert 0 < CutBoundSource.max_seconds < 3.0
