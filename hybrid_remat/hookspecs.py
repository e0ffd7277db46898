"""The plugin contract of hybrid_remat (pluggy hook specifications).

Every built-in heuristic, bound, improver, formulation, cost model and graph
loader registers through these six hooks (one per kind), exactly as a
third-party plugin does.

Writing a plugin
----------------
A plugin is a module (or any object) with functions decorated by
:data:`hookimpl` and named after the hooks below.  It reaches the library
in one of three ways:

1. an entry point of the ``hybrid_remat`` group in the plugin's
   distribution (loaded automatically unless the environment variable
   ``HYBRID_REMAT_DISABLE_PLUGIN_AUTOLOAD`` is set)::

       [project.entry-points.hybrid_remat]
       myplugin = "my_package.plugin"

2. at run time, :func:`hybrid_remat.plugins.register` (a module or object),
3. from a file, :func:`hybrid_remat.plugins.register_path` (datasette's
   ``--plugins-dir`` style; handy for experiments and test fixtures).

``HYBRID_REMAT_BLOCKED_PLUGINS=a,b`` blocks entry points by name.

Semantics shared by all hooks
-----------------------------
* **When called**: once, the first time the registry is read
  (:func:`hybrid_remat.plugins.heuristics` and friends), and again after
  every :func:`~hybrid_remat.plugins.register`,
  :func:`~hybrid_remat.plugins.unregister` or
  :func:`~hybrid_remat.plugins.reset`.  Return fresh objects each time;
  keep no state between calls.
* **Arguments**: none (hooks are called with keyword arguments only, and
  these take none).  A hookimpl declaring arguments is rejected.
* **Result**: a ``list`` (or tuple) of objects, possibly empty.  ``None``
  counts as "nothing".
* **Collecting, not first-result**: every implementation is called; the
  manager concatenates the lists, built-ins first, then entry points, then
  run-time registrations.  The *first* object to claim a name keeps it.

Registered objects
------------------
Each object declares, as attributes (the base classes of
:mod:`hybrid_remat.interfaces` provide defaults):

``name``
    Unique (per kind) non-empty string: what the CLI and ``anytime_solve``
    use (``--formulation ortools``).
``version``
    String, e.g. ``"1.2"``.
``capabilities``
    A set of strings saying which problems it accepts (see
    :mod:`hybrid_remat.interfaces`: ``"dag"``, ``"chain"``,
    ``"single_device"``, ``"multi_device"``, ``"needs_budget"``,
    ``"exact"``, ``"honours_limits"``, ...: the one vocabulary
    :data:`hybrid_remat.interfaces.CAPABILITIES`; unknown strings are
    ignored with a :class:`~hybrid_remat.plugins.PluginWarning`).
    :func:`hybrid_remat.interfaces.accepts` gates calls on them, so an
    object is never handed a problem it did not declare.
``run_by_default`` (optional, default ``True``)
    ``False`` keeps the object out of ``anytime_solve``'s default set: it
    runs only when named.
``applicable(problem) -> (bool, reason)`` (optional)
    A finer test than the capabilities (e.g. a range of graph sizes);
    ``anytime_solve`` neither runs nor gives time to an object that says no.

Its identity in result metadata is ``"{plugin}:{name}@{version}"``, with
``plugin`` the entry-point or registration name
(:func:`hybrid_remat.plugins.identity`).

Errors
------
The manager never lets a broken plugin stop the rest.  A plugin that cannot
be imported, has a hook with a wrong signature or an unknown
``hybrid_remat_*`` hook, raises from a hook, returns something other than a
list, or registers an object without a name, without its interface's
methods, with non-string capabilities, or under a name already taken, is
skipped (the whole plugin or the one object) with a
:class:`hybrid_remat.plugins.PluginWarning` that names the plugin.
Objects should raise :class:`hybrid_remat.errors.HybridRematError`
subclasses for bad input; :mod:`hybrid_remat.testing` checks that they do.

Checking a plugin
-----------------
Run :mod:`hybrid_remat.testing` in the plugin's own test suite, one pytest
case per named check::

    from hybrid_remat.testing import parametrize_with_checks

    @parametrize_with_checks([MyFormulation()])
    def test_battery(obj, check):
        check(obj)

or every check at once (``check_formulation(MyFormulation())``).
``CONTRIBUTING.md`` walks through writing each kind.
"""

from __future__ import annotations

import pluggy

PROJECT = "hybrid_remat"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PROJECT", "hookspec", "hookimpl"]


