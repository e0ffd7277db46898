"""The staged Checkmate MILP: optimum against brute force, encoder/decoder,
bound scope, cuts and memory units."""

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.exact.checkmate import (
    CheckmateFormulation,
    CheckmateModel,
    MemoryScale,
    estimate_size,
    solve_r_opt,
    stage_starts,
)
from hybrid_remat.generators import chain, random_layered, training_graph
from hybrid_remat.graph import Graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.plan import Plan, keep_all_plan, plan_from_order
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

NODES = 20_000


def mid_budget(g, frac):
    """A budget ``frac`` of the way from the smallest feasible one to the keep-all peak."""
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    return int(lo + frac * (hi - lo))


def tiny_problems(count, seed=0, nmax=7):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        n = int(rng.integers(3, nmax + 1))
        edges = [(u, v) for v in range(1, n) for u in range(v) if rng.random() < 0.4]
        for v in range(1, n):
            if not any(e[1] == v for e in edges):
                edges.append((int(rng.integers(0, v)), v))
        g = Graph.from_arrays(rng.integers(1, 5, n), edges, {"cost": rng.integers(1, 10, n).astype(float)})
        lo, hi = min_feasible_budget(g), keep_all_peak(g)
        out.append(Problem.single(g, int(rng.integers(lo, hi + 1))))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_milp_equals_staged_brute_force_and_never_beats_all_plans(seed):
    """On graphs of up to 7 nodes the MILP optimum equals the best staged
    plan (brute force in the simulator's semantics); the best plan overall
    is never worse, and the decoded plan is valid and as good as claimed."""
    for p in tiny_problems(10, seed):
        r = CheckmateFormulation(stage_size=1).solve(p, limits=Limits(nodes=NODES))
        staged = brute_force(p, "staged")[0]
        overall = brute_force(p)[0]
        assert overall <= staged
        if staged == float("inf"):
            assert r.status == "no_solution" and r.plan is None and r.stats.get("staged_class_empty")
            continue
        assert r.status == "optimal"
        sim = simulate(p, r.plan)
        assert sim.valid
        assert sim.total_time == pytest.approx(r.objective)
        assert r.objective == pytest.approx(staged)
        assert r.lower_bound == pytest.approx(staged)


def test_block_stages_match_their_own_brute_force():
    for p in tiny_problems(8, seed=3):
        st = stage_starts(p.graph.n, 2)
        r = CheckmateFormulation(stage_size=2).solve(p, limits=Limits(nodes=NODES))
        expected = brute_force(p, "staged", starts=st)[0]
        if expected == float("inf"):
            assert r.plan is None
        else:
            assert r.objective == pytest.approx(expected)
            assert simulate(p, r.plan).valid
        # coarser stages can only restrict the class
        assert expected >= brute_force(p, "staged")[0] - 1e-9
        # a restricted model's bound is not reported as a bound
        assert r.lower_bound == float("-inf") or np.isinf(r.lower_bound)


def test_chain_optimum_is_all_plans_optimum():
    g = chain(7, bytes=1, cost=[3, 1, 4, 1, 5, 9, 2])
    p = Problem.single(g, 3)
    r = CheckmateFormulation(stage_size=1).solve(p, limits=Limits(nodes=NODES))
    assert r.objective == pytest.approx(brute_force(p)[0])


def test_milp_never_worse_than_a_heuristic_start():
    g = random_layered(14, seed=2)
    p = Problem.single(g, mid_budget(g, 0.3))
    order = np.concatenate([np.arange(g.n), np.arange(g.n)])
    for plan in (keep_all_plan(g, "cost"), plan_from_order(g, order, "cost")):
        sim = simulate(p, plan)
        r = CheckmateFormulation(stage_size=1).solve(p, incumbent=plan, limits=Limits(nodes=NODES))
        if sim.valid:
            assert r.objective <= sim.total_time + 1e-9


def test_encoder_full_start_is_accepted_and_reproduces_the_plan_cost():
    g = random_layered(12, seed=5)
    p = Problem.single(g, "100%")
    plan = keep_all_plan(g, "cost")
    cm = CheckmateModel(p)
    try:
        R, S = cm.stage_rs(plan)
        val, why = cm.values_from_rs(R, S)
        assert val is not None, why
        kind, _ = cm.add_start(plan)
        assert kind == "full"
        cm.model.setParam("limits/nodes", 1)
        cm.model.optimize()
        assert cm.model.getNSols() >= 1
        assert cm.objective_value(cm.model.getPrimalbound()) == pytest.approx(simulate(p, plan).total_time)
    finally:
        cm.free()


