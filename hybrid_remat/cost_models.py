"""Cost models: where operator times come from.

The built-in :class:`ProfiledCostModel` returns a graph's measured column
(``gpu``/``cpu`` for profiled graphs).  Plugins add analytic models (e.g.
roofline) through ``hybrid_remat_register_cost_models``;
:func:`apply_cost_model` adds their estimate to a graph as a new cost kind.
"""

from __future__ import annotations

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
    cost kind ``kind`` (default: ``device``), all entries flagged estimated."""
    est = np.asarray(model.estimate(graph, device), dtype=np.float64)
    k = kind or device
    return graph.with_costs({k: est}, {k: np.ones(graph.n, dtype=bool)})
