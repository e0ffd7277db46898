"""Multi-device (CPU+GPU) planning: simulator semantics, heuristics, the
staged MILP against brute force, XEngine's unit instances."""

from __future__ import annotations

import os

import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak, node_need_bytes
from hybrid_remat.errors import HybridRematError, PlanError
from hybrid_remat.generators import chain
from hybrid_remat.graph import Graph
from hybrid_remat.hetero.heft import HeftScheduler, heft_kernel, rank_order, upward_rank
from hybrid_remat.hetero.heft_kernel import graph_record, machine_record, params_record
from hybrid_remat.hetero.lift import gpu_only_problem, lift_plan, remove_dead_computes
from hybrid_remat.hetero.lifted import LiftedSingleDevice
from hybrid_remat.hetero.paging import HeftOffload, PagingMILP, paging_problem
from hybrid_remat.hetero.xengine import XEngineMILP, coarse_ends, decode, model_size, stage_arrays
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.plan import OP_COMPUTE, Plan, plan_from_order
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate

DATASETS = os.path.join(os.path.dirname(__file__), "..", "datasets")


def two_dev(g: Graph, gpu: int, cpu: int, bw=(1.0, 1.0), lat=(0.0, 0.0), storage=False) -> Problem:
    cpu_dev = Device("cpu", "storage", cpu, can_compute=False) if storage else Device("cpu", "cpu", cpu)
    return Problem(g, [Device("gpu", "gpu", gpu), cpu_dev],
                   [Link("gpu", "cpu", bw[0], lat[0]), Link("cpu", "gpu", bw[1], lat[1])])


def random_problem(rng, n_lo=2, n_hi=6, slack=3):
    n = int(rng.integers(n_lo, n_hi))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if j == i + 1 or rng.random() < 0.3]
    g = Graph.from_arrays(rng.integers(1, 4, n), edges,
                          {"gpu": rng.integers(1, 10, n).astype(float), "cpu": rng.integers(1, 10, n).astype(float)})
    need = int(node_need_bytes(g).max())
    return two_dev(g, need + int(rng.integers(0, slack)), need + int(rng.integers(0, slack)),
                   bw=(1.0, 2.0), lat=(float(rng.integers(0, 3)), float(rng.integers(0, 3))))