def test_encoder_reports_an_incumbent_outside_the_model():
    g = random_layered(12, seed=5)
    p = Problem.single(g, "100%")
    # a plan computing node 2 before node 1 has no staged form (if 2 does not need 1)
    steps = [("compute", 0, "cost")]
    order = [0]
    preds2 = set(g.preds(2).tolist())
    if 1 in preds2:
        pytest.skip("graph has the edge 1 -> 2")
    order = [0, 2, 1] + list(range(3, g.n))
    plan = plan_from_order(g, order, "cost")
    assert simulate(p, plan).valid
    cm = CheckmateModel(p)
    try:
        kind, why = cm.add_start(plan)
        assert kind == "none" and "staged" in why
    finally:
        cm.free()
    r = CheckmateFormulation(stage_size=1, follow_incumbent=False).solve(p, incumbent=plan, limits=Limits(nodes=100))
    assert r.stats["start"] == "none" and "start_note" in r.stats
    assert steps  # the solve still works
    assert "scip_status" in r.stats  # built and solved
    assert r.plan is not None and simulate(p, r.plan).valid
    # following the incumbent's order relabels the graph: the start is then complete
    r = CheckmateFormulation(stage_size=1).solve(p, incumbent=plan, limits=Limits(nodes=100))
    assert r.stats["start"] == "full" and r.stats.get("relabelled")
    assert simulate(p, r.plan).valid and r.objective <= simulate(p, plan).total_time + 1e-9


def test_encoder_rejects_starts_over_the_conservative_memory():
    g = chain(6, bytes=2)
    p = Problem.single(g, 4)
    cm = CheckmateModel(p)
    try:
        R = np.tril(np.ones((6, 6), bool))  # recompute everything every stage: fine
        S = np.zeros((6, 6), bool)
        val, _ = cm.values_from_rs(solve_r_opt(g, S, cm.starts), S)
        assert val is not None
        S2 = np.tril(np.ones((6, 6), bool), -1)  # keep everything: needs 12 bytes
        val, why = cm.values_from_rs(solve_r_opt(g, S2, cm.starts), S2)
        assert val is None and "over the budget" in why
        assert R.sum() > 0
    finally:
        cm.free()


def test_solve_r_opt_is_minimal_closure():
    g = chain(5, bytes=1)
    S = np.zeros((5, 5), bool)
    R = solve_r_opt(g, S, stage_starts(5))
    assert (R == np.tril(np.ones((5, 5), bool))).all()
    S[3, 1] = True
    R = solve_r_opt(g, S, stage_starts(5))
    assert R[2, 1] and not R[3, 0] and R[3, 2] and R[3, 3]


def test_memory_scale_exact_and_conservative():
    sc = MemoryScale.choose(np.array([1024, 2048, 0]), 10_000)
    assert sc.exact and sc.unit == 1024 and sc.budget == 9
    big = MemoryScale.choose(np.array([3001, 5003, 7001]) * 10**6, 2 * 10**10, max_units=1000, target_units=100)
    assert not big.exact
    assert (big.sizes * big.unit >= np.array([3001, 5003, 7001]) * 10**6).all()
    assert big.budget * big.unit <= 2 * 10**10


def test_estimate_size_tracks_the_built_model():
    g = random_layered(25, seed=1)
    p = Problem.single(g, mid_budget(g, 0.3))
    cm = CheckmateModel(p)
    try:
        est = estimate_size(g, cm.starts)
        assert 0.5 * cm.n_vars <= est["vars"] <= 2 * cm.n_vars
    finally:
        cm.free()


def test_recompute_cap():
    g = training_graph(nx.path_graph(4, create_using=nx.DiGraph))  # 9 nodes, keep-all peak 9
    r = CheckmateFormulation(stage_size=1, recompute_cap=1).solve(Problem.single(g, 6), limits=Limits(nodes=NODES))
    assert r.plan is None  # needs recomputation
    r = CheckmateFormulation(stage_size=1, recompute_cap=1).solve(Problem.single(g, "100%"), limits=Limits(nodes=NODES))
    assert r.objective == pytest.approx(g.cost("cost").sum())
    p = Problem.single(g, 6)
    capped = CheckmateFormulation(stage_size=1, recompute_cap=2).solve(p, limits=Limits(nodes=NODES))
    free = CheckmateFormulation(stage_size=1).solve(p, limits=Limits(nodes=NODES))
    assert free.objective == pytest.approx(brute_force(p, "staged")[0])
    assert capped.objective >= free.objective - 1e-9
    assert simulate(p, capped.plan).computed.max() <= 2


