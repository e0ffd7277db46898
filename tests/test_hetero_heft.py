"""hetero_heft: one object for both objectives, work budgets, the
one-device fallback (issue 12.9), and HEFT insertion as the improver
``insertion``."""

from __future__ import annotations

import os

import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.generators import chain, random_dag
from hybrid_remat.graph import Graph
from hybrid_remat.hetero.heft import HeftScheduler, heft_run, single_device_fallback
from hybrid_remat.hetero.heft_kernel import ST_STUCK, ST_WORK
from hybrid_remat.hetero.insertion import InsertionImprover
from hybrid_remat.hetero.paging import HeftOffload
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.plan import OP_COMPUTE, Plan, keep_all_plan
from hybrid_remat.problem import Device, Link, Problem, default_links
from hybrid_remat.simulate import simulate

DATASETS = os.path.join(os.path.dirname(__file__), "..", "datasets")


def same_plan(a: Plan, b: Plan) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("op", "node", "device", "target"))


def two_dev(g, gpu, cpu, bw=50.0, lat=0.1):
    return Problem(g, [Device("gpu", "gpu", gpu), Device("cpu", "cpu", cpu)],
                   [Link("gpu", "cpu", bw, lat), Link("cpu", "gpu", bw, lat)], check=False)


def medium_problem(frac=0.4):
    g = random_dag(60, p=0.08, seed=5, kinds=("gpu", "cpu"))
    need = int(max(g.bytes[v] + sum(g.bytes[u] for u in g.preds(v)) for v in range(g.n)))
    return two_dev(g, max(need, int(frac * g.bytes.sum())), 10**9)


# ----------------------------------------------------------- objectives
@pytest.mark.parametrize("objective", ["serial", "makespan"])
def test_one_object_reads_the_problem_objective(objective):
    p = medium_problem()
    from_problem = HeftScheduler().run(p.with_objective(objective))
    overridden = HeftScheduler(objective).run(p)
    assert same_plan(from_problem, overridden)
    caps = HeftScheduler.capabilities
    assert {"serial", "makespan", "honours_limits", "deterministic"} <= caps
    assert {"serial", "makespan", "honours_limits"} <= HeftOffload.capabilities


def test_makespan_objective_gives_no_larger_makespan_than_serial():
    p = medium_problem()
    mk = simulate(p, HeftScheduler().run(p.with_objective("makespan")))
    se = simulate(p, HeftScheduler().run(p))
    assert mk.valid and se.valid
    assert mk.makespan <= se.makespan + 1e-12
    assert se.total_time <= mk.total_time + 1e-12


