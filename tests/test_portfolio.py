"""The portfolio runner: sharing between workers, stopping without losing a
plan, honest statuses, legacy and new signatures, skipping by prediction."""

import json
import math
import multiprocessing
import os
import threading
import time
import warnings

import pytest

from hybrid_remat import SolveInterrupted
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import chain, random_layered
from hybrid_remat.heuristics.lifetime_split import LifetimeSplit
from hybrid_remat.interfaces import ALL_PLANS, Bound, BoundResult, Formulation, FormulationResult, Heuristic, Improver
from hybrid_remat.limits import now
from hybrid_remat.plan import keep_all_plan
from hybrid_remat.plugins import PluginWarning
from hybrid_remat.portfolio import Ledger, Scheduler, run_portfolio
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

FORK = multiprocessing.get_context("fork")


def tight(seed=1, n=40):
    """A problem whose plans recompute (no heuristic reaches the trivial bound)."""
    g = random_layered(n, seed=seed)
    return Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)


def split_plan(p, marker):
    plan = LifetimeSplit().run(p)
    plan.meta["marker"] = marker
    return plan


# --------------------------------------------------------------------- sharing
class _Finder(Formulation):
    """Streams a plan at once, then waits until the probe has seen it (or its limits end)."""

    name = "finder"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def __init__(self, flag_path):
        self.flag_path = flag_path

    def solve(self, problem, *, incumbent=None, on_incumbent=None, limits=None, **kw):
        plan = split_plan(problem, "finder")
        on_incumbent(plan, self.name)
        with open(self.flag_path + ".finder", "w") as f:
            f.write(str(os.getpid()))
        while not limits.expired() and not os.path.exists(self.flag_path):
            time.sleep(0.02)
        return FormulationResult("feasible", plan, simulate(problem, plan).total_time)


class _Probe(Improver):
    """Records the plan and the shared view it starts from."""

    name = "probe"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits", "shares_incumbent"})

    def __init__(self, flag_path):
        self.flag_path = flag_path

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        if os.path.exists(self.flag_path):  # a later run (a copy, say) may start anywhere: the first one counts
            return None
        shared_plan = shared.incumbent()
        record = {"pid": os.getpid(), "marker": plan.meta.get("marker"),
                  "shared_marker": shared_plan.meta.get("marker") if shared_plan is not None else None,
                  "value": shared.incumbent_value(), "bound": shared.lower_bound()}
        with open(self.flag_path, "w") as f:
            json.dump(record, f)
        return None


def test_workers_share_an_incumbent(tmp_path):
    flag = str(tmp_path / "seen.json")
    p = tight()
    r = anytime_solve(p, 30, workers=2, heuristics=[], bounds=[], improvers=[_Probe(flag)],
                      formulations=[_Finder(flag)], warm=False)
    assert os.path.exists(flag), [(x.source, x.status, x.worker, x.seconds, x.note) for x in r.report]
    seen = json.loads(open(flag).read())
    finder_pid = int(open(flag + ".finder").read())
    assert seen["marker"] == "finder" and seen["shared_marker"] == "finder"  # the plan found by the other worker
    assert seen["pid"] != finder_pid and seen["pid"] != os.getpid()
    assert seen["value"] == pytest.approx(r.objective) and seen["bound"] <= r.objective
    assert r.plan.meta["marker"] == "finder" and simulate(p, r.plan).valid


# --------------------------------------------------------------------- stopping
class _Hang(Formulation):
    """Streams a plan, then never returns and ignores every limit."""

    name = "hang"
    capabilities = frozenset({"dag", "chain", "single_device"})

    def solve(self, problem, *, incumbent=None, on_incumbent=None, **kw):
        on_incumbent(split_plan(problem, "hang"), self.name)
        while True:
            time.sleep(0.05)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stopped_worker_never_loses_the_best_plan(workers):
    p = tight(seed=2)
    r = anytime_solve(p, 2.0, workers=workers, heuristics=[], bounds=[], improvers=[], formulations=[_Hang()],
                      warm=False)
    assert r.plan is not None and r.plan.meta.get("marker") == "hang" and simulate(p, r.plan).valid
    assert r.status == "feasible" and r.solver == "hang"
    assert [x.status for x in r.report if x.source == "hang"] == ["stopped"]


