"""Calling components: the new signatures (``limits=``) and the legacy ones.

While built-ins and plugins move to the signatures of
:mod:`hybrid_remat.interfaces`, the runner calls every component through
these functions: a method that accepts ``limits`` gets a
:class:`~hybrid_remat.limits.Limits`; an older one gets the keywords it
declares among the legacy ones (``deadline``, ``time_limit``,
``node_limit``, ``stop``, ``max_iters``, ``on_improve``).

:class:`BoundFromHeuristic`, :class:`ImproverFromFunction` and
:class:`ImproverFromFormulation` adapt legacy objects to the new kinds (a
``bound_only`` heuristic as a bound, a plain function or the ``lns``
formulation as an improver).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.interfaces import Heuristic
>>> from hybrid_remat.plan import keep_all_plan
>>> class Old(Heuristic):
...     name = "old"
...     def run(self, problem, *, seed=0):            # no limits=
...         return keep_all_plan(problem.graph, problem.primary.name)
>>> plan, bound = call_heuristic(Old(), Problem.single(chain(3, bytes=1), "100%"), seed=0, limits=None)
>>> len(plan), bound
(6, None)
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

from ..interfaces import ALL_PLANS, BoundResult
from ..limits import NO_LIMITS, Limits

__all__ = ["takes", "call_heuristic", "call_bound", "call_improver", "call_formulation", "formulation_scope",
           "BoundFromHeuristic", "ImproverFromFunction", "ImproverFromFormulation", "as_bound"]


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None


def takes(fn, name: str) -> bool:
    """``fn`` declares a parameter ``name`` (not only ``**kwargs``)."""
    ps = _params(fn)
    return ps is not None and name in ps


def _filtered(fn, **kw) -> dict:
    """The keywords ``fn`` accepts (all of them when it takes ``**kwargs``)."""
    ps = _params(fn)
    if ps is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps.values()):
        return kw
    return {k: v for k, v in kw.items() if k in ps}


def _deadline(limits: Limits):
    return limits.deadline if math.isfinite(limits.deadline) else None


def _time_limit(limits: Limits, default: float = 60.0) -> float:
    left = limits.left()
    return left if math.isfinite(left) else default


def call_heuristic(h, problem, *, seed: int = 0, limits: Limits | None = None):
    """Run a heuristic; ``(plan or None, bound or None)``.

    Prefers ``run_detailed`` (legacy: it also reports a bound) unless only
    ``run`` takes ``limits``.
    """
    limits = limits or NO_LIMITS
    detailed = getattr(h, "run_detailed", None)
    if callable(detailed) and (takes(detailed, "limits") or not takes(h.run, "limits")):
        kw = {"limits": limits} if takes(detailed, "limits") else _filtered(detailed, deadline=_deadline(limits))
        out = detailed(problem, seed=seed, **kw) or {}
        return out.get("plan"), out.get("lower_bound")
    if takes(h.run, "limits"):
        return h.run(problem, seed=seed, limits=limits), None
    return h.run(problem, seed=seed), None


def call_bound(b, problem, *, limits: Limits | None = None) -> BoundResult | None:
    """Run a bound source; a :class:`BoundResult` (``None``: no bound).

    A plain number is read as a bound over every plan; a legacy
    ``bound_only`` heuristic goes through :class:`BoundFromHeuristic`.
    """
    limits = limits or NO_LIMITS
    fn = getattr(b, "bound", None)
    if not callable(fn):
        return BoundFromHeuristic(b).bound(problem, limits=limits)
    out = fn(problem, limits=limits) if takes(fn, "limits") else fn(problem)
    if out is None or isinstance(out, BoundResult):
        return out
    return BoundResult(float(out))


def call_improver(imp, problem, plan, *, seed: int = 0, limits: Limits | None = None,
                  on_incumbent: Callable | None = None, shared=None):
    """Run an improver from ``plan``; its best plan (or ``None``).

    ``shared`` is passed only to improvers that declare
    ``"shares_incumbent"``.
    """
    limits = limits or NO_LIMITS
    fn = imp.improve
    name = getattr(imp, "name", "improver")
    caps = set(getattr(imp, "capabilities", ()))
    if takes(fn, "limits"):
        kw = {"seed": seed, "limits": limits, "on_incumbent": on_incumbent}
        if "shares_incumbent" in caps and takes(fn, "shared"):
            kw["shared"] = shared
        return fn(problem, plan, **_filtered(fn, **kw))
    legacy = {"seed": seed, "time_limit": _time_limit(limits), "deadline": _deadline(limits), "stop": limits.stop}
    if limits.nodes is not None:
        legacy["max_iters"] = int(limits.nodes)
        legacy["node_limit"] = int(limits.nodes)
    if on_incumbent is not None:
        legacy["on_improve"] = lambda p: on_incumbent(p, name)
        legacy["on_incumbent"] = on_incumbent
    ps = _params(fn)
    if ps is not None and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps.values()):
        legacy = {k: v for k, v in legacy.items() if k in ps}
    else:  # **kwargs: only what the new signature defines, the legacy way
        legacy = {k: legacy[k] for k in ("seed", "time_limit", "stop") if k in legacy}
    return fn(problem, plan, **legacy)


def call_formulation(f, problem, *, incumbent=None, limits: Limits | None = None, seed: int = 0,
                     on_incumbent: Callable | None = None, on_bound: Callable | None = None):
    """Run a formulation; its :class:`~hybrid_remat.interfaces.FormulationResult`.

    The legacy keywords (``time_limit``, ``node_limit``, ``stop``) always
    go with ``limits`` (when the method takes it): a new-style formulation
    merges them (:meth:`~hybrid_remat.interfaces.Formulation.limits_of`).
    """
    limits = limits or NO_LIMITS
    kw = {"incumbent": incumbent, "time_limit": _time_limit(limits), "node_limit": limits.nodes, "seed": seed,
          "threads": 1, "on_incumbent": on_incumbent, "on_bound": on_bound, "stop": limits.stop}
    if takes(f.solve, "limits"):
        kw["limits"] = limits
    return f.solve(problem, **_filtered(f.solve, **kw))


def formulation_scope(f) -> str:
    """The plans a formulation's bounds hold for: :data:`ALL_PLANS` only
    when it declares ``"exact"`` and not ``"scoped_bound"``; otherwise its
    ``bound_scope`` when that names a class, else its name."""
    caps = set(getattr(f, "capabilities", ()))
    declared = getattr(f, "bound_scope", ALL_PLANS)
    if "exact" in caps and "scoped_bound" not in caps and declared == ALL_PLANS:
        return ALL_PLANS
    return declared if declared and declared != ALL_PLANS else getattr(f, "name", "formulation")


# ----------------------------------------------------------------- adapters
class _Wrapped:
    """Forwards ``version``, ``rank``, ``applicable``, ``predict_seconds``,
    ``warmup`` and ``run_by_default`` to the wrapped object."""

    def __init__(self, inner, name: str | None = None, capabilities=None):
        self.inner = inner
        self.name = name or getattr(inner, "name", type(inner).__name__)
        self.version = str(getattr(inner, "version", "0"))
        self.rank = float(getattr(inner, "rank", 10.0))
        self.run_by_default = getattr(inner, "run_by_default", True)
        caps = set(getattr(inner, "capabilities", ()) if capabilities is None else capabilities)
        self.capabilities = frozenset(caps - {"bound_only"})
        for attr in ("applicable", "predict_seconds", "warmup"):
            if callable(getattr(inner, attr, None)):
                setattr(self, attr, getattr(inner, attr))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}@{self.version}>"


class BoundFromHeuristic(_Wrapped):
    """A legacy ``bound_only`` heuristic (``run_detailed`` reports
    ``lower_bound``) as a :class:`~hybrid_remat.interfaces.Bound`.  Its
    scope is :data:`ALL_PLANS` when it says ``bound_scope = "all plans"``,
    else a class named after it."""

    def bound(self, problem, *, limits=None) -> BoundResult | None:
        limits = limits or NO_LIMITS
        _, value = call_heuristic(self.inner, problem, seed=0, limits=limits)
        if value is None:
            return None
        scope = ALL_PLANS if getattr(self.inner, "bound_scope", "") == ALL_PLANS else self.name
        return BoundResult(float(value), scope)


def as_bound(obj):
    """``obj`` itself when it has ``bound``, else :class:`BoundFromHeuristic`."""
    return obj if callable(getattr(obj, "bound", None)) else BoundFromHeuristic(obj)


class ImproverFromFunction(_Wrapped):
    """An improver from a function ``fn(problem, plan, *, deadline=...)``
    returning a plan at most as costly (e.g.
    :func:`hybrid_remat.core.sequence.drop_recomputations`)."""

    def __init__(self, name: str, fn: Callable, capabilities, *, rank: float = 10.0, version: str = "1"):
        super().__init__(fn, name, capabilities)
        self.rank, self.version = float(rank), version

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        limits = limits or NO_LIMITS
        return self.inner(problem, plan, **_filtered(self.inner, deadline=_deadline(limits)))


class ImproverFromFormulation(_Wrapped):
    """A search-only formulation (no bound, e.g. the legacy ``lns``) as an
    improver: ``solve`` from the plan, its progress passed on."""

    def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
        fr = call_formulation(self.inner, problem, incumbent=plan, limits=limits, seed=seed,
                              on_incumbent=on_incumbent)
        return fr.plan
