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

__all__ = ["chain", "random_layered", "training_graph", "random_dag"]


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

    * one source (node 0) and one sink (node ``n-1``) that collects every
      node without a consumer;
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
    has_out = {u for u, _ in edges}
    for x in range(n - 1):
        if x not in has_out:
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