class _HangingHeuristic(Heuristic):
    """Never returns (and does not claim to honour its limits)."""

    capabilities = frozenset({"dag", "chain", "single_device"})

    def __init__(self, name, rank):
        self.name, self.rank = name, rank

    def run(self, problem, *, seed=0, limits=None):
        while True:
            time.sleep(0.05)


class _Good(Heuristic):
    name = "good"
    rank = 5
    capabilities = frozenset({"dag", "chain", "single_device"})

    def run(self, problem, *, seed=0, limits=None):
        return split_plan(problem, "good")


def test_a_worker_stuck_past_its_deadline_is_replaced():
    p = tight(seed=2)
    hs = [_HangingHeuristic("hang_a", 0), _HangingHeuristic("hang_b", 1), _Good()]
    r = anytime_solve(p, 8.0, workers=2, heuristics=hs, bounds=[], improvers=[], formulations=[], warm=False)
    # both workers hang on their first task; killed at its share, fresh workers run the next one
    assert r.plan is not None and r.plan.meta["marker"] == "good"
    stopped = {x.source: x.note for x in r.report if x.status == "stopped"}
    assert set(stopped) == {"hang_a", "hang_b"} and all("restarted" in n for n in stopped.values())


class _Waits(Formulation):
    """Streams the optimal plan of a chain at full budget, then waits for its stop flag."""

    name = "waits"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def __init__(self):
        self.ended_by = None

    def solve(self, problem, *, limits=None, on_incumbent=None, **kw):
        on_incumbent(keep_all_plan(problem.graph, problem.primary.name), self.name)
        while not limits.expired():
            time.sleep(0.01)
        self.ended_by = "stop" if limits.stop is not None and limits.stop.is_set() else "deadline"
        return FormulationResult("feasible")


class _Late(Formulation):
    name = "late"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})
    rank = 50

    def __init__(self):
        self.called = False

    def solve(self, problem, **kw):
        self.called = True
        return FormulationResult("no_solution")


def test_closing_the_gap_stops_the_running_task_and_skips_the_rest():
    p = Problem.single(chain(6, bytes=1), "100%")
    waits, late = _Waits(), _Late()
    r = anytime_solve(p, 60, workers=1, heuristics=[], bounds=[], improvers=[], formulations=[waits, late],
                      warm=False)
    assert r.status == "optimal" and r.gap == 0 and r.bound_source == "trivial"
    assert waits.ended_by == "stop" and not late.called
    assert [x.note for x in r.report if x.source == "late"] == ["gap closed"]


# --------------------------------------------------------------------- statuses
class _StagedOptimum(Formulation):
    """Claims its plan optimal within a restricted class."""

    name = "staged_model"
    bound_scope = "staged plans"
    capabilities = frozenset({"dag", "chain", "single_device", "exact", "scoped_bound", "honours_limits"})

    def solve(self, problem, *, on_bound=None, **kw):
        plan = split_plan(problem, "staged")
        value = simulate(problem, plan).total_time
        on_bound(value)
        return FormulationResult("optimal", plan, value, value)


def test_a_class_optimum_is_feasible_with_its_class_bound():
    p = tight(seed=3)
    r = anytime_solve(p, 30, workers=1, heuristics=[], bounds=[], improvers=[], formulations=[_StagedOptimum()],
                      warm=False)
    assert r.objective > p.objective.trivial_bound(p)  # the class bound is above every bound over all plans
    assert r.status == "feasible" and r.gap > 0
    assert r.class_bound == pytest.approx(r.objective) and r.class_bound_scope == "staged plans"
    assert r.lower_bound == pytest.approx(p.objective.trivial_bound(p)) and r.bound_source == "trivial"
    assert r.summary()["class_bound_scope"] == "staged plans"


def test_checkmate_alone_proves_only_its_class():
    g = random_layered(10, seed=1)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    p = Problem.single(g, int(lo + 0.3 * (hi - lo)))
    r = anytime_solve(p, 60, workers=1, heuristics=[], bounds=[], improvers=[], formulations=["checkmate"],
                      node_limit=5000, warm=False)
    assert r.plan is not None and simulate(p, r.plan).valid
    assert r.objective > r.lower_bound * (1 + 1e-9)  # it recomputes; nothing bounds every plan that high
    assert r.status == "feasible" and r.class_bound_scope == "staged"  # Checkmate's class
    assert r.class_bound == pytest.approx(r.objective)  # optimal within the staged class only


