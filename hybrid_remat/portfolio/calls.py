"""One signature per kind, and the one place where older components are
adapted to it.

The portfolio calls every component one way:

* heuristic: ``run(problem, *, seed=0, limits=None) -> Plan | None``;
* bound: ``bound(problem, *, limits=None) -> BoundResult | None``;
* improver: ``improve(problem, plan, *, seed=0, limits=None,
  on_incumbent=None, shared=None) -> Plan | None``;
* formulation: ``solve(problem, *, incumbent=None, limits=None, seed=0,
  on_incumbent=None, on_bound=None) -> FormulationResult``.

An object whose method does not take these keywords (an older plugin:
``time_limit=``, ``deadline=``, ``stop=``, ``run_detailed``, a
``"bound_only"`` heuristic) is wrapped *once*, when it is registered or
handed to :func:`~hybrid_remat.anytime.anytime_solve`, by :func:`adapt`,
with a :class:`~hybrid_remat.plugins.PluginWarning` naming it; the runner
never inspects a signature.

Examples
--------
>>> import warnings
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.interfaces import Heuristic
>>> from hybrid_remat.plan import keep_all_plan
>>> class Old(Heuristic):
...     name = "old"
...     def run(self, problem, *, seed=0):            # no limits=
...         return keep_all_plan(problem.graph, problem.primary.name)
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     h = adapt("heuristic", Old())
>>> type(h).__name__, "older signature" in str(caught[0].message)
('OlderHeuristic', True)
>>> len(h.run(Problem.single(chain(3, bytes=1), "100%"), seed=0, limits=None))
6
>>> adapt("heuristic", h) is h                          # once
True
"""

from __future__ import annotations

import inspect
import math
import warnings

from ..errors import PluginWarning
from ..interfaces import ALL_PLANS, BoundResult
from ..limits import NO_LIMITS, Limits

__all__ = ["SIGNATURES", "adapt", "current", "formulation_scope", "OlderHeuristic", "BoundFromHeuristic",
           "OlderBound", "OlderImprover", "OlderFormulation"]

#: the method and the keywords the portfolio passes, by kind
SIGNATURES = {
    "heuristic": ("run", ("seed", "limits")),
    "bound": ("bound", ("limits",)),
    "improver": ("improve", ("seed", "limits", "on_incumbent", "shared")),
    "formulation": ("solve", ("incumbent", "limits", "seed", "on_incumbent", "on_bound")),
}


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None


def _takes(fn, name: str) -> bool:
    ps = _params(fn)
    return ps is not None and (name in ps or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps.values()))


def _filtered(fn, **kw) -> dict:
    """The keywords ``fn`` accepts (all of them when it takes ``**kwargs``)."""
    ps = _params(fn)
    if ps is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps.values()):
        return kw
    return {k: v for k, v in kw.items() if k in ps}


def current(kind: str, obj) -> bool:
    """``obj``'s method takes every keyword of its kind's signature."""
    method, keywords = SIGNATURES[kind]
    fn = getattr(obj, method, None)
    if not callable(fn):
        return False
    if _params(fn) is None:
        return True  # a builtin or C method: trust it
    return all(_takes(fn, k) for k in keywords)


def _deadline(limits: Limits):
    return limits.deadline if math.isfinite(limits.deadline) else None


def _time_limit(limits: Limits, default: float = 60.0) -> float:
    left = limits.left()
    return left if math.isfinite(left) else default


class _Older:
    """Forwards ``version``, ``rank``, ``applicable``, ``predict_seconds``,
    ``warmup``, ``bound_scope``, ``infeasibility_only`` and
    ``run_by_default`` to the wrapped object."""

    adapted = True

    def __init__(self, inner):
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.version = str(getattr(inner, "version", "0"))
        self.rank = float(getattr(inner, "rank", 10.0))
        self.run_by_default = getattr(inner, "run_by_default", True)
        self.capabilities = frozenset(set(getattr(inner, "capabilities", ())) - {"bound_only"})
        for attr in ("bound_scope", "infeasibility_only"):
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))
        for attr in ("applicable", "predict_seconds", "warmup"):
            if callable(getattr(inner, attr, None)):
                setattr(self, attr, getattr(inner, attr))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}@{self.version}>"


class OlderHeuristic(_Older):
    """A heuristic whose ``run`` takes no ``limits`` (given ``deadline=``
    where it declares it)."""

    def run(self, problem, *, seed: int = 0, limits=None):
        limits = limits or NO_LIMITS
        fn = self.inner.run
        return fn(problem, **_filtered(fn, seed=seed, deadline=_deadline(limits)))


