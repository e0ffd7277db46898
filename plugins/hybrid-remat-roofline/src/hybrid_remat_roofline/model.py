"""The roofline cost model: ``max(flops / peak, bytes / bandwidth) + overhead``."""

from __future__ import annotations

import numpy as np

from hybrid_remat.errors import GraphError
from hybrid_remat.graph import Graph
from hybrid_remat.interfaces import CostModel

from .devices import DEVICES, PAIRS, DeviceSpec, HardwarePair

__all__ = ["RooflineModel", "bytes_moved", "is_matrix_op", "apply_pair"]

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


def apply_pair(graph: Graph, pair: HardwarePair | str, model: RooflineModel | None = None):
    """The graph costed on a hardware pair, and the links between the two.

    Returns ``(graph, links)``: a copy of ``graph`` whose ``gpu`` and
    ``cpu`` cost columns are the roofline estimates for the pair's devices
    (flagged estimated), and ``Link`` objects both ways.  The measured pair
    (``gpu``/``cpu`` ``None``) keeps the graph's own columns and takes its
    links from the graph's ``transfer`` record.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> g, links = apply_pair(chain(3, bytes=1 << 20), "irisxe_1185g7")
    >>> bool(g.estimated["gpu"].all()), [(ln.src, ln.dst) for ln in links]
    (True, [('gpu', 'cpu'), ('cpu', 'gpu')])
    """
    from hybrid_remat.problem import Link, default_links

    if isinstance(pair, str):
        try:
            pair = PAIRS[pair]
        except KeyError:
            raise GraphError(f"roofline knows no hardware pair {pair!r} (it knows {', '.join(sorted(PAIRS))})") from None
    if pair.gpu is None:
        return graph, default_links(graph, ["gpu", "cpu"])
    model = model or RooflineModel()
    est = {"gpu": model.estimate(graph, pair.gpu), "cpu": model.estimate(graph, pair.cpu)}
    out = graph.with_costs(est, {k: np.ones(graph.n, dtype=bool) for k in est})
    links = [Link("gpu", "cpu", pair.bandwidth, pair.latency), Link("cpu", "gpu", pair.bandwidth, pair.latency)]
    return out, links
