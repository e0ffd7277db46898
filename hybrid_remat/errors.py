"""Exception hierarchy of hybrid_remat.

Every error the library raises on purpose derives from :class:`HybridRematError`,
so callers (and the CLI) can catch one type and print a one-line message.
"""

__all__ = [
    "HybridRematError",
    "GraphError",
    "BudgetError",
    "PlanError",
    "PluginError",
    "SolverError",
    "PluginWarning",
]


class HybridRematError(Exception):
    """Base class of all errors raised by hybrid_remat."""


class GraphError(HybridRematError):
    """A graph is malformed: cycle, bad sizes or costs, unknown format, empty."""


class BudgetError(HybridRematError):
    """A memory budget cannot be parsed, or no plan can fit it."""


class PlanError(HybridRematError):
    """A plan is malformed or does not match its graph/problem."""


class PluginError(HybridRematError):
    """A plugin is broken: duplicate name, bad object, wrong hook signature."""


class SolverError(HybridRematError):
    """An exact solver failed in a way that is not an ordinary status."""


class PluginWarning(UserWarning):
    """A plugin was skipped or partly skipped, or adapted to the current
    signatures; the message names it (also :data:`hybrid_remat.plugins.PluginWarning`)."""
