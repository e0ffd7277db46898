"""Revolve closed form vs DP, and the rotor DP vs the brute-force optimum."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import random_dag, training_graph
from hybrid_remat.heuristics.revolve import beta, revolve_closed_form, revolve_dp, revolve_dp_costs
from hybrid_remat.heuristics.rotor import Rotor, training_chain_layout
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _py(kernel):
    """The pure-Python version of a kernel (itself when JIT is disabled)."""
    return getattr(kernel, "py_func", kernel)


def test_revolve_dp_equals_closed_form():
    t = revolve_dp(59, 5)
    for s in range(1, 6):
        for length in range(1, 60):
            assert t[length, s] == revolve_closed_form(length, s), (length, s)


def test_revolve_known_values():
    assert beta(2, 3) == 10
    assert revolve_closed_form(10, 1) == 45   # one snapshot: l(l-1)/2
    assert revolve_closed_form(10, 9) == 9    # enough snapshots: one sweep


def test_heterogeneous_revolve_on_unit_costs_matches():
    T = revolve_dp_costs(np.ones(20), 4)
    t = revolve_dp(20, 4)
    for s in range(1, 5):
        for length in range(1, 21):
            assert T[0, length, s] == t[length, s]


def test_revolve_dp_kernel_matches_py_func():
    assert np.array_equal(revolve_dp(15, 3), _py(revolve_dp)(15, 3))
    c = np.random.default_rng(0).random(8)
    assert np.allclose(revolve_dp_costs(c, 3), _py(revolve_dp_costs)(c, 3))


def _chain(L, seed):
    rng = np.random.default_rng(seed)
    fwd = nx.path_graph(L, create_using=nx.DiGraph)
    for v in fwd:
        fwd.nodes[v]["bytes"] = int(rng.integers(1, 6))
        fwd.nodes[v]["cost"] = float(rng.integers(1, 6))
    return training_graph(fwd, loss_bytes=int(rng.integers(1, 4)), loss_cost=float(rng.integers(0, 3)))


@pytest.mark.parametrize("L", [1, 2, 3])
def test_rotor_equals_brute_force_on_training_chains(L):
    for seed in range(8):
        g = _chain(L, seed)
        assert training_chain_layout(g) is not None
        for B in range(min_feasible_budget(g), keep_all_peak(g) + 1):
            p = Problem.single(g, B)
            opt, _ = brute_force(p)
            plan = Rotor().run(p)
            if not np.isfinite(opt):
                assert plan is None
                continue
            r = simulate(p, plan)
            assert r.valid, r.error
            assert r.total_time == pytest.approx(opt), (L, seed, B)


@pytest.mark.slow
def test_rotor_equals_brute_force_on_longer_chain():
    g = _chain(4, 7)
    for B in range(min_feasible_budget(g), keep_all_peak(g) + 1):
        p = Problem.single(g, B)
        opt, _ = brute_force(p)
        plan = Rotor().run(p)
        assert (plan is None) == (not np.isfinite(opt))
        if plan is not None:
            assert simulate(p, plan).total_time == pytest.approx(opt)


def test_rotor_on_long_homogeneous_chain_follows_revolve_shape():
    g = training_graph(nx.path_graph(30, create_using=nx.DiGraph))
    costs = []
    for pct in ("100%", "60%", "40%", "25%"):
        p = Problem.single(g, max(min_feasible_budget(g), int(float(pct[:-1]) / 100 * keep_all_peak(g))))
        plan = Rotor().run(p)
        assert plan is not None
        costs.append(simulate(p, plan).total_time)
    assert costs == sorted(costs)  # less memory, more recomputation
    assert costs[0] == pytest.approx(g.cost("cost").sum())


def test_training_chain_layout_rejects_dags():
    assert training_chain_layout(random_dag(9, p=0.5, seed=1)) is None


@pytest.mark.parametrize("L", [2, 3])
def test_rotor_equals_the_milp_optimum_on_training_chains(L):
    """Issue 3: on chains the rotor DP equals the (Checkmate) MILP optimum."""
    from hybrid_remat.exact.checkmate import CheckmateFormulation

    milp = CheckmateFormulation()
    checked = 0
    for seed in range(4):
        g = _chain(L, seed)
        lo, hi = min_feasible_budget(g), keep_all_peak(g)
        for B in sorted({lo, (lo + hi) // 2, hi - 1}):
            if B < lo:
                continue
            p = Problem.single(g, B)
            plan = Rotor().run(p)
            res = milp.solve(p, limits=Limits.seconds(60.0, nodes=20_000))
            if plan is None:
                assert res.plan is None, (L, seed, B)
                continue
            assert res.status == "optimal", (L, seed, B, res.status)
            assert simulate(p, plan).total_time == pytest.approx(res.objective), (L, seed, B)
            checked += 1
    assert checked > 0