def test_a_cut_bound_proof_is_optimal():
    import networkx as nx

    from hybrid_remat.generators import training_graph

    g = training_graph(nx.path_graph(6, create_using=nx.DiGraph))
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    p = Problem.single(g, int(lo + 0.2 * (hi - lo)))
    r = anytime_solve(p, 60, workers=1, formulations=[], node_limit=1000, warm=False)
    assert r.objective > p.objective.trivial_bound(p)  # needs recomputation: the trivial bound proves nothing
    assert r.status == "optimal" and r.bound_source in ("cut_bound", "multicut_bound") and r.gap == 0


class _Feasibility(Bound):
    name = "feasibility"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def bound(self, problem, *, limits=None):
        return BoundResult(math.inf)


def test_an_infinite_bound_over_every_plan_is_infeasible():
    p = tight(seed=4)
    late = _Late()
    r = anytime_solve(p, 30, workers=1, heuristics=[], bounds=[_Feasibility()], improvers=[], formulations=[late],
                      warm=False)
    assert r.status == "infeasible" and r.plan is None and r.lower_bound == math.inf
    assert not late.called  # nothing is left to find


class _BadBound(Bound):
    name = "too_high"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def bound(self, problem, *, limits=None):
        return BoundResult(1e30)


def test_a_bound_above_a_valid_plan_is_a_defect_never_used():
    p = tight(seed=4)
    r = anytime_solve(p, 30, workers=1, heuristics=["split"], bounds=[_BadBound()], improvers=[], formulations=[],
                      warm=False)
    assert r.status == "feasible" and r.lower_bound < r.objective
    assert r.stats["defects"] and r.stats["defects"][0]["source"] == "too_high"
    # the other order: the bound first, then a plan below it retracts it
    led = Ledger(p)
    assert led.offer_bound(1e30, "too_high")
    led.offer_plan(LifetimeSplit().run(p), "split")
    assert led.bound < led.value and led.defects[0]["bound"] == 1e30


def test_bounds_scale_with_the_data():
    """Costs of 1e-9 s: a bound 1 ns above an 8 ns plan is rejected, not rounded away."""
    g = chain(8, bytes=1, cost=1e-9)
    p = Problem.single(g, "100%")
    led = Ledger(p)
    led.offer_plan(keep_all_plan(g, "cost"), "keep_all")
    assert not led.offer_bound(9e-9, "bogus") and led.defects


# --------------------------------------------------------------------- signatures
class _OldHeuristic(Heuristic):
    name = "old_h"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def __init__(self):
        self.calls = []

    def run(self, problem, *, seed=0):
        self.calls.append("run")
        return LifetimeSplit().run(problem)


class _DetailedHeuristic(_OldHeuristic):
    name = "old_detailed"

    def run_detailed(self, problem, *, seed=0, deadline=None):
        self.calls.append(("run_detailed", deadline is not None))
        return {"plan": None, "lower_bound": problem.objective.trivial_bound(problem)}


class _NewHeuristic(_OldHeuristic):
    name = "new_h"

    def run(self, problem, *, seed=0, limits=None):
        self.calls.append(("run", limits is not None and math.isfinite(limits.deadline)))
        return None


class _OldImprover(Improver):
    name = "old_imp"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def __init__(self):
        self.calls = []

    def improve(self, problem, plan, *, time_limit=None, stop=None, on_improve=None, seed=0):
        self.calls.append((time_limit is not None, stop is not None, on_improve is not None))
        return plan


class _NewImprover(_OldImprover):
    name = "new_imp"

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        self.calls.append((limits is not None, on_incumbent is not None, shared is None))  # no shares_incumbent
        return plan


class _OldFormulation(Formulation):
    name = "old_f"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def __init__(self):
        self.calls = []

    def solve(self, problem, *, incumbent=None, time_limit=60.0, node_limit=None, seed=0, threads=1,
              on_incumbent=None, on_bound=None, stop=None):
        self.calls.append((incumbent is not None, time_limit < 60, node_limit, stop is not None))
        return FormulationResult("no_solution")


class _NewFormulation(_OldFormulation):
    name = "new_f"

    def solve(self, problem, *, incumbent=None, limits=None, **kw):
        self.calls.append((incumbent is not None, limits.nodes, limits.stop is not None))
        return FormulationResult("no_solution")


