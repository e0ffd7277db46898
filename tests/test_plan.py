import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_remat.errors import PlanError
from hybrid_remat.generators import chain, random_dag
from hybrid_remat.loaders import load_graph
from hybrid_remat.plan import (
    Plan,
    keep_all_plan,
    plan_from_json,
    plan_from_order,
    plan_from_rs,
    plan_to_json,
    read_plan,
    rs_from_plan,
    write_plan,
)
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 20), st.floats(0.05, 0.7), st.integers(0, 10**6))
def test_rs_round_trip_preserves_time_and_peak(n, p, seed):
    g = random_dag(n, p=p, seed=seed)
    prob = Problem.single(g, "100%")
    plan = keep_all_plan(g, "cost")
    R, S = rs_from_plan(g, plan)
    assert R.diagonal().all() and not np.triu(R, 1).any() and not np.triu(S).any()
    back = plan_from_rs(g, R, S, "cost")
    a, b = simulate(prob, plan), simulate(prob, back)
    assert b.valid, b.error
    assert b.total_time == pytest.approx(a.total_time)
    assert b.peak_bytes == a.peak_bytes


def _random_order_with_recompute(g, rng):
    """Frontier-ordered compute sequence with random recomputations of ancestors."""
    order = []
    for v in range(g.n):
        if v and rng.random() < 0.4:
            u = int(rng.integers(v))
            # recompute u and the chain of its inputs it needs (all inputs recomputed first)
            stack = sorted(set(_ancestors(g, u)) | {u})
            order.extend(stack)
        order.append(v)
    return order


def _ancestors(g, v):
    seen, todo = set(), [v]
    while todo:
        x = todo.pop()
        for u in g.preds(x):
            if int(u) not in seen:
                seen.add(int(u))
                todo.append(int(u))
    return seen


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 14), st.integers(0, 10**6))
def test_plan_from_order_with_recomputation_is_valid_and_round_trips(n, seed):
    rng = np.random.default_rng(seed)
    g = random_dag(n, p=0.3, seed=seed)
    order = _random_order_with_recompute(g, rng)
    prob = Problem.single(g, 10**9)
    plan = plan_from_order(g, order, "cost")
    r = simulate(prob, plan)
    assert r.valid, r.error
    assert r.total_time == pytest.approx(float(g.cost()[order].sum()))
    R, S = rs_from_plan(g, plan)
    r2 = simulate(prob, plan_from_rs(g, R, S, "cost"))
    assert r2.valid, r2.error
    assert r2.total_time <= r.total_time + 1e-9  # resident recomputations are skipped
    assert r2.peak_bytes["cost"] <= r.peak_bytes["cost"]


def test_rs_from_plan_rejects_non_frontier_plans():
    g = random_dag(3, p=0.0, seed=0)
    with pytest.raises(PlanError, match="frontier"):
        rs_from_plan(g, Plan.from_steps([("compute", 1, "d"), ("compute", 0, "d"), ("compute", 2, "d")]))


def test_rs_from_plan_rejects_computes_after_the_last_frontier():
    g = chain(2)
    plan = Plan.from_steps([("compute", 0, "d"), ("compute", 1, "d"), ("free", 0, "d"), ("compute", 0, "d")])
    with pytest.raises(PlanError, match="no staged form"):
        rs_from_plan(g, plan)


def test_plan_from_rs_rejects_missing_inputs():
    g = chain(2)
    R = np.array([[1, 0], [0, 1]])
    S = np.zeros((2, 2))
    with pytest.raises(PlanError, match="needs node 0"):
        plan_from_rs(g, R, S)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 15), st.integers(0, 10**6))
def test_plan_json_round_trip(n, seed):
    g = random_dag(n, p=0.3, seed=seed, kinds=("gpu", "cpu"))
    prob = Problem(g, [Device("gpu", "gpu", 10**6), Device("cpu", "cpu", 10**6)], [Link("gpu", "cpu", 1e9), Link("cpu", "gpu", 1e9)])
    steps = [("compute", v, "gpu") for v in range(g.n)] + [("copy", 0, "gpu", "cpu"), ("free", 0, "gpu")]
    plan = Plan.from_steps(steps, ["gpu", "cpu"])
    doc = json.loads(json.dumps(plan_to_json(plan, prob, {"total_time": 1.5, "peak_bytes": {"gpu": 3}})))
    assert doc["format"] == "remat-plan/1"
    assert doc["steps"][-2] == {"op": "copy", "node": 0, "from": "gpu", "to": "cpu"}
    assert doc["devices"][0] == {"name": "gpu", "kind": "gpu", "memory_bytes": 10**6}
    assert plan_from_json(doc, g) == plan


def test_node_link_plan_uses_node_ids(moccasin_dir, tmp_path):
    g = load_graph(moccasin_dir / "rlg_n100.json")
    prob = Problem.single(g, "100%")
    plan = keep_all_plan(g, prob.primary.name)
    doc = plan_to_json(plan, prob)
    first = doc["steps"][0]["node"]
    assert first == g.ids[0]  # the 'name' of the first node in graph['order']
    path = tmp_path / "p.json"
    write_plan(path, plan, prob)
    with pytest.raises(FileExistsError):
        write_plan(path, plan, prob)
    assert read_plan(path, g) == plan


def test_plan_json_errors():
    g = chain(2)
    with pytest.raises(PlanError, match="not a remat-plan/1"):
        plan_from_json({"format": "x"}, g)
    with pytest.raises(PlanError, match="lacks"):
        plan_from_json({"format": "remat-plan/1", "steps": [{"op": "compute", "node": 9, "device": "d"}]}, g)
    with pytest.raises(PlanError, match="unknown op"):
        plan_from_json({"format": "remat-plan/1", "steps": [{"op": "jump", "node": 0, "device": "d"}]}, g)
    with pytest.raises(PlanError, match="malformed"):
        plan_from_json({"format": "remat-plan/1", "steps": [{"op": "compute"}]}, g)
