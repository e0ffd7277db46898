"""Every reduction through the one protocol of core/reduction.py: apply ->
solve (brute force on tiny problems) -> invert -> the simulator accepts the
plan on the original with the same value; forward maps the original's plans
into the reduced problem; carry names the scope of what a reduced result
proves (a bound of a restricted class is never a bound over every plan, and
``optimal`` there is only ``feasible`` over every plan).  And the one
keep-set plan class with a rule."""

import math

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.budgets import min_feasible_budget
from hybrid_remat.core.devices import MergedDevices, OneDevice, Paging
from hybrid_remat.core.keepset import KeepSetPlanner, keep_sequence
from hybrid_remat.core.reduction import ALL_PLANS, Carried, Reduction
from hybrid_remat.core.reductions import NodeMap, induced, memory_greedy_order
from hybrid_remat.generators import training_graph
from hybrid_remat.interfaces import ALL_PLANS as INTERFACES_ALL_PLANS
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.plan import OP_COMPUTE, Plan
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate


def two_devices(seed: int, cpu_bytes: int = 10):
    """A 7-node training graph: GPU at its smallest budget, a CPU with ``cpu_bytes``."""
    rng = np.random.default_rng(seed)
    base = training_graph(nx.path_graph(3, create_using=nx.DiGraph))
    g = base.with_costs({"gpu": rng.integers(1, 6, base.n).astype(float),
                         "cpu": rng.integers(1, 12, base.n).astype(float)})
    return Problem(g, [Device("gpu", "gpu", min_feasible_budget(g)), Device("cpu", "cpu", cpu_bytes)],
                   [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)], check=False)


def one_device(seed: int):
    rng = np.random.default_rng(seed)
    base = training_graph(nx.path_graph(4, create_using=nx.DiGraph))
    g = base.with_costs({"gpu": rng.integers(1, 6, base.n).astype(float)})
    return Problem.single(g, min_feasible_budget(g))


def value(problem, plan) -> float:
    sim = simulate(problem, plan)
    assert sim.valid, sim.error
    return float(problem.objective.value(sim))


def test_the_protocol_is_one_abc_and_one_scope_name():
    assert INTERFACES_ALL_PLANS == ALL_PLANS
    for r in (NodeMap([0]), OneDevice("gpu"), MergedDevices(), Paging()):
        assert isinstance(r, Reduction)
        assert all(callable(getattr(r, m)) for m in ("apply", "invert", "forward", "carry", "inverts"))
    with pytest.raises(TypeError):
        Reduction()  # abstract: apply, invert, forward and scope_of are the contract


@pytest.mark.parametrize("seed", range(3))
def test_relabel_keeps_every_plan_and_the_optimum(seed):
    p = one_device(seed)
    order = memory_greedy_order(p.graph)
    red = NodeMap(order)
    q = red.apply(p)
    opt_q, plan_q = brute_force(q)
    back = red.invert(plan_q)
    assert value(p, back) == pytest.approx(opt_q)                      # apply -> solve -> invert: valid, same value
    opt_p, plan_p = brute_force(p)
    assert opt_p == pytest.approx(opt_q)                               # the same plans: the same optimum
    assert value(q, red.forward(plan_p)) == pytest.approx(opt_p)       # forward: an original plan, renumbered
    c = red.carry(opt_q, "optimal")
    assert c == Carried(opt_q, "optimal", ALL_PLANS, "optimal")


