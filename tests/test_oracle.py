"""The oracle: one brute force for every scope, one device or several."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget, node_need_bytes
from hybrid_remat.generators import chain, random_dag
from hybrid_remat.graph import Graph
from hybrid_remat.oracle import BruteForceError, brute_force
from hybrid_remat.plan import keep_all_plan, rs_from_plan
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate


def _single(seed):
    rng = np.random.default_rng(seed)
    g = random_dag(int(rng.integers(3, 8)), p=0.4, seed=seed)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    return Problem.single(g, int(rng.integers(lo, hi + 1)))


def _two_devices(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if j == i + 1 or rng.random() < 0.3]
    g = Graph.from_arrays(rng.integers(1, 4, n), edges,
                          {"gpu": rng.integers(1, 10, n).astype(float), "cpu": rng.integers(1, 10, n).astype(float)})
    need = int(node_need_bytes(g).max())
    return Problem(g, [Device("gpu", "gpu", need + int(rng.integers(0, 3))), Device("cpu", "cpu", need + 1)],
                   [Link("gpu", "cpu", 2.0, 0.1), Link("cpu", "gpu", 2.0, 0.1)])


@pytest.mark.parametrize("seed", range(12))
def test_scopes_nest_and_every_plan_reaches_its_value(seed):
    for p in (_single(seed), _two_devices(seed)):
        found = {scope: brute_force(p, scope) for scope in ("all", "frontier", "staged")}
        values = [found[s][0] for s in ("all", "frontier", "staged")]
        assert values[0] <= values[1] + 1e-9 <= values[2] + 2e-9  # each scope restricts the one before
        for scope, (value, plan) in found.items():
            if plan is None:
                assert math.isinf(value)
                continue
            r = simulate(p, plan)
            assert r.valid and r.total_time == pytest.approx(value), scope
        if p.is_single_device and found["staged"][1] is not None:
            R, _ = rs_from_plan(p.graph, found["staged"][1])  # a staged plan has the staged form
            assert R.diagonal().all()


def test_keep_all_is_optimal_when_it_fits_and_the_chain_value():
    g = chain(4, bytes=1)
    p = Problem.single(g, "100%")
    assert brute_force(p)[0] == pytest.approx(simulate(p, keep_all_plan(g, "cost")).total_time)
    assert brute_force(Problem.single(g, 2))[0] == 4.0


def test_no_plan_gives_inf_and_bad_requests_one_error_type():
    diamond = Graph.from_arrays([3, 3, 1, 1], [(0, 1), (0, 2), (1, 3), (2, 3)], {"cost": [1.0] * 4})
    for scope in ("all", "frontier", "staged"):  # min_feasible_budget is only a lower bound
        assert brute_force(Problem.single(diamond, 6), scope) == (math.inf, None)
    g = Graph.from_arrays([1, 1], [(0, 1)], {"cost": [1.0, 1.0]})
    p = Problem.single(g, 2)
    assert brute_force(p, starts=[0, 2], scope="staged")[0] == 2.0
    with pytest.raises(BruteForceError, match="scope"):
        brute_force(p, "bogus")
    with pytest.raises(BruteForceError, match="tiny"):
        brute_force(Problem.single(random_dag(13, seed=0), "100%"))
    with pytest.raises(BruteForceError, match="serial"):
        brute_force(p.with_objective("makespan"))
    with pytest.raises(BruteForceError, match="states"):
        brute_force(Problem.single(random_dag(9, p=0.3, seed=1), "100%"), max_states=10)
