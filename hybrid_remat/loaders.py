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
import math
import os
import zlib
from typing import Any

import networkx as nx
import numpy as np

from .errors import GraphError
from .graph import Graph, _is_number
from .interfaces import Loader

__all__ = ["load_graph", "read_json", "RematGraphLoader", "NodeLinkLoader", "graph_from_remat_json", "graph_from_node_link"]

REMAT_GRAPH_FORMAT = "remat-graph/1"


_GZIP_ERRORS = (OSError, EOFError, zlib.error)


def _head(path: str, size: int = 1024) -> bytes:
    try:
        with open(path, "rb") as f:
            raw = f.read(2)
        opener = gzip.open if raw == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            return f.read(size)
    except _GZIP_ERRORS as e:
        raise GraphError(f"{path}: cannot read: {_reason(e)}") from None


def _reason(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def read_json(path: str) -> Any:
    """Read JSON, gunzipping when the file is gzip-compressed.

    Raises
    ------
    GraphError
        The file cannot be read, its gzip stream is broken or truncated, or
        it is not JSON.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise GraphError(f"{path}: cannot read: {_reason(e)}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except _GZIP_ERRORS as e:
            raise GraphError(f"{path}: broken or truncated gzip file: {_reason(e)}") from None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GraphError(f"{path}: not valid JSON: {e}") from None
    except RecursionError:
        raise GraphError(f"{path}: not valid JSON: nested too deeply") from None


def _kind(x) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(x), "a number" if isinstance(x, (int, float)) else type(x).__name__)


def _column(nodes: dict, key: str, n: int | None, source: str, *, required: bool = True):
    """``nodes[key]`` checked to be a list (of ``n`` entries when ``n`` is given)."""
    if key not in nodes:
        if required:
            raise GraphError(f"{source}: remat-graph/1 'nodes' lacks the list {key!r}")
        return None
    col = nodes[key]
    if not isinstance(col, list):
        raise GraphError(f"{source}: remat-graph/1 'nodes.{key}' must be a list, not {_kind(col)}")
    if n is not None and len(col) != n:
        raise GraphError(f"{source}: remat-graph/1 'nodes.{key}' has {len(col)} entries for {n} nodes")
    return col


def _times(col: list, key: str, source: str) -> np.ndarray:
    """A time column as float64 (``null`` -> ``nan``); other non-numbers raise."""
    for i, x in enumerate(col):
        if x is not None and not _is_number(x):
            raise GraphError(f"{source}: node {i} has a non-numeric {key} {x!r}: times must be numbers (seconds)")
    return np.asarray([np.nan if x is None else x for x in col], dtype=np.float64)


def _check_transfer(tr, source: str) -> None:
    """The ``transfer`` record: rates > 0 and a latency >= 0, in numbers."""
    if tr is None:
        return
    if not isinstance(tr, dict):
        raise GraphError(f"{source}: remat-graph/1 'transfer' must be an object, not {_kind(tr)}")
    for key, low in (("h2d_bytes_per_s", 0.0), ("d2h_bytes_per_s", 0.0), ("latency_s", None)):
        x = tr.get(key)
        if x is None:
            continue
        if not _is_number(x) or not math.isfinite(x) or (x <= low if low is not None else x < 0):
            want = "a positive number" if low is not None else "a number >= 0"
            raise GraphError(f"{source}: remat-graph/1 'transfer.{key}' must be {want}, not {x!r}")


def graph_from_remat_json(doc: dict, *, source: str = "<memory>") -> Graph:
    """Build a :class:`Graph` from a parsed ``remat-graph/1`` document.

    Raises
    ------
    GraphError
        The document is not ``remat-graph/1`` or a field is missing or
        malformed; the message names the field.

    Examples
    --------
    >>> graph_from_remat_json({"format": "remat-graph/1", "nodes": 5})
    Traceback (most recent call last):
    ...
    hybrid_remat.errors.GraphError: <memory>: remat-graph/1 'nodes' must be an object of per-node lists (bytes, time_gpu_s, ...), not a number
    """
    if not isinstance(doc, dict) or doc.get("format") != REMAT_GRAPH_FORMAT:
        raise GraphError(f"{source}: not a {REMAT_GRAPH_FORMAT} document")
    if "nodes" not in doc:
        raise GraphError(f"{source}: remat-graph/1 document lacks 'nodes'")
    nodes = doc["nodes"]
    if not isinstance(nodes, dict):
        raise GraphError(
            f"{source}: remat-graph/1 'nodes' must be an object of per-node lists (bytes, time_gpu_s, ...), "
            f"not {_kind(nodes)}"
        )
    if "edges" not in doc:
        raise GraphError(f"{source}: remat-graph/1 document lacks 'edges' (a list of [u, v] pairs)")
    edges = doc["edges"]
    if not isinstance(edges, list):
        raise GraphError(f"{source}: remat-graph/1 'edges' must be a list of [u, v] pairs, not {_kind(edges)}")
    n = len(_column(nodes, "bytes", None, source))
    gpu = _times(_column(nodes, "time_gpu_s", n, source), "time_gpu_s", source)
    cpu_raw = _column(nodes, "time_cpu_s", n, source, required=False)
    for key in ("op", "phase", "flops"):
        _column(nodes, key, n, source, required=False)
    _check_transfer(doc.get("transfer"), source)
    outputs = doc.get("outputs", [])
    if not isinstance(outputs, list):
        raise GraphError(f"{source}: remat-graph/1 'outputs' must be a list of node indices, not {_kind(outputs)}")
    costs = {"gpu": gpu}
    estimated = {}
    if cpu_raw is not None:
        cpu = _times(cpu_raw, "time_cpu_s", source)
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
    name = doc.get("name", os.path.basename(source))
    return Graph.from_arrays(
        nodes["bytes"], edges, costs, name=name if isinstance(name, str) else str(name), names=names,
        phase=nodes.get("phase"), flops=nodes.get("flops"), required=outputs,
        estimated=estimated, meta=meta,
    )


_BYTES_KEYS = ("cost_ram", "out_cost", "bytes", "memory")
_COST_KEYS = ("cost_cpu", "duration", "cost", "time")


def _cost_columns(attrs: dict, bkey: str, ckey: str) -> dict[str, str]:
    """Cost kind -> node attribute.  Checkmate's files (``cost_ram`` bytes,
    ``cost_cpu`` the op's time) and the random layered files have one cost,
    stored as kind ``"cost"``; :meth:`Graph.to_networkx` writes ``bytes``
    and one ``cost_<kind>`` per column (``cost_gpu``, ``cost_cpu``), read back
    as those kinds (read as Checkmate's, ``cost_cpu`` -- the CPU times -- was
    taken for the one cost)."""
    if bkey == "bytes":
        kinds = {k[len("cost_"):]: k for k in attrs if k.startswith("cost_") and len(k) > len("cost_")}
        if kinds:
            return kinds
    return {"cost": ckey}


def graph_from_node_link(doc: dict, *, source: str = "<memory>") -> Graph:
    """Build a :class:`Graph` from networkx node-link JSON (Checkmate or
    random-layered conventions, :meth:`Graph.to_networkx`'s ``bytes`` and
    ``cost_<kind>`` columns, or plain ``bytes``/``cost`` attributes).

    Raises
    ------
    GraphError
        A malformed document: the message names the field or node.
    """
    if not isinstance(doc, dict):
        raise GraphError(f"{source}: node-link JSON must be an object, not {_kind(doc)}")
    links_key = "links" if "links" in doc else "edges"
    links = doc.get(links_key) or []
    if not isinstance(links, list) or not all(isinstance(x, dict) for x in links):
        raise GraphError(f"{source}: node-link {links_key!r} must be a list of objects")
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
    ids = []
    for i, d in enumerate(nodes):
        if id_key not in d:
            raise GraphError(f"{source}: node-link node {i} has no {id_key!r}")
        v = d[id_key]
        if not isinstance(v, (str, int)) or isinstance(v, bool):
            raise GraphError(f"{source}: node-link node {i} has {id_key!r} {v!r}: ids must be strings or integers")
        ids.append(v)
    known = set(ids)
    if len(known) != len(ids):
        seen: set = set()
        dup = next(v for v in ids if v in seen or seen.add(v))
        raise GraphError(f"{source}: node-link node id {dup!r} appears more than once")
    for i, e in enumerate(links):
        for key in (src_key, dst_key):
            if key not in e:
                raise GraphError(f"{source}: node-link {links_key} entry {i} has no {key!r}")
            end = e[key]
            if isinstance(end, bool) or not isinstance(end, (str, int)) or end not in known:
                raise GraphError(f"{source}: node-link {links_key} entry {i} names node {end!r}, which is not in 'nodes'")
    try:
        g = nx.node_link_graph(doc, directed=True, multigraph=False, source=src_key, target=dst_key, name=id_key, edges=links_key)
    except Exception as e:  # networkx raises assorted errors on malformed input
        raise GraphError(f"{source}: malformed node-link JSON: {_reason(e)}") from None
    attrs = nodes[0]
    bkey = next((k for k in _BYTES_KEYS if k in attrs), None)
    ckey = next((k for k in _COST_KEYS if k in attrs), None)
    if bkey is None or ckey is None:
        raise GraphError(f"{source}: node-link nodes need a size ({'/'.join(_BYTES_KEYS)}) and a cost ({'/'.join(_COST_KEYS)})")
    cost_attrs = _cost_columns(attrs, bkey, ckey)
    for v, d in g.nodes(data=True):
        if d.get(bkey) is None:
            raise GraphError(f"{source}: node {v!r} has no {bkey}")
        for key in cost_attrs.values():
            if d.get(key) is None:
                raise GraphError(f"{source}: node {v!r} has no {key}")
    order = g.graph.get("order")
    if order is not None:
        if not isinstance(order, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in order):
            raise GraphError(f"{source}: node-link graph 'order' must be a list of node ids")
    else:
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
        g, bytes_attr=bkey, cost_attrs=cost_attrs, order=order, name=str(name),
        phase_attr="backward", name_attr=name_attr, flops_attr="flops" if "flops" in attrs else None, meta=meta,
    )


#: errors that a malformed document can still raise deep inside the
#: builders; the built-in loaders turn them into one-line GraphErrors
_MALFORMED = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, RecursionError)


class _JSONLoader(Loader):
    """A JSON format read by ``parse(doc, source=path)``; a malformed
    document becomes one :class:`~hybrid_remat.errors.GraphError` line."""

    label = "JSON"

    @staticmethod
    def parse(doc, source: str) -> Graph:
        raise NotImplementedError

    def load(self, path: str) -> Graph:
        doc = read_json(path)
        try:
            return self.parse(doc, source=path)
        except _MALFORMED as e:
            raise GraphError(f"{path}: malformed {self.label} document: {type(e).__name__}: {_reason(e)}") from None


class RematGraphLoader(_JSONLoader):
    """Reads ``remat-graph/1`` JSON (plain or gzip)."""

    name = "remat-graph"
    version = "1"
    label = "remat-graph/1"
    parse = staticmethod(graph_from_remat_json)

    def sniff(self, path: str, head: bytes) -> bool:
        return b'"remat-graph/1"' in head or b"remat-graph/1" in head


class NodeLinkLoader(_JSONLoader):
    """Reads networkx node-link JSON (Checkmate and random-layered files)."""

    name = "node-link"
    version = "1"
    label = "node-link"
    parse = staticmethod(graph_from_node_link)

    def sniff(self, path: str, head: bytes) -> bool:
        if b"remat-graph/1" in head:
            return False
        return b'"nodes"' in head and (b'"links"' in head or b'"edges"' in head or b'"directed"' in head)


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
        return RematGraphLoader().load(path)
    if isinstance(doc, dict) and "nodes" in doc:
        return NodeLinkLoader().load(path)
    fmt = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
    raise GraphError(f"{path}: unknown graph format {fmt!r}: expected remat-graph/1 or node-link JSON")
