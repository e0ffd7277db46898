"""Find repeated blocks (transformer layers, ResNet stages) in a training graph.

A *block* is one layer's forward nodes and the backward nodes that
differentiate them.  Detection hashes each node's op name, output bytes and
in-degree (the structure and sizes; costs are compared separately, so layers
with measured, slightly different costs still share one structure), and
looks in the forward phase and in the backward phase (index order) for the
longest run that repeats with one period.  The period's alignment is the one
whose boundary carries the fewest bytes (a transformer layer boundary carries
the residual stream only).  Forward and backward blocks are paired by the
edges between them, and every block must have the same internal edges
(positions within the block) as the first.

The result (:class:`BlockStructure`) also splits the other nodes into a
*prologue* stage (forward nodes before the first block and the backward nodes
after the last, e.g. the embedding and its gradient) and an *epilogue* stage
(forward nodes after the last block and backward nodes before the first,
e.g. the head, the loss and their gradients), so that the graph reads as a
chain of stages ``prologue, block_0, ..., block_{L-1}, epilogue`` whose
backward parts run in reverse order.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> fw = nx.DiGraph()
>>> for i in range(12):        # a stem, 5 blocks of (wide, narrow), a head
...     fw.add_node(i, bytes=4 if i % 2 else 1, cost=2.0 if i % 2 else 1.0)
...     if i:
...         fw.add_edge(i - 1, i)
>>> bs = detect_blocks(training_graph(fw))
>>> bs.n_blocks, bs.fwd.shape[1], bs.bwd.shape[1]
(5, 2, 2)
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BlockStructure", "detect_blocks", "node_signatures"]


@dataclass
class BlockStructure:
    """Repeated blocks of a training graph.

    Attributes
    ----------
    fwd : ndarray (L, Pf)
        ``fwd[k, o]``: the node at position ``o`` of block ``k``'s forward part.
    bwd : ndarray (L, Pb)
        The backward part of block ``k`` (the nodes that differentiate it).
    prologue, epilogue : (ndarray, ndarray)
        Forward and backward nodes of the stages before and after the blocks.
    stage : ndarray (n,)
        Per node: -1 prologue, ``k`` block ``k``, ``L`` epilogue.
    same_costs : bool
        Every block has the same costs as the first (one exact solve serves all).
    """

    fwd: np.ndarray
    bwd: np.ndarray
    prologue: tuple
    epilogue: tuple
    stage: np.ndarray = field(repr=False)
    same_costs: bool = True

    @property
    def n_blocks(self) -> int:
        return int(self.fwd.shape[0])

    def block_nodes(self, k: int) -> np.ndarray:
        """Forward then backward nodes of block ``k``."""
        return np.concatenate([self.fwd[k], self.bwd[k]])

    def stages(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(fwd, bwd)]`` of the prologue, every block and the epilogue, in forward order."""
        return [self.prologue] + [(self.fwd[k], self.bwd[k]) for k in range(self.n_blocks)] + [self.epilogue]


def node_signatures(graph) -> np.ndarray:
    """An int64 hash per node of (op name, output bytes, in-degree).

    The op name is ``graph.meta["op"]``, else the part after ``:`` of names
    written ``"index:op"``; graphs with neither (names are identifiers) use
    the costs rounded to 4 digits instead."""
    ops = graph.meta.get("op")
    if ops is None and graph.n and all(":" in s for s in graph.names):
        ops = [s.split(":", 1)[-1] for s in graph.names]
    if ops is None:
        c = graph.costs[graph.cost_kinds[0]] if graph.cost_kinds else np.zeros(graph.n)
        ops = [f"{x:.4g}" for x in c.tolist()]
    indeg = np.diff(graph.pred_ptr)
    return np.array([zlib.crc32(f"{o}|{b}|{d}".encode()) for o, b, d in zip(ops, graph.bytes.tolist(),
                                                                            indeg.tolist())], dtype=np.int64)


