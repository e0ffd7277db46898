import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_remat.budgets import keep_all_peak
from hybrid_remat.errors import PlanError
from hybrid_remat.generators import chain, random_dag
from hybrid_remat.graph import Graph
from hybrid_remat.plan import Plan, keep_all_plan, plan_from_order
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import check_plan, simulate, simulate_kernel


def _two_device_problem(g, gpu=10**9, cpu=10**9, check=True):
    return Problem(
        g,
        [Device("gpu", "gpu", gpu), Device("cpu", "cpu", cpu)],
        [Link("gpu", "cpu", 10.0, 1.0), Link("cpu", "gpu", 20.0, 0.5)],
        check=check,
    )


def _random_plan(g, D, rng, k):
    """Random, mostly valid step sequence (some invalid steps on purpose)."""
    resident = np.zeros((D, g.n), bool)
    ops, nodes, devs, dsts = [], [], [], []
    for _ in range(k):
        r = rng.random()
        v = int(rng.integers(g.n))
        d = int(rng.integers(D))
        if r < 0.55:
            # prefer a computable node
            cands = [u for u in range(g.n) if not resident[d, u] and all(resident[d, p] for p in g.preds(u))]
            if cands and rng.random() < 0.9:
                v = int(rng.choice(cands))
            ops.append(0), nodes.append(v), devs.append(d), dsts.append(-1)
            resident[d, v] = True
        elif r < 0.85:
            res = np.flatnonzero(resident[d])
            if len(res) and rng.random() < 0.9:
                v = int(rng.choice(res))
            ops.append(1), nodes.append(v), devs.append(d), dsts.append(-1)
            resident[d, v] = False
        elif D > 1:
            t = 1 - d
            ops.append(2), nodes.append(v), devs.append(d), dsts.append(t)
            resident[t, v] = True
    return (np.array(ops, np.int8), np.array(nodes, np.int64), np.array(devs, np.int64), np.array(dsts, np.int64))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(1, 2), st.integers(0, 10**6), st.booleans(), st.booleans())
def test_kernel_agrees_with_python_version(n, D, seed, check_budget, wait):
    rng = np.random.default_rng(seed)
    g = random_dag(n, p=0.3, seed=seed, kinds=("gpu", "cpu"))
    p = (
        _two_device_problem(g, 25, 40, check=False)
        if D == 2
        else Problem(g, [Device("gpu", "gpu", 30)], check=False)
    )
    op, node, dev, dst = _random_plan(g, D, rng, int(rng.integers(1, 4 * n)))
    bw, lat = p.link_arrays
    args = (op, node, dev, dst, g.bytes, g.pred_ptr, g.pred_idx, p.cost_matrix, p.can_compute, p.budgets, bw, lat, check_budget, wait)
    a = simulate_kernel(*args)
    b = getattr(simulate_kernel, "py_func", simulate_kernel)(*args)  # plain function under NUMBA_DISABLE_JIT
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            assert np.array_equal(np.asarray(x), np.asarray(y))
        else:
            assert x == pytest.approx(y)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30), st.floats(0.05, 0.7), st.integers(0, 10**6))
def test_keep_all_plan_is_valid_and_has_the_keep_all_peak(n, p, seed):
    g = random_dag(n, p=p, seed=seed)
    prob = Problem.single(g, "100%")
    r = simulate(prob, keep_all_plan(g, "cost"))
    assert r.valid, r.error
    assert r.peak_bytes["cost"] == keep_all_peak(g)
    assert r.n_recompute == 0 and r.tdi_pct == 0.0
    assert r.total_time == pytest.approx(float(g.cost().sum()))


def test_hand_example_peak_time_and_recompute():
    # 0 -> 1 -> 2, bytes 4, 2, 1; recompute 0 once
    g = Graph.from_arrays([4, 2, 1], [(0, 1), (1, 2)], [1.0, 2.0, 3.0])
    plan = Plan.from_steps(
        [("compute", 0, "d"), ("compute", 1, "d"), ("free", 0, "d"), ("compute", 0, "d"),
         ("free", 0, "d"), ("compute", 2, "d"), ("free", 1, "d"), ("free", 2, "d")]
    )
    r = simulate(Problem(g, [Device("d", "cost", 6)]), plan)
    assert r.valid, r.error
    assert r.peak_bytes == {"d": 6}  # 4+2 after computing 1, and 2+4 after recomputing 0
    assert r.total_time == 7.0 and r.n_recompute == 1
    assert r.tdi_pct == pytest.approx(100 * 1 / 6)
    assert r.timeline[:, 0].tolist() == [4, 6, 2, 6, 2, 3, 1, 0]


