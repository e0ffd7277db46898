"""The conformance battery (hybrid_remat.testing): every built-in passes it,
and it catches objects that break the contract."""

from __future__ import annotations

import os

import numpy as np
import pytest

from hybrid_remat import plugins, testing
from hybrid_remat.errors import GraphError
from hybrid_remat.interfaces import CostModel, Formulation, FormulationResult, Heuristic, Loader
from hybrid_remat.loaders import RematGraphLoader
from hybrid_remat.plan import Plan, keep_all_plan
from hybrid_remat.simulate import simulate


def builtin(kind: str) -> list:
    """Registered built-ins of a kind (so built-ins merged later are covered automatically)."""
    plugins.reset()
    objs = [r.obj for r in plugins.registered() if r.kind == kind and r.source == "builtin"]
    plugins.reset()
    return objs


def ids(objs):
    return [o.name for o in objs]


HEURISTICS = builtin("heuristics")
FORMULATIONS = builtin("formulations")
BOUNDS = builtin("bounds")
IMPROVERS = builtin("improvers")
COST_MODELS = builtin("cost_models")
LOADERS = builtin("loaders")


# ------------------------------------------------------------- the built-ins
# one pytest case per (built-in, named check): a broken promise fails alone and names itself
def _for_small_graphs(formulation):
    """A formulation whose ``applicable`` leaves the battery's tiny graphs to others, set up to run on them."""
    from hybrid_remat.exact.decompose import DecomposedFormulation

    if isinstance(formulation, DecomposedFormulation):
        return DecomposedFormulation(segment_size=3, min_nodes=0)
    return formulation


BUILTINS = [(kind, obj) for kind, objs in (("heuristic", HEURISTICS), ("bound", BOUNDS), ("improver", IMPROVERS),
                                            ("cost_model", COST_MODELS), ("loader", LOADERS)) for obj in objs]


@testing.parametrize_with_checks(BUILTINS)
def test_builtin(obj, check):
    check(obj)


@pytest.mark.slow
# 500 branch-and-bound nodes a solve: the checks are about the contract, not about closing gaps
@testing.parametrize_with_checks([("formulation", _for_small_graphs(f)) for f in FORMULATIONS], node_limit=500)
def test_builtin_formulation(obj, check):
    check(obj)


@pytest.mark.parametrize("bound", BOUNDS, ids=ids(BOUNDS))
def test_builtin_bound_finds_a_bound(bound):
    report = testing.check_bound(bound)
    assert report["checked"] and any(v is not None for v in report["found"].values())


def test_every_builtin_has_its_checks():
    """The parametrized cases above cover every check of every built-in."""
    for objs, kind in ((HEURISTICS, "heuristic"), (BOUNDS, "bound"), (IMPROVERS, "improver"),
                       (FORMULATIONS, "formulation"), (COST_MODELS, "cost_model"), (LOADERS, "loader")):
        assert objs, kind
        for obj in objs:
            names = [name for name, _, _ in testing.checks_for(obj, kind=kind)]
            assert names[0] == "check_declares" and len(names) >= 3 and len(set(names)) == len(names)


def test_fixture_plugin_objects_conform():
    """A third party's objects (tests/plugins/good_plugin.py), including a loader with save()."""
    plugins.reset()
    try:
        plugins.register_path(os.path.join(os.path.dirname(__file__), "plugins", "good_plugin.py"))
        testing.check_heuristic(plugins.heuristics()["fixture_reference"])
        assert testing.check_formulation(plugins.formulations()["fixture_echo"])["status"]["training9@tight"] == "feasible"
        testing.check_cost_model(plugins.cost_models()["fixture_unit"])
        report = testing.check_loader(plugins.loaders()["fixture_edgelist"])
        assert report["loaded"] == ["profiled7.own", "chain6.own", "random_dag_n10_s3.own"]
    finally:
        plugins.reset()


