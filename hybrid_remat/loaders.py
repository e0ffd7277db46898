"""Reading graphs: ``remat-graph/1`` JSON and networkx node-link JSON.

:func:`load_graph` asks every registered loader (third-party first, then
the built-ins of this module) whether it can read a file and uses the first
that says yes.

``remat-graph/1`` (plain or ``.gz``): see ``datasets/README.md``.  A null CPU
time is filled with the node's GPU time times the graph's median CPU/GPU
ratio (over nodes with both times and a positive GPU time) and flagged in
``graph.estimated["cpu"]``.

Node-link JSON, two conventions (``../shared/benchmarks/moccasin``):

* Checkmate exports: nodes ``{id, name, backward, cost_cpu, cost_ram}``,
  edges under ``links`` with ``source``/``target``; node ids are the
  reference order.
* Random layered graphs: nodes keyed by ``name`` with ``duration`` and
  ``out_cost``; edges keyed ``"0"``/``"1"``; ``graph["order"]`` is the
  reference order.

Node-link graphs have one cost kind, ``"cost"``.

Examples
--------
>>> from hybrid_remat.loaders import load_graph
>>> g = load_graph("datasets/vgg16_b16.json.gz")   # doctest: +SKIP
>>> g.cost_kinds                                   # doctest: +SKIP
('gpu', 'cpu')
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

import networkx as nx
import numpy as np

from .errors import GraphError
from .graph import Graph
from .interfaces import Loader

__all__ = ["load_graph", "read_json", "RematGraphLoader", "NodeLinkLoader", "graph_from_remat_json", "graph_from_node_link"]

REMAT_GRAPH_FORMAT = "remat-graph/1"


def _head(path: str, size: int = 1024) -> bytes:
    with open(path, "rb") as f:
        raw = f.read(2)
    opener = gzip.open if raw == b"\x1f\x8b" else open
    try:
        with opener(path, "rb") as f:
            return f.read(size)
    except OSError as e:
        raise GraphError(f"{path}: cannot read: {e}") from None


def read_json(path: str) -> Any:
    """Read JSON, gunzipping when the file is gzip-compressed."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError as e:
            raise GraphError(f"{path}: broken gzip file: {e}") from None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GraphError(f"{path}: not valid JSON: {e}") from None


def graph_from_remat_json(doc: dict, *, source: str = "<memory>") -> Graph:
    """Build a :class:`Graph` from a parsed ``remat-graph/1`` document."""
    if not isinstance(doc, dict) or doc.get("format") != REMAT_GRAPH_FORMAT:
        raise GraphError(f"{source}: not a {REMAT_GRAPH_FORMAT} document")
    try:
        nodes = doc["nodes"]
        edges = doc["edges"]
        n = len(nodes["bytes"])
        gpu = np.asarray([np.nan if x is None else x for x in nodes["time_gpu_s"]], dtype=np.float64)
        cpu_raw = nodes.get("time_cpu_s")
    except (KeyError, TypeError) as e:
        raise GraphError(f"{source}: remat-graph/1 document lacks {e}") from None
    costs = {"gpu": gpu}
    estimated = {}
    if cpu_raw is not None:
        cpu = np.asarray([np.nan if x is None else x for x in cpu_raw], dtype=np.float64)
        missing = np.isnan(cpu)
        if missing.any():
            ok = ~missing & ~np.isnan(gpu) & (gpu > 0)
            ratio = float(np.median(cpu[ok] / gpu[ok])) if ok.any() else 1.0
            cpu = np.where(missing, gpu * ratio, cpu)
        costs["cpu"] = cpu
        estimated["cpu"] = missing
    ops = nodes.get("op", [str(i) for i in range(n)])
    meta = {
        k: doc[k]
        for k in ("constant_bytes", "params_bytes", "input_bytes", "measured_peak_bytes", "devices", "transfer", "meta")
        if k in doc
    }
    meta["format"] = REMAT_GRAPH_FORMAT
    meta["op"] = list(ops)
    for k in ("inplace", "shape", "out_bytes"):
        if k in nodes:
            meta[k] = nodes[k]
    names = [f"{i}:{op}" for i, op in enumerate(ops)]
    return Graph.from_arrays(
        nodes["bytes"], edges, costs, name=doc.get("name", os.path.basename(source)), names=names,
        phase=nodes.get("phase"), flops=nodes.get("flops"), required=doc.get("outputs", []),
        estimated=estimated, meta=meta,
    )


_BYTES_KEYS = ("cost_ram", "out_cost", "bytes", "memory")
_COST_KEYS = ("cost_cpu", "duration", "cost", "time")


