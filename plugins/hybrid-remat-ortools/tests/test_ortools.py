"""The OR-Tools plugin: found through its entry point only, conforms to the
formulation contract, is optimal inside its staged model (brute force on tiny
graphs), streams valid incumbents, honours hints and stop, and is used by
anytime_solve and the CLI."""

from __future__ import annotations

import importlib.metadata
import itertools
import threading

import numpy as np
import pytest
from hybrid_remat_ortools import CpSatRemat, event_index, plan_to_intervals

from hybrid_remat import Problem, generators, plugins, simulate
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.limits import Limits
from hybrid_remat.plan import keep_all_plan, plan_from_order
from hybrid_remat.testing import check_formulation, standard_instances


@pytest.fixture(autouse=True)
def autoload(monkeypatch):
    monkeypatch.delenv(plugins.DISABLE_ENV, raising=False)
    monkeypatch.delenv(plugins.BLOCK_ENV, raising=False)
    plugins.reset()
    yield
    plugins.reset()


# ------------------------------------------------------------------ discovery
def test_installed_and_discovered_through_its_entry_point():
    dist = importlib.metadata.distribution("hybrid-remat-ortools")  # fails when not pip-installed
    eps = [(ep.name, ep.value) for ep in dist.entry_points if ep.group == "hybrid_remat"]
    assert eps == [("ortools", "hybrid_remat_ortools.plugin")]
    (reg,) = [r for r in plugins.registered() if r.name == "ortools"]
    assert reg.kind == "formulations" and reg.source == "entrypoint:hybrid-remat-ortools"
    assert reg.identity == "ortools:ortools@0.1.0"
    assert "single_device" in reg.capabilities and "exact" not in reg.capabilities


def test_absent_when_autoload_is_off(monkeypatch):
    monkeypatch.setenv(plugins.DISABLE_ENV, "1")
    plugins.reset()
    assert "ortools" not in plugins.formulations()
    plugins.register(__import__("hybrid_remat_ortools.plugin", fromlist=["x"]), name="ortools-by-hand")
    (reg,) = [r for r in plugins.registered() if r.name == "ortools"]
    assert reg.source == "runtime"


def test_registered_object_passes_the_conformance_battery():
    report = check_formulation(plugins.formulations()["ortools"])
    assert report["status"]["chain6@100%"] == "optimal"
    assert report["status"]["random_dag_n10_s3@tight"] == "feasible"  # found from the witness's order


