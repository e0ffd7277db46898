"""The block solver is anytime: it plans on the coarse layer staircase, then
refines the staircase gap by gap and plans again; every plan it reports
passes the simulator, a refinement stopped midway (a work budget of closure
solves) never makes the plan worse than the unrefined one, and the
refinement left to finish ends on the one-shot run's staircase and plan."""

import pathlib

import numpy as np
import pytest

from hybrid_remat.blocks import solve_blocks
from hybrid_remat.generators import repeat_layers
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def problem():
    g = repeat_layers(load_graph(str(ROOT / "datasets" / "llama_8l_b4_s512.json.gz")), 4)
    return Problem.single(g, "50%")


def _valid(p, r):
    sim = simulate(p, r.plan)
    assert sim.valid and sim.total_time == pytest.approx(r.objective)


def test_refinement_stopped_midway_is_no_worse_and_the_full_one_matches_the_one_shot_run(problem):
    p = problem
    reported = []
    unrefined = solve_blocks(p, limits=Limits(work=0), stream=False)
    midway = solve_blocks(p, limits=Limits(work=20), stream=False)
    full = solve_blocks(p, stream=False, on_incumbent=lambda plan, src: reported.append(plan))
    one_shot = solve_blocks(p, stream=False, anytime=False)
    for r in (unrefined, midway, full, one_shot):
        _valid(p, r)
    assert unrefined.stats["refine_solves"] == 0 and not unrefined.stats["refine"]
    # stopped midway: some gaps refined, not all (the full run spends more solves and adds more points)
    assert 0 < midway.stats["refine_solves"] < full.stats["refine_solves"]
    assert unrefined.stats["layer_points"] < midway.stats["layer_points"] < full.stats["layer_points"]
    assert midway.objective <= unrefined.objective + 1e-9
    # not stopped: the same staircase as the one-shot run, its last plan that run's plan, the best no worse
    assert full.stats["layer_points"] == one_shot.stats["layer_points"]
    assert full.stats["refine"][-1]["objective"] == pytest.approx(one_shot.objective)
    assert full.objective <= one_shot.objective + 1e-9
    assert full.objective < unrefined.objective      # here the refinement pays
    # every plan reported passes the simulator, each better than the one before, the last the result
    values = [simulate(p, plan) for plan in reported]
    assert all(s.valid for s in values) and reported[-1] is full.plan
    times = np.array([s.total_time for s in values])
    assert (np.diff(times) < 0).all()
