"""anytime_solve: statuses, bounds, determinism, reports, freeing, stop."""

import math
import threading

import networkx as nx
import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.anytime import Result, anytime_solve, trivial_lower_bound
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.errors import HybridRematError
from hybrid_remat.exact.lp_rounding import LPRounding
from hybrid_remat.generators import chain, random_layered, training_graph
from hybrid_remat.interfaces import Formulation, FormulationResult, Heuristic
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.plan import keep_all_plan
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

NODES = 5000


def mid_budget(g, frac):
    """A budget ``frac`` of the way from the smallest feasible one to the keep-all peak."""
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    return int(lo + frac * (hi - lo))


def test_optimal_status_and_bound_on_a_chain():
    g = chain(8, bytes=1, cost=[2, 1, 3, 1, 2, 1, 1, 2])
    p = Problem.single(g, 3)
    r = anytime_solve(p, 60, node_limit=NODES)
    assert r.status == "optimal"
    assert simulate(p, r.plan).valid
    assert r.objective == pytest.approx(brute_force(p, "staged")[0])
    assert r.lower_bound == pytest.approx(r.objective) and r.gap == 0
    s = r.summary()
    assert set(s) >= {"total_time", "tdi_pct", "peak_bytes", "lower_bound", "gap", "solver"}
    assert s["peak_bytes"]["cost"] <= 3


def test_never_worse_than_any_heuristic():
    g = random_layered(16, seed=4)
    p = Problem.single(g, mid_budget(g, 0.30))
    r = anytime_solve(p, 60, node_limit=200)
    for row in r.report:
        if row.kind == "heuristic" and row.status == "valid":
            assert r.objective <= row.objective + 1e-9
    assert r.lower_bound <= r.objective
    assert r.lower_bound >= trivial_lower_bound(p)


def test_deterministic_for_a_seed():
    g = random_layered(18, seed=7)
    p = Problem.single(g, mid_budget(g, 0.25))
    a = anytime_solve(p, 60, node_limit=50, seed=3, workers=1)  # one worker: repeats exactly
    b = anytime_solve(p, 60, node_limit=50, seed=3, workers=1)
    assert a.objective == b.objective and a.lower_bound == b.lower_bound and a.status == b.status
    assert a.plan == b.plan
    assert [h[1:] for h in a.history] == [h[1:] for h in b.history]


def test_history_and_report_and_on_improve():
    g = training_graph(nx.path_graph(5, create_using=nx.DiGraph))
    p = Problem.single(g, mid_budget(g, 0.35))
    seen = []
    r = anytime_solve(p, 60, node_limit=NODES, on_improve=seen.append)
    assert r.history and all(len(h) == 4 for h in r.history)
    times = [h[0] for h in r.history]
    assert times == sorted(times)
    finite = [h[1] for h in r.history if math.isfinite(h[1]) and h[3] != "lp_rounding"]
    assert finite and min(finite) == pytest.approx(r.objective)
    assert seen and seen[-1].objective == pytest.approx(r.objective)
    names = {row.source for row in r.report}
    assert "checkmate" in names and "keep_all" in names
    assert "checkmate" in r.table()


def test_no_heuristics_no_formulations_gives_no_solution():
    p = Problem.single(chain(5, bytes=1), 2)
    r = anytime_solve(p, 10, heuristics=[], formulations=[])
    assert r.status == "no_solution" and r.plan is None and r.gap == float("inf")
    assert r.lower_bound == pytest.approx(5.0)


def test_empty_staged_class_is_not_called_infeasible():
    # node 2 needs 0 and 1 (2 + 2 bytes) plus itself (1): 5 bytes, but staged
    # order makes 0 and 1 coexist with nothing else: feasible at 5; at 5 with
    # a forced extra resident the class is empty -> use a fork that needs recompute
    from hybrid_remat.graph import Graph

    g = Graph.from_arrays([2, 2, 2, 1], [(0, 1), (0, 2), (1, 3), (2, 3)], {"cost": [1.0, 1, 1, 1]})
    p = Problem.single(g, 5)
    staged = brute_force(p, "staged")[0]
    r = anytime_solve(p, 10, heuristics=[], bounds=[], node_limit=NODES)
    if staged == float("inf"):
        assert r.status == "no_solution"  # a restricted model never claims infeasibility
    else:
        assert r.status == "optimal" and r.objective == pytest.approx(staged)
    # a search over every plan does: 1 and 2 must coexist (4 B) and the second of them needs 0 (2 B) too
    assert brute_force(p)[0] == float("inf")
    r = anytime_solve(p, 10, heuristics=[], formulations=[], node_limit=NODES)
    assert r.status == "infeasible" and r.plan is None and r.lower_bound == float("inf")


