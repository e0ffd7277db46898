"""The conformance battery for plugin objects, as named checks (in the
manner of scikit-learn's ``check_estimator`` / ``parametrize_with_checks``
and cvxpy's solver test helpers).

Third-party test suites run it on their objects, one pytest case per check::

    from hybrid_remat.testing import parametrize_with_checks

    @parametrize_with_checks([MyHeuristic()])
    def test_battery(obj, check):
        check(obj)

or all checks at once (an ``AssertionError`` names every failed check)::

    from hybrid_remat.testing import check_heuristic
    def test_my_heuristic_conforms():
        check_heuristic(MyHeuristic())

Our own tests run it on every registered built-in (``tests/test_conformance.py``).

The checks
----------
Each check is a function ``check_xxx(obj, **options)`` that runs the
object on small standard problems (:func:`standard_instances`: a chain, a
small training graph, a random DAG and a graph of repeated blocks, each at
100 % of the keep-all peak and at a tight budget, and a CPU+GPU problem
for ``multi_device`` objects) and raises :class:`AssertionError` naming the
object, the instance and what went wrong.  Every plan an object returns or
reports is verified with :func:`~hybrid_remat.simulate.simulate`.

* every kind: :func:`check_declares` (``name``, ``version``,
  ``capabilities``, the kind's methods), :func:`check_accepts_an_instance`;
* heuristics: :func:`check_heuristic_plans_are_valid`,
  :func:`check_heuristic_plan_at_full_budget`,
  :func:`check_heuristic_deterministic` (a legacy ``"bound_only"``
  heuristic: :func:`check_bound_only_returns_no_plan` and the bound checks);
* bounds: :func:`check_bound_below_valid_plans`,
  :func:`check_bound_below_brute_force` (tiny graphs, scope every plan),
  :func:`check_bound_deterministic`;
* improvers: :func:`check_improver_plans_are_valid`,
  :func:`check_improver_never_worse`;
* formulations: :func:`check_formulation_results` (statuses, bounds below
  every valid plan, ``optimal`` no worse than a known plan, valid
  incumbents), :func:`check_formulation_keeps_a_fitting_incumbent`,
  :func:`check_formulation_deterministic`,
  :func:`check_formulation_honours_stop`,
  :func:`check_formulation_foreign_incumbent`;
* cost models: :func:`check_cost_model_estimates`,
  :func:`check_cost_model_unknown_device`;
* loaders: :func:`check_loader_round_trips`,
  :func:`check_loader_refuses_broken_files`.

Skips
-----
An object is only called on the instances its capabilities accept
(:func:`~hybrid_remat.interfaces.accepts`, with its own ``applicable``),
and the makespan instances only when it declares ``"makespan"``.  A check
can be turned off by a *battery tag*: an object's ``battery_tags``
attribute (a dict) overrides :data:`DEFAULT_TAGS`: ``{"deterministic":
False}`` (same seed, different results: allowed only without the
``"deterministic"`` capability) or ``{"plan_at_full_budget": False}`` (it
may give up where keep-all fits).  Skips never depend on the object's name.

Examples
--------
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> report = check_heuristic(KeepAll())
>>> report["checks"]["check_heuristic_deterministic"], report["found"]["training9@100%"]
('passed', 24.0)
"""

from ._base import DEFAULT_TAGS, FORMULATION_STATUSES, SkipCheck, tags_of
from .battery import (
    CHECKS,
    KINDS,
    TAGGED,
    check_bound,
    check_cost_model,
    check_formulation,
    check_heuristic,
    check_improver,
    check_loader,
    checks_for,
    kind_of,
    parametrize_with_checks,
    run_checks,
)
from .formulations import (
    check_formulation_deterministic,
    check_formulation_foreign_incumbent,
    check_formulation_honours_stop,
    check_formulation_keeps_a_fitting_incumbent,
    check_formulation_results,
)
from .instances import Instance, standard_instances
from .io import (
    check_cost_model_estimates,
    check_cost_model_unknown_device,
    check_loader_refuses_broken_files,
    check_loader_round_trips,
    standard_graphs,
    write_node_link,
    write_remat_graph,
)
from .solvers import (
    check_accepts_an_instance,
    check_bound_below_brute_force,
    check_bound_below_valid_plans,
    check_bound_deterministic,
    check_bound_only_returns_no_plan,
    check_declares,
    check_heuristic_deterministic,
    check_heuristic_plan_at_full_budget,
    check_heuristic_plans_are_valid,
    check_improver_never_worse,
    check_improver_plans_are_valid,
)

__all__ = [
    "Instance", "standard_instances", "standard_graphs", "write_remat_graph", "write_node_link",
    "FORMULATION_STATUSES", "DEFAULT_TAGS", "SkipCheck", "tags_of", "KINDS", "CHECKS", "TAGGED", "kind_of",
    "checks_for", "parametrize_with_checks", "run_checks",
    "check_heuristic", "check_bound", "check_improver", "check_formulation", "check_cost_model", "check_loader",
    "check_declares", "check_accepts_an_instance", "check_heuristic_plans_are_valid",
    "check_heuristic_plan_at_full_budget", "check_heuristic_deterministic", "check_bound_only_returns_no_plan",
    "check_bound_below_valid_plans", "check_bound_below_brute_force", "check_bound_deterministic",
    "check_improver_plans_are_valid", "check_improver_never_worse", "check_formulation_results",
    "check_formulation_keeps_a_fitting_incumbent", "check_formulation_deterministic",
    "check_formulation_honours_stop", "check_formulation_foreign_incumbent", "check_cost_model_estimates",
    "check_cost_model_unknown_device", "check_loader_round_trips", "check_loader_refuses_broken_files",
]