def test_an_induced_sub_problem_names_its_class():
    p = one_device(0)
    sub, red = induced(p, range(p.graph.n // 2))
    _, plan = brute_force(sub)
    back = red.invert(plan)
    assert set(back.node.tolist()) <= set(range(p.graph.n // 2))
    assert red.forward(back) == plan
    c = red.carry(3.0, "optimal")
    assert c.scope == f"induced on {sub.graph.n} of {p.graph.n} nodes" and c.status == "feasible"
    assert c.scope_status == "optimal" and c.bound == 3.0


@pytest.mark.parametrize("seed", range(3))
def test_one_device_plans_lift_back_and_its_bounds_stay_its_own(seed):
    p = two_devices(seed)
    red = OneDevice("gpu")
    sub = red.apply(p)
    opt_sub, plan = brute_force(sub)
    variants = dict(red.inverts(plan))
    assert "" in variants
    for q in variants.values():
        assert value(p, q) <= opt_sub + 1e-9                           # as it is, or lifted: never worse
    assert value(p, red.invert(plan)) == pytest.approx(opt_sub)
    for q in variants.values():
        assert red.forward(q) == variants[""]                          # warm start: back to the one-device plan
    opt, _ = brute_force(p)
    c = red.carry(opt_sub, "optimal")
    assert c == Carried(opt_sub, "feasible", "gpu only", "optimal")
    assert c.bound >= opt - 1e-9  # why it is named: it may exceed the multi-device optimum
    assert red.lower_bound(p) <= opt_sub


@pytest.mark.parametrize("seed", range(3))
def test_merged_devices_give_bounds_over_every_plan_and_no_plans(seed):
    p = two_devices(seed, cpu_bytes=1)
    red = MergedDevices()
    merged = red.apply(p)
    m_opt, m_plan = brute_force(merged)
    assert not red.maps_plans and red.invert(m_plan) is None and red.inverts(m_plan) == []
    opt, plan = brute_force(p)
    assert red.forward(plan) is None
    c = red.carry(m_opt, "optimal")
    assert c.scope == ALL_PLANS and c.bound <= opt + 1e-9            # a bound of the original over every plan
    assert c.status == "feasible"                                      # its optimum is not the original's
    mk = MergedDevices()
    mk.apply(p.with_objective("makespan"))
    assert mk.carry(m_opt).bound == pytest.approx(m_opt / 2)           # two compute devices: two streams


@pytest.mark.parametrize("seed", range(3))
def test_paging_plans_are_plans_of_the_original_and_its_scope_is_declared(seed):
    p = two_devices(seed)
    red = Paging()
    pp = red.apply(p)
    assert [d.can_compute for d in pp.devices] == [True, False]
    bt, plan = brute_force(pp)
    back = red.invert(plan)
    assert value(p, back) == pytest.approx(bt)
    assert all(back.devices[d] == "gpu" for o, d in zip(back.op, back.device, strict=True) if o == OP_COMPUTE)
    assert red.forward(back) is back                                   # a paging plan warm-starts the reduced problem
    on_cpu = Plan.from_steps([("compute", 0, "cpu")], ["gpu", "cpu"])
    assert red.forward(on_cpu) is None                                 # a co-execution plan is outside the class
    opt, _ = brute_force(p)
    c = red.carry(bt, "optimal")
    assert c == Carried(bt, "feasible", "paging", "optimal") and c.bound >= opt - 1e-9
    assert red.carry(math.inf, "infeasible").status == "no_solution"  # no paging plan says nothing of the rest


def test_the_paging_formulation_maps_its_result_through_carry():
    from hybrid_remat.hetero.paging import PagingMILP

    p = two_devices(1)
    res = PagingMILP().solve(p, limits=Limits(nodes=20000))
    assert simulate(p, res.plan).valid
    assert PagingMILP.bound_scope == res.stats["carried"]["scope"] == "paging"
    assert res.stats["carried"]["status"] != "optimal"  # optimal among paging plans only


@pytest.mark.parametrize("seed", range(4))
def test_one_keep_set_class_with_a_rule(seed):
    """A rule is the keep set -> sequence map: the default rule passed
    explicitly gives the same plans, peaks and recomputed nodes."""
    p = one_device(seed)
    g = p.graph
    rng = np.random.default_rng(seed)
    default = KeepSetPlanner(p, "blocks")
    ruled = KeepSetPlanner(p, "blocks", rule=lambda keep: keep_sequence(g, keep))
    on_graph = KeepSetPlanner.on_graph(g, p.primary.name, "blocks")
    for _ in range(5):
        keep = rng.random(g.n) < 0.5
        a, b, c = default.plan(keep), ruled.plan(keep), on_graph.plan(keep)
        assert a[0] == b[0] == c[0] and a[1] == b[1] == c[1]
        assert np.array_equal(a[2], b[2]) and simulate(p, a[0], check_budget=False).valid
        assert a[0].meta["solver"] == "blocks"


def test_the_torch_planner_uses_the_keep_set_class():
    """The eager planner's plans are the keep-set class's with the runtime's
    executable order as the rule: the minimal-memory plan of that order."""
    torch = pytest.importorskip("torch")
    import hybrid_remat.torch as hrt
    from hybrid_remat.plan import plan_from_order
    from hybrid_remat.torch._planner import _Evaluator, _problem

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 4))
    g = hrt.trace(model, torch.randn(4, 8), hrt.default_loss, repeats=1)
    n_fwd = g.meta["torch"]["n_forward"]
    ev = _Evaluator(_problem(g, 10**12, None))
    assert isinstance(ev.planner, KeepSetPlanner)
    rng = np.random.default_rng(0)
    for _ in range(8):
        keep = rng.random(n_fwd) < 0.5
        plan = hrt.executable_plan(g, keep, ev.device)
        assert plan == plan_from_order(g, hrt.executable_order(g, keep), ev.device) == ev(keep, "x").plan
        assert plan.meta["solver"] == "torch_keep_set"