def test_unknown_names_raise():
    p = Problem.single(chain(3, bytes=1), 2)
    with pytest.raises(HybridRematError, match="unknown heuristic"):
        anytime_solve(p, 1, heuristics=["nope"])
    with pytest.raises(HybridRematError, match="unknown formulation"):
        anytime_solve(p, 1, formulations=["nope"])


class _Broken(Heuristic):
    name = "broken"
    rank = -1

    def run(self, problem, *, seed=0):
        raise RuntimeError("boom")


class _OverBudget(Heuristic):
    name = "over_budget"
    rank = -0.5

    def run(self, problem, *, seed=0):
        return keep_all_plan(problem.graph, problem.primary.name)


def test_bad_heuristics_are_reported_not_fatal():
    p = Problem.single(training_graph(nx.path_graph(4, create_using=nx.DiGraph)), 6)
    # no bound or exact model that could close the gap (and skip them) before both bad ones run
    r = anytime_solve(p, 30, workers=1, heuristics=[_Broken(), _OverBudget(), "dtr"], bounds=[],
                      improvers=[], formulations=[], node_limit=NODES)
    status = {row.source: row.status for row in r.report}
    assert status["broken"] == "error" and "boom" in next(x.note for x in r.report if x.source == "broken")
    assert status["over_budget"] == "over_budget"
    assert r.plan is not None and simulate(p, r.plan).valid
    # and with the default portfolio the solve still ends proved optimal
    r = anytime_solve(p, 30, heuristics=[_Broken(), _OverBudget()], node_limit=NODES)
    assert {row.status for row in r.report if row.source == "broken"} <= {"error", "skipped"}
    assert r.status == "optimal" and simulate(p, r.plan).valid


class _MultiOnly(Heuristic):
    name = "multi_only"
    capabilities = frozenset({"dag", "multi_device"})


def test_capability_filter():
    p = Problem.single(chain(4, bytes=1), 2)
    r = anytime_solve(p, 10, heuristics=[_MultiOnly()], formulations=[])
    assert r.report[0].status == "skipped"


class _Stopper(Formulation):
    """Sets the stop event via the incumbent callback path, then waits."""

    name = "stopper"
    capabilities = frozenset({"dag", "chain", "single_device"})

    def solve(self, problem, *, incumbent=None, time_limit=60.0, node_limit=None, seed=0, threads=1,
              on_incumbent=None, on_bound=None, stop=None):
        stop.set()
        return FormulationResult("no_solution")


def test_stop_event_skips_remaining_work():
    p = Problem.single(random_layered(12, seed=0), "100%")
    stop = threading.Event()
    r = anytime_solve(p, 30, formulations=[_Stopper(), "checkmate"], stop=stop)
    status = {row.source: row.status for row in r.report}
    assert status["checkmate"] == "skipped"
    assert r.plan is not None  # heuristics ran first


def test_scip_models_are_freed(monkeypatch):
    import multiprocessing

    from hybrid_remat.exact import checkmate as cmod

    freed = multiprocessing.get_context("fork").Value("i", 0)  # counts in forked workers too
    orig = cmod.CheckmateModel.free

    def spy(self):
        with freed.get_lock():
            freed.value += 1
        orig(self)

    monkeypatch.setattr(cmod.CheckmateModel, "free", spy)
    g = random_layered(10, seed=1)
    p = Problem.single(g, mid_budget(g, 0.35))
    assert brute_force(p)[0] < float("inf")
    # no bound may close the gap before the MILP runs
    anytime_solve(p, 30, node_limit=10, heuristics=["lp_rounding"], bounds=[], workers=1, warm=False)
    assert freed.value == 2  # the LP heuristic's model and the MILP


