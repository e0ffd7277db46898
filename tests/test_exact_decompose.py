"""Decomposition: window models (fixed incumbent outside a node set) and the
"decomposed" formulation."""

import numpy as np
import pytest
from test_exact_checkmate import tiny_problems  # noqa: E402  (tests/ is on sys.path)

from hybrid_remat.anytime import anytime_solve
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.exact.checkmate import CheckmateFormulation, CheckmateModel, solve_r_opt, stage_starts
from hybrid_remat.exact.decompose import DecomposedFormulation, segments, solve_window
from hybrid_remat.generators import chain, random_layered
from hybrid_remat.heuristics.dtr import DTR
from hybrid_remat.heuristics.lifetime_split import LifetimeSplit
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.plan import plan_from_rs, rs_from_plan
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

NODES = 20_000


def _start(p):
    """A staged, valid plan in the reference order: the staged optimum's plan."""
    r = CheckmateFormulation(stage_size=1, follow_incumbent=False).solve(p, limits=Limits(nodes=NODES))
    return r.plan


def _poor_start(p):
    """Recompute everything, keep nothing (staged); ``None`` when even that is over budget."""
    n = p.graph.n
    S = np.zeros((n, n), bool)
    start = plan_from_rs(p.graph, solve_r_opt(p.graph, S, stage_starts(n)), S, p.primary.name)
    return start if simulate(p, start).valid else None


def _cases(count, seed):
    """Tiny problems with a finite staged optimum and a valid poor start: (problem, staged optimum, start)."""
    for p in tiny_problems(count, seed=seed):
        staged = brute_force(p, "staged")[0]
        start = _poor_start(p)
        if np.isfinite(staged) and start is not None:
            yield p, staged, start


def test_window_over_every_node_reaches_the_staged_optimum_and_over_none_keeps_the_plan():
    checked = 0
    for p, staged, start in _cases(10, 21):
        n = p.graph.n
        base = simulate(p, start).total_time
        full, st = solve_window(p, start, np.arange(n), limits=Limits(nodes=NODES))
        assert st["start"] in ("full", "full_min_r")
        assert simulate(p, full).valid
        assert simulate(p, full).total_time == pytest.approx(min(base, staged))
        same, st0 = solve_window(p, start, [], limits=Limits(nodes=NODES))
        assert same is start
        checked += 1
    assert checked >= 5