# ------------------------------------------------------------- simulator
class TestSimulatorMultiDevice:
    def setup_method(self):
        g = chain(3, bytes=10).with_costs({"gpu": [1.0, 2.0, 3.0], "cpu": [4.0, 5.0, 6.0]})
        self.p = Problem(g, [Device("gpu", "gpu", 20), Device("cpu", "cpu", 100)],
                         [Link("gpu", "cpu", 5.0, 0.5), Link("cpu", "gpu", 10.0, 1.0)])

    def test_copy_time_and_destination_memory(self):
        plan = Plan.from_steps([("compute", 0, "gpu"), ("copy", 0, "gpu", "cpu"), ("free", 0, "gpu"),
                                ("compute", 1, "cpu"), ("free", 0, "cpu"), ("copy", 1, "cpu", "gpu"),
                                ("compute", 2, "gpu")])
        r = simulate(self.p, plan)
        assert r.valid, r.error
        # copies: 0.5 + 10/5 = 2.5 and 1 + 10/10 = 2
        assert r.copy_time == pytest.approx(4.5)
        assert r.compute_time == pytest.approx(1.0 + 5.0 + 3.0)
        assert r.total_time == pytest.approx(13.5)
        assert r.peak_bytes == {"gpu": 20, "cpu": 20}
        # a resident value on two devices counts on both
        assert r.timeline[1].tolist() == [10, 10]

    def test_makespan_overlaps_streams(self):
        # gpu computes 0, copies 0 out while it computes 1; cpu waits for the copy
        plan = Plan.from_steps([("compute", 0, "gpu"), ("copy", 0, "gpu", "cpu"), ("compute", 1, "gpu"),
                                ("free", 1, "gpu"), ("free", 0, "gpu"), ("compute", 1, "cpu"),
                                ("compute", 2, "cpu")])
        r = simulate(self.p, plan)
        assert r.valid, r.error
        # copy 0 runs [1, 3.5]; gpu 1 runs [1, 3]; cpu 1 runs [3.5, 8.5]; cpu 2 [8.5, 14.5]
        assert r.makespan == pytest.approx(14.5)
        assert r.total_time == pytest.approx(1 + 2.5 + 2 + 5 + 6)

    @pytest.mark.parametrize("steps,needle", [
        ([("copy", 0, "gpu", "cpu")], "not resident"),
        ([("compute", 0, "gpu"), ("copy", 0, "gpu", "cpu"), ("copy", 0, "gpu", "cpu")], "already resident"),
        ([("compute", 0, "gpu"), ("compute", 1, "cpu")], "input 0 is not resident"),
        ([("compute", 0, "gpu"), ("compute", 1, "gpu"), ("compute", 2, "gpu")], "over its budget"),
    ])
    def test_copy_and_budget_errors(self, steps, needle):
        r = simulate(self.p, Plan.from_steps(steps, ["gpu", "cpu"]))
        assert not r.valid and needle in r.error

    def test_no_link_and_storage_device(self):
        g = chain(2, bytes=1).with_costs({"gpu": [1.0, 1.0]})
        p = Problem(g, [Device("gpu", "gpu", 5), Device("host", "storage", 5, can_compute=False)],
                    [Link("host", "gpu", 1.0)])
        r = simulate(p, Plan.from_steps([("compute", 0, "gpu"), ("copy", 0, "gpu", "host")]))
        assert not r.valid and "no link" in r.error
        r = simulate(p, Plan.from_steps([("compute", 0, "host")], ["gpu", "host"]))
        assert not r.valid and "storage only" in r.error


# -------------------------------------------------------------- heuristics
def test_upward_rank_gives_topological_order():
    rng = np.random.default_rng(3)
    for _ in range(20):
        p = random_problem(rng, 3, 12)
        order = rank_order(p)
        pos = np.empty(p.graph.n, dtype=int)
        pos[order] = np.arange(p.graph.n)
        for u, v in p.graph.edges():
            assert pos[u] < pos[v]


@pytest.mark.parametrize("scan,strict", [(256, False), (2, False), (256, True)])
def test_heft_kernel_matches_py_func(scan, strict):
    kern = getattr(heft_kernel, "py_func", None)
    if kern is None:
        pytest.skip("JIT disabled")
    rng = np.random.default_rng(7)
    for _ in range(15):
        p = random_problem(rng, 3, 10)
        g = p.graph
        bw, lat = p.link_arrays
        for mode in (0, 1):
            args = (graph_record(g), machine_record(p),
                    params_record(mode, 0.5, int(rng.integers(0, 2)), scan, int(rng.integers(0, 100)), strict),
                    np.arange(g.n, dtype=np.int64), 200, 10**9)
            a, b = heft_kernel(*args), kern(*args)
            assert a[:3] == b[:3] and a[-1] == b[-1]
            for x, y in zip(a[3:-1], b[3:-1], strict=True):
                assert np.array_equal(x[: a[2]], y[: b[2]])
        assert np.allclose(upward_rank(g.bytes, g.succ_ptr, g.succ_idx, p.cost_matrix, p.can_compute, bw, lat),
                           upward_rank.py_func(g.bytes, g.succ_ptr, g.succ_idx, p.cost_matrix, p.can_compute, bw,
                                               lat))