class _LegacyBound(Heuristic):
    name = "legacy_bound"
    capabilities = frozenset({"dag", "chain", "single_device", "bound_only", "honours_limits"})
    bound_scope = ALL_PLANS

    def run(self, problem, *, seed=0):
        return None

    def run_detailed(self, problem, *, seed=0, deadline=None):
        return {"plan": None, "lower_bound": problem.objective.trivial_bound(problem) * 1.0000001}


def test_older_signatures_are_wrapped_once_with_a_warning_and_new_ones_called_directly():
    from hybrid_remat.portfolio.calls import adapt

    p = tight(seed=5)
    comps = {"h": [_OldHeuristic(), _DetailedHeuristic(), _NewHeuristic()],
             "i": [_OldImprover(), _NewImprover()], "f": [_OldFormulation(), _NewFormulation()]}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = anytime_solve(p, 30, workers=1, heuristics=comps["h"] + [_LegacyBound()], bounds=[],
                          improvers=comps["i"], formulations=comps["f"], node_limit=7, warm=False)
    warned = {n for n in ("old_h", "old_detailed", "new_h", "old_imp", "new_imp", "old_f", "new_f", "legacy_bound")
              if any(issubclass(x.category, PluginWarning) and repr(n) in str(x.message) for x in w)}
    assert warned == {"old_h", "old_detailed", "old_imp", "old_f", "legacy_bound"}  # the new ones: no warning
    old_h, det_h, new_h = comps["h"]
    assert old_h.calls == ["run"] and det_h.calls == ["run"] and new_h.calls == [("run", True)]
    assert comps["i"][0].calls[0] == (True, True, True) and comps["i"][1].calls[0] == (True, True, True)
    assert comps["f"][0].calls[0] == (True, True, 7, True) and comps["f"][1].calls[0] == (True, 7, True)
    assert r.bound_source == "legacy_bound" and r.plan is not None
    assert {x.kind for x in r.report if x.source == "legacy_bound"} == {"bound"}
    once = adapt("heuristic", _OldHeuristic())
    assert adapt("heuristic", once) is once and adapt("heuristic", new_h) is new_h


# --------------------------------------------------------------------- scheduling
class _Slow(Heuristic):
    name = "slow"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def __init__(self):
        self.called = False

    def predict_seconds(self, problem):
        return 1e6

    def run(self, problem, *, seed=0, limits=None):
        self.called = True
        return None


def test_a_component_predicted_to_overrun_is_skipped_with_the_reason():
    p = tight(seed=6)
    slow = _Slow()
    r = anytime_solve(p, 5, workers=1, heuristics=[slow, "split"], bounds=[], improvers=[], formulations=[],
                      warm=False)
    assert not slow.called
    (row,) = [x for x in r.report if x.source == "slow"]
    assert row.status == "skipped" and row.note.startswith("predicted 1e+06 s >")
    # the calibration table predicts the same way for components without predict_seconds
    class Unpredicted(Heuristic):  # no predict_seconds of its own
        name, capabilities = "split", frozenset({"dag", "chain", "single_device"})

    s = Scheduler(p, heuristics=[Unpredicted()], table={"split": {"c": 1.0, "k": 2.0, "value": 0.5}})
    assert s.construct[0].predicted == pytest.approx(p.graph.n ** 2)
    assert Scheduler.too_slow(s.construct[0], 10.0).startswith("predicted")


class _Deterministic(Improver):
    name = "det"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits", "deterministic"})

    def __init__(self):
        self.calls = 0

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        self.calls += 1
        return plan


def test_a_deterministic_improver_does_not_rerun_from_the_same_start():
    p = tight(seed=6)
    det = _Deterministic()
    r = anytime_solve(p, 30, workers=1, heuristics=["split"], bounds=[], improvers=[det], formulations=[],
                      warm=False)
    assert det.calls == 1  # the polish run; the long phase would start from the same plan
    assert [x.note for x in r.report if x.source == "det"][-1] == "same start as its last run (deterministic)"


class H(Heuristic):
    """A heuristic that only has a name (and a rank): for the scheduler's ordering."""

    capabilities = frozenset({"dag", "chain", "single_device"})

    def __init__(self, name, rank=10.0):
        self.name, self.rank = name, rank