def graph_from_node_link(doc: dict, *, source: str = "<memory>") -> Graph:
    """Build a :class:`Graph` from networkx node-link JSON (Checkmate or
    random-layered conventions, or plain ``bytes``/``cost`` attributes)."""
    links_key = "links" if "links" in doc else "edges"
    links = doc.get(links_key) or []
    if links and "source" not in links[0] and "0" in links[0]:
        src_key, dst_key = "0", "1"
    else:
        src_key, dst_key = "source", "target"
    nodes = doc.get("nodes") or []
    if not isinstance(nodes, list) or not all(isinstance(x, dict) for x in nodes):
        raise GraphError(f"{source}: node-link 'nodes' must be a list of objects")
    if not nodes:
        raise GraphError(f"{source}: graph is empty: it has no nodes")
    id_key = "id" if "id" in nodes[0] else "name"
    try:
        g = nx.node_link_graph(doc, directed=True, multigraph=False, source=src_key, target=dst_key, name=id_key, edges=links_key)
    except Exception as e:  # networkx raises assorted errors on malformed input
        raise GraphError(f"{source}: malformed node-link JSON: {e}") from None
    attrs = nodes[0]
    bkey = next((k for k in _BYTES_KEYS if k in attrs), None)
    ckey = next((k for k in _COST_KEYS if k in attrs), None)
    if bkey is None or ckey is None:
        raise GraphError(f"{source}: node-link nodes need a size ({'/'.join(_BYTES_KEYS)}) and a cost ({'/'.join(_COST_KEYS)})")
    for v, d in g.nodes(data=True):
        if d.get(bkey) is None:
            raise GraphError(f"{source}: node {v!r} has no {bkey}")
        if d.get(ckey) is None:
            raise GraphError(f"{source}: node {v!r} has no {ckey}")
    order = g.graph.get("order")
    if order is None:
        try:
            order = sorted(g.nodes)
            index = {v: i for i, v in enumerate(order)}
            if any(index[u] >= index[v] for u, v in g.edges()):
                order = None
        except TypeError:
            order = None
    name = g.graph.get("name") or os.path.basename(source)
    meta = {"format": "node-link", "source_file": os.path.basename(source)}
    name_attr = "name" if id_key == "id" else None
    return Graph.from_networkx(
        g, bytes_attr=bkey, cost_attrs={"cost": ckey}, order=order, name=name,
        phase_attr="backward", name_attr=name_attr, flops_attr=None, meta=meta,
    )


class RematGraphLoader(Loader):
    """Reads ``remat-graph/1`` JSON (plain or gzip)."""

    name = "remat-graph"
    version = "1"

    def sniff(self, path: str, head: bytes) -> bool:
        return b'"remat-graph/1"' in head or b"remat-graph/1" in head

    def load(self, path: str) -> Graph:
        return graph_from_remat_json(read_json(path), source=path)


class NodeLinkLoader(Loader):
    """Reads networkx node-link JSON (Checkmate and random-layered files)."""

    name = "node-link"
    version = "1"

    def sniff(self, path: str, head: bytes) -> bool:
        if b"remat-graph/1" in head:
            return False
        return b'"nodes"' in head and (b'"links"' in head or b'"edges"' in head or b'"directed"' in head)

    def load(self, path: str) -> Graph:
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise GraphError(f"{path}: node-link JSON must be an object")
        return graph_from_node_link(doc, source=path)


def load_graph(path: str | os.PathLike) -> Graph:
    """Load a graph file with the first registered loader that accepts it.

    Raises
    ------
    GraphError
        Missing file, or no loader recognises the format.
    """
    from . import plugins

    path = os.fspath(path)
    if not os.path.exists(path):
        raise GraphError(f"{path}: no such file")
    if os.path.isdir(path):
        raise GraphError(f"{path}: is a directory, not a graph file")
    head = _head(path)
    regs = list(plugins.loaders().values())
    for loader in reversed(regs):  # later registrations (third-party) first
        try:
            ok = loader.sniff(path, head)
        except Exception:
            ok = False
        if ok:
            return loader.load(path)
    # the head may be too short for the sniffers: try a full parse
    doc = read_json(path)
    if isinstance(doc, dict) and doc.get("format") == REMAT_GRAPH_FORMAT:
        return graph_from_remat_json(doc, source=path)
    if isinstance(doc, dict) and "nodes" in doc:
        return graph_from_node_link(doc, source=path)
    fmt = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
    raise GraphError(f"{path}: unknown graph format {fmt!r}: expected remat-graph/1 or node-link JSON")
