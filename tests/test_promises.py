"""The battery holds every kind to its time promise, and the examples that
teach the contract (hookspecs.py, CONTRIBUTING.md) pass the battery."""

import doctest
import time

import pytest

from hybrid_remat import hookspecs, testing
from hybrid_remat.interfaces import (
    Bound,
    BoundResult,
    CostModel,
    Formulation,
    FormulationResult,
    Heuristic,
    Improver,
    Loader,
)
from hybrid_remat.plan import keep_all_plan
from hybrid_remat.simulate import simulate
from hybrid_remat.testing.promises import SLACK_S, check_honours_limits

CAPS = frozenset({"dag", "chain", "single_device", "honours_limits"})
NAP = SLACK_S + 0.1  # longer than the slack, whatever the limits: the promise is broken


class SleepyHeuristic(Heuristic):
    name, capabilities = "sleepy_heuristic", CAPS

    def run(self, problem, *, seed=0, limits=None):
        time.sleep(NAP)
        plan = keep_all_plan(problem.graph, problem.primary.name)
        return plan if simulate(problem, plan).valid else None


class SleepyBound(Bound):
    name, capabilities = "sleepy_bound", CAPS

    def bound(self, problem, *, limits=None):
        time.sleep(NAP)
        return BoundResult(problem.objective.trivial_bound(problem))


class SleepyImprover(Improver):
    name, capabilities = "sleepy_improver", CAPS

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        time.sleep(NAP)
        return plan


class SleepyFormulation(Formulation):
    name, capabilities = "sleepy_formulation", CAPS

    def solve(self, problem, *, incumbent=None, limits=None, seed=0, on_incumbent=None, on_bound=None):
        time.sleep(NAP)
        return FormulationResult("no_solution")


@pytest.mark.parametrize("cls", [SleepyHeuristic, SleepyBound, SleepyImprover, SleepyFormulation])
def test_a_component_that_sleeps_past_its_limits_fails_the_battery(cls):
    obj = cls()
    with pytest.raises(AssertionError, match="after its deadline"):
        check_honours_limits(obj)
    with pytest.raises(AssertionError, match="check_honours_limits"):  # and the whole battery of its kind
        testing.run_checks(obj)
    # without the promise it runs in a process killed at its deadline: nothing to check
    obj.capabilities = CAPS - {"honours_limits"}
    with pytest.raises(testing.SkipCheck):
        check_honours_limits(obj)


def test_every_kind_that_takes_limits_has_the_time_check():
    assert [k for k in testing.KINDS if check_honours_limits in testing.CHECKS[k]] == [
        "heuristic", "bound", "improver", "formulation"]


def _hookspec_examples() -> list:
    """The plugin objects the hookspecs' examples define."""
    out = []
    for test in doctest.DocTestFinder().find(hookspecs):
        if not test.examples:
            continue
        env = dict(hookspecs.__dict__)
        exec(compile("\n".join(e.source for e in test.examples), test.name, "exec"), env)
        out += [v() for k, v in env.items() if isinstance(v, type) and k not in hookspecs.__dict__
                and v.__module__ != "hybrid_remat.interfaces"
                and issubclass(v, (Heuristic, Bound, Improver, Formulation, CostModel, Loader))]
    return out


@pytest.mark.parametrize("obj", _hookspec_examples(), ids=lambda o: o.name)
def test_the_hookspec_examples_pass_the_battery(obj):
    report = testing.run_checks(obj)  # raises on a failed check
    assert set(report["checks"].values()) == {"passed"}, report


def test_the_hookspecs_teach_every_kind():
    kinds = {testing.kind_of(o) for o in _hookspec_examples()}
    assert kinds == {"heuristic", "bound", "improver", "formulation", "cost_model", "loader"}