class BoundFromHeuristic(_Older):
    """An older ``"bound_only"`` heuristic (``run_detailed`` reports
    ``lower_bound``) as a bound.  Its scope is :data:`ALL_PLANS` when it
    says ``bound_scope = "all plans"``, else a class named after it."""

    def bound(self, problem, *, limits=None) -> BoundResult | None:
        limits = limits or NO_LIMITS
        fn = getattr(self.inner, "run_detailed", None)
        if not callable(fn):
            return None
        kw = {"limits": limits} if _takes(fn, "limits") else _filtered(fn, deadline=_deadline(limits))
        value = (fn(problem, seed=0, **kw) or {}).get("lower_bound")
        if value is None:
            return None
        scope = ALL_PLANS if getattr(self.inner, "bound_scope", "") == ALL_PLANS else self.name
        return BoundResult(float(value), scope)


class OlderBound(_Older):
    """A bound whose ``bound`` takes no ``limits`` or returns a number."""

    def bound(self, problem, *, limits=None) -> BoundResult | None:
        fn = self.inner.bound
        out = fn(problem, **_filtered(fn, limits=limits or NO_LIMITS, deadline=_deadline(limits or NO_LIMITS)))
        if out is None or isinstance(out, BoundResult):
            return out
        return BoundResult(float(out))


class OlderImprover(_Older):
    """An improver with the older keywords (``time_limit``, ``deadline``,
    ``stop``, ``max_iters``/``node_limit``, ``on_improve``)."""

    def improve(self, problem, plan, *, seed: int = 0, limits=None, on_incumbent=None, shared=None):
        limits = limits or NO_LIMITS
        kw = {"seed": seed, "limits": limits, "time_limit": _time_limit(limits), "deadline": _deadline(limits),
              "stop": limits.stop, "shared": shared, "on_incumbent": on_incumbent}
        if limits.nodes is not None:
            kw["max_iters"] = kw["node_limit"] = int(limits.nodes)
        if on_incumbent is not None:
            kw["on_improve"] = lambda p: on_incumbent(p, self.name)
        fn = self.inner.improve
        ps = _params(fn)
        if ps is not None and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps.values()) and "limits" not in ps:
            kw = {k: kw[k] for k in ("seed", "time_limit", "stop") if k in kw}  # **kwargs: the old keywords only
        return fn(problem, plan, **_filtered(fn, **kw))


class OlderFormulation(_Older):
    """A formulation with the older keywords (``time_limit``,
    ``node_limit``, ``stop``, ``threads``)."""

    def solve(self, problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent=None, on_bound=None):
        limits = limits or NO_LIMITS
        fn = self.inner.solve
        kw = {"incumbent": incumbent, "limits": limits, "time_limit": _time_limit(limits), "node_limit": limits.nodes,
              "seed": seed, "threads": 1, "on_incumbent": on_incumbent, "on_bound": on_bound, "stop": limits.stop}
        return fn(problem, **_filtered(fn, **kw))


_WRAPPERS = {"heuristic": OlderHeuristic, "bound": OlderBound, "improver": OlderImprover,
             "formulation": OlderFormulation}


def adapt(kind: str, obj, *, who: str = ""):
    """``obj`` itself when it has its kind's signature (:data:`SIGNATURES`);
    else wrapped once, with a :class:`~hybrid_remat.plugins.PluginWarning`
    (a ``"bound_only"`` heuristic becomes a bound: ``kind`` ``"bound"``)."""
    if getattr(obj, "adapted", False):
        return obj
    name = getattr(obj, "name", type(obj).__name__)
    where = f"plugin {who!r}: " if who else ""
    if kind == "heuristic" and "bound_only" in set(getattr(obj, "capabilities", ())):
        warnings.warn(f"{where}heuristic {name!r} declares 'bound_only': it is used as a bound; register it "
                      "through hybrid_remat_register_bounds", PluginWarning, stacklevel=3)
        return BoundFromHeuristic(obj)
    if current(kind, obj):
        return obj
    method, keywords = SIGNATURES[kind]
    warnings.warn(f"{where}{kind} {name!r} has an older signature: {method}() should take "
                  f"{', '.join(k + '=' for k in keywords)} (hybrid_remat.hookspecs); it is wrapped to be called "
                  "that way", PluginWarning, stacklevel=3)
    return _WRAPPERS[kind](obj)


def formulation_scope(f) -> str:
    """The plans a formulation's bounds hold for: :data:`ALL_PLANS` only
    when it declares ``"exact"`` and not ``"scoped_bound"``; otherwise its
    ``bound_scope`` when that names a class, else its name."""
    caps = set(getattr(f, "capabilities", ()))
    declared = getattr(f, "bound_scope", ALL_PLANS)
    if "exact" in caps and "scoped_bound" not in caps and declared == ALL_PLANS:
        return ALL_PLANS
    return declared if declared and declared != ALL_PLANS else getattr(f, "name", "formulation")
