"""Cost models: where operator times come from.

The built-in :class:`ProfiledCostModel` returns a graph's measured column
(``gpu``/``cpu`` for profiled graphs).  Plugins add analytic models (e.g.
roofline) through ``hybrid_remat_register_cost_models``;
:func:`apply_cost_model` adds their estimate to a graph as a new cost kind.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .errors import GraphError
from .graph import Graph
from .interfaces import CostModel

__all__ = ["ProfiledCostModel", "apply_cost_model"]


class ProfiledCostModel(CostModel):
    """Measured times already in the graph: ``estimate(graph, kind)`` is
    the graph's cost column ``kind``."""

    name = "profiled"
    version = "1"
    capabilities = frozenset({"measured"})

    def devices(self) -> list[str]:
        return ["gpu", "cpu", "cost"]

    def estimate(self, graph: Graph, device: str) -> np.ndarray:
        if device not in graph.costs:
            raise GraphError(f"graph {graph.name!r} has no measured {device!r} times")
        return np.asarray(graph.costs[device], dtype=np.float64)


def apply_cost_model(graph: Graph, model, device: str, kind: str | None = None) -> Graph:
    """A copy of ``graph`` with ``model``'s estimate for ``device`` stored as
    cost kind ``kind`` (default: ``device``), all entries flagged estimated.

    A new column comes first, so it is the graph's default cost kind:
    :meth:`Problem.single <hybrid_remat.problem.Problem.single>` (and every
    caller that takes the first column) plans with the estimate unless told
    otherwise; a column replaced keeps its place.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> class Doubled(CostModel):
    ...     name, version = "doubled", "1"
    ...     def devices(self):
    ...         return ["h200"]
    ...     def estimate(self, graph, device):
    ...         return 2.0 * graph.cost()
    >>> g = apply_cost_model(chain(3, bytes=1, cost=1.0), Doubled(), "h200")
    >>> g.cost_kinds, Problem.single(g, "100%").primary.kind
    (('h200', 'cost'), 'h200')
    """
    est = np.asarray(model.estimate(graph, device), dtype=np.float64)
    k = kind or device
    g = graph.with_costs({k: est}, {k: np.ones(graph.n, dtype=bool)})
    if k in graph.costs:
        return g
    first = lambda cols: {k: cols[k], **{c: v for c, v in cols.items() if c != k}}  # noqa: E731
    return dataclasses.replace(g, costs=first(g.costs), estimated=first(g.estimated))
