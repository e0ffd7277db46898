"""Property tests of the single-device heuristic portfolio."""

from __future__ import annotations

import importlib.util

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid_remat import plugins
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import chain, random_dag, random_layered, training_graph
from hybrid_remat.heuristics import builtin_heuristics
from hybrid_remat.heuristics.checkpoints import (
    ChenGreedy,
    ChenSqrtN,
    articulation_points,
    chen_greedy_checkpoints,
    chen_sqrtn_checkpoints,
    forward_nodes,
)
from hybrid_remat.heuristics.local_search import LocalSearch
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

HEURISTICS = [h for h in builtin_heuristics() if h.name != "local_search"] + [LocalSearch(time_limit=0.02)]
IDS = [h.name for h in HEURISTICS]


def _random_training_graph(n_fwd: int, p: float, seed: int):
    rng = np.random.default_rng(seed)
    fwd = nx.DiGraph()
    fwd.add_nodes_from(range(n_fwd))
    for i in range(1, n_fwd):
        fwd.add_edge(i - 1, i)
        for j in range(i - 1):
            if rng.random() < p:
                fwd.add_edge(j, i)
    for v in fwd:
        fwd.nodes[v]["bytes"] = int(rng.integers(1, 10))
        fwd.nodes[v]["cost"] = float(rng.integers(1, 10))
    return training_graph(fwd)


def _budget(g, frac: float) -> int:
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    return int(lo + frac * (max(hi, lo) - lo))


graphs = st.one_of(
    st.builds(lambda n, p, s: random_dag(n, p=p, seed=s), st.integers(2, 14), st.floats(0.1, 0.6), st.integers(0, 10**6)),
    st.builds(_random_training_graph, st.integers(1, 7), st.floats(0.0, 0.5), st.integers(0, 10**6)),
    st.builds(lambda n, s: random_layered(n, seed=s), st.integers(3, 30), st.integers(0, 10**6)),
    st.builds(lambda n: chain(n, bytes=3), st.integers(1, 12)),
)


@pytest.mark.parametrize("heuristic", HEURISTICS, ids=IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=graphs, frac=st.floats(0.0, 1.0), seed=st.integers(0, 3))
def test_every_plan_is_valid_or_none(heuristic, g, frac, seed):
    p = Problem.single(g, _budget(g, frac))
    plan = heuristic.run(p, seed=seed)
    if plan is not None:
        r = simulate(p, plan)
        assert r.valid, r.error
        assert r.peak_bytes[p.primary.name] <= p.budgets[0]


@settings(max_examples=40, deadline=None)
@given(g=st.one_of(
    st.builds(lambda n, p, s: random_dag(n, p=p, seed=s), st.integers(2, 7), st.floats(0.1, 0.7), st.integers(0, 10**6)),
    st.builds(_random_training_graph, st.integers(1, 3), st.floats(0.0, 0.5), st.integers(0, 10**6)),
), frac=st.floats(0.0, 1.0))
def test_no_heuristic_beats_the_brute_force_optimum(g, frac):
    p = Problem.single(g, _budget(g, frac))
    opt, opt_plan = brute_force(p)
    if opt_plan is None:  # min_feasible_budget is only a lower bound
        for h in HEURISTICS:
            assert h.run(p) is None, h.name
        return
    assert simulate(p, opt_plan).valid
    assert opt == pytest.approx(simulate(p, opt_plan).total_time)
    for h in HEURISTICS:
        plan = h.run(p)
        if plan is not None:
            assert simulate(p, plan).total_time >= opt - 1e-9, h.name


def test_feasible_at_keep_all_peak_and_zero_overhead():
    g = random_layered(80, seed=5)
    p = Problem.single(g, "100%")
    for h in HEURISTICS:
        if h.name.startswith("chen") or h.name == "rotor":
            continue  # checkpoint schemes recompute by design; rotor needs a backward pass
        plan = h.run(p)
        assert plan is not None, h.name
        assert simulate(p, plan).tdi_pct == pytest.approx(0.0, abs=1e-9), h.name


def test_portfolio_finds_plans_on_tight_layered_graphs():
    g = random_layered(120, seed=2)
    for pct in ("90%", "80%"):
        p = Problem.single(g, pct)
        found = [h.name for h in HEURISTICS if h.run(p) is not None]
        assert {"split", "local_search"} & set(found), (pct, found)


def test_local_search_never_worsens_an_incumbent():
    g = random_layered(60, seed=11)
    p = Problem.single(g, "85%")
    start = ChenGreedy().run(p) or HEURISTICS[-1].run(p)
    assert start is not None
    before = simulate(p, start).total_time
    out = LocalSearch().improve(p, start, limits=Limits.seconds(0.05), seed=1)
    r = simulate(p, out)
    assert r.valid and r.total_time <= before + 1e-9