def test_multi_device_is_refused_cleanly():
    from hybrid_remat.problem import Device, Link

    g = chain(4, bytes=1)
    p = Problem(g, [Device("a", "cost", 4), Device("b", "cost", 4)], [Link("a", "b", 1.0)])
    r = CheckmateFormulation(stage_size=1).solve(p, limits=Limits(nodes=10))
    assert r.status == "error"


def test_plan_type():
    g = chain(4, bytes=1)
    r = CheckmateFormulation(stage_size=1).solve(Problem.single(g, 2), limits=Limits(nodes=NODES))
    assert isinstance(r.plan, Plan)


def test_relabel_round_trip_and_greedy_order():
    from hybrid_remat.core.reductions import (
        first_compute_order,
        memory_greedy_order,
        plan_to_original,
        plan_to_relabelled,
        relabel,
    )

    g = random_layered(15, seed=9)
    p = Problem.single(g, "1000%")  # roomy: keep-all fits in either order
    order = memory_greedy_order(g)
    q, order = relabel(p, order)
    plan = keep_all_plan(q.graph, "cost")
    back = plan_to_original(plan, order)
    assert simulate(p, back).valid
    assert simulate(p, back).total_time == pytest.approx(simulate(q, plan).total_time)
    assert plan_to_relabelled(back, order) == plan
    assert (first_compute_order(back, g.n) == order).all()


def test_staged_evict_plans_are_valid():
    from hybrid_remat.heuristics.staged_evict import StagedEvict

    for seed in range(3):
        g = random_layered(20, seed=seed)
        p = Problem.single(g, mid_budget(g, 0.4))
        plan = StagedEvict().run(p)
        if plan is not None:
            assert simulate(p, plan).valid


def test_local_search_never_worsens_and_stays_valid():
    from hybrid_remat.core.sequence import remove_unread
    from hybrid_remat.pruning import drop_recomputations

    rng = np.random.default_rng(4)
    for seed in range(4):
        g = random_layered(16, seed=seed)
        p = Problem.single(g, mid_budget(g, 0.5))
        # a wasteful but valid-ordered sequence: everything twice
        seq = list(range(g.n)) + list(range(g.n))
        plan = plan_from_order(g, seq, "cost")
        sim = simulate(p, plan)
        out = drop_recomputations(p, plan)
        out_sim = simulate(p, out)
        if sim.valid:
            assert out_sim.valid and out_sim.total_time <= sim.total_time
        # removing unread recomputations keeps every first computation
        cleaned = remove_unread(g, seq + [int(rng.integers(0, g.n))])
        assert set(cleaned) == set(range(g.n))


def test_rins_phase_fixes_where_lp_and_incumbent_agree_and_never_worsens():
    from hybrid_remat.heuristics.staged_evict import StagedEvict

    g = random_layered(20, seed=3)
    p = Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)
    start = StagedEvict().run(p)
    assert start is not None
    plain = CheckmateFormulation(rins_share=0.0).solve(p, incumbent=start, limits=Limits.seconds(60, nodes=2000))
    rins = CheckmateFormulation(rins_share=0.5).solve(p, incumbent=start, limits=Limits.seconds(60, nodes=2000))
    phase = [ph for ph in rins.stats["phases"] if ph.get("rins_phase")]
    assert phase and isinstance(phase[0]["rins"], dict) and 0 < phase[0]["rins"]["fixed"] <= phase[0]["rins"]["of"]
    r = simulate(p, rins.plan)
    assert r.valid and r.total_time <= simulate(p, start).total_time + 1e-9
    # the restricted phase's status and bound are not claims: the full model's are
    assert rins.status == plain.status
    assert rins.lower_bound <= rins.objective + 1e-9


def _model_optimum(p, scale):
    cm = CheckmateModel(p, scale=scale)
    try:
        cm.model.setParam("limits/nodes", NODES)
        cm.model.optimize()
        if cm.model.getStatus() == "infeasible":
            return float("inf")
        assert cm.model.getStatus() == "optimal"
        return cm.objective_value(cm.model.getObjVal())
    finally:
        cm.free()