# ------------------------------------------------------- the battery's premises
def test_standard_instances_are_feasible_and_tight_ones_need_recomputation():
    insts = testing.standard_instances()
    assert {i.problem.n_devices for i in insts} == {1, 2}
    for inst in insts:
        r = simulate(inst.problem, inst.witness)
        assert r.valid
        if not inst.full_budget and inst.problem.is_single_device:
            g = inst.problem.graph
            assert not simulate(inst.problem, keep_all_plan(g, inst.problem.primary.name)).valid
            assert r.n_recompute > 0


def test_written_files_round_trip_through_load_graph(tmp_path):
    from hybrid_remat.loaders import load_graph

    for g in testing.standard_graphs():
        p = tmp_path / f"{g.name}.json.gz"
        testing.write_remat_graph(g, p)
        back = load_graph(p)
        assert back.n == g.n and np.array_equal(back.edges(), g.edges()) and np.array_equal(back.bytes, g.bytes)
        q = tmp_path / f"{g.name}.nl.json"
        testing.write_node_link(g, q)
        assert np.allclose(load_graph(q).cost("cost"), g.costs[g.cost_kinds[0]])


# ------------------------------------------------- the battery catches defects
class Base(Heuristic):
    name = "bad"
    capabilities = frozenset({"dag", "chain", "single_device"})


class DropsLastNode(Base):
    def run(self, problem, *, seed=0):
        g = problem.graph
        full = keep_all_plan(g, problem.primary.name)
        keep = full.node != g.n - 1
        return Plan(full.op[keep], full.node[keep], full.device[keep], full.target[keep], full.devices)


class Random(Base):
    calls = 0

    def run(self, problem, *, seed=0):
        Random.calls += 1
        return keep_all_plan(problem.graph, problem.primary.name) if Random.calls % 2 else None


class GivesUp(Base):
    def run(self, problem, *, seed=0):
        return None


class Crashes(Base):
    def run(self, problem, *, seed=0):
        raise KeyError("oops")


class ChainOnly(Base):
    capabilities = frozenset({"chain", "single_device"})

    def run(self, problem, *, seed=0):
        return keep_all_plan(problem.graph, problem.primary.name)


@pytest.mark.parametrize("cls, pattern", [
    (DropsLastNode, "invalid: plan ends without ever computing node"),
    (Random, "not deterministic"),
    (GivesUp, "returned None on chain6@100%"),
    (Crashes, "raised KeyError"),
])
def test_check_heuristic_catches(cls, pattern):
    with pytest.raises(AssertionError, match=pattern):
        testing.check_heuristic(cls())


def test_check_heuristic_respects_capabilities():
    report = testing.check_heuristic(ChainOnly())
    assert report["checked"] == ["chain6@100%"]
    assert ("training9@100%", "chains only") in report["skipped"]
    assert testing.check_heuristic(GivesUp(), require_plan_at_full_budget=False)["found"]["chain6@100%"] is None

    class Nothing(Base):
        capabilities = frozenset({"multi_device"})

        def run(self, problem, *, seed=0):
            return None

    with pytest.raises(AssertionError, match="accepts none of the instances"):
        testing.check_heuristic(Nothing(), instances=testing.standard_instances(multi_device=False))


class FormBase(Formulation):
    name = "badf"
    capabilities = frozenset({"dag", "chain", "single_device", "exact"})


class SaysInfeasible(FormBase):
    def solve(self, problem, **kw):
        return FormulationResult("infeasible")


class OverBound(FormBase):
    def solve(self, problem, *, incumbent=None, **kw):
        return FormulationResult("feasible" if incumbent else "no_solution", incumbent, lower_bound=1e9)


class FalseOptimal(FormBase):
    """Claims optimality for a plan with a needless recomputation."""

    def solve(self, problem, *, incumbent=None, **kw):
        g = problem.graph
        from hybrid_remat.plan import plan_from_order
        plan = plan_from_order(g, list(range(g.n - 1)) + [0, g.n - 1] if g.n > 2 else list(range(g.n)),
                               problem.primary.name)
        if not simulate(problem, plan).valid:
            plan = incumbent
        return FormulationResult("optimal" if plan is not None else "no_solution", plan)


