"""The immutable computation graph that every other module reads.

Nodes are numbered ``0..n-1`` in a topological order (the *reference order*:
executing the nodes once in this order is the keep-all schedule).  Each node
has a name, the bytes its output holds while live, a phase (forward or
backward), a cost per *cost kind* (e.g. ``"gpu"`` and ``"cpu"`` for profiled
graphs, ``"cost"`` for node-link graphs), FLOPs where known and a flag saying
whether it is a required output.  Predecessor and successor lists are stored
as int64 CSR arrays, ready for Numba kernels.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.graph import Graph
>>> g = nx.DiGraph([(0, 1), (1, 2)])
>>> for v in g:
...     g.nodes[v].update(bytes=4, cost=1.0)
>>> G = Graph.from_networkx(g)
>>> G.n, G.m, G.preds(2).tolist()
(3, 2, [1])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from .errors import GraphError

__all__ = ["Graph", "FORWARD", "BACKWARD", "MAX_TOTAL_BYTES", "csr_from_edges"]

FORWARD = 0
BACKWARD = 1

#: the most bytes a graph's outputs may hold together (4 EiB): every memory
#: sum a plan can form (all outputs at once, plus a budget of the same size)
#: then fits the int64 arithmetic of the kernels and the simulator
MAX_TOTAL_BYTES = 2**62


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _first_bad(values, ok) -> int:
    return next(i for i, x in enumerate(values) if not ok(x))


def _numeric(values, what: str, name: str) -> np.ndarray:
    """``values`` as a float64 or int64 (or object, for ints beyond int64)
    array; ``None`` becomes ``nan``.  Anything that is not a number (a
    string, a list, a bool) raises a :class:`GraphError` naming the node."""
    try:
        vals = list(values)
    except TypeError:
        raise GraphError(f"graph {name!r}: {what} must be a list of numbers, not {type(values).__name__}") from None
    try:
        arr = np.asarray(vals)
    except (ValueError, TypeError):
        arr = None
    if (arr is not None and arr.dtype.kind in "iuf" and arr.ndim == 1
            and (isinstance(values, np.ndarray) or not any(isinstance(x, bool) for x in vals))):
        return arr.astype(np.float64) if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 else arr
    for i, x in enumerate(vals):
        if x is not None and not _is_number(x):
            shown = repr(x) if len(repr(x)) <= 40 else repr(x)[:37] + "..."
            raise GraphError(f"graph {name!r}: node {i} has a non-numeric {what} {shown}: {what} must be numbers")
    if all(isinstance(x, (int, np.integer)) for x in vals):
        return np.asarray(vals, dtype=object)  # some beyond int64: checked exactly by the caller
    return np.asarray([np.nan if x is None else float(x) for x in vals], dtype=np.float64)


def _byte_array(values, name: str) -> np.ndarray:
    """Validated int64 bytes: numbers, non-negative, finite, summing to at
    most :data:`MAX_TOTAL_BYTES` (fractions of a byte are rounded down)."""
    arr = _numeric(values, "bytes", name)
    if arr.dtype == object:  # Python ints, some beyond int64
        big = _first_bad(arr, lambda x: 0 <= x <= MAX_TOTAL_BYTES)
        if arr[big] < 0:
            raise GraphError(f"graph {name!r}: node {big} has negative bytes {arr[big]}")
        raise GraphError(f"graph {name!r}: node {big} has {arr[big]:.3g} bytes, more than the {MAX_TOTAL_BYTES} "
                         "(4 EiB) that plans can count exactly")
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise GraphError(f"graph {name!r}: node {int(np.flatnonzero(np.isnan(arr))[0])} has no bytes")
        if (arr < 0).any():
            v = int(np.flatnonzero(arr < 0)[0])
            raise GraphError(f"graph {name!r}: node {v} has negative bytes {arr[v]:g}")
        if (arr > MAX_TOTAL_BYTES).any():  # inf included
            v = int(np.flatnonzero(arr > MAX_TOTAL_BYTES)[0])
            raise GraphError(f"graph {name!r}: node {v} has {arr[v]:.3g} bytes, more than the {MAX_TOTAL_BYTES} "
                             "(4 EiB) that plans can count exactly")
        arr = np.floor(arr).astype(np.int64)
    else:
        arr = arr.astype(np.int64)
        if (arr < 0).any():
            v = int(np.flatnonzero(arr < 0)[0])
            raise GraphError(f"graph {name!r}: node {v} has negative bytes {arr[v]}")
    total = sum(arr.tolist())  # exact (Python ints)
    if total > MAX_TOTAL_BYTES:
        raise GraphError(
            f"graph {name!r}: node sizes sum to {total:.3g} bytes, more than the {MAX_TOTAL_BYTES} (4 EiB) "
            "that plans can count exactly (int64 memory sums would overflow)"
        )
    return arr


def _cost_array(values, kind: str, n: int, name: str) -> np.ndarray:
    """Validated float64 costs: numbers, finite, non-negative, ``n`` of them."""
    arr = _numeric(values, f"{kind!r} cost", name)
    arr = np.asarray(arr, dtype=np.float64)
    if arr.shape != (n,):
        raise GraphError(f"graph {name!r}: cost kind {kind!r} has {arr.shape[0]} entries for {n} nodes")
    if np.isnan(arr).any():
        v = int(np.flatnonzero(np.isnan(arr))[0])
        raise GraphError(f"graph {name!r}: node {v} has no {kind!r} cost")
    if np.isinf(arr).any():
        v = int(np.flatnonzero(np.isinf(arr))[0])
        raise GraphError(f"graph {name!r}: node {v} has an infinite {kind!r} cost: costs must be finite seconds")
    if (arr < 0).any():
        v = int(np.flatnonzero(arr < 0)[0])
        raise GraphError(f"graph {name!r}: node {v} has negative {kind!r} cost {arr[v]:g}")
    with np.errstate(over="ignore"):
        total = arr.sum()
    if not np.isfinite(total):
        raise GraphError(f"graph {name!r}: the {kind!r} costs sum to infinity: use smaller units")
    return arr


def _edge_array(edges, n: int, name: str) -> np.ndarray:
    """Edges as an ``(m, 2)`` int64 array of node indices."""
    try:
        e = np.asarray(list(edges))
    except (TypeError, ValueError):
        e = None
    if e is None or not (e.size == 0 or (e.ndim == 2 and e.shape[1] == 2 and e.dtype.kind in "iuf")):
        raise GraphError(f"graph {name!r}: edges must be a list of [u, v] pairs of node indices")
    if e.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if e.dtype.kind == "f" and not (np.isfinite(e).all() and (e == np.floor(e)).all()):
        raise GraphError(f"graph {name!r}: edges must be a list of [u, v] pairs of node indices (integers)")
    if e.min() < 0 or e.max() >= n:
        raise GraphError(f"graph {name!r}: an edge names a node outside 0..{n - 1}")
    return e.astype(np.int64)


def csr_from_edges(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(indptr, indices)`` of the CSR rows ``src -> sorted dst``."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    perm = np.lexsort((dst, src))
    src, dst = src[perm], dst[perm]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, src + 1, 1)
    np.cumsum(indptr, out=indptr)
    return indptr, np.ascontiguousarray(dst)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable DAG of operators with sizes and costs.

    Use :meth:`from_arrays` or :meth:`from_networkx` to build one; the
    constructor expects already-validated arrays.

    Attributes
    ----------
    name : str
        Graph name (used in plan files).
    names : tuple of str
        Human-readable node names.
    ids : tuple
        External node identifiers written to plan files (the index for
        ``remat-graph/1`` graphs, the node-link id otherwise).
    bytes : ndarray of int64, shape (n,)
        Bytes a node's output holds while it is live.
    costs : dict of str -> ndarray of float64
        Time of each node per cost kind.
    estimated : dict of str -> ndarray of bool
        Which cost entries were filled in by a rule rather than measured.
    phase : ndarray of int8
        ``FORWARD`` (0) or ``BACKWARD`` (1) per node.
    flops : ndarray of float64
        FLOPs per node, ``nan`` where unknown.
    required : ndarray of bool
        Required outputs (e.g. parameter gradients).
    pred_ptr, pred_idx, succ_ptr, succ_idx : ndarray of int64
        CSR predecessor and successor lists; all edges go from lower to
        higher index.
    meta : dict
        Everything else the source carried (transfer rates, op names, ...).
    """

    name: str
    names: tuple
    ids: tuple
    bytes: np.ndarray
    costs: Mapping[str, np.ndarray]
    estimated: Mapping[str, np.ndarray]
    phase: np.ndarray
    flops: np.ndarray
    required: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    meta: Mapping[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_arrays(
        cls,
        bytes: Sequence[int],
        edges: Iterable[tuple[int, int]],
        costs: Mapping[str, Sequence[float]] | Sequence[float],
        *,
        name: str = "graph",
        names: Sequence[str] | None = None,
        ids: Sequence[Any] | None = None,
        phase: Sequence[Any] | None = None,
        flops: Sequence[float] | None = None,
        required: Sequence[int] | None = None,
        estimated: Mapping[str, Sequence[bool]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Graph:
        """Build and validate a graph whose nodes are already ``0..n-1``.

        Edges may come in any order, but the node numbering must be a
        topological order (every edge ``u -> v`` has ``u < v``); use
        :meth:`from_networkx` for arbitrary DAGs.  Duplicate edges are
        merged into one (an operator that reads a tensor twice depends on it
        once).

        Parameters
        ----------
        bytes : sequence of int
            Output bytes per node: numbers, non-negative, together at most
            :data:`MAX_TOTAL_BYTES` (4 EiB, so that memory sums cannot
            overflow int64); fractions of a byte are rounded down.
        edges : iterable of (u, v)
        costs : mapping kind -> sequence of float, or one sequence
            One sequence is stored under the kind ``"cost"``; finite,
            non-negative numbers.
        phase : sequence of {"forward", "backward", 0, 1, bool}, optional
            Defaults to all forward.
        required : sequence of int, optional
            Indices of required outputs.

        Raises
        ------
        GraphError
            Empty graph; missing, non-numeric or negative bytes or costs;
            infinite costs; sizes that sum beyond :data:`MAX_TOTAL_BYTES`;
            malformed edges, self loops, edges against the numbering (or
            cycles).

        Examples
        --------
        >>> Graph.from_arrays([4, 4, 4], [(0, 1), (1, 2), (0, 1)], [1.0, 1.0, 1.0]).m  # the repeated edge is merged
        2
        >>> Graph.from_arrays([5 * 10**18] * 6, [], [1.0] * 6)
        Traceback (most recent call last):
        ...
        hybrid_remat.errors.GraphError: graph 'graph': node sizes sum to 3e+19 bytes, more than the 4611686018427387904 (4 EiB) that plans can count exactly (int64 memory sums would overflow)
        """
        b = _byte_array(bytes, name)
        n = int(b.shape[0])
        if n == 0:
            raise GraphError(f"graph {name!r} is empty: it has no nodes")

        if not isinstance(costs, Mapping):
            costs = {"cost": costs}
        if not costs:
            raise GraphError(f"graph {name!r} has no cost column")
        cost_arrays = {str(kind): _readonly(_cost_array(c, kind, n, name)) for kind, c in costs.items()}
        est = {k: _readonly(np.zeros(n, dtype=bool)) for k in cost_arrays}
        for k, e in (estimated or {}).items():
            est[k] = _readonly(np.asarray(e, dtype=bool))

        e = _edge_array(edges, n, name)
        if e.size:
            if (e[:, 0] == e[:, 1]).any():
                v = int(e[e[:, 0] == e[:, 1]][0, 0])
                raise GraphError(f"graph {name!r} has a cycle: self loop on node {v}")
            back = e[:, 0] > e[:, 1]
            if back.any():
                # maybe a genuine cycle: report it by name if so
                g = nx.DiGraph()
                g.add_nodes_from(range(n))
                g.add_edges_from(map(tuple, e.tolist()))
                if not nx.is_directed_acyclic_graph(g):
                    cyc = nx.find_cycle(g)
                    nodes = [u for u, _ in cyc][:6]
                    shown = ", ".join(str(names[u]) if names else str(u) for u in nodes)
                    raise GraphError(f"graph {name!r} has a cycle through nodes {shown}")
                u, v = e[back][0]
                raise GraphError(
                    f"graph {name!r}: edge {u}->{v} goes against the node numbering; "
                    "nodes must be numbered in a topological order (use Graph.from_networkx)"
                )
            e = np.unique(e, axis=0)  # duplicate edges merged: reading a tensor twice is one dependency
        src, dst = (e[:, 0], e[:, 1]) if e.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        succ_ptr, succ_idx = csr_from_edges(n, src, dst)
        pred_ptr, pred_idx = csr_from_edges(n, dst, src)

        if phase is None:
            ph = np.zeros(n, dtype=np.int8)
        else:
            if isinstance(phase, str) or not isinstance(phase, Iterable):
                raise GraphError(f"graph {name!r}: phase must be a list with one entry per node")
            ph = np.asarray(
                [BACKWARD if (isinstance(p, (str, bool, int, np.integer)) and p in ("backward", "bwd", True, 1))
                 else FORWARD for p in phase], dtype=np.int8
            )
            if ph.shape != (n,):
                raise GraphError(f"graph {name!r}: phase has {ph.shape[0]} entries for {n} nodes")
        fl = np.full(n, np.nan) if flops is None else np.asarray(_numeric(flops, "flops", name), dtype=np.float64)
        if fl.shape != (n,):
            raise GraphError(f"graph {name!r}: flops has {fl.shape[0]} entries for {n} nodes")
        req = np.zeros(n, dtype=bool)
        if required is not None:
            try:
                r = np.asarray(list(required))
            except (TypeError, ValueError):
                r = None
            if r is None or (r.size and (r.ndim != 1 or r.dtype.kind not in "iu")):
                raise GraphError(f"graph {name!r}: required outputs must be a list of node indices")
            r = r.astype(np.int64)
            if r.size and (r.min() < 0 or r.max() >= n):
                raise GraphError(f"graph {name!r}: a required output is outside 0..{n - 1}")
            req[r] = True
        return cls(
            name=str(name),
            names=tuple(str(x) for x in (names if names is not None else range(n))),
            ids=tuple(ids if ids is not None else range(n)),
            bytes=_readonly(b),
            costs=cost_arrays,
            estimated=est,
            phase=_readonly(ph),
            flops=_readonly(fl),
            required=_readonly(req),
            pred_ptr=_readonly(pred_ptr),
            pred_idx=_readonly(pred_idx),
            succ_ptr=_readonly(succ_ptr),
            succ_idx=_readonly(succ_idx),
            meta=dict(meta or {}),
        )

    @classmethod
    def from_networkx(
        cls,
        g: nx.DiGraph,
        *,
        bytes_attr: str = "bytes",
        cost_attrs: Mapping[str, str] | str = "cost",
        order: Sequence[Any] | None = None,
        name: str | None = None,
        phase_attr: str | None = "backward",
        name_attr: str | None = "name",
        flops_attr: str | None = "flops",
        meta: Mapping[str, Any] | None = None,
    ) -> Graph:
        """Build a graph from a networkx DiGraph.

        Parameters
        ----------
        g : networkx.DiGraph
            Must be acyclic.
        bytes_attr : str
            Node attribute holding output bytes.
        cost_attrs : str or mapping kind -> attribute
            A single attribute is stored as kind ``"cost"``.
        order : sequence of nodes, optional
            Reference topological order; defaults to a lexicographic
            topological sort (ties broken by node id).
        phase_attr : str, optional
            Boolean node attribute that marks backward nodes (``"backward"``),
            or a string attribute ``"forward"``/``"backward"``.
        """
        if g.number_of_nodes() == 0:
            raise GraphError(f"graph {name or g.graph.get('name', 'graph')!r} is empty: it has no nodes")
        if not g.is_directed():
            raise GraphError(f"graph {name or g.graph.get('name', 'graph')!r} is undirected: a computation graph "
                             "needs directed edges (node-link JSON: \"directed\": true)")
        if not nx.is_directed_acyclic_graph(g):
            cyc = nx.find_cycle(g)
            nodes = ", ".join(str(u) for u, _ in cyc[:6])
            raise GraphError(f"graph has a cycle through nodes {nodes}")
        if order is None:
            order = list(nx.lexicographical_topological_sort(g, key=lambda v: (str(type(v)), v)))
        else:
            try:
                order = list(order)
                same = set(order) == set(g.nodes) and len(order) == g.number_of_nodes()
            except TypeError:
                same = False
            if not same:
                raise GraphError("the given order does not list every node exactly once")
        index = {v: i for i, v in enumerate(order)}
        for u, v in g.edges():
            if index[u] >= index[v]:
                raise GraphError(f"the given order is not topological: edge {u}->{v}")
        if isinstance(cost_attrs, str):
            cost_attrs = {"cost": cost_attrs}

        def attr(v, key):
            d = g.nodes[v]
            if key not in d:
                raise GraphError(f"node {v!r} has no attribute {key!r}")
            return d[key]

        bytes_ = [attr(v, bytes_attr) for v in order]
        costs = {kind: [attr(v, a) for v in order] for kind, a in cost_attrs.items()}
        phase = None
        if phase_attr is not None:
            phase = [g.nodes[v].get(phase_attr, False) for v in order]
        names = [g.nodes[v].get(name_attr, v) if name_attr else v for v in order]
        flops = [g.nodes[v].get(flops_attr) for v in order] if flops_attr else None
        edges = [(index[u], index[v]) for u, v in g.edges()]
        return cls.from_arrays(
            bytes_,
            edges,
            costs,
            name=name or g.graph.get("name", "graph"),
            names=names,
            ids=order,
            phase=phase,
            flops=flops,
            meta=meta,
        )

    # ------------------------------------------------------------- accessors
    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.bytes.shape[0])

    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.succ_idx.shape[0])

    @property
    def cost_kinds(self) -> tuple[str, ...]:
        """Names of the cost columns, e.g. ``("gpu", "cpu")``."""
        return tuple(self.costs)

    def cost(self, kind: str | None = None) -> np.ndarray:
        """Cost column ``kind`` (the first one when ``None``)."""
        if kind is None:
            kind = self.cost_kinds[0]
        try:
            return self.costs[kind]
        except KeyError:
            raise GraphError(
                f"graph {self.name!r} has no cost kind {kind!r}; it has {', '.join(self.cost_kinds)}"
            ) from None

    def preds(self, v: int) -> np.ndarray:
        """Predecessors of node ``v`` (sorted)."""
        return self.pred_idx[self.pred_ptr[v] : self.pred_ptr[v + 1]]

    def succs(self, v: int) -> np.ndarray:
        """Successors of node ``v`` (sorted)."""
        return self.succ_idx[self.succ_ptr[v] : self.succ_ptr[v + 1]]

    def edges(self) -> np.ndarray:
        """All edges as an ``(m, 2)`` int64 array sorted by source."""
        src = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.succ_ptr))
        return np.stack([src, self.succ_idx], axis=1)

    @property
    def is_backward(self) -> np.ndarray:
        """Boolean mask of backward nodes."""
        return self.phase == BACKWARD

    @property
    def forward_nodes(self) -> np.ndarray:
        return np.flatnonzero(self.phase == FORWARD)

    def id_to_index(self) -> dict:
        """Map external ids to node indices."""
        return {v: i for i, v in enumerate(self.ids)}

    def to_networkx(self) -> nx.DiGraph:
        """Return a networkx DiGraph on ``0..n-1`` with the node data: ``name``,
        ``bytes``, ``backward``, ``cost_<kind>`` per cost column and ``flops``
        where known (``networkx.node_link_data`` of it loads back with
        :func:`~hybrid_remat.loaders.load_graph`)."""
        g = nx.DiGraph(name=self.name)
        for v in range(self.n):
            d = {"name": self.names[v], "bytes": int(self.bytes[v]), "backward": bool(self.phase[v])}
            for k, c in self.costs.items():
                d[f"cost_{k}"] = float(c[v])
            if self.flops is not None:
                d["flops"] = float(self.flops[v])
            g.add_node(v, **d)
        g.add_edges_from(map(tuple, self.edges().tolist()))
        return g

    def derived(self, key: str, compute):
        """``compute(self)``, computed once per graph and kept with it under
        ``key`` (a graph does not change: structure found by an analysis,
        such as the repeated blocks, serves every component that asks).

        Examples
        --------
        >>> from hybrid_remat.generators import chain
        >>> g = chain(3)
        >>> g.derived("n_sinks", lambda g: 1), g.derived("n_sinks", lambda g: 2)
        (1, 1)
        """
        cache = self.__dict__.setdefault("_derived", {})
        if key not in cache:
            cache[key] = compute(self)
        return cache[key]

    def with_costs(self, costs: Mapping[str, np.ndarray], estimated: Mapping[str, np.ndarray] | None = None) -> Graph:
        """A copy with cost columns replaced or added (e.g. from a cost model)."""
        new = dict(self.costs)
        new_est = dict(self.estimated)
        for k, c in costs.items():
            c = np.asarray(c, dtype=np.float64)
            with np.errstate(over="ignore"):
                bad = c.shape != (self.n,) or not np.isfinite(c).all() or (c < 0).any() or not np.isfinite(c.sum())
            if bad:
                raise GraphError(f"cost column {k!r} must be {self.n} finite non-negative numbers")
            new[k] = _readonly(c)
            new_est[k] = _readonly(
                np.asarray(estimated[k], dtype=bool) if estimated and k in estimated else np.zeros(self.n, bool)
            )
        return Graph(
            name=self.name, names=self.names, ids=self.ids, bytes=self.bytes, costs=new, estimated=new_est,
            phase=self.phase, flops=self.flops, required=self.required, pred_ptr=self.pred_ptr,
            pred_idx=self.pred_idx, succ_ptr=self.succ_ptr, succ_idx=self.succ_idx, meta=self.meta,
        )

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, n={self.n}, m={self.m}, costs={list(self.cost_kinds)})"