def test_order_is_value_per_second_then_rank():
    p = tight(seed=6)
    table = {"fast_good": {"c": 1e-6, "k": 1.0, "value": 0.9}, "slow_good": {"c": 1e-5, "k": 1.0, "value": 0.9},
             "fast_bad": {"c": 1e-6, "k": 1.0, "value": 0.0}}
    hs = [H("unknown_b", 2), H("slow_good", 9), H("unknown_a", 1), H("fast_bad", 0), H("fast_good", 5)]
    s = Scheduler(p, heuristics=hs, table=table)
    # the quick start, then the components without figures (their short first slot) by rank, then by priority
    assert [t.name for t in s.construct] == ["fast_good", "unknown_a", "unknown_b", "slow_good", "fast_bad"]
    # share users (a heuristic with a value but no time fit: it uses the time it is given) right after the
    # probes, by rank; a bound with figures but no fit stays last
    table |= {"share_a": {"c": None, "k": None, "value": 0.1}, "share_b": {"c": None, "k": None, "value": 0.2}}
    s = Scheduler(p, heuristics=hs + [H("share_b", 3), H("share_a", 4)], bounds=[_NoFitBound()],
                  table=table | {"no_fit_bound": {"c": None, "k": None, "value": 1.0}})
    assert [t.name for t in s.construct] == ["fast_good", "unknown_a", "unknown_b", "share_b", "share_a",
                                             "slow_good", "fast_bad", "no_fit_bound"]
    # ... and after the last constructor of a positive priority (a block solver: its proof needs its time)
    table |= {"constructor": {"c": 2e-6, "k": 1.0, "value": 0.9}}
    s = Scheduler(p, heuristics=hs + [H("share_b", 3), H("share_a", 4)], formulations=[_Constructor()], table=table)
    assert [t.name for t in s.construct] == ["fast_good", "unknown_a", "unknown_b", "constructor", "share_b",
                                             "share_a", "slow_good", "fast_bad"]


class _Constructor(Formulation):
    name = "constructor"
    capabilities = frozenset({"dag", "chain", "single_device"})

    def solve(self, problem, *, incumbent=None, limits=None, seed=0, on_incumbent=None, on_bound=None):
        return FormulationResult("no_solution")


class _NoFitBound(Bound):
    name = "no_fit_bound"
    capabilities = frozenset({"dag", "chain", "single_device"})

    def bound(self, problem, *, limits=None):
        return BoundResult(problem.base_cost, ALL_PLANS)


def test_the_quickest_heuristic_that_gave_plans_starts_before_the_best_valued():
    p = tight(seed=6)
    table = {"best": {"c": 1e-3, "k": 1.0, "value": 1.0}, "cheap": {"c": 1e-4, "k": 1.0, "value": 0.05},
             "cheaper_few_plans": {"c": 1e-8, "k": 1.0, "value": 0.02}, "mid": {"c": 2e-4, "k": 1.0, "value": 0.5}}
    s = Scheduler(p, heuristics=[H("mid"), H("best"), H("cheaper_few_plans"), H("cheap")], table=table)
    by_priority = [t.name for t in Scheduler._by_priority(s.construct)]
    assert by_priority.index("cheap") > by_priority.index("best")
    # the quick start (cheap: the smallest prediction among those that gave plans) moves to the front
    assert [t.name for t in s.construct] == ["cheap"] + [n for n in by_priority if n != "cheap"]


def test_the_quick_start_is_the_quickest_of_those_that_planned_almost_everywhere():
    p = tight(seed=6)
    table = {"thrasher": {"c": 1e-6, "k": 1.0, "value": 0.5, "plans": 0.6},
             "planner": {"c": 1e-5, "k": 1.0, "value": 0.2, "plans": 1.0},
             "slow_planner": {"c": 1e-4, "k": 1.0, "value": 0.2, "plans": 1.0}}
    s = Scheduler(p, heuristics=[H("slow_planner"), H("thrasher"), H("planner")], table=table)
    assert s.construct[0].name == "planner"
    # no row says where it planned: the quickest with value, as before
    bare = {k: {x: y for x, y in v.items() if x != "plans"} for k, v in table.items()}
    assert Scheduler(p, heuristics=[H("slow_planner"), H("thrasher"), H("planner")],
                     table=bare).construct[0].name == "thrasher"


class _Form(Formulation):
    def __init__(self, name, caps=()):
        self.name = name
        self.capabilities = frozenset({"dag", "chain", "single_device", "honours_limits", *caps})

    def solve(self, problem, *, incumbent=None, limits=None, **kw):
        return FormulationResult("no_solution")