def test_window_optimum_lies_between_the_staged_optimum_and_the_start():
    rng = np.random.default_rng(3)
    improved = 0
    for p, staged, start in _cases(12, 22):
        n = p.graph.n
        free = rng.choice(n, size=max(1, n // 2), replace=False)
        out, st = solve_window(p, start, free, limits=Limits(nodes=NODES))
        sim = simulate(p, out)
        assert sim.valid
        assert staged - 1e-9 <= sim.total_time <= simulate(p, start).total_time + 1e-9
        improved += sim.total_time < simulate(p, start).total_time - 1e-9
    assert improved  # windows do improve poor starts


def test_window_model_fixes_the_nodes_outside():
    p = tiny_problems(1, seed=23)[0]
    start = _start(p)
    n = p.graph.n
    R, S = rs_from_plan(p.graph, start)
    free = np.zeros(n, bool)
    free[: n // 2] = True
    cm = CheckmateModel(p, fix=(R, S, free))
    try:
        assert all(free[i] for (_, i) in cm.S) and all(free[i] for (_, i) in cm.R)
        assert cm.fixed == int((~free).sum())
        kind, _ = cm.add_start(start)
        assert kind in ("full", "full_min_r")
    finally:
        cm.free()


def test_segments_partition_the_nodes():
    g = random_layered(50, seed=2)
    segs = segments(g, np.arange(g.n), 7)
    flat = np.sort(np.concatenate(segs))
    assert (flat == np.arange(g.n)).all() and max(len(s) for s in segs) <= 7


def test_segments_cut_training_graphs_at_articulation_points(moccasin_dir):
    from hybrid_remat.loaders import load_graph

    g = load_graph(moccasin_dir / "fcn_8_vgg_b32_416x608_train.json")
    segs = segments(g, np.arange(g.n), 8)
    flat = np.sort(np.concatenate(segs))
    assert (flat == np.arange(g.n)).all()
    fwd = ~g.is_backward
    for s in segs:
        assert fwd[s].sum() <= 8
        # every backward node sits with a forward node it reads, when it reads one
        for v in s[~fwd[s]]:
            fw_in = [u for u in g.preds(v) if fwd[u]]
            if fw_in:
                assert any(u in s for u in fw_in)


def test_decomposed_improves_a_poor_start_on_a_random_layered_graph():
    g = random_layered(60, seed=0)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    p = Problem.single(g, (lo + hi) // 2)
    start = DTR("lru", name="dtr_lru").run(p) or LifetimeSplit().run(p)
    base = simulate(p, start).total_time
    seen = []
    r = DecomposedFormulation(segment_size=10, min_nodes=0, max_widen=1).solve(
        p, incumbent=start, limits=Limits(nodes=500), on_incumbent=lambda pl, s: seen.append(simulate(p, pl)))
    assert r.status == "feasible" and simulate(p, r.plan).valid
    assert r.objective < base and p.base_cost - 1e-9 <= r.lower_bound <= r.objective
    assert all(s.valid for s in seen)
    assert r.stats["windows"] >= 1


def test_decomposed_leaves_small_graphs_to_the_full_model():
    p = Problem.single(chain(6, bytes=1), 3)
    start = LifetimeSplit().run(p)
    r = DecomposedFormulation().solve(p, incumbent=start)
    assert r.status == "feasible" and r.plan is start and "skipped" in r.stats
    ok, why = accepts(DecomposedFormulation(), p)
    assert not ok and "fewer than 150 nodes" in why
    assert accepts(DecomposedFormulation(min_nodes=0), p)[0]
    # anytime_solve gives it no time there
    res = anytime_solve(p, 5, formulations=["decomposed"], node_limit=100)
    assert any(x.source == "decomposed" and x.status == "skipped" for x in res.report)


def test_decomposed_proves_optimality_from_the_parts_on_independent_towers():
    """Two independent training graphs: windows of 5 nodes are the towers, the
    parts' bounds add up to the optimum (20, brute force) and the plan reaches it."""
    from test_exact_bounds import _two_towers

    g, _ = _two_towers()
    p = Problem.single(g, 8)
    start = None  # the formulation starts from its own staged heuristic plan
    got = []
    r = DecomposedFormulation(segment_size=5, min_nodes=0, max_widen=0).solve(
        p, incumbent=start, limits=Limits(nodes=NODES), on_bound=got.append)
    assert r.stats["parts_bound"]["value"] == 20.0 and got == [20.0]
    assert r.status == "optimal" and r.objective == 20.0 and r.lower_bound == 20.0
    assert simulate(p, r.plan).valid


def test_decomposed_refuses_graphs_whose_staged_form_is_too_large(monkeypatch):
    """Above MAX_NODES the n x n staged form of the incumbent is not built:
    the formulation says why and hands back the incumbent."""
    from hybrid_remat.exact import decompose
    from hybrid_remat.generators import random_layered
    from hybrid_remat.heuristics.local_search import LocalSearch
    from hybrid_remat.problem import Problem

    monkeypatch.setattr(decompose, "MAX_NODES", 50)
    p = Problem.single(random_layered(80, seed=1), "90%")
    ok, why = decompose.DecomposedFormulation(min_nodes=0).applicable(p)
    assert not ok and "more than 50 nodes" in why
    start = LocalSearch(max_iters=2).run(p)
    r = decompose.DecomposedFormulation(min_nodes=0).solve(p, incumbent=start, limits=Limits(nodes=10))
    assert r.plan is start and "more than 50 nodes" in r.stats["skipped"]