# ----------------------------------------------------- exactness in its model
def staged_sequences(n: int):
    """Every staged compute sequence: in stage s, any subset of 0..s-1 (in index order), then s."""
    per_stage = [list(itertools.chain.from_iterable(itertools.combinations(range(s), k) for k in range(s + 1)))
                 for s in range(n)]
    for choice in itertools.product(*per_stage):
        seq = []
        for s, sub in enumerate(choice):
            seq.extend(sub)
            seq.append(s)
        yield seq


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_optimal_within_the_staged_space_matches_brute_force(seed):
    g = generators.random_dag(5, p=0.5, seed=seed, max_bytes=6)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    seqs = list(staged_sequences(g.n))
    for budget in sorted({lo, (lo + hi) // 2, hi}):
        p = Problem.single(g, budget)
        best = min((r.total_time for r in (simulate(p, plan_from_order(g, s, "cost")) for s in seqs) if r.valid),
                   default=np.inf)
        res = CpSatRemat(max_computations=g.n).solve(p, limits=Limits.seconds(30))
        if np.isinf(best):
            assert res.plan is None and res.stats["model_status"] == "INFEASIBLE"
            continue
        assert res.stats["model_status"] == "OPTIMAL"
        assert simulate(p, res.plan).valid
        assert res.objective == pytest.approx(best)
        assert res.stats["model_bound"] == pytest.approx(best)
        assert res.lower_bound == pytest.approx(p.base_cost)  # the only bound valid outside the model
        assert (res.status == "optimal") == (best == pytest.approx(p.base_cost))


def test_two_computations_per_node_bounds_the_plan():
    g = generators.random_dag(7, p=0.45, seed=11, max_bytes=8)
    p = Problem.single(g, min_feasible_budget(g) + 2)
    res = CpSatRemat(max_computations=2).solve(p, limits=Limits.seconds(30))
    if res.plan is not None:
        counts = np.bincount(res.plan.node[res.plan.op == 0], minlength=g.n)
        assert counts.max() <= 2 and counts.min() >= 1


# ------------------------------------------------------- hints and streaming
def test_plan_to_intervals_of_a_staged_plan():
    g = standard_instances()[2].problem.graph  # training9
    plan = plan_from_order(g, [0, 1, 2, 3, 4, 5, 6, 0, 1, 7, 0, 8], "cost")
    copies, serves, complete = plan_to_intervals(plan, g, np.arange(g.n), max_copies=2)
    assert not complete  # node 0 is computed three times
    copies, serves, complete = plan_to_intervals(plan, g, np.arange(g.n), max_copies=3)
    assert complete
    assert copies[(0, 0)][0] == event_index(0, 0) and copies[(0, 1)][0] == event_index(0, 7)
    assert copies[(0, 2)][0] == event_index(0, 8)
    assert (0, 1, 1, 1) in serves and (1, 1, 7, 0) in serves


def test_streamed_incumbents_are_valid_and_improve():
    g = generators.random_layered(40, seed=4)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    p = Problem.single(g, lo + (hi - lo) * 7 // 10)  # tight: recomputation needed
    seen = []

    def on_incumbent(plan, source):
        r = simulate(p, plan)
        assert r.valid and source == "ortools"
        seen.append(r.total_time)

    res = CpSatRemat().solve(p, limits=Limits.seconds(30, nodes=20000), on_incumbent=on_incumbent)
    assert res.plan is not None and seen
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == len(seen)
    assert seen[-1] == pytest.approx(res.objective)
    assert [t for _, t in res.stats["history"]] == seen


def test_warm_start_from_a_heuristic_plan_is_used():
    inst = standard_instances()[4]  # random_dag_n10_s3@tight: infeasible in the reference order with C=2
    assert CpSatRemat().solve(inst.problem, limits=Limits.seconds(10)).plan is None
    seen = []
    res = CpSatRemat().solve(inst.problem, incumbent=inst.witness, limits=Limits.seconds(10),
                             on_incumbent=lambda plan, src: seen.append(plan))
    assert res.stats["hint"] == "full" and res.stats["order"] == "incumbent"
    assert res.plan is not None and res.objective <= simulate(inst.problem, inst.witness).total_time
    assert seen


def test_stop_event_ends_the_search():
    g = generators.random_layered(120, seed=2)
    p = Problem.single(g, "85%")
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    try:
        res = CpSatRemat().solve(p, limits=Limits.seconds(300, stop=stop))
    finally:
        timer.cancel()
    assert res.stats["stopped"] and res.stats["model_status"] in ("UNKNOWN", "FEASIBLE")
    assert res.stats["solve_s"] < 100  # far below the 300 s limit (not a timing claim: it stopped)
    assert res.plan is None or simulate(p, res.plan).valid
    stop_now = threading.Event()
    stop_now.set()
    assert CpSatRemat().solve(p, limits=Limits.seconds(300, stop=stop_now)).stats["solve_s"] == 0.0


def test_deterministic_for_a_seed():
    g = generators.random_layered(30, seed=7)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    p = Problem.single(g, lo + (hi - lo) * 8 // 10)
    a = CpSatRemat().solve(p, limits=Limits.seconds(60, nodes=3000), seed=5)
    b = CpSatRemat().solve(p, limits=Limits.seconds(60, nodes=3000), seed=5)
    assert a.status == b.status and a.objective == b.objective
    assert (a.plan is None) == (b.plan is None) and (a.plan is None or a.plan == b.plan)


# ------------------------------------------------------ used by the library
def test_used_by_anytime_solve():
    anytime = pytest.importorskip("hybrid_remat.anytime")
    g = generators.random_layered(30, seed=3)
    p = Problem.single(g, "85%")
    res = anytime.anytime_solve(p, 10.0, formulations=["ortools"])
    assert res.plan is not None and simulate(p, res.plan).valid
    sources = [str(getattr(row, "source", "")) for row in getattr(res, "report", [])]
    assert any("ortools" in s for s in sources), sources  # it ran inside anytime_solve


def test_large_graphs_are_refused_with_the_reason_and_predicted():
    from hybrid_remat_ortools.formulation import MAX_NODES

    f = CpSatRemat()
    small = Problem.single(generators.chain(20, bytes=1), 10)
    large = Problem.single(generators.chain(MAX_NODES + 1, bytes=1), MAX_NODES // 2)
    assert f.applicable(small) == (True, "")
    ok, why = f.applicable(large)
    assert not ok and f"> {MAX_NODES}" in why
    assert 0 < f.predict_seconds(small) < f.predict_seconds(large)
    anytime = pytest.importorskip("hybrid_remat.anytime")
    res = anytime.anytime_solve(large, 5.0, workers=1, heuristics=["dtr_size"], bounds=[], improvers=[],
                                formulations=["ortools"], warm=False)
    (row,) = [r for r in res.report if r.source == "ortools"]
    assert row.status == "skipped" and f"> {MAX_NODES}" in row.note


def test_used_by_the_cli(tmp_path, capsys):
    cli = pytest.importorskip("hybrid_remat.cli")
    pytest.importorskip("hybrid_remat.anytime")
    from hybrid_remat import load_graph, read_plan
    from hybrid_remat.testing import write_node_link

    g = generators.random_layered(25, seed=1)
    src = tmp_path / "g.json"
    write_node_link(g, src)
    out = tmp_path / "plan.json"
    rc = cli.main(["solve", str(src), "--budget", "85%", "--formulation", "ortools", "--time-limit", "5",
                   "--quiet", "--out", str(out)])
    assert rc == 0
    assert "ortools" in capsys.readouterr().out
    g2 = load_graph(src)
    assert simulate(Problem.single(g2, "85%"), read_plan(out, g2)).valid


def test_keep_all_fits_means_optimal_without_recomputation():
    g = generators.random_layered(60, seed=9)
    p = Problem.single(g, "100%")
    res = CpSatRemat().solve(p, incumbent=keep_all_plan(g, "cost"), limits=Limits.seconds(20))
    assert res.status == "optimal" and res.objective == pytest.approx(p.base_cost)


def test_phase_one_finds_a_plan_within_budget_without_an_incumbent():
    g = generators.random_layered(60, seed=5)
    p = Problem.single(g, "85%")
    res = CpSatRemat(presolve=False).solve(p, limits=Limits.seconds(30, nodes=5000))
    assert res.stats["phase1"]["found"] and res.stats["hint"].startswith("phase1")
    assert res.plan is not None and simulate(p, res.plan).valid
    without = CpSatRemat(phase1_share=0).solve(p, limits=Limits.seconds(1, nodes=100))
    assert without.stats["phase1"] == {}
    with pytest.raises(Exception, match="phase1_share"):
        CpSatRemat(phase1_share=1.5)


def test_incumbent_beyond_c_computations_triggers_phase_one():
    inst = standard_instances()[2]  # training9@tight: its witness computes node 0 three times
    assert inst.name == "training9@tight"
    res = CpSatRemat(max_computations=2).solve(inst.problem, incumbent=inst.witness, limits=Limits.seconds(10))
    assert res.stats["phase1"] and not res.stats["phase1"]["found"]  # C = 2 cannot fit this budget
    assert res.stats["hint"] == "partial" and res.plan is None and res.status == "no_solution"
    res3 = CpSatRemat(max_computations=3).solve(inst.problem, incumbent=inst.witness, limits=Limits.seconds(10))
    assert res3.stats["phase1"] == {} and res3.stats["hint"] == "full"
    assert res3.plan is not None and res3.objective <= simulate(inst.problem, inst.witness).total_time