@pytest.mark.parametrize("seed", range(4))
def test_heuristic_plans_valid_under_device_budgets(seed):
    rng = np.random.default_rng(100 + seed)
    found = 0
    for _ in range(10):
        p = random_problem(rng, 4, 14, slack=6)
        for h in (HeftScheduler(), HeftScheduler("makespan"), HeftOffload(), LiftedSingleDevice()):
            plan = h.run(p)
            if plan is None:
                continue
            found += 1
            r = simulate(p, plan)
            assert r.valid, (h.name, r.error)
            for d in p.devices:
                assert r.peak_bytes[d.name] <= d.memory_bytes
    assert found > 0


def test_heft_respects_tight_gpu_and_uses_host():
    # a long chain whose GPU budget holds only one node and its input
    g = chain(12, bytes=4).with_costs({"gpu": [1.0] * 12, "cpu": [50.0] * 12})
    p = two_dev(g, 8, 1000, bw=(4.0, 4.0), lat=(0.1, 0.1))
    plan = HeftScheduler().run(p)
    r = simulate(p, plan)
    assert r.valid and r.peak_bytes["gpu"] <= 8
    assert r.total_time < 50.0  # the GPU does the work


def test_graph_that_does_not_fit_on_gpu_gets_a_cpu_gpu_plan():
    # node 2 needs 3 + 3 + 3 bytes with its inputs: more than the GPU holds
    g = Graph.from_arrays([3, 3, 3, 1], [(0, 2), (1, 2), (2, 3)],
                          {"gpu": [1.0, 1.0, 1.0, 1.0], "cpu": [5.0, 5.0, 5.0, 5.0]})
    p = two_dev(g, 7, 100, bw=(10.0, 10.0))
    assert gpu_only_problem(p) is None
    for h in (HeftScheduler(), HeftScheduler("makespan")):
        plan = h.run(p)
        r = simulate(p, plan)
        assert r.valid and r.peak_bytes["gpu"] <= 7
        assert any(plan.devices[d] == "cpu" for o, d in zip(plan.op, plan.device, strict=False) if o == OP_COMPUTE)
    res = XEngineMILP().solve(p, limits=Limits(nodes=2000))
    assert res.status == "optimal" and simulate(p, res.plan).valid
    assert res.objective == pytest.approx(brute_force(p, "frontier")[0])


@pytest.mark.skipif(not os.path.exists(os.path.join(DATASETS, "vgg16_b16.json.gz")), reason="dataset missing")
def test_profiled_graph_below_gpu_minimum_gets_a_valid_plan():
    from hybrid_remat.loaders import load_graph

    g = load_graph(os.path.join(DATASETS, "vgg16_b16.json.gz"))
    gpu = int(0.35 * keep_all_peak(g))
    assert gpu < node_need_bytes(g).max()
    p = Problem.from_specs(g, [f"gpu={gpu}", "cpu=64GiB"])
    plan = HeftScheduler(full=False).run(p)
    r = simulate(p, plan)
    assert r.valid and r.peak_bytes["gpu"] <= gpu


def test_lift_replaces_costly_recomputations_by_round_trips():
    edges = [(0, 1), (1, 2), (2, 3), (0, 3)]
    g = Graph.from_arrays([1, 1, 1, 1], edges, {"gpu": [9.0, 1.0, 1.0, 1.0], "cpu": [9.0] * 4})
    p = two_dev(g, 3, 10, bw=(1.0, 1.0))
    # a GPU plan that recomputes 0 (cost 9) for node 3 -- the round trip costs 2
    gplan = plan_from_order(g, [0, 1, 2, 0, 3], "gpu")
    sub = gpu_only_problem(p)
    r0 = simulate(sub, gplan)
    assert r0.valid and r0.n_recompute == 1
    lifted = lift_plan(p, gplan)
    r1 = simulate(p, lifted)
    assert r1.valid and r1.n_recompute == 0
    assert r1.total_time == pytest.approx(r0.total_time - 9 + 2)
    assert r1.peak_bytes["gpu"] <= r0.peak_bytes["gpu"]
    # cheap recomputation: nothing to gain, the plan is unchanged
    g2 = Graph.from_arrays([1, 1, 1, 1], edges, {"gpu": [0.5, 1.0, 1.0, 1.0], "cpu": [9.0] * 4})
    p2 = two_dev(g2, 3, 10)
    assert simulate(p2, lift_plan(p2, plan_from_order(g2, [0, 1, 2, 0, 3], "gpu"))).total_time == pytest.approx(4.0)
    # policy "all" offloads anyway
    assert simulate(p2, lift_plan(p2, plan_from_order(g2, [0, 1, 2, 0, 3], "gpu"), policy="all")).n_recompute == 0
    with pytest.raises(PlanError):
        lift_plan(p, gplan, policy="bogus")