def test_a_formulation_measured_to_deliver_fast_runs_with_the_heuristics_by_value_per_second():
    p = tight(seed=6)
    table = {"fast": {"c": 1e-7, "k": 1.0, "value": 0.1}, "slow": {"c": 1e-2, "k": 1.0, "value": 0.1},
             "quick_form": {"c": 1e-3, "k": 1.0, "value": 1.0},        # first plan measured: a constructor
             "anytime_form": {"c": None, "k": None, "value": 1.0},     # used all it was given: long phase
             "needy_form": {"c": 1e-5, "k": 1.0, "value": 1.0},        # needs a plan: long phase
             "fruitless_form": {"c": 1e-6, "k": 1.0, "value": 0.0}}    # returned fast, but nothing: long phase
    forms = [_Form("anytime_form"), _Form("needy_form", {"needs_incumbent"}), _Form("quick_form"),
             _Form("fruitless_form")]
    s = Scheduler(p, heuristics=[H("slow"), H("fast")], formulations=forms, table=table)
    assert [(t.name, t.kind) for t in s.construct] == [("fast", "heuristic"), ("quick_form", "formulation"),
                                                        ("slow", "heuristic")]
    assert [t.name for t in s.long] == ["anytime_form", "needy_form", "fruitless_form"]
    # it runs once, with a construct share, and reports as a formulation
    r = run_portfolio(p, deadline=now() + 5, heuristics=[H("slow"), H("fast")], formulations=forms, table=table)
    rows = [(x.source, x.kind) for x in r.ledger.report]
    assert rows.count(("quick_form", "formulation")) == 1 and ("anytime_form", "formulation") in rows


def test_parallel_run_reports_every_task():
    p = tight(seed=7)
    r = anytime_solve(p, 20, workers=2, heuristics=["split", "dtr_eq", "keep_all"], bounds=[],
                      improvers=["drop_recomputations"], formulations=[], warm=False)
    assert simulate(p, r.plan).valid and r.stats["workers"] == 2
    names = [x.source for x in r.report]
    assert {"split", "dtr_eq", "keep_all", "drop_recomputations"} <= set(names)
    assert {x.worker for x in r.report if x.source in ("split", "dtr_eq")} <= {0, 1}
    # a deterministic improver picked again and skipped ("same start") is not picked forever
    assert sum(x.source == "drop_recomputations" for x in r.report) <= 2 * 3, len(r.report)


class _SlowPlan(Heuristic):
    """A valid plan after a pause (so that the pool's other worker starts cold)."""

    name = "slow_plan"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits"})

    def __init__(self, delay=0.5):
        self.delay = delay

    def run(self, problem, *, seed=0, limits=None):
        time.sleep(self.delay)
        return LifetimeSplit().run(problem)


class _WarmOnly(Formulation):
    """Finds nothing without a start, returns the start with one."""

    name = "warm_only"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def solve(self, problem, *, incumbent=None, limits=None, **kw):
        if incumbent is None:
            return FormulationResult("no_solution")
        return FormulationResult("feasible", incumbent, simulate(problem, incumbent).total_time)


def _two_workers_after_a_slow_plan(delay=0.5, *, improvers=(), formulations=()):
    """A 2-worker solve whose only heuristic gives its plan after ``delay`` s (the other worker starts cold)."""
    p = tight(seed=7)
    return p, anytime_solve(p, 20, workers=2, heuristics=[_SlowPlan(delay)], bounds=[], improvers=list(improvers),
                            formulations=list(formulations), warm=False)


def test_a_formulation_waits_briefly_for_the_first_plan_to_start_warm():
    from hybrid_remat.portfolio.scheduler import PLAN_WAIT_S

    _, r = _two_workers_after_a_slow_plan(0.3 * PLAN_WAIT_S, formulations=[_WarmOnly()])
    assert [x.status for x in r.report if x.source == "warm_only"] == ["feasible"]


def test_a_formulation_that_started_cold_and_found_nothing_runs_again_from_a_plan():
    from hybrid_remat.portfolio.scheduler import PLAN_WAIT_S

    p, r = _two_workers_after_a_slow_plan(1.5 * PLAN_WAIT_S, formulations=[_WarmOnly()])
    rows = [x for x in r.report if x.source == "warm_only"]
    assert [x.status for x in rows] == ["no_solution", "feasible"], rows
    assert rows[1].note.startswith("second round") and simulate(p, r.plan).valid


