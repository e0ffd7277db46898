"""A FLOPs cost model for traced graphs (no measurement needed).

``time = launch + max(flops / peak_flops, bytes / bandwidth)`` per node, with
``bytes`` the node's output bytes (a crude roofline).  It follows the
:class:`~hybrid_remat.interfaces.CostModel` interface, so it can be
registered through ``hybrid_remat_register_cost_models`` and any registered
cost model can replace it (``trace(..., costs="flops", cost_model="name")``).
"""

from __future__ import annotations

import numpy as np

from ..errors import HybridRematError
from ..interfaces import CostModel

__all__ = ["FlopsRooflineCostModel", "resolve_cost_model"]

_PEAKS = {  # FLOP/s, bytes/s, launch s: rough fp32 figures
    "gpu": (50e12, 3.0e12, 8e-6),
    "cpu": (0.5e12, 50e9, 2e-6),
}


class FlopsRooflineCostModel(CostModel):
    """Roofline estimate from a graph's ``flops`` and ``bytes``."""

    name = "torch_flops_roofline"
    version = "1"
    capabilities = frozenset({"estimated"})

    def __init__(self, peaks: dict | None = None):
        self.peaks = dict(_PEAKS, **(peaks or {}))

    def devices(self) -> list[str]:
        return list(self.peaks)

    def estimate(self, graph, device: str) -> np.ndarray:
        if device not in self.peaks:
            raise HybridRematError(f"{self.name} has no figures for device {device!r} ({', '.join(self.peaks)})")
        peak, bw, launch = self.peaks[device]
        flops = np.nan_to_num(np.asarray(graph.flops, dtype=np.float64), nan=0.0)
        nbytes = np.asarray(graph.bytes, dtype=np.float64)
        return launch + np.maximum(flops / peak, nbytes / bw)


def resolve_cost_model(cost_model) -> CostModel:
    """``None`` -> the roofline model; a name -> the registered cost model;
    an object with ``estimate`` -> itself."""
    if cost_model is None:
        return FlopsRooflineCostModel()
    if isinstance(cost_model, str):
        from .. import plugins

        models = plugins.cost_models()
        if cost_model == FlopsRooflineCostModel.name and cost_model not in models:
            return FlopsRooflineCostModel()
        if cost_model not in models:
            raise HybridRematError(f"no cost model named {cost_model!r} is registered ({', '.join(models)})")
        return models[cost_model]
    if not hasattr(cost_model, "estimate"):
        raise HybridRematError("cost_model must be a name or an object with estimate(graph, device)")
    return cost_model