def test_dtr_is_deterministic_for_a_seed():
    g = random_layered(70, seed=4)
    p = Problem.single(g, "85%")
    for h in HEURISTICS:
        if h.name.startswith("dtr") or h.name == "split":
            a, b = h.run(p, seed=3), h.run(p, seed=3)
            assert (a is None and b is None) or a == b, h.name


# ------------------------------------------------------------ checkpoints
def test_articulation_points_are_not_every_node():
    """Regression for Checkmate's master bug (every forward node reported
    as an articulation point): a diamond's branches are not cut vertices."""
    fwd = nx.DiGraph([(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)])
    g = training_graph(fwd)
    aps = articulation_points(g).tolist()
    assert aps == [0, 3, 4, 5]  # 5 is the loss node, a forward node
    assert len(aps) < len(forward_nodes(g))


def test_articulation_points_of_a_chain_are_all_nodes():
    g = training_graph(nx.path_graph(6, create_using=nx.DiGraph))
    assert articulation_points(g).tolist() == list(range(7))  # 6 layers and the loss


def test_chen_sqrtn_picks_every_kth_candidate():
    assert chen_sqrtn_checkpoints(np.arange(10)).tolist() == [2, 5, 8]
    assert chen_sqrtn_checkpoints(np.arange(16)).tolist() == [3, 7, 11, 15]


def test_chen_greedy_resets_after_each_checkpoint():
    g = chain(6, bytes=[1, 2, 3, 4, 5, 6])
    assert chen_greedy_checkpoints(g, np.arange(6), 4.0).tolist() == [2, 4, 5]


def test_chen_on_training_chain_recomputes_and_fits():
    g = training_graph(nx.path_graph(16, create_using=nx.DiGraph))
    p = Problem.single(g, "60%")
    for h in (ChenSqrtN(), ChenGreedy(), ChenGreedy(use_aps=True)):
        plan = h.run(p)
        assert plan is not None, h.name
        r = simulate(p, plan)
        assert r.valid and r.n_recompute > 0


# ------------------------------------------------------------- plugins
def test_registered_through_the_plugin_hook_with_capabilities():
    hs = plugins.heuristics()
    for name in ("keep_all", "chen_sqrtn", "chen_sqrtn_ap", "chen_greedy", "chen_greedy_ap", "dtr_eq", "dtr_lru",
                 "dtr_size", "split", "local_search"):
        assert name in hs
        assert {"single_device"} <= set(hs[name].capabilities)
    ranks = [h.rank for h in builtin_heuristics()]
    assert ranks == sorted(ranks)


# --------------------------------------------- infeasibility vs the MILP
@pytest.mark.skipif(importlib.util.find_spec("hybrid_remat.exact") is None
                    or importlib.util.find_spec("hybrid_remat.exact.checkmate") is None,
                    reason="hybrid_remat.exact.checkmate is not available")
@pytest.mark.slow
def test_infeasible_means_the_milp_finds_nothing_either():
    import hybrid_remat.exact.checkmate as cm  # noqa: F401  (provided by the exact engineer)

    formulations = plugins.formulations()
    milp = formulations.get("checkmate") or next(iter(formulations.values()), None)
    if milp is None:
        pytest.skip("no registered formulation")
    checked = 0
    for seed in range(40):
        g = random_dag(7, p=0.5, seed=seed)
        p = Problem.single(g, min_feasible_budget(g))
        if any(h.run(p) is not None for h in HEURISTICS):
            continue
        # the whole portfolio says infeasible: the brute force and the MILP must agree
        opt, _ = brute_force(p)
        assert not np.isfinite(opt)
        res = milp.solve(p, limits=Limits.seconds(30.0, nodes=10_000))
        # a restricted (staged) model reports an empty class as no_solution, never as a plan
        assert res.plan is None and res.status in ("infeasible", "no_solution"), res.status
        checked += 1
    assert checked > 0


def test_plans_are_frontier_ordered_for_milp_warm_starts():
    """Every plan first computes the nodes in index order, so it has
    Checkmate's staged R/S form (what the exact engine warm-starts from)."""
    from hybrid_remat.plan import rs_from_plan

    for g, pct in ((random_layered(40, seed=8), "85%"), (_random_training_graph(6, 0.3, 2), "70%")):
        p = Problem.single(g, max(_budget(g, 0.0), int(float(pct[:-1]) / 100 * keep_all_peak(g))))
        for h in HEURISTICS:
            if h.name == "staged_evict":
                continue  # its memory-greedy-order variant is staged in another order (it says so)
            plan = h.run(p)
            if plan is not None:
                R, S = rs_from_plan(g, plan)
                assert R.diagonal().all(), h.name