@hookspec
def hybrid_remat_register_heuristics() -> list:
    """Return heuristics (:class:`~hybrid_remat.interfaces.Heuristic`).

    Receives nothing; collecting (all implementations are called).

    A heuristic has ``name``, ``version``, ``capabilities``, a numeric
    ``rank`` and ``run(problem, *, seed=0, limits=None) -> Plan | None``.
    ``run`` returns a :class:`~hybrid_remat.plan.Plan` or ``None`` ("no
    feasible plan found") within ``limits``
    (:class:`~hybrid_remat.limits.Limits`: deadline, work budget, stop
    flag); it must be deterministic for a seed and a work budget.  The
    caller simulates every plan and discards invalid or over-budget ones, so
    a heuristic need not re-check, but
    :func:`hybrid_remat.testing.check_heuristic` fails a heuristic that
    returns invalid plans.

    Declare ``"honours_limits"`` once ``run`` returns within its limits: the
    portfolio then runs it in-process; otherwise it runs in a worker process
    that is killed at its deadline.  Optional: ``predict_seconds(problem)``
    (the portfolio skips a heuristic predicted to need more than the time
    left) and ``warmup()`` (compile kernels; called outside every time
    limit).

    One signature per kind (:data:`hybrid_remat.portfolio.calls.SIGNATURES`).
    An object with an older one (``run(problem, *, seed=0)`` without
    ``limits``; a ``"bound_only"`` heuristic, whose ``run_detailed`` reports a
    ``lower_bound``: it becomes a bound) is wrapped once when it is
    registered, with a :class:`~hybrid_remat.plugins.PluginWarning`.

    Example
    -------
    >>> from hybrid_remat import hookimpl
    >>> from hybrid_remat.interfaces import Heuristic
    >>> from hybrid_remat.plan import keep_all_plan
    >>> from hybrid_remat.simulate import simulate
    >>> class ReferenceOrder(Heuristic):
    ...     name, version, rank = "reference_order", "1", 0.0
    ...     capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})
    ...     def run(self, problem, *, seed=0, limits=None):
    ...         plan = keep_all_plan(problem.graph, problem.primary.name)
    ...         return plan if simulate(problem, plan).valid else None   # keep-all may not fit
    >>> @hookimpl
    ... def hybrid_remat_register_heuristics():
    ...     return [ReferenceOrder()]
    """


@hookspec
def hybrid_remat_register_bounds() -> list:
    """Return bound sources (:class:`~hybrid_remat.interfaces.Bound`).

    Receives nothing; collecting.

    A bound has ``bound(problem, *, limits=None) -> BoundResult(value,
    scope, stats)``: a lower bound on the problem's objective
    (``problem.objective``; declare ``"makespan"`` among the capabilities
    for a makespan bound) that holds for every plan in ``scope``
    (:data:`~hybrid_remat.interfaces.ALL_PLANS`, or the name of a
    restricted class).  It returns within ``limits`` (a weaker bound is
    fine; ``-inf`` says "nothing").  A plan that reaches an all-plans bound
    is optimal: ``anytime_solve`` then stops.
    :func:`hybrid_remat.testing.check_bound` checks a bound against brute
    force on tiny graphs.

    Example
    -------
    >>> from hybrid_remat.interfaces import Bound, BoundResult
    >>> class EveryNodeOnce(Bound):
    ...     name, version = "every_node_once", "1"
    ...     def bound(self, problem, *, limits=None):
    ...         return BoundResult(float(problem.graph.cost(problem.primary.kind).sum()))
    >>> @hookimpl
    ... def hybrid_remat_register_bounds():
    ...     return [EveryNodeOnce()]
    """


@hookspec
def hybrid_remat_register_improvers() -> list:
    """Return improvers (:class:`~hybrid_remat.interfaces.Improver`).

    Receives nothing; collecting.

    An improver has ``improve(problem, plan, *, seed=0, limits=None,
    on_incumbent=None, shared=None) -> Plan | None``: starting from a valid
    plan, it searches for better ones, reports each with
    ``on_incumbent(plan, source)`` as it finds it and returns its best
    within ``limits``.  ``anytime_solve`` runs improvers on the incumbent
    (local search, ruin-and-recreate, HEFT insertion); with
    ``"shares_incumbent"`` it also passes ``shared``, whose
    ``incumbent()`` is the portfolio's best plan so far (found by any
    worker).

    Example
    -------
    >>> from hybrid_remat.interfaces import Improver
    >>> class NoOp(Improver):
    ...     name, version = "noop", "1"
    ...     def improve(self, problem, plan, *, seed=0, limits=None, on_incumbent=None, shared=None):
    ...         return plan
    >>> @hookimpl
    ... def hybrid_remat_register_improvers():
    ...     return [NoOp()]
    """