def test_lp_rounding_bound_and_plan():
    g = random_layered(14, seed=3)
    p = Problem.single(g, mid_budget(g, 0.30))
    out = LPRounding().run_detailed(p)
    from hybrid_remat.exact.checkmate import CheckmateFormulation

    # the LP bounds the staged plans of the reference order
    opt = CheckmateFormulation(stage_size=1, follow_incumbent=False).solve(p, limits=Limits(nodes=NODES)).objective
    assert out["lower_bound"] <= opt + 1e-6
    if out["plan"] is not None:
        sim = simulate(p, out["plan"])
        assert sim.valid and sim.total_time >= opt - 1e-6


def test_builtins_registered():
    assert "checkmate" in plugins.formulations()
    assert "lp_rounding" in plugins.heuristics()


def test_result_type():
    r = anytime_solve(Problem.single(chain(3, bytes=1), "100%"), 5, node_limit=10)
    assert isinstance(r, Result) and r.status == "optimal" and np.isclose(r.objective, 3.0)


@pytest.mark.slow
def test_vgg16_train_proved_optimal(moccasin_dir):
    """Exact memory units (gcd of the sizes) let the full staged model prove its optimum."""
    from hybrid_remat.loaders import load_graph

    g = load_graph(moccasin_dir / "vgg16_b256_224x224_train.json")
    p = Problem.single(g, "90%")
    r = anytime_solve(p, 120, bounds=[], formulations=["checkmate"], node_limit=20_000, workers=1)  # no cut bound
    assert simulate(p, r.plan).valid
    # the staged model proves its optimum within its class: a class bound, not optimality over every plan
    assert r.class_bound_scope == "staged" and r.class_bound == pytest.approx(r.objective)
    assert r.status == "feasible" and r.bound_source == "trivial" and r.gap > 0
    # the cut bound proves the same value optimal over every plan, before any formulation runs
    r2 = anytime_solve(p, 120, formulations=["checkmate"], node_limit=20_000, workers=1)
    assert r2.status == "optimal" and r2.bound_source in ("cut_bound", "multicut_bound") and r2.gap == 0
    assert r2.objective == pytest.approx(r.objective)
    assert any(x.source == "checkmate" and x.note == "gap closed" for x in r2.report)


class _Hungry(Formulation):
    """Uses its whole share and proves nothing (records each time limit)."""

    name = "hungry"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})  # runs in-process

    def __init__(self):
        self.limits = []

    def solve(self, problem, *, incumbent=None, time_limit=60.0, node_limit=None, seed=0, threads=1,
              on_incumbent=None, on_bound=None, stop=None):
        import time

        self.limits.append(time_limit)
        time.sleep(time_limit)
        return FormulationResult("feasible", incumbent, simulate(problem, incumbent).total_time)


class _Quick(Formulation):
    name = "quick"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def solve(self, problem, *, incumbent=None, **kw):
        return FormulationResult("no_solution")


def test_time_left_by_quick_formulations_goes_back_to_hungry_ones(monkeypatch):
    import hybrid_remat.anytime as anytime_mod

    monkeypatch.setattr(anytime_mod, "SECOND_ROUND_MIN_S", 0.2)
    monkeypatch.setattr(anytime_mod, "SECOND_ROUND_MARGIN_S", 0.05)
    g = random_layered(60, seed=1)
    p = Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)  # split recomputes here
    hungry = _Hungry()
    r = anytime_solve(p, 1.2, heuristics=["split"], bounds=[], formulations=[hungry, _Quick()], local_search=False,
                      workers=1)
    assert r.plan is not None and r.status == "feasible"
    assert len(hungry.limits) == 2
    assert hungry.limits[1] >= 0.2 and hungry.limits[0] + hungry.limits[1] <= 1.2
    assert [x.note.startswith("second round") for x in r.report if x.source == "hungry"] == [False, True]
    # a formulation that finished early is not called again
    assert sum(x.source == "quick" for x in r.report) == 1
