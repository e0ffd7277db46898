"""The named checks of heuristics, bounds and improvers (the contracts of
:func:`~hybrid_remat.hookspecs.hybrid_remat_register_heuristics`,
``_bounds`` and ``_improvers``), and the ones every kind shares.

Each ``check_*`` takes the object (and optional keywords: ``instances``,
``seed``, ``runs``, ...), runs it on the accepted standard instances and
raises :class:`AssertionError` naming the object, the instance and the
problem; it returns a small report (``{"found": {instance: value}}``).

Examples
--------
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> check_heuristic_plans_are_valid(KeepAll())["found"]["chain6@100%"]
28.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..interfaces import ALL_PLANS, BoundResult
from ..limits import Limits
from ._base import Runs, call, check_plan, in_staged_scope, known_value, select, who
from .instances import Instance

__all__ = [
    "REQUIRED_METHODS", "check_declares", "check_accepts_an_instance",
    "check_heuristic_plans_are_valid", "check_heuristic_plan_at_full_budget", "check_heuristic_deterministic",
    "check_bound_only_returns_no_plan", "check_bound_below_valid_plans", "check_bound_below_brute_force",
    "check_bound_deterministic", "check_improver_plans_are_valid", "check_improver_never_worse",
]

#: what each kind of object must have besides ``name``, ``version`` and ``capabilities``
REQUIRED_METHODS = {
    "heuristic": ("run",), "bound": ("bound",), "improver": ("improve",), "formulation": ("solve",),
    "cost_model": ("devices", "estimate"), "loader": ("sniff", "load"),
}
_BOUND_SECONDS = 60.0     # a backstop: the battery's instances are tiny
_IMPROVER_SECONDS = 5.0   # lns searches until its deadline (it takes no node limit under one)


def _key(instances: Sequence[Instance] | None):
    return None if instances is None else tuple(i.name for i in instances)


# ------------------------------------------------------------------ every kind
def check_declares(obj, *, kind: str = "heuristic") -> None:
    """A non-empty string ``name``, a string ``version``, ``capabilities`` a
    set of strings, the kind's methods (:data:`REQUIRED_METHODS`) and, for a
    heuristic, a numeric ``rank``."""
    name = getattr(obj, "name", None)
    assert isinstance(name, str) and name, f"{who(obj)}: a {kind} needs a non-empty string `name`"
    assert isinstance(getattr(obj, "version", None), str), f"{who(obj)}: `version` must be a string"
    caps = getattr(obj, "capabilities", None)
    assert caps is not None and not isinstance(caps, str) and all(isinstance(c, str) for c in caps), (
        f"{who(obj)}: `capabilities` must be a set of strings, got {caps!r}")
    for method in REQUIRED_METHODS[kind]:
        assert callable(getattr(obj, method, None)), f"{who(obj)} has no {method}()"
    if kind == "heuristic":
        assert isinstance(getattr(obj, "rank", None), (int, float)), f"{who(obj)}: `rank` must be a number"


def check_accepts_an_instance(obj, *, instances: Sequence[Instance] | None = None, runs: Runs | None = None) -> dict:
    """Its capabilities (and ``applicable``) admit at least one instance."""
    chosen, skipped = select(obj, instances, runs)
    assert chosen, f"{who(obj)} accepts none of the instances ({skipped}): check its capabilities"
    return {"checked": [i.name for i in chosen], "skipped": skipped}


# ------------------------------------------------------------------ heuristics
def _heuristic_runs(h, instances, seed, runs) -> list:
    """``[(instance, plan)]``: one run on each accepted instance (shared by the checks)."""
    runs = runs if runs is not None else Runs()
    chosen, _ = select(h, instances, runs)
    return runs.get(("run", seed, _key(instances)), lambda: [
        (inst, call(h, inst.name, "run", h.run, inst.problem, seed=seed)) for inst in chosen])


def check_heuristic_plans_are_valid(heuristic, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                    runs: Runs | None = None) -> dict:
    """On every accepted instance ``run`` returns a plan that passes the
    simulator within the budget, using only the problem's devices, or
    ``None``; it never raises there."""
    found = {}
    for inst, plan in _heuristic_runs(heuristic, instances, seed, runs):
        found[inst.name] = None if plan is None else check_plan(heuristic, inst, plan, "its plan").total_time
    return {"found": found}


def check_heuristic_plan_at_full_budget(heuristic, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                        runs: Runs | None = None) -> None:
    """Where the keep-all order fits, ``run`` finds a plan (tag
    ``plan_at_full_budget``)."""
    for inst, plan in _heuristic_runs(heuristic, instances, seed, runs):
        assert plan is not None or not inst.full_budget, (
            f"{who(heuristic)} returned None on {inst.name}, where the reference order fits")


def check_heuristic_deterministic(heuristic, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                  runs: Runs | None = None) -> None:
    """A second run with the same seed returns the same plan (tag
    ``deterministic``)."""
    for inst, plan in _heuristic_runs(heuristic, instances, seed, runs):
        again = call(heuristic, inst.name, "run, second time", heuristic.run, inst.problem, seed=seed)
        assert (plan is None) == (again is None) and (plan is None or plan == again), (
            f"{who(heuristic)} is not deterministic on {inst.name} for seed {seed}")


def check_bound_only_returns_no_plan(heuristic, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                     runs: Runs | None = None) -> None:
    """A legacy ``"bound_only"`` heuristic returns no plan (it is used as a
    bound: the bound checks apply to it)."""
    for inst, plan in _heuristic_runs(heuristic, instances, seed, runs):
        assert plan is None, f"{who(heuristic)} is bound_only but returned a plan on {inst.name}"


# ---------------------------------------------------------------------- bounds
def _as_bound(obj):
    from ..portfolio.calls import adapt

    return adapt("bound" if callable(getattr(obj, "bound", None)) else "heuristic", obj)


def _bound_call(b, inst):
    return call(b, inst.name, "bound", b.bound, inst.problem, limits=Limits.seconds(_BOUND_SECONDS))


def _bound_runs(bound, instances, runs) -> list:
    """``[(instance, BoundResult or None)]``, each result checked for its type."""
    runs = runs if runs is not None else Runs()
    b = _as_bound(bound)
    chosen, _ = select(b, instances, runs)

    def compute():
        out = []
        for inst in chosen:
            res = _bound_call(b, inst)
            assert res is None or (isinstance(res, BoundResult) and isinstance(res.value, (int, float))
                                   and not math.isnan(res.value)), f"{who(b)}: bound {res!r} on {inst.name}"
            out.append((inst, res))
        return out

    return runs.get(("bound", _key(instances)), compute)


def check_bound_below_valid_plans(bound, *, instances: Sequence[Instance] | None = None,
                                  runs: Runs | None = None) -> dict:
    """``bound`` returns a :class:`~hybrid_remat.interfaces.BoundResult`
    (or ``None``) no greater than the witness plan's value, where the witness
    lies in the class the bound covers: every plan (scope ``all plans``) or,
    for a ``staged`` class bound, a witness whose first computations follow
    the reference order; other scopes are not compared."""
    found = {}
    for inst, res in _bound_runs(bound, instances, runs):
        found[inst.name] = None if res is None else res.value
        in_class = res is not None and (res.scope == ALL_PLANS
                                        or (res.scope == "staged" and in_staged_scope(inst)))
        if in_class:
            known = known_value(inst)
            assert res.value <= known * (1 + 1e-9), (
                f"{who(bound)}: bound {res.value} above the witness {known} on {inst.name}")
    return {"found": found}


def check_bound_below_brute_force(bound, *, instances: Sequence[Instance] | None = None,
                                  runs: Runs | None = None) -> None:
    """A bound over every plan is at most the optimum
    (:func:`~hybrid_remat.oracle.brute_force`) on instances of at most 8
    nodes with the serial objective."""
    from ..oracle import brute_force

    for inst, res in _bound_runs(bound, instances, runs):
        if res is None or res.scope != ALL_PLANS or inst.problem.graph.n > 8 or inst.problem.objective.name != "serial":
            continue
        opt = brute_force(inst.problem)[0]
        assert res.value <= opt * (1 + 1e-9), f"{who(bound)}: bound {res.value} above the optimum {opt} on {inst.name}"


def check_bound_deterministic(bound, *, instances: Sequence[Instance] | None = None, runs: Runs | None = None) -> None:
    """A second call gives the same value (tag ``deterministic``)."""
    b = _as_bound(bound)
    for inst, res in _bound_runs(bound, instances, runs):
        if res is None:
            continue
        again = _bound_call(b, inst)
        assert again is not None and again.value == res.value, f"{who(b)} is not deterministic on {inst.name}"


# -------------------------------------------------------------------- improvers
def _improver_runs(improver, instances, seed, moves, runs) -> list:
    """``[(instance, reported plans, returned plan)]`` from each witness."""
    from ..portfolio.calls import adapt

    improver = adapt("improver", improver)
    runs = runs if runs is not None else Runs()
    chosen, _ = select(improver, instances, runs)

    def compute():
        out = []
        for inst in chosen:
            seen: list = []
            plan = call(improver, inst.name, "improve", improver.improve, inst.problem, inst.witness,
                        seed=seed, limits=Limits.seconds(_IMPROVER_SECONDS, nodes=moves),
                        on_incumbent=lambda p, s=None, _seen=seen: _seen.append(p))
            out.append((inst, seen, plan))
        return out

    return runs.get(("improve", seed, moves, _key(instances)), compute)


def check_improver_plans_are_valid(improver, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                   moves: int = 50, runs: Runs | None = None) -> None:
    """From each witness (``moves`` as the node limit), every plan it
    reports (``on_incumbent``) and the plan it returns pass the simulator."""
    for inst, seen, plan in _improver_runs(improver, instances, seed, moves, runs):
        for p in seen:
            check_plan(improver, inst, p, "a reported plan")
        if plan is not None:
            check_plan(improver, inst, plan, "its plan")


def check_improver_never_worse(improver, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                               moves: int = 50, runs: Runs | None = None) -> dict:
    """The plan it returns is no worse than the witness it started from."""
    found = {}
    for inst, _, plan in _improver_runs(improver, instances, seed, moves, runs):
        found[inst.name] = None
        if plan is None:
            continue
        value, known = inst.problem.objective.value(check_plan(improver, inst, plan, "its plan")), known_value(inst)
        assert value <= known * (1 + 1e-9), f"{who(improver)}: {value} is worse than its start {known} on {inst.name}"
        found[inst.name] = value
    return {"found": found}
