"""Graph generators: chains, random layered DAGs and training graphs.

Examples
--------
>>> from hybrid_remat.generators import chain, training_graph
>>> chain(5).n
5
>>> import networkx as nx
>>> fwd = nx.path_graph(3, create_using=nx.DiGraph)
>>> training_graph(fwd).n   # 3 forward, a loss, 3 backward
7
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from .errors import GraphError
from .graph import Graph

__all__ = ["chain", "random_layered", "training_graph", "random_dag", "repeat_layers"]


def chain(n: int, *, bytes: int | Sequence[int] = 1, cost: float | Sequence[float] = 1.0, name: str | None = None) -> Graph:
    """A linear chain ``0 -> 1 -> ... -> n-1`` (all forward nodes).

    Parameters
    ----------
    n : int
        Number of nodes (>= 1).
    bytes, cost : scalar or sequence
        Per-node output size and cost.
    """
    if n < 1:
        raise GraphError("a chain needs at least one node")
    b = np.broadcast_to(np.asarray(bytes, dtype=np.int64), (n,))
    c = np.broadcast_to(np.asarray(cost, dtype=np.float64), (n,))
    return Graph.from_arrays(b, [(i, i + 1) for i in range(n - 1)], {"cost": c}, name=name or f"chain{n}")


def random_layered(
    n: int,
    *,
    width: float = 0.3,
    level_var: float = 0.75,
    edge_density: float = 0.2,
    skip_density: float = 0.14,
    max_cost: int = 1000,
    mean_bytes: int = 2000,
    seed: int = 0,
) -> Graph:
    """A random layered DAG in the style of Gagrani et al. 2022, App. A.

    The parameters mirror the published instance names
    (``random_layered_n{n}_w{width}_nlv{level_var}_ed{edge_density}_scd{skip_density}``):

    * one source (node 0) and one sink (node ``n-1``) fed by the last
      layer; every other node feeds at least one node of the next layer;
    * about ``sqrt(n) / (2 * width)`` inner layers whose sizes vary
      uniformly by ``+-level_var`` around the mean;
    * each node reads each node of the previous layer with probability
      ``edge_density`` (at least one);
    * skip connections from a random node of an earlier layer (two or more
      layers back) make up a fraction ``skip_density`` of the edges;
    * costs uniform integers in ``[1, max_cost]`` (source 0), output sizes
      multiples of 10 with mean ``mean_bytes`` (exponential).

    Deterministic for a seed.

    Notes
    -----
    The appendix text itself could not be retrieved here; the layer count,
    edge-span and size statistics were matched to the four published
    instances (e.g. n=1000: 51 layers, 14 % skip edges, mean in-degree 5.9).
    """
    if n < 3:
        raise GraphError("random_layered needs n >= 3")
    if not (0 < width and 0 <= level_var < 1 and 0 < edge_density <= 1 and 0 <= skip_density < 1):
        raise GraphError("random_layered: need width > 0, 0 <= level_var < 1, 0 < edge_density <= 1, 0 <= skip_density < 1")
    rng = np.random.default_rng(seed)
    inner = n - 2
    n_layers = int(min(inner, max(1, round(np.sqrt(n) / (2 * width)))))
    weights = 1.0 + level_var * (2 * rng.random(n_layers) - 1)
    sizes = np.maximum(1, np.floor(weights / weights.sum() * inner).astype(np.int64))
    while sizes.sum() < inner:
        sizes[int(rng.integers(n_layers))] += 1
    while sizes.sum() > inner:
        i = int(rng.integers(n_layers))
        if sizes[i] > 1:
            sizes[i] -= 1
    layers: list[list[int]] = [[0]]
    v = 1
    for k in sizes.tolist():
        layers.append(list(range(v, v + k)))
        v += k
    sink = n - 1
    edges = set()
    for li in range(1, len(layers)):
        prev = layers[li - 1]
        for x in layers[li]:
            chosen = [u for u in prev if rng.random() < edge_density]
            if not chosen:
                chosen = [prev[int(rng.integers(len(prev)))]]
            edges.update((u, x) for u in chosen)
    n_skip = int(round(len(edges) * skip_density / (1 - skip_density)))
    if len(layers) > 2:
        for _ in range(n_skip):
            li = int(rng.integers(2, len(layers)))
            lj = int(rng.integers(0, li - 1))
            u = layers[lj][int(rng.integers(len(layers[lj])))]
            x = layers[li][int(rng.integers(len(layers[li])))]
            edges.add((u, x))
    # every node feeds the next layer (the last layer feeds the sink)
    has_out = {u for u, _ in edges}
    for li in range(len(layers) - 1):
        nxt = layers[li + 1]
        for x in layers[li]:
            if x not in has_out:
                edges.add((x, nxt[int(rng.integers(len(nxt)))]))
    for x in layers[-1]:
        edges.add((x, sink))
    costs = rng.integers(1, max_cost + 1, size=n).astype(np.float64)
    costs[0] = 0.0
    sizes_b = 10 * np.ceil(rng.exponential(mean_bytes / 10, size=n)).astype(np.int64)
    return Graph.from_arrays(
        sizes_b, sorted(edges), {"cost": costs},
        name=f"random_layered_n{n}_w{width}_nlv{level_var}_ed{edge_density}_scd{skip_density}_s{seed}",
    )


def random_dag(n: int, *, p: float = 0.3, max_cost: int = 10, max_bytes: int = 10, seed: int = 0, kinds=("cost",)) -> Graph:
    """A small random DAG on ``0..n-1`` (edge ``i -> j``, ``i < j``, with
    probability ``p``), integer costs per kind and sizes; for tests."""
    rng = np.random.default_rng(seed)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    costs = {k: rng.integers(1, max_cost + 1, size=n).astype(np.float64) for k in kinds}
    return Graph.from_arrays(rng.integers(1, max_bytes + 1, size=n), edges, costs, name=f"random_dag_n{n}_s{seed}")


def training_graph(
    forward: nx.DiGraph,
    *,
    bytes_attr: str = "bytes",
    cost_attr: str = "cost",
    loss_bytes: int = 4,
    loss_cost: float = 0.0,
    backward_cost_factor: float = 2.0,
    name: str | None = None,
) -> Graph:
    """Add a loss and backward nodes to a forward DAG (Checkmate's conventions).

    Forward nodes ``0..L-1`` (in a topological order), loss ``L``, and the
    backward node of forward node ``i`` at ``2L - i``.  Edges: the forward
    edges; ``i -> bwd(i)``; for each forward edge ``u -> v``: ``v -> bwd(u)``
    and ``bwd(v) -> bwd(u)``; ``last -> loss -> bwd(last)``.  Backward
    memory equals forward memory; backward cost is ``backward_cost_factor``
    times forward (missing attributes default to 1).
    """
    if forward.number_of_nodes() == 0:
        raise GraphError("the forward graph is empty")
    if not nx.is_directed_acyclic_graph(forward):
        raise GraphError("the forward graph has a cycle")
    order = list(nx.lexicographical_topological_sort(forward, key=str))
    L = len(order)
    idx = {v: i for i, v in enumerate(order)}

    def bwd(i: int) -> int:
        return 2 * L - i

    n = 2 * L + 1
    b = np.zeros(n, dtype=np.int64)
    c = np.zeros(n, dtype=np.float64)
    names = [""] * n
    for v, i in idx.items():
        d = forward.nodes[v]
        b[i] = b[bwd(i)] = int(d.get(bytes_attr, 1))
        c[i] = float(d.get(cost_attr, 1.0))
        c[bwd(i)] = backward_cost_factor * c[i]
        names[i] = str(v)
        names[bwd(i)] = f"grad_{v}"
    b[L] = loss_bytes
    c[L] = loss_cost
    names[L] = "loss"
    edges = set()
    for u, v in forward.edges():
        iu, iv = idx[u], idx[v]
        edges.add((iu, iv))
        edges.add((iv, bwd(iu)))
        edges.add((bwd(iv), bwd(iu)))
    for i in range(L):
        edges.add((i, bwd(i)))
    edges.add((L - 1, L))
    edges.add((L, bwd(L - 1)))
    phase = ["forward"] * (L + 1) + ["backward"] * L
    return Graph.from_arrays(
        b, sorted(edges), {"cost": c}, name=name or forward.graph.get("name", "training_graph"),
        names=names, phase=phase, required=[bwd(i) for i in range(L)],
    )


def _period(ops: Sequence[str], copies: int) -> tuple[int, int] | None:
    """The shortest period ``P`` (and its first start ``s``) such that
    ``ops[s : s + copies * P]`` is ``copies`` repetitions of one block."""
    n = len(ops)
    for P in range(2, n // copies + 1):
        for s in range(0, n - copies * P + 1):
            block = ops[s:s + P]
            if all(ops[s + k * P:s + (k + 1) * P] == block for k in range(1, copies)):
                return P, s
    return None


def repeat_layers(graph: Graph, n_layers: int, *, layers: int | None = None, name: str | None = None) -> Graph:
    """A deeper version of a layered training graph: its repeated block
    (a transformer layer, forward and backward) copied ``n_layers`` times.

    The forward phase must be ``prologue, layers x block, epilogue`` and the
    backward phase the same with its own block, recognised by the node op
    names (``graph.meta["op"]``, else the node names).  Each copy gets the
    median of the measured costs (and the sizes) of the original layers at
    that position, so every copy is identical; the prologue and epilogue keep
    their own figures.  An edge between layers ``i`` and ``i + k`` of the
    original is repeated for every pair of copies ``k`` apart; an edge
    between a layer and the prologue or epilogue is repeated for every copy
    when every original layer has it, else it is kept for the first or last
    copy as in the original.

    Parameters
    ----------
    graph : Graph
        A training graph with ``layers`` repeated blocks in each phase
        (e.g. ``datasets/llama_8l_b4_s512``).
    n_layers : int
        Copies of the block in the result (>= 1).
    layers : int, optional
        How many blocks ``graph`` has; default: ``graph.meta["meta"]["layers"]``
        or 8.

    Raises
    ------
    GraphError
        No repeated block found, or an edge that fits none of the patterns.

    Examples
    --------
    >>> from hybrid_remat.loaders import load_graph
    >>> g = load_graph("datasets/llama_8l_b4_s512.json.gz")    # doctest: +SKIP
    >>> repeat_layers(g, 32).n                                 # doctest: +SKIP
    4145
    """
    if n_layers < 1:
        raise GraphError("n_layers must be at least 1")
    L = int(layers or (graph.meta.get("meta") or {}).get("layers", 8))
    ops = list(graph.meta.get("op") or [s.split(":", 1)[-1] for s in graph.names])
    n = graph.n
    fwd = np.flatnonzero(graph.phase == 0)
    bwd = np.flatnonzero(graph.phase != 0)
    if fwd.size == 0 or bwd.size == 0 or fwd[-1] >= bwd[0]:
        raise GraphError(f"graph {graph.name!r} is not forward nodes followed by backward nodes")
    # where each node sits: segment (0 pro-f, 1 layer-f, 2 epi-f, 3 pro-b, 4 layer-b, 5 epi-b), layer, offset
    seg = np.empty(n, np.int64)
    lay = np.full(n, -1, np.int64)
    off = np.empty(n, np.int64)
    sizes = []
    for phase_idx, idx in enumerate((fwd, bwd)):
        found = _period([ops[i] for i in idx], L)
        if found is None:
            raise GraphError(f"graph {graph.name!r}: no block repeated {L} times in its "
                             f"{('forward', 'backward')[phase_idx]} phase")
        P, s = found
        base = 3 * phase_idx
        for j, v in enumerate(idx):
            if j < s:
                seg[v], off[v] = base, j
            elif j < s + L * P:
                k, o = divmod(j - s, P)
                # backward blocks run last layer first: number them by the layer they differentiate
                seg[v], lay[v], off[v] = base + 1, (k if phase_idx == 0 else L - 1 - k), o
            else:
                seg[v], off[v] = base + 2, j - s - L * P
        sizes.append((s, P, len(idx) - s - L * P))
    (sf, Pf, ef), (sb, Pb, eb) = sizes
    # new numbering
    starts = {}
    pos = 0
    for sg, count in ((0, sf), (1, Pf * n_layers), (2, ef), (3, sb), (4, Pb * n_layers), (5, eb)):
        starts[sg] = pos
        pos += count
    N = pos

    def new_id(sg: int, layer: int, o: int) -> int:
        if sg == 1:
            return starts[1] + layer * Pf + o
        if sg == 4:  # backward copies: layer n_layers-1 first
            return starts[4] + (n_layers - 1 - layer) * Pb + o
        return starts[sg] + o

    # node figures: pro/epi as they are; block positions take the median over the original layers
    kinds = graph.cost_kinds
    costs = {k: np.empty(N) for k in kinds}
    nbytes = np.empty(N, np.int64)
    phase = np.empty(N, np.int8)
    opn = [""] * N
    flops = np.empty(N)
    req = np.zeros(N, bool)
    groups: dict = {}
    for v in range(n):
        if lay[v] >= 0:
            groups.setdefault((int(seg[v]), int(off[v])), []).append(v)
        else:
            w = new_id(int(seg[v]), 0, int(off[v]))
            for k in kinds:
                costs[k][w] = graph.costs[k][v]
            nbytes[w], phase[w], opn[w], flops[w], req[w] = graph.bytes[v], graph.phase[v], ops[v], graph.flops[v], \
                graph.required[v]
    for (sg, o), vs in groups.items():
        vs = np.asarray(vs)
        med = {k: float(np.median(graph.costs[k][vs])) for k in kinds}
        b, f, r = int(np.median(graph.bytes[vs])), float(np.median(graph.flops[vs])), bool(graph.required[vs].any())
        for layer in range(n_layers):
            w = new_id(sg, layer, o)
            for k in kinds:
                costs[k][w] = med[k]
            nbytes[w], flops[w], req[w] = b, f, r
            phase[w], opn[w] = graph.phase[vs[0]], ops[vs[0]]
    # edges
    src, dst = graph.edge_arrays() if hasattr(graph, "edge_arrays") else _edges_of(graph)
    edges = set()
    layer_edges: dict = {}
    for u, v in zip(src.tolist(), dst.tolist()):
        lu, lv = int(lay[u]), int(lay[v])
        if lu < 0 and lv < 0:
            edges.add((new_id(int(seg[u]), 0, int(off[u])), new_id(int(seg[v]), 0, int(off[v]))))
        elif lu >= 0 and lv >= 0:
            d = lv - lu
            for layer in range(max(0, -d), min(n_layers, n_layers - d)):
                edges.add((new_id(int(seg[u]), layer, int(off[u])), new_id(int(seg[v]), layer + d, int(off[v]))))
        else:
            key = (int(seg[u]), -1 if lu >= 0 else int(off[u]), int(seg[v]), -1 if lv >= 0 else int(off[v]),
                   int(off[u]) if lu >= 0 else int(off[v]))
            layer_edges.setdefault(key, set()).add(lu if lu >= 0 else lv)
    for (su, ou, sv, ov, lo), have in layer_edges.items():
        if len(have) == L:
            targets = range(n_layers)
        else:
            targets = sorted({0 if x == 0 else (n_layers - 1 if x == L - 1 else min(x, n_layers - 1)) for x in have})
        for layer in targets:
            u = new_id(su, layer, lo) if ou < 0 else new_id(su, 0, ou)
            v = new_id(sv, layer, lo) if ov < 0 else new_id(sv, 0, ov)
            if u >= v:
                raise GraphError(f"graph {graph.name!r}: an edge between a layer and the prologue/epilogue "
                                 "does not fit the repeated pattern")
            edges.add((u, v))
    meta = {k: graph.meta[k] for k in ("transfer", "devices", "format") if k in graph.meta}
    meta["op"] = opn
    meta["meta"] = {**(graph.meta.get("meta") or {}), "layers": n_layers, "repeated_from": graph.name}
    return Graph.from_arrays(nbytes, sorted(edges), costs, name=name or f"{graph.name}_x{n_layers}",
                             names=[f"{i}:{o}" for i, o in enumerate(opn)], phase=phase, flops=flops,
                             required=np.flatnonzero(req), meta=meta)


def _edges_of(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr))
    return src, graph.succ_idx.copy()