@hookspec
def hybrid_remat_register_formulations() -> list:
    """Return exact (or bounding) formulations
    (:class:`~hybrid_remat.interfaces.Formulation`).

    Receives nothing; collecting.

    A formulation has ``solve(problem, *, incumbent=None, limits=None,
    seed=0, on_incumbent=None, on_bound=None) -> FormulationResult`` (one
    with the older ``time_limit``/``node_limit``/``stop`` keywords instead of
    ``limits`` is wrapped once when registered, with a
    :class:`~hybrid_remat.plugins.PluginWarning`).  It

    * may use ``incumbent`` (a valid :class:`~hybrid_remat.plan.Plan`) as a
      warm start / hint;
    * respects ``limits`` (its deadline, ``limits.nodes``: search nodes,
      branches or an equivalent deterministic work limit, which tests use,
      and its stop flag) and ``seed`` (same seed: same result);
    * calls ``on_incumbent(plan, source)`` with every improving plan, after
      checking it with :func:`~hybrid_remat.simulate.simulate` (``source``
      a short string such as ``"ortools"``), and ``on_bound(value)`` when its
      proven lower bound on the total compute time improves.  A bound that
      holds only for the plans its model can express (e.g. staged plans in
      the reference order) is allowed if the formulation declares the
      capability ``"scoped_bound"`` (and names the class in
      ``bound_scope``); ``anytime_solve`` reports it as a class bound
      (``Result.class_bound``), never as a bound over every plan.  Only a
      formulation that declares ``"exact"`` and no ``"scoped_bound"``
      bounds every plan.  ``optimal`` follows the same scope;
    * stops promptly when ``stop.is_set()``;
    * frees its solver's resources before returning;
    * returns ``FormulationResult(status, plan, objective, lower_bound,
      stats)``, ``status`` one of ``optimal``, ``feasible``, ``infeasible``,
      ``no_solution``, ``error``; a returned plan is valid for the problem.

    An optional numeric ``rank`` orders formulations in ``anytime_solve``
    (default 10, lower first): the built-in exact models use 10, the
    decomposition 15.  Search without bounds belongs among the improvers.

    Example
    -------
    >>> from hybrid_remat.interfaces import Formulation, FormulationResult
    >>> from hybrid_remat.simulate import simulate
    >>> class EchoIncumbent(Formulation):
    ...     name, version = "echo", "1"
    ...     capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})
    ...     def solve(self, problem, *, incumbent=None, limits=None, seed=0, on_incumbent=None, on_bound=None):
    ...         sim = simulate(problem, incumbent) if incumbent is not None else None
    ...         if sim is None or not sim.valid:       # none, or a plan of another problem
    ...             return FormulationResult("no_solution")
    ...         return FormulationResult("feasible", incumbent, problem.objective.value(sim))
    >>> @hookimpl
    ... def hybrid_remat_register_formulations():
    ...     return [EchoIncumbent()]
    """


@hookspec
def hybrid_remat_register_cost_models() -> list:
    """Return cost models (:class:`~hybrid_remat.interfaces.CostModel`).

    Receives nothing; collecting.

    A cost model has ``devices() -> list[str]`` (the device names it knows,
    e.g. ``["h200", "a100"]``) and ``estimate(graph, device) -> ndarray``:
    each node's time in seconds on that device, a finite non-negative
    float64 array of length ``graph.n``.  An unknown device or a graph it
    cannot estimate raises a :class:`~hybrid_remat.errors.HybridRematError`
    subclass.  :func:`hybrid_remat.cost_models.apply_cost_model` stores an
    estimate as a new cost kind of a graph.

    Example
    -------
    >>> import numpy as np
    >>> from hybrid_remat.errors import HybridRematError
    >>> from hybrid_remat.interfaces import CostModel
    >>> class UnitCost(CostModel):
    ...     name, version = "unit", "1"
    ...     def devices(self):
    ...         return ["unit"]
    ...     def estimate(self, graph, device):
    ...         if device not in self.devices():
    ...             raise HybridRematError(f"cost model 'unit' knows no device {device!r}")
    ...         return np.ones(graph.n)
    >>> @hookimpl
    ... def hybrid_remat_register_cost_models():
    ...     return [UnitCost()]
    """


@hookspec
def hybrid_remat_register_loaders() -> list:
    """Return graph loaders (:class:`~hybrid_remat.interfaces.Loader`).

    Receives nothing; collecting.

    A loader has ``sniff(path, head: bytes) -> bool`` (can it read this
    file?  ``head`` is the first KiB, decompressed for ``.gz``; must not
    raise) and ``load(path) -> Graph`` (raises
    :class:`~hybrid_remat.errors.GraphError` on malformed files).
    :func:`hybrid_remat.loaders.load_graph` asks the loaders latest
    registration first (so third parties can override a built-in format)
    and uses the first that says yes.

    Example
    -------
    >>> from hybrid_remat.interfaces import Loader
    >>> from hybrid_remat.loaders import graph_from_node_link, read_json
    >>> class NodeLinkFile(Loader):
    ...     name, version = "nodelink_file", "1"
    ...     def sniff(self, path, head):
    ...         return str(path).endswith(".nodelink.json")
    ...     def load(self, path):                      # a GraphError on a malformed file
    ...         return graph_from_node_link(read_json(path), source=str(path))
    >>> @hookimpl
    ... def hybrid_remat_register_loaders():
    ...     return [NodeLinkFile()]
    """