def test_remove_dead_computes():
    g = chain(3, bytes=1)
    steps = [[0, 0, 0, -1], [0, 1, 0, -1], [1, 0, 0, -1], [0, 0, 0, -1], [1, 0, 0, -1], [0, 2, 0, -1]]
    out = remove_dead_computes(g, steps)
    assert out == [[0, 0, 0, -1], [0, 1, 0, -1], [1, 0, 0, -1], [0, 2, 0, -1]]


@pytest.mark.parametrize("seed", range(3))
def test_lift_never_raises_gpu_peak(seed):
    rng = np.random.default_rng(seed)
    for _ in range(8):
        p = random_problem(rng, 5, 14, slack=4)
        sub = gpu_only_problem(p)
        if sub is None:
            continue
        gplan = HeftScheduler().run(sub)
        if gplan is None:
            continue
        r0 = simulate(sub, gplan)
        for policy in ("serial", "all"):
            r1 = simulate(p, lift_plan(p, gplan, policy=policy))
            assert r1.valid, r1.error
            assert r1.peak_bytes["gpu"] <= r0.peak_bytes["gpu"]
            if policy == "serial":
                assert r1.total_time <= r0.total_time + 1e-9


def test_bad_objective_is_a_clear_error():
    with pytest.raises(HybridRematError, match="objective"):
        HeftScheduler("fastest")


# ------------------------------------------------------------- exact model
def test_milp_equals_brute_force_on_tiny_graphs():
    rng = np.random.default_rng(0)
    for _ in range(25):
        p = random_problem(rng)
        bt, _ = brute_force(p, "frontier")
        res = XEngineMILP().solve(p, limits=Limits(nodes=20000))
        assert res.status == "optimal"
        assert res.objective == pytest.approx(bt)
        r = simulate(p, res.plan)
        assert r.valid and r.total_time == pytest.approx(res.objective)
        assert res.stats["staged_lower_bound"] == pytest.approx(bt, rel=1e-6)
        assert res.lower_bound <= bt + 1e-9


def test_brute_force_frontier_restriction_is_a_restriction():
    rng = np.random.default_rng(5)
    for _ in range(10):
        p = random_problem(rng, 3, 5)
        assert brute_force(p)[0] <= brute_force(p, "frontier")[0] + 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_milp_never_worse_than_heuristics(seed):
    rng = np.random.default_rng(50 + seed)
    for _ in range(4):
        p = random_problem(rng, 5, 9, slack=3)
        for h in (HeftScheduler(), HeftOffload(), LiftedSingleDevice()):
            plan = h.run(p)
            if plan is None:
                continue
            hval = simulate(p, plan).total_time
            res = XEngineMILP().solve(p, incumbent=plan, limits=Limits(nodes=50))
            assert res.plan is not None
            r = simulate(p, res.plan)
            assert r.valid and r.total_time <= hval + 1e-9
            assert res.objective == pytest.approx(r.total_time)


def test_warm_start_from_a_staged_plan_is_used():
    rng = np.random.default_rng(11)
    p = random_problem(rng, 5, 6, slack=3)
    opt = XEngineMILP().solve(p, limits=Limits(nodes=20000))
    R, S, X = stage_arrays(p, opt.plan)
    again = decode(p, R, S, X)
    assert simulate(p, again).total_time == pytest.approx(opt.objective)
    res = XEngineMILP().solve(p, incumbent=opt.plan, limits=Limits(nodes=1))
    assert res.stats["warm_start"] == "incumbent full"
    assert res.objective == pytest.approx(opt.objective)