class _Idle(Improver):
    """Sleeps ``seconds`` and improves nothing."""

    def __init__(self, name, seconds, caps):
        self.name, self.seconds = name, seconds
        self.capabilities = frozenset({"dag", "chain", "single_device", "honours_limits", *caps})

    def improve(self, problem, plan, *, seed=0, limits=None, **kw):
        time.sleep(self.seconds)
        return None


def test_idle_workers_never_run_one_deterministic_improver_from_the_same_start_at_once():
    _, r = _two_workers_after_a_slow_plan(improvers=[_Idle("slow_det", 0.3, {"deterministic"})])
    rows = [x.status for x in r.report if x.source == "slow_det"]
    # skipped at first (no plan yet), then run once from the plan: never twice from the same start
    assert rows.count("no_change") == 1, [(x.source, x.status, x.worker, x.note) for x in r.report]


def test_copies_of_an_improver_that_ends_early_stop_instead_of_spinning():
    # it shares the incumbent, so copies of it are admitted, but it ends at once
    _, r = _two_workers_after_a_slow_plan(improvers=[_Idle("quick_sharer", 0.05, {"shares_incumbent"})])
    runs = [x for x in r.report if x.source == "quick_sharer" and x.status != "skipped"]
    assert 1 <= len(runs) <= 6, [(x.status, x.worker, x.note) for x in r.report if x.source == "quick_sharer"]


def test_run_portfolio_directly_and_the_lift_uses_it():
    from hybrid_remat.hetero.lifted import single_device_portfolio

    p = tight(seed=8)
    run = run_portfolio(p, deadline=now() + 30, heuristics=[LifetimeSplit()], signals=())
    assert run.ledger.status() == "feasible" and not run.interrupted
    best = single_device_portfolio(p, limits=None, top=3)
    assert best and all(simulate(p, plan).valid for _, plan, _ in best)
    assert [v for _, _, v in best] == sorted(v for _, _, v in best)


# --------------------------------------------------------------------- signals (in-process)
class _Sleeper(Formulation):
    """Streams a plan, then waits for its stop flag (honours its limits)."""

    name = "sleeper"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def solve(self, problem, *, limits=None, on_incumbent=None, **kw):
        on_incumbent(split_plan(problem, "sleeper"), self.name)
        while not limits.expired():
            time.sleep(0.01)
        return FormulationResult("feasible")


def test_sigint_raises_solve_interrupted_with_the_best_result():
    import signal

    p = tight(seed=9)
    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))
    stop = threading.Event()
    timer.start()
    try:
        with pytest.raises(SolveInterrupted) as info:
            anytime_solve(p, 60, workers=1, heuristics=[], bounds=[], improvers=[], formulations=[_Sleeper()],
                          warm=False, stop=stop)
    finally:
        timer.cancel()
    res = info.value.result
    assert isinstance(info.value, KeyboardInterrupt) and info.value.signal == "SIGINT"
    assert res.interrupted and res.plan.meta["marker"] == "sleeper" and simulate(p, res.plan).valid
    assert res.summary()["interrupted"] is True
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_the_callers_stop_flag_ends_the_solve():
    p = tight(seed=9)
    stop = threading.Event()

    def stop_once_a_plan_is_in(imp):  # (a fixed timer raced the workers' start on a loaded machine)
        if imp.plan is not None:
            threading.Timer(0.1, stop.set).start()

    r = anytime_solve(p, 60, workers=2, heuristics=[], bounds=[], improvers=[], formulations=[_Sleeper()],
                      warm=False, stop=stop, on_improve=stop_once_a_plan_is_in)
    assert stop.is_set() and r.interrupted and r.plan is not None and r.status == "feasible"


def test_a_class_bound_is_reported_only_above_the_bound_over_every_plan():
    p = tight(seed=6)
    ledger = Ledger(p)
    base = p.base_cost
    assert ledger.offer_bound(base * 1.02, "cut_bound")
    ledger.offer_bound(base * 1.01, "checkmate", scope="staged")   # below it: says nothing more
    assert ledger.class_bound() == (-math.inf, "")
    ledger.offer_bound(base * 1.03, "checkmate", scope="staged")   # above it: the staged class's own bound
    assert ledger.class_bound() == (pytest.approx(base * 1.03), "staged")