def test_relaxed_memory_units_bound_the_staged_class_and_conservative_ones_restrict_it():
    """With a coarse memory unit, sizes rounded down give a model whose
    optimum is at most the best staged plan in bytes (a valid bound) and
    sizes rounded up one whose optimum is at least it; the brute force
    decides on 7-node graphs with uneven sizes."""
    rng = np.random.default_rng(11)
    seen_strict = 0
    for p in tiny_problems(12, seed=5):
        g = p.graph
        g = Graph.from_arrays(rng.integers(3, 40, g.n), g.edges().tolist(), {"cost": g.cost()})
        lo, hi = min_feasible_budget(g), keep_all_peak(g)
        p = Problem.single(g, int(lo + 0.4 * (hi - lo)))
        B = int(p.budgets[0])
        up = MemoryScale.choose(g.bytes, B, max_units=3, target_units=3)
        down = MemoryScale.choose(g.bytes, B, max_units=3, target_units=3, relax=True)
        assert not up.exact and down.relaxed and down.bound_valid and not up.bound_valid
        staged = brute_force(p, "staged")[0]
        relaxed, conservative = _model_optimum(p, down), _model_optimum(p, up)
        assert relaxed <= staged + 1e-9 <= conservative + 2e-9
        seen_strict += relaxed < staged - 1e-9 or staged < conservative - 1e-9
    assert seen_strict  # the units are coarse enough to matter


def test_full_phase_reports_a_valid_bound_with_inexact_units():
    """The formulation builds its full staged model relaxed when the unit is
    inexact: its lower bound never exceeds the staged optimum and its plan
    is valid in bytes."""
    bounded = 0
    for p in tiny_problems(6, seed=9):
        g = p.graph
        g = Graph.from_arrays(np.array([100_000_007 + 7_654_321 * i for i in range(g.n)]), g.edges().tolist(),
                              {"cost": g.cost()})
        lo, hi = min_feasible_budget(g), keep_all_peak(g)
        p = Problem.single(g, int(lo + 0.5 * (hi - lo)))
        r = CheckmateFormulation(stage_size=1, follow_incumbent=False).solve(p, limits=Limits(nodes=NODES))
        staged = brute_force(p, "staged")[0]
        assert r.stats["mem_relaxed"] and not r.stats["mem_exact"]
        if r.plan is not None:
            assert simulate(p, r.plan).valid
        if np.isfinite(r.lower_bound):
            assert r.lower_bound <= staged + 1e-6
            bounded += 1
    assert bounded  # the relaxed model did report bounds


def test_a_model_predicted_too_large_is_still_attempted(monkeypatch):
    """Issue 23.7: when no model is predicted to fit (here: a slow build rate and small size thresholds, as a
    1000-node graph at 20 s), ``solve`` (reached only when the scheduler admits it or the user names it)
    builds and solves its smallest model within the limits instead of declining up front."""
    from hybrid_remat.exact.checkmate import policy

    g = random_layered(40, seed=3)
    p = Problem.single(g, keep_all_peak(g))
    monkeypatch.setattr(policy, "BUILD_RATE", 50.0)
    f = CheckmateFormulation(small_items=100, fast_items=100, tiny_items=10)
    assert f.phases(p, None) == [] and f.predict_seconds(p) == float("inf")  # the prediction declines it
    r = f.solve(p, limits=Limits(nodes=NODES))
    assert "skipped" not in r.stats and r.stats["phases"], r.stats
    assert r.stats["phases"][0]["stage_size"] == f.max_stage_size and "attempted" in r.stats
    assert "scip_status" in r.stats  # built and solved
    assert r.plan is not None and simulate(p, r.plan).valid


def test_estimate_size_counts_edges_into_each_stage_from_the_csr():
    """The edge counts of :func:`estimate_size` (read from the predecessor
    CSR) equal a direct count of the edges ``(u, v)`` with ``v`` before each
    stage's end, on graphs of several families and stage sizes."""
    from hybrid_remat.families import family_graph

    for g in (random_layered(300, seed=4), family_graph("unet", 600, 0), family_graph("decoder_varied", 600, 1)):
        dst = g.edges()[:, 1]
        for size in (1, 3, 8):
            starts = stage_starts(g.n, size)
            est = estimate_size(g, starts)
            edges_in = np.array([(dst < h).sum() for h in starts[1:]])
            n_rs = np.concatenate([[0], np.cumsum(np.diff(g.succ_ptr) > 0)])[starts[:-1]]
            assert est["vars"] == 2 * n_rs.sum() + edges_in.sum() + starts[1:].sum()
            assert est["rows"] == 4 * edges_in.sum() + n_rs.sum() + starts[1:].sum()
