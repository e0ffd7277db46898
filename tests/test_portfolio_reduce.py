"""Reductions of multi-device problems (issue 14.1): each device alone by
the same runner, plans lifted back, bounds only where they carry over."""

import math
import signal
import threading
import time

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.anytime import SolveInterrupted, anytime_solve
from hybrid_remat.budgets import min_feasible_budget
from hybrid_remat.generators import chain, random_dag, training_graph
from hybrid_remat.hetero.heft import HeftScheduler
from hybrid_remat.heuristics.dtr import DTR
from hybrid_remat.interfaces import ALL_PLANS, Formulation, FormulationResult, Improver
from hybrid_remat.oracle import brute_force
from hybrid_remat.plan import Plan
from hybrid_remat.portfolio import MergedDevices, OneDevice, SubPortfolio, ThroughReduction, reductions_for
from hybrid_remat.portfolio.reduce import OTHER_DEVICE_SHARE, REDUCE_SHARE
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate


def tiny_training(seed: int, cpu_bytes: int = 1):
    """A 7-node training graph: GPU at its smallest budget, a CPU that holds one value."""
    rng = np.random.default_rng(seed)
    base = training_graph(nx.path_graph(3, create_using=nx.DiGraph))
    g = base.with_costs({"gpu": rng.integers(1, 6, base.n).astype(float),
                         "cpu": rng.integers(1, 12, base.n).astype(float)})
    return Problem(g, [Device("gpu", "gpu", min_feasible_budget(g)), Device("cpu", "cpu", cpu_bytes)],
                   [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)], check=False)


def offload_pays():
    """The GPU alone recomputes (optimum 27); round trips to the CPU are cheaper (optimum 15)."""
    return tiny_training(0, cpu_bytes=10)


# ------------------------------------------------------------------ bounds
@pytest.mark.parametrize("seed", range(6))
def test_merged_bound_holds_for_every_plan_and_beats_the_trivial_one(seed):
    p = tiny_training(seed)
    opt, _ = brute_force(p)
    merged = MergedDevices().apply(p)
    assert merged.primary.memory_bytes == int(p.budgets.sum())
    m_opt, _ = brute_force(merged)
    assert m_opt <= opt + 1e-9  # the argument of the module docstring, checked exhaustively
    r = anytime_solve(p, 600, workers=1, heuristics=["hetero_heft", "dtr_eq"], bounds=["cut_bound"], improvers=[],
                      formulations=[], warm=False)
    assert r.lower_bound <= opt + 1e-9 and simulate(p, r.plan).valid
    rows = {x.source: x for x in r.report}
    assert rows["merged devices"].status == "bound"
    if m_opt > p.objective.trivial_bound(p) + 1e-9:  # the merged bound carried over
        assert r.lower_bound > p.objective.trivial_bound(p) and r.bound_source.startswith("merged/")


def test_a_one_device_bound_does_not_bound_two_devices():
    p = tiny_training(0)
    two, _ = brute_force(p)
    gpu, _ = brute_force(OneDevice("gpu").apply(p))
    assert gpu > two  # so the GPU sub-run's bounds are never offered
    red = OneDevice("gpu")
    red.apply(p)
    assert red.carry(gpu, "optimal") == (gpu, "feasible", "gpu only", "optimal")  # named as the class they bound
    r = anytime_solve(p, 600, workers=1, heuristics=["dtr_eq", "split", "keep_all"], bounds=["cut_bound"],
                      improvers=[], formulations=[], warm=False)
    assert r.lower_bound <= two + 1e-9
    assert r.stats["reductions"]["gpu only"]["lower_bound"] > r.lower_bound
    assert r.stats["reductions"]["gpu only"]["carried"]["scope"] == "gpu only"  # carry names the class it bounds


