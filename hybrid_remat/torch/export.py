"""Write a traced graph as ``remat-graph/1`` (the format of ``datasets/``),
so that steps traced on a GPU can join the project's profiled graphs and be
read back with :func:`hybrid_remat.load_graph`.

Only graphs with GPU times can be written (the format's ``time_gpu_s`` is
mandatory); CPU times, when the graph has them, go to ``time_cpu_s``.
"""

from __future__ import annotations

import gzip
import json
import os

import numpy as np

from ..errors import HybridRematError
from ..graph import Graph

__all__ = ["to_remat_graph_doc", "write_remat_graph"]


def _num(x):
    x = float(x)
    return None if np.isnan(x) else x


def to_remat_graph_doc(graph: Graph, *, params_bytes: int | None = None, input_bytes: int | None = None,
                       measured_peak_bytes: dict | None = None, device_name: str | None = None) -> dict:
    """The ``remat-graph/1`` document of a graph from :func:`hybrid_remat.torch.trace`."""
    tm = graph.meta.get("torch")
    if not tm:
        raise HybridRematError(f"graph {graph.name!r} was not traced by hybrid_remat.torch.trace")
    if "gpu" not in graph.costs:
        raise HybridRematError(
            f"remat-graph/1 needs GPU times; graph {graph.name!r} has {', '.join(graph.cost_kinds)} (trace on CUDA)"
        )
    n = graph.n
    nodes = {
        "op": list(tm["op"]),
        "module": list(tm["module"]),
        "phase": ["backward" if p else "forward" for p in graph.phase.tolist()],
        "bytes": graph.bytes.tolist(),
        "out_bytes": tm.get("out_bytes", [[int(b)] for b in graph.bytes.tolist()]),
        "flops": [_num(x) for x in graph.flops],
        "time_gpu_s": graph.cost("gpu").tolist(),
        "time_cpu_s": graph.cost("cpu").tolist() if "cpu" in graph.costs else [None] * n,
        "inplace": list(tm["inplace"]),
        "shape": tm["shape"],
    }
    doc = {
        "format": "remat-graph/1",
        "name": graph.name,
        "nodes": nodes,
        "edges": graph.edges().tolist(),
        "outputs": np.flatnonzero(graph.required).tolist(),
        "meta": {"source": "hybrid_remat.torch.trace", "torch_version": tm.get("torch_version"),
                 "device": tm.get("device"), "loss": tm.get("loss"), "repeats": tm.get("repeats")},
    }
    if params_bytes is not None:
        doc["params_bytes"] = int(params_bytes)
    if input_bytes is not None:
        doc["input_bytes"] = int(input_bytes)
    if params_bytes is not None and input_bytes is not None:
        doc["constant_bytes"] = int(2 * params_bytes + input_bytes)
    if measured_peak_bytes:
        doc["measured_peak_bytes"] = {k: int(v) for k, v in measured_peak_bytes.items()}
    if device_name:
        doc["devices"] = {"gpu": {"name": device_name}}
    return doc


def write_remat_graph(path, graph: Graph, *, overwrite: bool = False, **kwargs) -> None:
    """Write :func:`to_remat_graph_doc` to ``path`` (gzip when it ends in ``.gz``)."""
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{os.fspath(path)} exists; pass overwrite=True to replace it")
    doc = to_remat_graph_doc(graph, **kwargs)
    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "wt") as fh:
        json.dump(doc, fh)
