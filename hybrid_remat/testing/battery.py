"""The battery as named checks: which checks apply to an object
(:func:`checks_for`), one pytest case per (object, check)
(:func:`parametrize_with_checks`), or all of them at once with a report
(:func:`run_checks` and the ``check_<kind>`` entry points).

Which checks run is decided by the object's *kind* (:func:`kind_of`), its
capabilities (a ``"bound_only"`` heuristic gets the bound checks) and its
battery tags (:func:`~hybrid_remat.testing._base.tags_of`: a check that a
tag turns off is skipped, with the tag as the reason), never by its name.
Which instances a check runs on is decided by
:func:`~hybrid_remat.interfaces.accepts` (capabilities and the object's own
``applicable``).

Examples
--------
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> [name for name, _, skip in checks_for(KeepAll())][:3]
['check_declares', 'check_accepts_an_instance', 'check_heuristic_plans_are_valid']
>>> check_heuristic(KeepAll())["found"]["chain6@100%"]
28.0
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Iterator

from . import formulations as F
from . import io as IO
from . import promises as P
from . import solvers as S
from ._base import Runs, SkipCheck, tags_of, who

__all__ = ["KINDS", "CHECKS", "TAGGED", "kind_of", "checks_for", "parametrize_with_checks", "run_checks",
           "check_heuristic", "check_bound", "check_improver", "check_formulation", "check_cost_model",
           "check_loader"]

_BOUND_CHECKS = (S.check_bound_below_valid_plans, S.check_bound_below_brute_force, S.check_bound_deterministic)

#: the checks of each kind, in the order they run
CHECKS = {
    "heuristic": (S.check_declares, S.check_accepts_an_instance, S.check_heuristic_plans_are_valid,
                  S.check_heuristic_plan_at_full_budget, S.check_heuristic_deterministic, P.check_honours_limits),
    "bound": (S.check_declares, S.check_accepts_an_instance) + _BOUND_CHECKS + (P.check_honours_limits,),
    "improver": (S.check_declares, S.check_accepts_an_instance, S.check_improver_plans_are_valid,
                 S.check_improver_never_worse, P.check_honours_limits),
    "formulation": (S.check_declares, S.check_accepts_an_instance, F.check_formulation_results,
                    F.check_formulation_keeps_a_fitting_incumbent, F.check_formulation_deterministic,
                    F.check_formulation_honours_stop, F.check_formulation_foreign_incumbent,
                    P.check_honours_limits),
    "cost_model": (S.check_declares, IO.check_cost_model_estimates, IO.check_cost_model_unknown_device),
    "loader": (S.check_declares, IO.check_loader_round_trips, IO.check_loader_refuses_broken_files),
}
KINDS = tuple(CHECKS)
#: the legacy ``"bound_only"`` heuristic: no plan, and a bound's checks
_BOUND_ONLY = (S.check_declares, S.check_accepts_an_instance, S.check_bound_only_returns_no_plan) + _BOUND_CHECKS

#: checks a battery tag can turn off (``battery_tags = {tag: False}``)
TAGGED = {
    S.check_heuristic_plan_at_full_budget: "plan_at_full_budget",
    F.check_formulation_keeps_a_fitting_incumbent: "plan_at_full_budget",
    S.check_heuristic_deterministic: "deterministic",
    S.check_bound_deterministic: "deterministic",
    F.check_formulation_deterministic: "deterministic",
}


def kind_of(obj) -> str:
    """The kind of a plugin object: by its base class in
    :mod:`hybrid_remat.interfaces`, else by its methods (``solve``,
    ``bound``, ``improve``, ``run``, ``estimate``, ``load``).  An object
    registered as two kinds (``local_search`` is a heuristic and an
    improver) is checked as each by naming the kind.

    Raises
    ------
    TypeError
        The object has none of the kinds' methods.
    """
    from ..interfaces import Bound, CostModel, Formulation, Heuristic, Improver, Loader

    for cls, kind in ((Formulation, "formulation"), (Bound, "bound"), (Improver, "improver"),
                      (Heuristic, "heuristic"), (CostModel, "cost_model"), (Loader, "loader")):
        if isinstance(obj, cls):
            return kind
    for method, kind in (("solve", "formulation"), ("bound", "bound"), ("improve", "improver"), ("run", "heuristic"),
                         ("estimate", "cost_model"), ("load", "loader")):
        if callable(getattr(obj, method, None)):
            return kind
    raise TypeError(f"{who(obj)} is none of {', '.join(KINDS)}: it has none of their methods")


def _bind(check, obj, kind: str, runs: Runs, options: dict):
    """``check`` with the options it takes (and ``runs``, ``kind``) bound:
    a function of the object alone."""
    params = inspect.signature(check).parameters
    kw = {k: v for k, v in options.items() if k in params}
    if "runs" in params:
        kw["runs"] = runs
    if "kind" in params:
        kw["kind"] = kind
    return functools.partial(check, **kw)


def checks_for(obj, *, kind: str | None = None, tags: dict | None = None,
               **options) -> Iterator[tuple[str, object, str | None]]:
    """``(name, check, skip_reason)`` for every check of ``obj``'s kind:
    ``check(obj)`` runs it (its calls of ``obj`` shared with the other checks
    of this object); ``skip_reason`` is ``None`` or why a tag turns it off.

    Parameters
    ----------
    obj : plugin object
    kind : str, optional
        One of :data:`KINDS` (default :func:`kind_of`).
    tags : dict, optional
        Battery tags over the object's own (``tags_of(obj)``).
    **options
        Passed to the checks that take them: ``instances``, ``seed``,
        ``moves`` (improvers), ``time_limit``/``node_limit``
        (formulations), ``graphs`` (cost models), ``samples`` (loaders).
    """
    kind = kind or kind_of(obj)
    if kind not in CHECKS:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    for key in ("instances", "graphs", "samples"):
        if options.get(key) is not None:
            options[key] = list(options[key])
    all_tags = {**tags_of(obj), **(tags or {})}
    checks = _BOUND_ONLY if kind == "heuristic" and "bound_only" in set(getattr(obj, "capabilities", ())) \
        else CHECKS[kind]
    runs = Runs()
    for check in checks:
        tag = TAGGED.get(check)
        skip = f"battery tag {tag!r} is off" if tag is not None and not all_tags.get(tag, True) else None
        yield check.__name__, _bind(check, obj, kind, runs, options), skip


def parametrize_with_checks(objects: Iterable, *, kind: str | None = None, tags: dict | None = None, **options):
    """A ``pytest.mark.parametrize`` of ``(obj, check)`` with one case per
    object and check (id ``"<name>-<check>"``), as scikit-learn's
    ``parametrize_with_checks``; checks a tag turns off are skipped with
    the reason, and a check that finds it does not apply skips itself.
    Each case fails on its own: one broken promise does not hide the rest.

    ``objects`` holds plugin objects (of ``kind``, default :func:`kind_of`)
    or ``(kind, object)`` pairs (ids ``"<kind>-<name>-<check>"``).  Use it
    on a test that calls ``check(obj)``::

        @parametrize_with_checks([MyHeuristic()])
        def test_battery(obj, check):
            check(obj)
    """
    import pytest

    params = []
    for item in objects:
        obj_kind, obj = item if isinstance(item, tuple) else (kind, item)
        prefix = f"{obj_kind}-" if isinstance(item, tuple) else ""
        for name, check, skip in checks_for(obj, kind=obj_kind, tags=tags, **dict(options)):
            marks = [pytest.mark.skip(reason=skip)] if skip else []
            params.append(pytest.param(obj, _as_test(check), marks=marks,
                                       id=f"{prefix}{getattr(obj, 'name', type(obj).__name__)}-{name}"))
    return pytest.mark.parametrize("obj, check", params)


def _as_test(check):
    """``check`` with :class:`SkipCheck` turned into ``pytest.skip``."""
    @functools.wraps(check.func if isinstance(check, functools.partial) else check)
    def run(obj):
        import pytest

        try:
            return check(obj)
        except SkipCheck as e:
            pytest.skip(str(e))

    return run


def run_checks(obj, *, kind: str | None = None, tags: dict | None = None, **options) -> dict:
    """Every check of ``obj`` (:func:`checks_for`), each run even when
    another failed.

    Returns
    -------
    dict
        The checks' reports merged (``checked``/``skipped`` instances,
        ``found``, ``status``, ...) and ``checks``: ``{check: "passed" |
        "skipped: <why>"}``.

    Raises
    ------
    AssertionError
        Naming every failed check with its message.
    """
    report: dict = {"checks": {}}
    failures = []
    for name, check, skip in checks_for(obj, kind=kind, tags=tags, **options):
        if skip:
            report["checks"][name] = f"skipped: {skip}"
            continue
        try:
            out = check(obj)
        except SkipCheck as e:
            report["checks"][name] = f"skipped: {e}"
            continue
        except AssertionError as e:
            failures.append(f"{name}: {e}")
            report["checks"][name] = "failed"
            continue
        report["checks"][name] = "passed"
        for key, value in (out or {}).items():
            if isinstance(value, dict):
                report.setdefault(key, {}).update(value)
            else:
                report[key] = value
    if failures:
        head = f"{who(obj)} failed {len(failures)} of {len(report['checks'])} checks:\n" if len(failures) > 1 else ""
        raise AssertionError(head + "\n".join(failures))
    return report


# ---------------------------------------------------------- run-them-all entry points
def check_heuristic(heuristic, *, instances=None, seed: int = 0, require_plan_at_full_budget: bool = True) -> dict:
    """Every check of a heuristic (:data:`CHECKS` ``["heuristic"]``; a
    ``"bound_only"`` one gets the bound checks); ``require_plan_at_full_budget=False``
    turns the tag ``plan_at_full_budget`` off.

    Returns
    -------
    dict
        ``{"checked": [instances], "skipped": [(instance, reason)], "found": {instance: value or None},
        "checks": {check: outcome}}``.
    """
    tags = None if require_plan_at_full_budget else {"plan_at_full_budget": False}
    return run_checks(heuristic, kind="heuristic", tags=tags, instances=instances, seed=seed)


def check_bound(bound, *, instances=None) -> dict:
    """Every check of a bound: ``{"checked", "skipped", "found": {instance: value or None}, "checks"}``."""
    return run_checks(bound, kind="bound", instances=instances)


def check_improver(improver, *, instances=None, seed: int = 0, moves: int = 50) -> dict:
    """Every check of an improver (``moves``: its node limit):
    ``{"checked", "skipped", "found": {instance: value or None}, "checks"}``."""
    return run_checks(improver, kind="improver", instances=instances, seed=seed, moves=moves)


def check_formulation(formulation, *, instances=None, seed: int = 0, time_limit: float = 20.0,
                      node_limit: int | None = 2000, require_plan_at_full_budget: bool = True) -> dict:
    """Every check of a formulation (``time_limit`` and ``node_limit`` per
    solve): ``{"checked", "skipped", "status": {instance: status}, "checks"}``."""
    tags = None if require_plan_at_full_budget else {"plan_at_full_budget": False}
    return run_checks(formulation, kind="formulation", tags=tags, instances=instances, seed=seed,
                      time_limit=time_limit, node_limit=node_limit)


def check_cost_model(model, *, graphs=None) -> dict:
    """Every check of a cost model: ``{"checked": [(graph, device)], "refused": [...], "checks"}``."""
    return run_checks(model, kind="cost_model", graphs=graphs)


def check_loader(loader, *, samples=None) -> dict:
    """Every check of a loader: ``{"loaded": [files], "declined": [files], "checks"}``."""
    return run_checks(loader, kind="loader", samples=samples)