def test_oversized_model_is_refused_with_a_reason():
    g = chain(60, bytes=1).with_costs({"gpu": [1.0] * 60, "cpu": [2.0] * 60})
    p = two_dev(g, 4, 100)
    assert model_size(p)["variables"] > 1000
    plan = HeftScheduler().run(p)
    res = XEngineMILP(max_variables=1000, coarse=False, windows=False).solve(p, incumbent=plan)
    assert res.status == "no_solution" and "too large" in res.stats["reason"]
    assert res.plan is plan


def test_coarse_grid_when_the_per_node_model_is_too_large():
    g = chain(60, bytes=1).with_costs({"gpu": [1.0] * 60, "cpu": [2.0] * 60})
    p = two_dev(g, 4, 100)
    plan = HeftScheduler().run(p)
    ends = coarse_ends(p, plan, 20_000)
    assert ends is not None and len(ends) < 60 and ends[-1] == 59
    assert model_size(p, ends)["variables"] < model_size(p)["variables"]
    res = XEngineMILP(max_variables=20_000).solve(p, incumbent=plan, limits=Limits(nodes=200))
    assert res.stats["grid"].startswith("coarse") and res.stats["warm_start"] == "incumbent full"
    r = simulate(p, res.plan)
    assert r.valid and r.total_time <= simulate(p, plan).total_time + 1e-12


def _solve_on_grid(p, ends, node_limit=20000):
    """The model on the stage grid ``ends`` alone: ``FormulationResult``-like (status, plan, objective)."""
    from types import SimpleNamespace

    from hybrid_remat.limits import Limits

    best = {"plan": None, "obj": float("inf")}

    def offer(plan, source):
        r = simulate(p, plan)
        if r.valid and r.total_time < best["obj"]:
            best["plan"], best["obj"] = plan, r.total_time
        return r

    status, _ = XEngineMILP().solve_grid(p, ends, None, Limits(nodes=node_limit), 0, 1, offer, None, {}, full=False)
    return SimpleNamespace(status=status, plan=best["plan"], objective=best["obj"])


def test_coarse_model_on_tiny_graphs_is_exact_for_its_grid():
    rng = np.random.default_rng(9)
    for _ in range(10):
        p = random_problem(rng, 3, 6)
        n = p.graph.n
        fine = XEngineMILP().solve(p, limits=Limits(nodes=20000), frontier="reference")
        ends = np.array(sorted(set(rng.choice(n - 1, size=min(2, n - 1), replace=False).tolist()) | {n - 1}))
        coarse = _solve_on_grid(p, ends)
        assert coarse.status == "optimal" and fine.status == "optimal"
        r = simulate(p, coarse.plan)
        assert r.valid and r.total_time == pytest.approx(coarse.objective)
        assert coarse.objective >= fine.objective - 1e-9


def test_paging_mode_computes_on_gpu_only_and_matches_brute_force():
    rng = np.random.default_rng(21)
    for _ in range(8):
        p = random_problem(rng, 2, 5)
        pp = paging_problem(p)
        bt, _ = brute_force(pp, "frontier")
        res = PagingMILP().solve(p, limits=Limits(nodes=20000))
        assert res.objective == pytest.approx(bt)
        r = simulate(p, res.plan)
        assert r.valid
        assert all(res.plan.devices[d] == "gpu" for o, d in zip(res.plan.op, res.plan.device, strict=False) if o == OP_COMPUTE)
        # co-execution can only help
        assert XEngineMILP().solve(p, limits=Limits(nodes=20000)).objective <= res.objective + 1e-9


