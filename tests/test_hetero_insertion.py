"""HEFT's insertion post-pass: valid plans, never a larger makespan."""

import pytest

from hybrid_remat.generators import random_dag
from hybrid_remat.graph import Graph
from hybrid_remat.hetero.heft import HeftScheduler, heft_plan
from hybrid_remat.hetero.insertion import earliest_position, insert_earlier
from hybrid_remat.limits import Limits
from hybrid_remat.plan import Plan
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate


def _problem(g, gpu, cpu):
    return Problem(g, [Device("gpu", "gpu", gpu), Device("cpu", "cpu", cpu)],
                   [Link("gpu", "cpu", 50.0, 0.1), Link("cpu", "gpu", 50.0, 0.1)], check=False)


def test_gap_is_filled():
    g = Graph.from_arrays([1, 1, 1], [(0, 1)], {"gpu": [9.0, 1.0, 3.0], "cpu": [5.0, 9.0, 9.0]})
    p = Problem(g, [Device("gpu", "gpu", 10), Device("cpu", "cpu", 10)], [Link("cpu", "gpu", 1.0), Link("gpu", "cpu", 1.0)])
    plan = Plan.from_steps([("compute", 0, "cpu"), ("copy", 0, "cpu", "gpu"), ("compute", 1, "gpu"),
                            ("compute", 2, "gpu")], ["gpu", "cpu"])
    assert earliest_position(plan, 3, g.preds(2)) == 0
    assert earliest_position(plan, 2, g.preds(1)) == 2  # right after the copy that brings its input
    out = insert_earlier(p, plan)
    assert simulate(p, out).makespan == pytest.approx(7.0)
    assert simulate(p, plan).makespan == pytest.approx(10.0)


def test_memory_limit_blocks_a_move():
    # same as above but the GPU can hold only 2 values: node 2 computed early would overflow
    g = Graph.from_arrays([1, 1, 1], [(0, 1)], {"gpu": [9.0, 1.0, 3.0], "cpu": [5.0, 9.0, 9.0]})
    p = Problem(g, [Device("gpu", "gpu", 2), Device("cpu", "cpu", 10)], [Link("cpu", "gpu", 1.0), Link("gpu", "cpu", 1.0)])
    plan = Plan.from_steps([("compute", 0, "cpu"), ("copy", 0, "cpu", "gpu"), ("compute", 1, "gpu"),
                            ("free", 0, "gpu"), ("free", 1, "gpu"), ("compute", 2, "gpu")], ["gpu", "cpu"])
    assert simulate(p, plan).valid
    out = insert_earlier(p, plan)
    r = simulate(p, out)
    assert r.valid and r.peak_bytes["gpu"] <= 2


@pytest.mark.parametrize("seed", range(12))
def test_insertion_keeps_plans_valid_and_never_slower(seed):
    g = random_dag(14, p=0.25, seed=seed, kinds=("gpu", "cpu"))
    need = int(max(g.bytes[v] + sum(g.bytes[u] for u in g.preds(v)) for v in range(g.n)))
    p = _problem(g, need + 5, 10**6)
    plan = heft_plan(p, mode=1)
    if plan is None or not simulate(p, plan).valid:
        pytest.skip("no HEFT plan for this instance")
    before = simulate(p, plan)
    out = insert_earlier(p, plan, limits=Limits.seconds(5.0))
    after = simulate(p, out)
    assert after.valid
    assert after.makespan <= before.makespan + 1e-12
    assert after.total_time == pytest.approx(before.total_time)  # same steps, other order


def test_makespan_scheduler_applies_insertion(datasets_dir):
    from hybrid_remat.loaders import load_graph

    p = Problem.from_specs(load_graph(datasets_dir / "mlp_chain_b256.json.gz"), ["gpu=50%", "cpu=64GiB"])
    with_ins = HeftScheduler(objective="makespan").run(p)
    without = HeftScheduler(objective="makespan", insertion_time=0.0).run(p)
    a, b = simulate(p, with_ins), simulate(p, without)
    assert a.valid and b.valid and a.makespan <= b.makespan + 1e-12