def _longest_run(eq: np.ndarray) -> tuple[int, int]:
    """Start and length of the longest run of ``True`` in ``eq``."""
    if not eq.any():
        return 0, 0
    x = np.concatenate([[0], eq.astype(np.int8), [0]])
    d = np.diff(x)
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    i = int(np.argmax(ends - starts))
    return int(starts[i]), int(ends[i] - starts[i])


def _periods(sig: np.ndarray, min_copies: int, max_candidates: int = 24) -> list[tuple[int, int, int]]:
    """Candidate ``(P, start, length)``: ``sig[start:start+length]`` has period ``P``."""
    n = sig.size
    order = np.argsort(sig, kind="stable")
    s = sig[order]
    same = s[1:] == s[:-1]
    gaps = (order[1:] - order[:-1])[same]
    gaps = gaps[gaps > 0]
    if gaps.size == 0:
        return []
    vals, counts = np.unique(gaps, return_counts=True)
    cand = vals[np.argsort(-counts, kind="stable")][:max_candidates]
    out = []
    for P in sorted(int(p) for p in cand):
        if P * min_copies > n:
            continue
        start, run = _longest_run(sig[:-P] == sig[P:])
        if run + P >= min_copies * P:
            out.append((P, start, run + P))
    return out


def _phase_edges(graph, nodes: np.ndarray) -> tuple:
    """``(src position, dst position, src node)`` of the edges between nodes
    of one phase (positions in ``nodes``)."""
    pos = np.full(graph.n, -1, dtype=np.int64)
    pos[nodes] = np.arange(nodes.size)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr))
    ps, pd = pos[src], pos[graph.succ_idx]
    keep = (ps >= 0) & (pd >= 0)
    return ps[keep], pd[keep], src[keep]


def _crossing_bytes(graph, edges: tuple, P: int, offset: int, copies: int) -> int:
    """Bytes of the values that cross a block boundary when the phase's
    nodes ``offset:`` are cut every ``P`` positions (``edges``:
    :func:`_phase_edges`)."""
    ps, pd, src = edges
    lo, hi = offset, offset + copies * P
    inside = (ps >= lo) & (ps < hi) & (pd >= lo) & (pd < hi)
    cross = (ps[inside] - lo) // P != (pd[inside] - lo) // P
    return int(graph.bytes[np.unique(src[inside][cross])].sum())


def _blocks_of_phase(graph, nodes: np.ndarray, sig: np.ndarray, min_copies: int) -> np.ndarray | None:
    """``(copies, P)`` node ids of the best repeated block of one phase: the
    most nodes covered, then the fewest boundary bytes (within 1 %: the
    earliest alignment)."""
    options = []
    edges = _phase_edges(graph, nodes)
    for P, start, length in _periods(sig[nodes], min_copies):
        for offset in range(start, start + min(P, length - min_copies * P + 1)):
            copies = (start + length - offset) // P
            if copies < min_copies:
                break
            options.append((copies * P, _crossing_bytes(graph, edges, P, offset, copies), P, offset, copies))
    if not options:
        return None
    cover = max(o[0] for o in options)
    options = [o for o in options if o[0] == cover]
    least = min(o[1] for o in options)
    _, _, P, offset, copies = min((o for o in options if o[1] <= 1.01 * least), key=lambda o: (o[3], o[2]))
    return nodes[offset:offset + copies * P].reshape(copies, P)


def _edges(graph) -> tuple:
    """``(src, dst)`` of every edge."""
    return np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr)), graph.succ_idx.astype(np.int64)


