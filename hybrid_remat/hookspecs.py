"""The plugin contract of hybrid_remat (pluggy hook specifications).

Every built-in heuristic, formulation, cost model and graph loader registers
through these hooks, exactly as a third-party plugin does.  A plugin is a
module or object with functions decorated by :data:`hookimpl`, registered
either through the ``hybrid_remat`` entry-point group::

    [project.entry-points.hybrid_remat]
    myplugin = "my_package.plugin"

or at run time with :func:`hybrid_remat.plugins.register`.

All ``register_*`` hooks are *collecting* hooks: every implementation is
called (in LIFO registration order) and returns a list of objects; the
manager flattens them and rejects duplicate names with a warning naming
both plugins.  Each registered object declares

``name``          unique string (used on the CLI and in results),
``version``       string,
``capabilities``  frozenset of strings (see :mod:`hybrid_remat.interfaces`),

and the methods of its interface in :mod:`hybrid_remat.interfaces`.  The
object's identity in result metadata is ``"{plugin}:{name}@{version}"``.

Hooks are called with keyword arguments only.
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

    Called once when the registry is built.  Collecting: all
    implementations are called; return a list (possibly empty).

    A heuristic has ``run(problem, *, seed=0) -> Plan | None`` (``None`` =
    "no feasible plan found") and a numeric ``rank`` (cheaper first in
    :func:`~hybrid_remat.anytime.anytime_solve`).

    Example
    -------
    >>> from hybrid_remat import hookimpl
    >>> from hybrid_remat.interfaces import Heuristic
    >>> class Mine(Heuristic):
    ...     name = "mine"
    ...     def run(self, problem, *, seed=0):
    ...         return None
    >>> @hookimpl
    ... def hybrid_remat_register_heuristics():
    ...     return [Mine()]
    """


@hookspec
def hybrid_remat_register_formulations() -> list:
    """Return exact formulations (:class:`~hybrid_remat.interfaces.Formulation`).

    Collecting.  A formulation has ``solve(problem, *, incumbent, time_limit,
    node_limit, seed, threads, on_incumbent, on_bound, stop) ->
    FormulationResult``; it must report every improving plan through
    ``on_incumbent(plan, source)`` and bound changes through
    ``on_bound(value)``, stop promptly when ``stop.is_set()``, and free its
    solver resources before returning.

    Example
    -------
    >>> @hookimpl
    ... def hybrid_remat_register_formulations():
    ...     return [MyCpSatFormulation()]  # doctest: +SKIP
    """


@hookspec
def hybrid_remat_register_cost_models() -> list:
    """Return cost models (:class:`~hybrid_remat.interfaces.CostModel`).

    Collecting.  A cost model has ``estimate(graph, device) -> ndarray``
    giving each node's time in seconds on the named device (e.g. ``"h200"``)
    and ``devices()`` listing the names it knows.

    Example
    -------
    >>> @hookimpl
    ... def hybrid_remat_register_cost_models():
    ...     return [RooflineModel()]  # doctest: +SKIP
    """


@hookspec
def hybrid_remat_register_loaders() -> list:
    """Return graph loaders (:class:`~hybrid_remat.interfaces.Loader`).

    Collecting.  A loader has ``sniff(path, head: bytes) -> bool`` (can it
    read this file?  ``head`` is the first KiB, decompressed for ``.gz``)
    and ``load(path) -> Graph``.  :func:`hybrid_remat.loaders.load_graph`
    asks the loaders in registration order (third-party first) and uses the
    first that says yes.

    Example
    -------
    >>> @hookimpl
    ... def hybrid_remat_register_loaders():
    ...     return [OnnxLoader()]  # doctest: +SKIP
    """
