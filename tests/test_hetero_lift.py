"""The lift's Numba kernels agree with their Python versions, and the lift
stays cheap on large plans (counted in steps, not seconds)."""

import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import random_dag
from hybrid_remat.hetero.lift import dead_steps_kernel, lift_plan, recompute_candidates_kernel, remove_dead_steps
from hybrid_remat.heuristics.dtr import DTR
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate


def problem(seed, bw):
    g = random_dag(25, p=0.2, seed=seed, kinds=("gpu", "cpu"))
    b = (min_feasible_budget(g) + keep_all_peak(g)) // 2
    return Problem(g, [Device("gpu", "gpu", max(b, min_feasible_budget(g))), Device("cpu", "cpu", 10**6)],
                   [Link("gpu", "cpu", bw, 0.01), Link("cpu", "gpu", bw, 0.01)])


@pytest.mark.parametrize("seed", range(4))
def test_kernels_match_their_python_versions(seed):
    p = problem(seed, 10.0)
    plan = DTR("lru", name="lru").run(Problem(p.graph, [p.devices[0]]))
    op, node = plan.op.astype(np.int64), plan.node.astype(np.int64)
    assert np.array_equal(recompute_candidates_kernel(op, node, p.graph.n),
                          recompute_candidates_kernel.py_func(op, node, p.graph.n))
    lifted = lift_plan(p, plan, policy="all")
    assert lifted.meta["offloads"] == len(recompute_candidates_kernel(op, node, p.graph.n)) > 0
    args = (lifted.op.astype(np.int64), lifted.node, lifted.device, lifted.target, p.graph.pred_ptr,
            p.graph.pred_idx, p.graph.n, 2)
    a, b = np.ones(len(lifted), bool), np.ones(len(lifted), bool)
    assert dead_steps_kernel(*args, a) == dead_steps_kernel.py_func(*args, b) and np.array_equal(a, b)
    assert remove_dead_steps(p.graph, *args[:4]).all()  # the lift already removed what is dead


@pytest.mark.parametrize("seed", range(4))
def test_lift_offloads_and_stays_valid(seed):
    p = problem(seed, 10.0)
    plan = DTR("lru", name="lru").run(Problem(p.graph, [p.devices[0]]))
    base = simulate(p, lift_plan(p, plan, policy="serial", max_offloads=0))
    for policy in ("serial", "all"):
        lifted = lift_plan(p, plan, policy=policy)
        sim = simulate(p, lifted)
        assert sim.valid and sim.peak_bytes["gpu"] <= base.peak_bytes["gpu"]
        if policy == "serial":
            assert sim.total_time <= base.total_time + 1e-12
        assert sim.n_recompute + lifted.meta.get("offloads", 0) >= base.n_recompute
