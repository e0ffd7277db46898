"""The multi-device planners are registered and follow the formulation API."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.generators import chain
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate


def problem(n=6, gpu=8):
    g = chain(n, bytes=4).with_costs({"gpu": np.linspace(1, 2, n), "cpu": np.linspace(3, 9, n)})
    return Problem(g, [Device("gpu", "gpu", gpu), Device("cpu", "cpu", 1000)],
                   [Link("gpu", "cpu", 8.0, 0.1), Link("cpu", "gpu", 8.0, 0.1)])


def test_registered_with_capabilities():
    h = plugins.heuristics()
    f = plugins.formulations()
    for name in ("hetero_heft", "hetero_heft_offload", "hetero_lift"):
        assert name in h and "multi_device" in h[name].capabilities and "dag" in h[name].capabilities
    for name in ("hetero_xengine", "hetero_paging"):
        assert name in f and {"multi_device", "dag", "exact"} <= f[name].capabilities
    p = problem()
    assert all(accepts(h[k], p)[0] for k in ("hetero_heft", "hetero_heft_offload", "hetero_lift"))
    single = Problem.single(chain(4, bytes=1).with_costs({"gpu": [1.0] * 4}), "100%", "gpu")
    assert accepts(h["hetero_heft"], single)[0]
    assert not accepts(h["hetero_lift"], single)[0]
    assert not accepts(f["hetero_xengine"], single)[0]


def test_registered_heuristics_give_valid_plans():
    p = problem()
    for name in ("hetero_heft", "hetero_heft_offload", "hetero_lift"):
        plan = plugins.heuristics()[name].run(p, seed=0)
        assert plan is not None and simulate(p, plan).valid


def test_formulation_reports_incumbents_and_bounds():
    p = problem()
    seen, bounds = [], []
    f = plugins.formulations()["hetero_xengine"]
    res = f.solve(p, incumbent=None, limits=Limits.seconds(60, nodes=5000, stop=threading.Event()),
                  on_incumbent=lambda plan, src: seen.append((simulate(p, plan).total_time, src)),
                  on_bound=bounds.append)
    assert res.status == "optimal"
    assert seen and seen[-1][0] == pytest.approx(res.objective)
    assert all(b <= res.objective + 1e-9 for b in bounds)
    assert res.lower_bound <= res.objective


def test_stop_event_set_before_solve_returns_promptly():
    p = problem(10, 8)
    stop = threading.Event()
    stop.set()
    inc = plugins.heuristics()["hetero_heft"].run(p)
    res = plugins.formulations()["hetero_xengine"].solve(p, incumbent=inc, limits=Limits.seconds(60, stop=stop))
    assert res.plan is not None and simulate(p, res.plan).valid
    assert res.objective <= simulate(p, inc).total_time + 1e-9