def _same_internal_edges(graph, blocks: np.ndarray) -> bool:
    """Whether every row of ``blocks`` (``(copies, m)`` node ids, matched by
    position) has the same edges inside it."""
    L, m = blocks.shape
    blk = np.full(graph.n, -1, dtype=np.int64)
    loc = np.full(graph.n, -1, dtype=np.int64)
    blk[blocks] = np.arange(L)[:, None]
    loc[blocks] = np.arange(m)[None, :]
    src, dst = _edges(graph)
    inside = (blk[src] >= 0) & (blk[src] == blk[dst])
    b, key = blk[src[inside]], loc[src[inside]] * m + loc[dst[inside]]
    order = np.lexsort((key, b))
    counts = np.bincount(b, minlength=L)
    if np.any(counts != counts[0]):
        return False
    key = key[order].reshape(L, int(counts[0]))
    return bool(np.all(key == key[0]))


def _pairing(graph, F: np.ndarray, Bk: np.ndarray) -> list:
    """For each forward block the backward block that reads most from it
    (``-1``: none reads from it)."""
    owner = np.full(graph.n, -1, dtype=np.int64)
    owner[Bk] = np.arange(Bk.shape[0])[:, None]
    fblk = np.full(graph.n, -1, dtype=np.int64)
    fblk[F] = np.arange(F.shape[0])[:, None]
    src, dst = _edges(graph)
    both = (fblk[src] >= 0) & (owner[dst] >= 0)
    counts = np.bincount(fblk[src[both]] * Bk.shape[0] + owner[dst[both]],
                         minlength=F.shape[0] * Bk.shape[0]).reshape(F.shape[0], Bk.shape[0])
    return [int(row.argmax()) if row.any() else -1 for row in counts]


def detect_blocks(graph, *, min_copies: int = 2) -> BlockStructure | None:
    """The repeated blocks of a training graph, or ``None`` (no backward
    phase, no block repeated ``min_copies`` times, or blocks whose forward
    and backward parts do not pair up or whose internal edges differ).

    Parameters
    ----------
    graph : Graph
    min_copies : int
        Fewest repetitions that count as repeated structure.
    """
    fwd_nodes = np.flatnonzero(graph.phase == 0)
    bwd_nodes = np.flatnonzero(graph.phase != 0)
    if fwd_nodes.size == 0 or bwd_nodes.size == 0 or fwd_nodes[-1] > bwd_nodes[0]:
        return None
    sig = node_signatures(graph)
    F = _blocks_of_phase(graph, fwd_nodes, sig, min_copies)
    Bk = _blocks_of_phase(graph, bwd_nodes, sig, min_copies)
    if F is None or Bk is None:
        return None
    # pair each forward block with the backward block that reads most from it
    pair = _pairing(graph, F, Bk)
    if F.shape[0] != Bk.shape[0] or sorted(pair) != list(range(F.shape[0])):
        return None
    Bk = Bk[pair]
    if not _same_internal_edges(graph, np.concatenate([F, Bk], axis=1)):
        return None
    L = F.shape[0]
    stage = np.full(graph.n, -1, dtype=np.int64)
    for k in range(L):
        stage[F[k]] = k
        stage[Bk[k]] = k
    first_b = int(Bk.min())
    last_b = int(Bk.max())
    epi_f = fwd_nodes[fwd_nodes > F.max()]
    epi_b = bwd_nodes[bwd_nodes < first_b]
    pro_f = fwd_nodes[fwd_nodes < F.min()]
    pro_b = bwd_nodes[bwd_nodes > last_b]
    if pro_f.size + epi_f.size + pro_b.size + epi_b.size + F.size + Bk.size != graph.n:
        return None  # nodes between blocks that belong to no stage
    stage[epi_f] = L
    stage[epi_b] = L
    cost = np.stack([graph.costs[k] for k in graph.cost_kinds])
    same = bool(all(np.array_equal(cost[:, F[k]], cost[:, F[0]]) and np.array_equal(cost[:, Bk[k]], cost[:, Bk[0]])
                    for k in range(1, L)))
    return BlockStructure(F, Bk, (pro_f, pro_b), (epi_f, epi_b), stage, same)