def test_makespan_carries_the_merged_bound_over_the_compute_devices():
    p = tiny_training(2).with_objective("makespan")
    m = MergedDevices()
    m.apply(p)
    assert m.carry(12.0).bound == 6.0 and m.carry(math.inf).bound == math.inf and m.carry(12.0).scope == ALL_PLANS
    r = anytime_solve(p, 600, workers=1, heuristics=["hetero_heft", "hetero_heft_offload"], bounds=["cut_bound"],
                      improvers=[], formulations=[], warm=False)
    for h in (HeftScheduler(), HeftScheduler("makespan")):
        sim = simulate(p, h.run(p))
        assert sim.valid and sim.makespan >= r.lower_bound - 1e-9


# ------------------------------------------------------------------ plans
def test_one_device_invert_and_forward():
    p = offload_pays()
    red = OneDevice("gpu")
    sub = red.apply(p)
    assert sub.is_single_device and sub.primary.name == "gpu" and sub.objective.name == "serial"
    _, plan = brute_force(sub)
    assert simulate(sub, plan).valid and simulate(sub, plan).n_recompute > 0
    out = dict(red.inverts(plan))
    assert set(out) == {"", "+offload"}
    raw, lifted = simulate(p, out[""]), simulate(p, out["+offload"])
    assert raw.valid and lifted.valid and lifted.total_time < raw.total_time == simulate(sub, plan).total_time
    assert red.forward(out["+offload"]) == out[""]  # a lifted plan maps back to its one-device plan
    assert red.forward(out[""]) == out[""]
    assert red.forward(HeftScheduler().run(p)) is None or simulate(sub, red.forward(HeftScheduler().run(p))).valid
    mixed = Plan.from_steps([("compute", 0, "cpu"), ("copy", 0, "cpu", "gpu"), ("compute", 1, "gpu")], ["gpu", "cpu"])
    cpu = OneDevice("cpu")
    cpu.apply(p)
    assert red.forward(mixed) is None and cpu.forward(mixed) is None


def test_routing_of_components():
    from hybrid_remat import plugins

    p = offload_pays()
    h, i = plugins.heuristics(), plugins.improvers()
    r = reductions_for(p, heuristics=[h["dtr_eq"], h["hetero_heft"], h["hetero_heft_offload"]], bounds=[],
                       improvers=[i["drop_recomputations"], i["insertion"]], formulations=[])
    assert [x.name for x in r.reductions] == ["gpu only", "cpu only"]  # cheapest device first
    assert [x.share for x in r.reductions] == [REDUCE_SHARE["serial"], OTHER_DEVICE_SHARE]
    assert all(isinstance(x, SubPortfolio) for x in r.reductions)
    assert [x.name for x in r.heuristics] == ["hetero_heft", "hetero_heft_offload"]  # dtr_eq runs per device
    assert [x.name for x in r.improvers] == ["drop_recomputations@one-device", "insertion"]
    assert isinstance(r.improvers[0], ThroughReduction) and "multi_device" in r.improvers[0].capabilities
    single = OneDevice("gpu").apply(p)
    same = reductions_for(single, heuristics=[h["dtr_eq"]], bounds=[], improvers=[], formulations=[])
    assert same.reductions == [] and same.heuristics == [h["dtr_eq"]]


def test_a_device_that_cannot_hold_the_graph_has_no_reduction():
    g = chain(4, bytes=4).with_costs({"gpu": [1.0] * 4, "cpu": [2.0] * 4})
    p = Problem(g, [Device("gpu", "gpu", 4), Device("cpu", "cpu", 1000)],
                [Link("gpu", "cpu", 8.0), Link("cpu", "gpu", 8.0)])
    assert OneDevice("gpu").apply(p) is None
    (cpu,) = reductions_for(p, heuristics=[], bounds=[], improvers=[], formulations=[]).reductions
    assert cpu.name == "cpu only" and cpu.share == OTHER_DEVICE_SHARE  # not the cheapest device: a small share
    r = anytime_solve(p, 60, workers=1, formulations=[], improvers=[], warm=False)
    assert simulate(p, r.plan).valid