# ---------------------------------------------------------------- limits
def test_work_budget_stops_the_kernel_and_is_deterministic():
    p = medium_problem(0.3)
    full, st, spent = heft_run(p)
    assert full is not None and spent > 0
    plan, st, used = heft_run(p, work=spent // 3)
    assert plan is None and st == ST_WORK and used < spent
    again = heft_run(p, work=spent // 3)
    assert again[1:] == (st, used)
    same = heft_run(p, work=spent)
    assert same[0] is not None and same_plan(same[0], full)


def test_scheduler_within_a_work_budget_returns_its_first_variants_plan():
    p = medium_problem(0.3)
    h = HeftScheduler()
    first = next(h.variants(p))
    plan1, _, spent1 = heft_run(p, order=first[1], mode=first[2], offload_weight=first[3], score_kind=first[4])
    got = h.run(p, limits=Limits(work=spent1))
    assert got is not None and same_plan(got, plan1)
    # more work, more variants: never worse
    more = h.run(p, limits=Limits(work=20 * spent1))
    assert simulate(p, more).total_time <= simulate(p, got).total_time + 1e-12


def test_no_work_left_still_gives_the_keep_all_plan_of_a_device_that_holds_the_graph():
    p = medium_problem(0.3)
    plan, spent = single_device_fallback(p, work=0)
    r = simulate(p, plan)
    assert r.valid and plan.meta.get("keep_all") and plan.meta["fallback"] == "cpu"
    assert {plan.devices[d] for o, d in zip(plan.op, plan.device, strict=True) if o == OP_COMPUTE} == {"cpu"}
    got = HeftScheduler().run(p, limits=Limits(work=0))
    assert got is not None and simulate(p, got).valid


# --------------------------------------------- one device holds the graph
def test_fallback_computes_on_the_device_that_holds_the_working_set():
    # the GPU can hold no node with its inputs; the CPU holds everything
    g = chain(5, bytes=4).with_costs({"gpu": [1.0] * 5, "cpu": [3.0] * 5})
    p = two_dev(g, 6, 1000)
    plan, _ = single_device_fallback(p)
    r = simulate(p, plan)
    assert r.valid and r.total_time == pytest.approx(15.0)
    assert HeftOffload().run(p) is None  # paging needs the GPU to compute
    got = HeftScheduler().run(p)
    assert got is not None and simulate(p, got).valid


@pytest.mark.skipif(not os.path.exists(os.path.join(DATASETS, "resnet50_b32.json.gz")), reason="dataset missing")
def test_resnet50_with_a_100mib_gpu_and_a_large_cpu_has_a_plan():
    # issue 12.9: `--device gpu=100MiB --device cpu=64GiB` answered "no plan found"
    g = load_graph(os.path.join(DATASETS, "resnet50_b32.json.gz"))
    p = Problem.from_specs(g, ["gpu=100MiB", "cpu=64GiB"])
    cpu_only = simulate(p, Plan(*(lambda k: (k.op, k.node, np.full(len(k), 1), k.target))(keep_all_plan(g, "cpu")),
                                ["gpu", "cpu"]))
    assert cpu_only.valid  # running everything on the CPU is valid
    # the first variants get stuck (pins of a recomputation set fill the GPU) ...
    assert heft_run(p)[1] == ST_STUCK
    # ... the scheduler retries them with strict set placement and finds CPU+GPU plans
    for objective in ("serial", "makespan"):
        plan = HeftScheduler().run(p.with_objective(objective))
        r = simulate(p, plan)
        assert r.valid and r.peak_bytes["gpu"] <= p.devices[0].memory_bytes
        assert r.total_time < cpu_only.total_time
        used = {plan.devices[d] for o, d in zip(plan.op, plan.device, strict=True) if o == OP_COMPUTE}
        assert used == {"gpu", "cpu"}
    from hybrid_remat.anytime import anytime_solve

    res = anytime_solve(p, 5.0, heuristics=["hetero_heft"], formulations=[], warm=False)
    assert res.plan is not None and simulate(p, res.plan).valid


# --------------------------------------------------------------- insertion
def _gap_problem():
    g = Graph.from_arrays([1, 1, 1], [(0, 1)], {"gpu": [9.0, 1.0, 3.0], "cpu": [5.0, 9.0, 9.0]})
    p = Problem(g, [Device("gpu", "gpu", 10), Device("cpu", "cpu", 10)],
                [Link("cpu", "gpu", 1.0), Link("gpu", "cpu", 1.0)])
    plan = Plan.from_steps([("compute", 0, "cpu"), ("copy", 0, "cpu", "gpu"), ("compute", 1, "gpu"),
                            ("compute", 2, "gpu")], ["gpu", "cpu"])
    return p, plan


def test_insertion_is_a_registered_improver_for_makespan_problems():
    imp = plugins.improvers()["insertion"]
    assert isinstance(imp, InsertionImprover)
    p, plan = _gap_problem()
    assert not accepts(imp, p)[0]  # serial objective: insertion cannot change the serial time
    mk = p.with_objective("makespan")
    assert accepts(imp, mk)[0]
    seen = []
    better = imp.improve(mk, plan, on_incumbent=lambda pl, src: seen.append((src, simulate(p, pl).makespan)))
    assert simulate(p, better).makespan == pytest.approx(7.0)
    assert simulate(p, plan).makespan == pytest.approx(10.0)
    assert seen and seen[-1] == ("insertion", pytest.approx(7.0))
    assert imp.improve(mk, better) is None  # nothing left to move
    assert imp.improve(mk, plan, limits=Limits(work=0)) is None  # no move may be tried


@pytest.mark.parametrize("seed", range(4))
def test_insertion_improver_keeps_plans_valid_and_never_slower(seed):
    g = random_dag(16, p=0.25, seed=seed, kinds=("gpu", "cpu"))
    need = int(max(g.bytes[v] + sum(g.bytes[u] for u in g.preds(v)) for v in range(g.n)))
    p = two_dev(g, need + 4, 10**6).with_objective("makespan")
    plan = HeftScheduler(insertion_time=0.0).run(p)
    before = simulate(p, plan)
    out = InsertionImprover().improve(p, plan, limits=Limits(work=200))
    if out is not None:
        after = simulate(p, out)
        assert after.valid and after.makespan < before.makespan
        assert after.total_time == pytest.approx(before.total_time)


def test_profiled_graph_makespan_heft_with_links_from_the_graph():
    g = load_graph(os.path.join(DATASETS, "mlp_chain_b256.json.gz"))
    p = Problem(g, [Device("gpu", "gpu", int(0.35 * g.bytes.sum())), Device("cpu", "cpu", 2**36)],
                default_links(g, ["gpu", "cpu"])).with_objective("makespan")
    plan = HeftScheduler().run(p)
    r = simulate(p, plan)
    assert r.valid and all(r.timed_peak_bytes[d.name] <= d.memory_bytes for d in p.devices)


# --------------------------------------------- one device: few variants, no long search when stuck
def test_one_device_runs_only_the_variants_that_differ():
    from hybrid_remat.generators import chain
    from hybrid_remat.problem import Problem

    one = Problem.single(chain(12, bytes=2), 12)
    assert len(list(HeftScheduler().variants(one))) == 4          # 2 orders x 2 scores: modes/weights agree
    assert len(list(HeftScheduler().variants(medium_problem(0.3)))) == 16


def test_one_device_stuck_returns_after_the_first_variant(monkeypatch):
    """On one device, a stuck first variant ends the run: one kernel run,
    not 33 (random layered graphs: 2-3 s, no plan)."""
    from hybrid_remat.families import family_graph
    from hybrid_remat.hetero import heft as heft_mod
    from hybrid_remat.problem import Problem

    p = Problem.single(family_graph("random_layered", 100), "50%")
    calls = []
    real = heft_mod.heft_run

    def counted(*a, **kw):
        out = real(*a, **kw)
        calls.append(out[1])
        return out

    monkeypatch.setattr(heft_mod, "heft_run", counted)
    assert HeftScheduler().run(p) is None          # keep-all does not fit either
    assert calls == [heft_mod.ST_STUCK]