# ------------------------------------------------ XEngine's unit instances
def _xe(c_cpu, c_gpu, m, M, edges=None, lat=(0.0, 0.0), bw=(1e30, 1e30)):
    n = len(c_gpu)
    edges = edges if edges is not None else [(i, i + 1) for i in range(n - 1)]
    costs = {"gpu": np.array(c_gpu, float)}
    devs = [Device("gpu", "gpu", M)]
    if c_cpu is not None:
        costs["cpu"] = np.array(c_cpu, float)
        devs = [Device("cpu", "cpu", M), Device("gpu", "gpu", M)]
    g = Graph.from_arrays(np.array(m, dtype=np.int64), edges, costs)
    links = [Link("cpu", "gpu", bw[0], lat[0]), Link("gpu", "cpu", bw[1], lat[1])] if c_cpu is not None else []
    return Problem(g, devs, links)


def test_xengine_unit_instances():
    milp = XEngineMILP()
    # 1 device, chain 0->1 -> 11
    p = _xe(None, [1, 10], [1, 4], 5)
    assert milp.solve(p, limits=Limits(nodes=1000)).objective == pytest.approx(11)
    # 7-op chain -> 24 (no remat); with skips 1->3, 2->6 and M = 6 -> still 24
    c = [1, 10, 5, 1, 4, 2, 1]
    m2 = [2, 8, 2, 2, 6, 3, 2]  # sizes in 0.5e6 units: [1, 4, 1, 1, 3, 1.5, 1]e6
    assert milp.solve(_xe(None, c, m2, 10), limits=Limits(nodes=1000)).objective == pytest.approx(24)
    skip = [(i, i + 1) for i in range(6)] + [(1, 3), (2, 6)]
    assert milp.solve(_xe(None, c, m2, 12, skip), limits=Limits(nodes=1000)).objective == pytest.approx(24)
    # 2 devices, chain 0->1, copy cpu->gpu 3, gpu->cpu 8 -> 5
    p = _xe([1, 10], [10, 1], [1, 1], 5, lat=(2.0, 7.0), bw=(1.0, 1.0))
    res = milp.solve(p, limits=Limits(nodes=1000))
    assert res.objective == pytest.approx(5)
    # 2 devices, 7-op chain, op 3 on the GPU: 7 x 1 + copies 2 + 3 -> 12
    p = _xe([1, 1, 1, 10, 1, 1, 1], [10, 10, 10, 1, 10, 10, 10], [1] * 7, 10, lat=(1.0, 2.0), bw=(1.0, 1.0))
    res = milp.solve(p, limits=Limits(nodes=1000))
    assert res.objective == pytest.approx(12)
    assert [s.device for s in res.plan.steps() if s.op == "compute"] == ["cpu"] * 3 + ["gpu"] + ["cpu"] * 3
    # 2 devices, 7-op skip graph, free copies, M = 6e6 per device -> 11.5
    p = _xe(c, [0.5, 2, 1.5, 0.5, 7, 4, 2], m2, 12, skip, lat=(0.0, 0.0), bw=(1e30, 1e30))
    res = milp.solve(p, limits=Limits(nodes=5000))
    assert res.objective == pytest.approx(11.5)
    assert [s.device for s in res.plan.steps() if s.op == "compute"] == ["gpu"] * 4 + ["cpu"] * 3


def test_milp_stages_in_the_incumbents_order_when_it_is_not_staged():
    # a diamond whose reference order keeps both branches alive; the incumbent
    # computes 0, 2, 1, 3 (not staged in index order)
    g = Graph.from_arrays([2, 2, 1, 1], [(0, 1), (0, 2), (1, 3), (2, 3)],
                          {"gpu": [1.0, 1.0, 1.0, 1.0], "cpu": [4.0, 4.0, 4.0, 4.0]})
    p = two_dev(g, 5, 50, bw=(2.0, 2.0))
    inc = Plan.from_steps([("compute", 0, "gpu"), ("compute", 2, "gpu"), ("compute", 1, "gpu"), ("free", 0, "gpu"),
                           ("compute", 3, "gpu")], ["gpu", "cpu"])
    assert simulate(p, inc).valid and stage_arrays(p, inc) is None
    res = XEngineMILP().solve(p, incumbent=inc, limits=Limits(nodes=5000))
    assert res.stats["frontier"] == "incumbent order" and res.stats["warm_start"] == "incumbent full"
    r = simulate(p, res.plan)
    assert r.valid and r.total_time <= simulate(p, inc).total_time + 1e-12
    ref = XEngineMILP().solve(p, limits=Limits(nodes=5000), frontier="reference")
    assert ref.stats["frontier"] == "reference"
    assert simulate(p, ref.plan).valid