def test_anytime_reports_the_reduction_and_lifts_its_plans():
    p = offload_pays()
    r = anytime_solve(p, 600, workers=1, heuristics=["dtr_eq", "split", "keep_all"], bounds=[], improvers=[],
                      formulations=[], warm=False)
    two, _ = brute_force(p)
    assert two <= r.objective < r.stats["reductions"]["gpu only"]["objective"]  # lifted: better than the GPU alone
    assert r.solver.startswith("gpu/") and r.solver.endswith("+offload") and r.lower_bound <= two
    rows = {x.source: x for x in r.report}
    assert rows["gpu only"].kind == "reduction" and rows["gpu only"].objective == pytest.approx(r.objective)
    assert rows["cpu only"].status == "skipped"  # every CPU-only plan costs more than the incumbent
    assert any(s.startswith("gpu/") for s in rows)


class _Recorder(Improver):
    """A single-device improver that records the problems it is given."""

    name = "recorder"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def __init__(self):
        self.seen = []

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        self.seen.append((problem.n_devices, simulate(problem, plan).valid))
        return None


class _MultiRecorder(_Recorder):
    name = "multi_recorder"
    capabilities = frozenset({"dag", "chain", "multi_device", "honours_limits"})


def test_multi_device_improvers_get_the_multi_device_incumbent():
    # at 40% the GPU budget binds: HEFT's plan is not proved optimal, so the improver is given it
    p = Problem.from_specs(random_dag(14, p=0.3, seed=4, kinds=("gpu", "cpu")), ["gpu=40%", "cpu=64GiB"])
    rec = _MultiRecorder()
    r = anytime_solve(p, 600, workers=1, heuristics=["dtr_eq", "hetero_heft"], bounds=[], improvers=[rec],
                      formulations=[], warm=False)
    assert r.status == "feasible" and rec.seen and all(n == 2 and ok for n, ok in rec.seen)
    assert "multi_recorder" in {x.source for x in r.report} and "gpu/multi_recorder" not in {x.source for x in r.report}


def test_single_device_improvers_get_the_one_device_problem():
    p = Problem.from_specs(random_dag(14, p=0.3, seed=4, kinds=("gpu", "cpu")), ["gpu=60%", "cpu=64GiB"])
    rec = _Recorder()
    r = anytime_solve(p, 600, workers=1, heuristics=["dtr_eq"], bounds=[], improvers=[rec], formulations=[],
                      warm=False)
    assert simulate(p, r.plan).valid
    assert rec.seen and all(n == 1 and ok for n, ok in rec.seen)
    assert "recorder@one-device" in {x.source for x in r.report}


class _Sleeper(Formulation):
    """Streams a plan, then waits for its stop flag (one device only)."""

    name = "sleeper"
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})

    def solve(self, problem, *, limits=None, on_incumbent=None, **kw):
        on_incumbent(DTR("dtr_eq", name="dtr_eq").run(problem), self.name)
        while not limits.expired():
            time.sleep(0.01)
        return FormulationResult("feasible")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_signal_during_a_reduction_stops_the_solve_with_its_plan(workers):
    p = offload_pays()
    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(SolveInterrupted) as info:
            anytime_solve(p, 60, workers=workers, heuristics=[], bounds=[], improvers=[], formulations=[_Sleeper()],
                          warm=False)
    finally:
        timer.cancel()
    res = info.value.result
    assert res.interrupted and res.solver.startswith("gpu/sleeper") and simulate(p, res.plan).valid
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_callers_stop_flag_ends_a_reduction():
    p = offload_pays()
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    r = anytime_solve(p, 60, workers=1, heuristics=[], bounds=[], improvers=[], formulations=[_Sleeper()],
                      warm=False, stop=stop)
    assert r.interrupted and r.plan is not None and r.solver.startswith("gpu/sleeper")