class BadIncumbentCallback(FormBase):
    def solve(self, problem, *, incumbent=None, on_incumbent=None, **kw):
        if on_incumbent is not None:
            on_incumbent(Plan.from_steps([("compute", 0, problem.primary.name)]), "bad")
        return FormulationResult("no_solution")


class HintCrash(FormBase):
    def solve(self, problem, *, incumbent=None, **kw):
        if incumbent is None:
            return FormulationResult("no_solution")
        if incumbent.node.max() >= problem.graph.n:
            [][0]  # an unguarded index error on a hint for another graph
        return FormulationResult("feasible", incumbent)


@pytest.mark.parametrize("cls, pattern", [
    (SaysInfeasible, "says infeasible"),
    (OverBound, "lower bound 1000000000.0 exceeds"),
    (FalseOptimal, "'optimal' plan costs 30.0, more than a known plan's 28.0"),
    (BadIncumbentCallback, "incumbent from 'bad' is invalid"),
    (HintCrash, "IndexError.*incumbent for another graph"),
])
def test_check_formulation_catches(cls, pattern):
    with pytest.raises(AssertionError, match=pattern):
        testing.check_formulation(cls(), instances=testing.standard_instances(multi_device=False))


class NegativeCost(CostModel):
    name = "neg"
    version = "1"

    def devices(self):
        return ["d"]

    def estimate(self, graph, device):
        if device != "d":
            raise GraphError("unknown")
        return -np.ones(graph.n)


class WrongShape(NegativeCost):
    def estimate(self, graph, device):
        if device != "d":
            raise GraphError("unknown")
        return np.ones(graph.n + 1)


class SilentDevice(NegativeCost):
    def estimate(self, graph, device):
        return np.ones(graph.n)


@pytest.mark.parametrize("cls, pattern", [
    (NegativeCost, "negative entries"),
    (WrongShape, "has shape"),
    (SilentDevice, "unknown device name was accepted"),
])
def test_check_cost_model_catches(cls, pattern):
    with pytest.raises(AssertionError, match=pattern):
        testing.check_cost_model(cls())


class KeyErrorLoader(Loader):
    name = "keyerror"
    version = "1"

    def sniff(self, path, head):
        return True

    def load(self, path):
        return RematGraphLoader().load(path) if "remat" in path else {}["x"]


class LossyLoader(RematGraphLoader):
    name = "lossy"

    def load(self, path):
        g = super().load(path)
        return g.with_costs({"gpu": g.cost("gpu") * 2})


def test_check_loader_catches():
    with pytest.raises(AssertionError, match="sniffed .* but load raised KeyError"):
        testing.check_loader(KeyErrorLoader())
    with pytest.raises(AssertionError, match="read back with different 'gpu' costs"):
        testing.check_loader(LossyLoader())


class StagedModelBound(FormBase):
    """Reports a bound of its staged model that a non-staged plan beats (random_dag@tight: witness 85)."""

    def solve(self, problem, *, incumbent=None, on_bound=None, **kw):
        if incumbent is not None and simulate(problem, incumbent).valid:
            cost = simulate(problem, incumbent).total_time
            return FormulationResult("feasible", incumbent, cost, problem.base_cost)
        lb = 90.0 if problem.graph.name.startswith("random_dag") and problem.budgets[0] == 23 else problem.base_cost
        if on_bound is not None:
            on_bound(lb)
        return FormulationResult("no_solution", lower_bound=lb)


def test_scoped_bounds_are_compared_with_staged_witnesses_only():
    insts = testing.standard_instances(multi_device=False)
    with pytest.raises(AssertionError, match=r"random_dag_n10_s3@tight: lower bound 90.0 exceeds the cost 85.0"):
        testing.check_formulation(StagedModelBound(), instances=insts)
    scoped = StagedModelBound()
    scoped.capabilities = FormBase.capabilities | {"scoped_bound"}
    assert "random_dag_n10_s3@tight" in testing.check_formulation(scoped, instances=insts)["checked"]