# ------------------------------------------------------------ windows
def test_window_models_are_neighbourhoods_of_their_plan():
    """A window keeps the plan outside its stages x nodes: the plan is a full
    start; its optimum lies between the full model's and the plan's; with
    every stage and node free it is the full model."""
    from hybrid_remat.hetero.xengine import staged_base
    from hybrid_remat.hetero.xengine_model import XEngineModel
    from hybrid_remat.limits import Limits
    from hybrid_remat.scip import run

    rng = np.random.default_rng(31)
    checked = 0
    for _ in range(12):
        p = random_problem(rng, 4, 7, slack=2)
        plan = HeftScheduler().run(p)
        base = staged_base(p, plan) if plan is not None else None
        if base is None:
            continue
        R, S, X, cur = base
        cur_t = simulate(p, cur).total_time
        n = p.graph.n
        opt, _ = brute_force(p, "frontier")
        for a, b, back in ((0, n, n), (1, min(n, 3), 1), (n - 2, n, 0)):
            fs, fn = np.zeros(n, bool), np.zeros(n, bool)
            fs[a:b] = True
            fn[max(0, a - back):b] = True
            with XEngineModel(p, fix=(R, S, X, fs, fn)) as xm:
                assert xm.add_start((R, S, X)) == "full"
                res = run(xm.model, limits=Limits(nodes=20000))
                assert res.status == "optimal"
                plan_w = xm.decode(xm.model.getBestSol())
                r = simulate(p, plan_w)
                assert r.valid and r.total_time == pytest.approx(xm.objscale.real(xm.model.getObjVal()))
                assert opt - 1e-9 <= r.total_time <= cur_t + 1e-9
                if (a, b, back) == (0, n, n):
                    assert r.total_time == pytest.approx(opt)
        checked += 1
    assert checked >= 5


def test_windows_improve_large_problems_and_stay_valid():
    """Past ``max_variables`` the incumbent is improved window by window
    (random layered graphs, GPU at half the keep-all peak, a slower CPU)."""
    from hybrid_remat.generators import random_layered

    improved = 0
    for seed in range(2):
        g = random_layered(40, seed=seed)
        c = np.asarray(g.cost("cost"), float)
        g = g.with_costs({"gpu": c, "cpu": 3 * c})
        peak, bw = keep_all_peak(g), float(g.bytes.mean())
        p = Problem(g, [Device("gpu", "gpu", max(int(node_need_bytes(g).max()), peak // 2)),
                        Device("cpu", "cpu", 10 * peak)], [Link("gpu", "cpu", bw), Link("cpu", "gpu", bw)])
        plan = HeftScheduler().run(p)
        assert model_size(p)["variables"] > 1000
        res = XEngineMILP(max_variables=1000, coarse=False, window_variables=600).solve(p, incumbent=plan,
                                                                                       limits=Limits(nodes=500))
        assert "windows" in res.stats["grid"] and res.stats["windows"]["solved"] > 0
        r = simulate(p, res.plan)
        assert r.valid and r.total_time == pytest.approx(res.objective)
        assert r.total_time <= simulate(p, plan).total_time + 1e-12
        improved += r.total_time < simulate(p, plan).total_time - 1e-9
    assert improved  # seed 1: a window finds a cheaper plan
