"""The segment-chain formulation honours its limits structurally (no clock
asserted): an expired deadline or a stop flag reaches every SCIP solve of
its menus, figures, rounds and bound, and the closure models are built
without the SCIP features that ran past their time limit (solutions copied
back after each solve, sub-MIP heuristics, the knapsack row's dual
presolving: a 48-variable model re-solved after ``freeTransform`` took
1.2-2.8 s past a 0.2 s limit)."""

import threading

import numpy as np
import pytest

import hybrid_remat.scip as scip_pkg
from hybrid_remat.blocks.staircase import _model, closure_staircase
from hybrid_remat.families import random_layered_training
from hybrid_remat.limits import Limits, now
from hybrid_remat.problem import Problem
from hybrid_remat.segments.formulation import SegmentsFormulation
from hybrid_remat.simulate import simulate


@pytest.fixture(scope="module")
def problem():
    return Problem.single(random_layered_training(300, seed=1), "50%")


@pytest.fixture
def runs(monkeypatch):
    """Counts the SCIP runs (every closure, knapsack and allocation model
    goes through ``hybrid_remat.scip.run``); ``runs.after`` is called after
    each."""
    calls = []
    orig = scip_pkg.run

    def counted(model, **kw):
        out = orig(model, **kw)
        calls.append(model.getProbName())
        if counted.after is not None:
            counted.after(len(calls))
        return out

    counted.after = None
    counted.calls = calls
    monkeypatch.setattr(scip_pkg, "run", counted)
    return counted


def test_closure_model_has_the_overrunning_features_off():
    m, *_ = _model([[], [0], [1]], np.array([True, True, True]), np.zeros(3, dtype=bool), [1.0, 2.0, 3.0],
                   np.array([4, 5, 6]))
    try:
        assert m.getParam("misc/transsolsorig") is False
        assert m.getParam("constraints/knapsack/dualpresolving") is False
        assert m.getParam("heuristics/rens/freq") == -1     # the FAST heuristics emphasis: no sub-MIPs
    finally:
        m.free()


def test_expired_deadline_runs_no_scip_and_returns_a_status(problem, runs):
    r = SegmentsFormulation().solve(problem, limits=Limits(deadline=now() - 1.0))
    assert runs.calls == []
    assert r.status in ("feasible", "no_solution")
    assert r.stats["bound"]["node"] == -1          # the bound was skipped, not attempted
    if r.plan is not None:                          # the one-simulation quick plan only
        assert simulate(problem, r.plan).valid


def test_stop_flag_set_during_the_first_solve_ends_every_later_one(problem, runs):
    stop = threading.Event()
    runs.after = lambda k: stop.set()
    r = SegmentsFormulation().solve(problem, limits=Limits(stop=stop))
    assert len(runs.calls) == 1
    assert r.status != "optimal"


def test_staircase_stops_at_the_node_limit_with_an_incomplete_front():
    rng = np.random.default_rng(0)
    k = 40
    preds = [sorted(rng.choice(i, size=min(i, 2), replace=False).tolist()) if i else [] for i in range(k)]
    st = closure_staircase(np.arange(k), preds, needed=rng.random(k) < 0.5, cost=rng.random(k) + 0.1,
                           size=rng.integers(1, 100, k), limits=Limits(nodes=1), max_points=2)
    assert not st.complete and len(st.points) <= 2
