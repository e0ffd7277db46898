"""What every check of the battery shares: naming the object, calling it so
that a crash becomes a failure that names it, checking plans with the
simulator, the object's battery tags, and the cache of calls shared by the
checks of one object.

Examples
--------
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> who(KeepAll()), tags_of(KeepAll())["plan_at_full_budget"]
("KeepAll 'keep_all'", True)
>>> runs = Runs()
>>> runs.get("x", lambda: 1), runs.get("x", lambda: 2)
(1, 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..errors import HybridRematError
from ..interfaces import accepts, objectives_of
from ..plan import Plan, rs_from_plan
from ..simulate import simulate
from .instances import Instance, standard_instances

__all__ = ["FORMULATION_STATUSES", "TOL", "DEFAULT_TAGS", "SkipCheck", "Runs", "who", "tags_of", "call",
           "check_plan", "close", "select", "known_value"]

FORMULATION_STATUSES = frozenset({"optimal", "feasible", "infeasible", "no_solution", "error"})
#: relative round-off allowed between a bound and a plan's value
TOL = 1e-6

#: battery tags and their defaults; an object overrides them with a ``battery_tags`` dict attribute
DEFAULT_TAGS = {
    # it finds a plan where the keep-all order fits (heuristics), or keeps the fitting incumbent (formulations)
    "plan_at_full_budget": True,
    # same seed (one thread, no deadline): same result; a declared "deterministic" capability always keeps it
    "deterministic": True,
}


class SkipCheck(Exception):
    """A check does not apply to an object (its tags or capabilities say so)."""


def who(obj) -> str:
    """How failures name an object: its class and registered name."""
    return f"{type(obj).__name__} {getattr(obj, 'name', '?')!r}"


def tags_of(obj) -> dict:
    """The object's battery tags: :data:`DEFAULT_TAGS` updated by its
    ``battery_tags`` attribute (a dict); unknown tags are kept (and ignored)."""
    tags = dict(DEFAULT_TAGS)
    tags.update(dict(getattr(obj, "battery_tags", None) or {}))
    if "deterministic" in set(getattr(obj, "capabilities", ())):
        tags["deterministic"] = True
    return tags


class Runs:
    """Results shared by the checks of one object, so that each call of the
    object is made once however many checks read it (``get(key, compute)``)."""

    def __init__(self):
        self._memo: dict = {}

    def get(self, key, compute: Callable):
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


def call(obj, inst_name: str, what: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; any exception but an ``AssertionError`` is
    turned into one that names the object, the instance and the call."""
    try:
        return fn(*args, **kwargs)
    except AssertionError:
        raise
    except Exception as e:
        raise AssertionError(
            f"{who(obj)} raised {type(e).__name__}: {e} on {inst_name}, a problem its capabilities accept ({what})"
        ) from e


def check_plan(obj, inst: Instance, plan, what: str):
    """The simulation of ``plan`` on ``inst``; an ``AssertionError`` naming
    the object and instance when it is not a valid plan of the problem."""
    assert isinstance(plan, Plan), f"{who(obj)} on {inst.name}: {what} is {type(plan).__name__}, not a Plan"
    names = {d.name for d in inst.problem.devices}
    if inst.problem.n_devices > 1:
        bad = set(plan.devices) - names
        assert not bad, f"{who(obj)} on {inst.name}: {what} uses unknown devices {sorted(bad)}"
    try:
        r = simulate(inst.problem, plan)
    except HybridRematError as e:
        raise AssertionError(f"{who(obj)} on {inst.name}: {what} cannot be simulated: {e}") from None
    assert r.valid, f"{who(obj)} on {inst.name}: {what} is invalid: {r.error}"
    return r


def in_staged_scope(inst: Instance) -> bool:
    """The witness is a staged plan (first computations in the reference
    order, one device): inside the model of every staged formulation."""
    if not inst.problem.is_single_device:
        return False
    try:
        rs_from_plan(inst.problem.graph, inst.witness)
    except HybridRematError:
        return False
    return True


def known_value(inst: Instance) -> float:
    """The witness's value under the instance's objective."""
    return inst.problem.objective.value(simulate(inst.problem, inst.witness))


def close(a: float, b: float) -> bool:
    """Equal within :data:`TOL` (infinities only to themselves)."""
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def select(obj, instances: Sequence[Instance] | None, runs: Runs | None = None
           ) -> tuple[list[Instance], list[tuple[str, str]]]:
    """``(chosen, skipped)``: the instances ``obj`` accepts
    (:func:`~hybrid_remat.interfaces.accepts`: its capabilities and its own
    ``applicable``), and the others with the reason.  Default instances:
    :func:`standard_instances`, with the makespan ones for objects that
    declare ``"makespan"``."""
    def compute():
        insts = list(instances) if instances is not None else standard_instances(
            makespan="makespan" in objectives_of(obj))
        chosen, skipped = [], []
        for inst in insts:
            ok, why = accepts(obj, inst.problem)
            if ok:
                chosen.append(inst)
            else:
                skipped.append((inst.name, why))
        return chosen, skipped

    return (runs or Runs()).get(("select", None if instances is None else tuple(i.name for i in instances)),
                                compute)