@pytest.mark.parametrize(
    "steps, budget, match",
    [
        ([("compute", 1, "d")], 10, r"step 0 computes node 1 on d but its input 0 is not resident"),
        ([("compute", 0, "d"), ("compute", 0, "d")], 10, r"step 1 computes node 0 on d where it is already resident"),
        ([("free", 0, "d")], 10, r"step 0 frees node 0 on d where it is not resident"),
        ([("compute", 0, "d"), ("compute", 1, "d")], 5, r"step 1 puts d at 6 bytes, over its budget of 5"),
        ([("compute", 0, "d")], 10, r"plan ends without ever computing node 1"),
        ([("compute", 7, "d")], 10, r"names node 7"),
    ],
)
def test_invalid_plans_report_first_offending_step(steps, budget, match):
    g = Graph.from_arrays([4, 2], [(0, 1)], [1.0, 1.0])
    r = simulate(Problem(g, [Device("d", "cost", budget)], check=False), Plan.from_steps(steps))
    assert not r.valid
    assert r.error is not None
    import re

    assert re.search(match, r.error), r.error


def test_over_budget_plan_valid_without_budget_check():
    g = chain(3, bytes=5)
    prob = Problem.single(g, 10)
    plan = plan_from_order(g, [0, 1, 2], "cost")
    assert simulate(prob, plan).valid
    assert simulate(Problem.single(g, 10), Plan.from_steps([("compute", 0, "cost"), ("compute", 1, "cost"), ("compute", 2, "cost")]), check_budget=False).valid


def test_copies_serial_and_makespan():
    g = Graph.from_arrays([10, 10], [(0, 1)], {"gpu": [1.0, 1.0], "cpu": [4.0, 4.0]})
    p = _two_device_problem(g)
    plan = Plan.from_steps([("compute", 0, "gpu"), ("copy", 0, "gpu", "cpu"), ("compute", 1, "cpu"), ("free", 0, "gpu")])
    r = simulate(p, plan)
    assert r.valid, r.error
    # copy gpu->cpu: latency 1 + 10 B / 10 B/s = 2
    assert r.copy_time == pytest.approx(2.0)
    assert r.total_time == pytest.approx(1 + 2 + 4)
    assert r.makespan == pytest.approx(1 + 2 + 4)
    assert r.peak_bytes == {"gpu": 10, "cpu": 20}


def test_makespan_overlaps_independent_streams():
    # two independent nodes on two devices run in parallel
    g = Graph.from_arrays([1, 1], [], {"gpu": [3.0, 3.0], "cpu": [5.0, 5.0]})
    p = _two_device_problem(g)
    r = simulate(p, Plan.from_steps([("compute", 0, "gpu"), ("compute", 1, "cpu")]))
    assert r.total_time == pytest.approx(8.0)
    assert r.makespan == pytest.approx(5.0)


def test_copy_errors():
    g = Graph.from_arrays([1, 1], [(0, 1)], {"gpu": [1.0, 1.0], "cpu": [1.0, 1.0]})
    p = Problem(g, [Device("gpu", "gpu", 10), Device("cpu", "cpu", 10)])  # no links
    r = simulate(p, Plan.from_steps([("compute", 0, "gpu"), ("copy", 0, "gpu", "cpu")]))
    assert not r.valid and "no link" in r.error
    p2 = _two_device_problem(g)
    r = simulate(p2, Plan.from_steps([("copy", 0, "gpu", "cpu")]))
    assert not r.valid and "not resident" in r.error


def test_storage_device_cannot_compute():
    g = Graph.from_arrays([1], [], {"gpu": [1.0]})
    p = Problem(g, [Device("gpu", "gpu", 10), Device("host", "storage", 10, can_compute=False)],
                [Link("gpu", "host", 1.0), Link("host", "gpu", 1.0)])
    r = simulate(p, Plan.from_steps([("compute", 0, "host")]))
    assert not r.valid and "storage only" in r.error


def test_plan_device_must_exist():
    g = chain(2)
    p = _two_device_problem(Graph.from_arrays([1, 1], [(0, 1)], {"gpu": [1, 1], "cpu": [1, 1]}))
    with pytest.raises(PlanError, match="'tpu'"):
        simulate(p, Plan.from_steps([("compute", 0, "tpu"), ("compute", 0, "gpu")]))
    # a one-device plan runs on any one-device problem
    assert simulate(Problem.single(g, "100%"), keep_all_plan(g, "whatever")).valid


def test_check_plan_raises():
    g = chain(2)
    with pytest.raises(PlanError, match="input 0"):
        check_plan(Problem.single(g, 10), Plan.from_steps([("compute", 1, "cost")]))
