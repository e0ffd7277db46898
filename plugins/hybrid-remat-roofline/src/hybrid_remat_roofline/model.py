"""The roofline cost model: ``max(flops / peak, bytes / bandwidth) + overhead``."""

from __future__ import annotations

import numpy as np

from hybrid_remat.errors import GraphError
from hybrid_remat.graph import Graph
from hybrid_remat.interfaces import CostModel

from .devices import DEVICES, DeviceSpec

__all__ = ["RooflineModel", "bytes_moved", "is_matrix_op"]

_CONV = ("convolution",)
_MATMUL = ("mm.", "addmm", "bmm", "matmul", "linear", "scaled_dot_product", "baddbmm")


def is_matrix_op(op: str) -> str:
    """``"conv"``, ``"matmul"`` or ``""`` for an ATen op name."""
    o = op.lower()
    if any(k in o for k in _CONV):
        return "conv"
    if any(k in o for k in _MATMUL) or o.endswith(".mm") or o == "mm":
        return "matmul"
    return ""


def bytes_moved(graph: Graph) -> np.ndarray:
    """Output bytes plus the bytes of every input, per node (float64)."""
    b = graph.bytes.astype(np.float64)
    src_of_edge = graph.pred_idx
    counts = np.diff(graph.pred_ptr)
    dst = np.repeat(np.arange(graph.n), counts)
    inputs = np.bincount(dst, weights=b[src_of_edge], minlength=graph.n) if src_of_edge.size else np.zeros(graph.n)
    return b + inputs


class RooflineModel(CostModel):
    """Estimate operator times from FLOPs and bytes moved.

    ``t = max(flops / peak, bytes_moved / bandwidth) + overhead`` where
    ``peak`` is the device's convolution, matmul or vector rate according
    to the op name (``graph.meta["op"]``; vector when unknown) and unknown
    FLOPs (``nan``) count as zero (the op is then bandwidth-bound).

    Parameters
    ----------
    devices : dict of str -> DeviceSpec, optional
        Defaults to :data:`hybrid_remat_roofline.devices.DEVICES`.
    """

    name = "roofline"
    version = "0.1.0"
    capabilities = frozenset({"analytic", "flops", "bytes"})

    def __init__(self, devices: dict[str, DeviceSpec] | None = None):
        self.table = dict(DEVICES if devices is None else devices)

    def devices(self) -> list[str]:
        return sorted(self.table)

    def spec(self, device: str) -> DeviceSpec:
        try:
            return self.table[device]
        except KeyError:
            raise GraphError(f"roofline knows no device {device!r} (it knows {', '.join(self.devices())})") from None

    def estimate(self, graph: Graph, device: str) -> np.ndarray:
        """Seconds per node on ``device``.

        Raises
        ------
        GraphError
            Unknown device name.
        """
        s = self.spec(device)
        ops = graph.meta.get("op") or [""] * graph.n
        if len(ops) != graph.n:
            raise GraphError(f"graph {graph.name!r}: meta['op'] has {len(ops)} entries for {graph.n} nodes")
        peak = np.full(graph.n, s.vector_flops)
        for v, op in enumerate(ops):
            k = is_matrix_op(str(op))
            if k == "conv":
                peak[v] = s.conv_flops
            elif k == "matmul":
                peak[v] = s.matmul_flops
        flops = np.nan_to_num(np.asarray(graph.flops, dtype=np.float64), nan=0.0)
        flops = np.maximum(flops, 0.0)
        t = np.maximum(flops / peak, bytes_moved(graph) / s.bandwidth) + s.overhead
        return t.astype(np.float64)
