"""One hook raises; the plugin's other hook still works."""

import numpy as np

from hybrid_remat import hookimpl
from hybrid_remat.interfaces import CostModel


class Zero(CostModel):
    name = "fixture_zero"
    version = "1"

    def devices(self):
        return ["zero"]

    def estimate(self, graph, device):
        return np.zeros(graph.n)


@hookimpl
def hybrid_remat_register_heuristics():
    raise RuntimeError("boom from raising_hook")


@hookimpl
def hybrid_remat_register_cost_models():
    return [Zero()]