# ---------------------------------------------------- the battery as named checks
class InvalidAndRandom(Base):
    """Two broken promises at once: an invalid plan and a different answer each call."""
    calls = 0

    def run(self, problem, *, seed=0):
        InvalidAndRandom.calls += 1
        plan = DropsLastNode().run(problem)
        return plan if InvalidAndRandom.calls % 2 else keep_all_plan(problem.graph, problem.primary.name)


def test_one_failed_check_does_not_stop_the_others():
    with pytest.raises(AssertionError) as e:
        testing.check_heuristic(InvalidAndRandom())
    msg = str(e.value)
    assert "failed 2 of 6 checks" in msg
    assert "check_heuristic_plans_are_valid: " in msg and "plan ends without ever computing node" in msg
    assert "check_heuristic_deterministic: " in msg and "not deterministic" in msg


def test_each_check_is_its_own_pytest_case():
    from hybrid_remat.heuristics.keep_all import KeepAll

    mark = testing.parametrize_with_checks([DropsLastNode(), KeepAll()], kind="heuristic")
    params = mark.args[1]
    ids = [p.id for p in params]
    assert ids[:5] == ["bad-check_declares", "bad-check_accepts_an_instance", "bad-check_heuristic_plans_are_valid",
                       "bad-check_heuristic_plan_at_full_budget", "bad-check_heuristic_deterministic"]
    outcomes = {}
    for p in params:
        obj, check = p.values
        try:
            check(obj)
            outcomes[p.id] = "passed"
        except AssertionError as e:
            outcomes[p.id] = str(e)
        except pytest.skip.Exception:  # a check that does not apply (the time promise of one that makes none)
            outcomes[p.id] = "skipped"
    assert "is invalid" in outcomes["bad-check_heuristic_plans_are_valid"]
    assert outcomes["bad-check_heuristic_deterministic"] == "passed"  # the other checks of the object still pass
    assert all(v == "passed" for k, v in outcomes.items() if k.startswith("keep_all-"))


class RandomTagged(Random):
    """Declares through its battery tags that the same seed may give another plan."""
    name = "random_tagged"
    capabilities = frozenset({"chain", "single_device"})  # where keep-all fits: the chain at 100 %
    battery_tags = {"deterministic": False, "plan_at_full_budget": False}


def test_skips_come_from_tags_and_capabilities_not_names():
    report = testing.check_heuristic(RandomTagged())
    assert report["checks"]["check_heuristic_deterministic"] == "skipped: battery tag 'deterministic' is off"
    assert report["checks"]["check_heuristic_plan_at_full_budget"].startswith("skipped")
    # a declared "deterministic" capability keeps the check whatever the tags say
    claims = RandomTagged()
    claims.capabilities = RandomTagged.capabilities | {"deterministic"}
    with pytest.raises(AssertionError, match="not deterministic"):
        testing.check_heuristic(claims)
    # the same object under another name is checked the same way
    renamed = RandomTagged()
    renamed.name = "decomposed"
    assert testing.check_heuristic(renamed)["checks"] == report["checks"]
    skipped = [(name, skip) for name, _, skip in testing.checks_for(RandomTagged()) if skip]
    assert [n for n, _ in skipped] == ["check_heuristic_plan_at_full_budget", "check_heuristic_deterministic"]


def test_kinds_are_read_from_the_object():
    from hybrid_remat.heuristics.local_search import LocalSearch

    assert [testing.kind_of(o) for o in (HEURISTICS[0], FORMULATIONS[0], BOUNDS[0], COST_MODELS[0], LOADERS[0])] \
        == ["heuristic", "formulation", "bound", "cost_model", "loader"]
    assert testing.kind_of(LocalSearch()) == "improver"  # registered as both: the caller names the kind
    assert "check_heuristic_deterministic" in [n for n, _, _ in testing.checks_for(LocalSearch(), kind="heuristic")]
    with pytest.raises(TypeError, match="none of heuristic"):
        testing.kind_of(object())
