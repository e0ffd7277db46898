"""Issue 24.1 (chains): the first heavy moment bound never exceeds the
all-plans optimum (brute force on rescaled tiny instances, every heavy set
tried; the exact state search on MLP training chains in miniature with
costs and bytes rescaled), reaches that optimum on the miniature MLPs and
honours its deadline."""

import math

import networkx as nx
import numpy as np
import pytest

from benchmarks.bounds_battery import mini_mlp, rescaled_instances
from hybrid_remat import plugins
from hybrid_remat.bounds.first_moment import FirstMomentBound, first_moment_extra, first_moment_lower_bound, heavy_sets
from hybrid_remat.bounds.state_search import state_search_bound
from hybrid_remat.budgets import budget_lower_bound, keep_all_peak
from hybrid_remat.errors import BudgetError
from hybrid_remat.generators import training_graph
from hybrid_remat.graph import Graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem

RTOL = 1e-9


def _below(value, opt):
    return value <= opt + RTOL * abs(opt) if math.isfinite(opt) else True


@pytest.mark.parametrize("seed", [0, 1])
def test_never_above_the_brute_force_optimum_with_any_heavy_set(seed):
    rng = np.random.default_rng(seed)
    models = 0
    for p in rescaled_instances(100, seed=seed, max_nodes=7):
        opt = brute_force(p)[0]
        r = first_moment_lower_bound(p, limits=Limits(nodes=200))
        assert _below(r.value, opt), (r.value, opt)
        assert r.value >= p.base_cost * (1 - RTOL)
        n = p.graph.n
        for h in ([int(rng.integers(n))], [v for v in range(n) if rng.random() < 0.5] or [0]):
            extra = first_moment_extra(p, h, Limits(nodes=200))
            if extra == math.inf:
                assert opt == math.inf  # infeasible only where no plan fits
            elif extra is not None:
                assert _below(p.base_cost + extra, opt), (h, extra, opt)
            models += 1
    assert models == 200


def _rescaled(g, cost_scale, byte_scale):
    return Graph.from_arrays([int(b) * byte_scale for b in g.bytes], g.edges().tolist(),
                             {"cost": [float(c) * cost_scale for c in g.costs["cost"]]})


@pytest.mark.parametrize("scale", [(1.0, 1), (1e-12, 1), (1e12, 10**15), (3e-7, 7)])
def test_on_miniature_mlps_at_most_and_mostly_at_the_optimum(scale):
    g0 = mini_mlp(3, seed=1)
    g = _rescaled(g0, *scale)
    tight = above_base = 0
    for B in range(budget_lower_bound(g0), keep_all_peak(g0) + 1):
        try:
            p = Problem.single(g, B * scale[1])
        except BudgetError:
            continue
        exact = state_search_bound(p)
        assert exact.exact
        fm = first_moment_lower_bound(p).value
        assert _below(fm, exact.value), (B, fm, exact.value)
        if math.isfinite(exact.value) and exact.value > p.base_cost * (1 + 1e-6):
            above_base += 1
            tight += fm >= exact.value * (1 - 1e-6)
    assert above_base >= 2 and tight == above_base  # here the first heavy moment decides every budget


@pytest.mark.parametrize("seed", range(4))
def test_on_training_chains_never_above_the_brute_force(seed):
    rng = np.random.default_rng(seed)
    L = 3 + seed % 2
    fwd = nx.path_graph(L, create_using=nx.DiGraph)
    for v in fwd.nodes:
        fwd.nodes[v]["bytes"] = int(rng.integers(1, 6)) * 10 ** int(rng.integers(0, 15))
        fwd.nodes[v]["cost"] = float(rng.uniform(0.5, 3.0)) * 10.0 ** float(rng.uniform(-12, 12))
    g = training_graph(fwd)
    for B in np.unique(np.linspace(budget_lower_bound(g), keep_all_peak(g), 6).astype(np.int64)):
        try:
            p = Problem.single(g, int(B))
        except BudgetError:
            continue
        opt = brute_force(p)[0]
        for h in heavy_sets(g) + [[int(rng.integers(g.n))]]:
            extra = first_moment_extra(p, h, Limits(nodes=500))
            if extra is not None:
                assert _below(p.base_cost + extra, opt), (B, h, extra, opt)


def test_registered_for_single_device_serial_problems():
    src = plugins.bounds()["first_moment_bound"]
    p = Problem.single(mini_mlp(2), 6)
    assert src.applicable(p) == (True, "")
    r = src.bound(p, limits=Limits(nodes=200))
    assert r.scope == "all plans" and r.value >= p.base_cost


def test_a_passed_deadline_proves_nothing():
    p = Problem.single(mini_mlp(3), 7)
    r = first_moment_lower_bound(p, limits=Limits(deadline=0.0))
    assert r.value == p.base_cost and r.stats["finished"] == 0
    assert FirstMomentBound().bound(p, limits=Limits(deadline=0.0)).value == -math.inf


def test_an_empty_heavy_set_is_refused():
    with pytest.raises(ValueError, match="heavy set is empty"):
        first_moment_extra(Problem.single(mini_mlp(2), 6), [])
