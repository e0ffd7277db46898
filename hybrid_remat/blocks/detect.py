"""Find repeated blocks (transformer layers, ResNet stages) in a training graph.

A *block* is one layer's forward nodes and the backward nodes that
differentiate them.  Detection hashes each node's op name (or, for graphs
with node names only, the offsets to its inputs of its phase), output bytes
and phase (:func:`node_signatures`: the structure and sizes; not in-degree,
which differs at the last layer, whose gradient reads the head's; not the
costs, compared separately, so layers with measured, slightly different
costs still share one structure).  It looks in the forward phase and in the
backward phase (index order) for the longest run that repeats with one
period, then, recursively, for runs before and after it (:func:`detect_runs`:
ResNet stages of different widths, U-Net levels, each a run of its own).
The period's alignment is the one whose boundary carries the fewest bytes (a
transformer layer boundary carries the residual stream only).  Forward and
backward blocks are paired by the edges between them; a run keeps the
longest stretch of blocks paired in reverse order whose nodes and internal
edges (positions within the block) equal the middle block's: boundary
blocks that differ (the first and last layer next to the embedding and the
head) are left to the stages around, and why is kept in
:attr:`Structure.notes` (``info`` prints it).

:func:`detect_blocks` returns the run with the most nodes as a
:class:`BlockStructure`, which also splits the other nodes into a
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

from dataclasses import dataclass, field

import numpy as np

__all__ = ["BlockStructure", "Run", "Structure", "STOPPED", "detect_blocks", "detect_runs", "node_signatures",
           "STOPPED_KEY", "missing_structure"]

#: the note of a detection that its limits stopped (:attr:`Structure.stopped`)
STOPPED = "structure detection stopped at the limit"
#: the key a graph's ``derived`` cache holds while the stand-ins of a stopped detection last
#: (:func:`~hybrid_remat.segments.chain.derive_structure`)
STOPPED_KEY = "structure_stopped"


def missing_structure(graph, why: str) -> str:
    """Why ``graph`` has no structure of the kind a component needs:
    :data:`STOPPED` while a stopped detection's stand-ins last (the solve did
    not look), else ``why`` (it looked and found none).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> missing_structure(chain(4), "no repeated blocks")
    'no repeated blocks'
    """
    return STOPPED if graph.__dict__.get("_derived", {}).get(STOPPED_KEY) else why


class _Stopped(Exception):
    """The limits of :func:`detect_runs` expired (caught there)."""


def _tick(limits) -> None:
    """Raise :class:`_Stopped` once ``limits`` (a :class:`~hybrid_remat.limits.Limits` or ``None``) expire."""
    if limits is not None and limits.expired():
        raise _Stopped


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

    def kind_of(self, s: int):
        """Stages of one kind share a menu and bound staircases: every block is of kind 0; the
        prologue and epilogue are of their own (``None``)."""
        return 0 if 0 <= s < self.n_blocks else None

    def stage_nodes(self, s: int) -> np.ndarray:
        """The nodes of block ``s`` by position (forward, then backward)."""
        return self.block_nodes(s)

    def positioned(self, s: int) -> int:
        """How many of :meth:`stage_nodes` match the other blocks' by position (all)."""
        return int(self.fwd.shape[1] + self.bwd.shape[1])

    def same_costs_of(self, kind) -> bool:
        return self.same_costs

    def count_of(self, kind) -> int:
        return self.n_blocks

    def stages(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(fwd, bwd)]`` of the prologue, every block and the epilogue, in forward order."""
        return [self.prologue] + [(self.fwd[k], self.bwd[k]) for k in range(self.n_blocks)] + [self.epilogue]


def node_signatures(graph, *, shape: bool = True) -> np.ndarray:
    """An int64 id per node: equal ids for equal op name, output bytes and phase.

    The op name is ``graph.meta["op"]``, else the part after ``:`` of names
    written ``"index:op"`` (when nine in ten are); graphs with neither (names are identifiers) use
    the offsets to the node's inputs of its own phase instead (``v - u``,
    the shape of the layer; not the costs, which a profiler measures with
    noise).  In-degree is not hashed: the node of the last layer that reads
    the head's gradient instead of a next layer's still matches its peers
    (the internal edges of whole blocks are compared afterwards).
    ``shape=False``: without the offsets (op name, or nothing, with bytes
    and phase), to compare whole blocks, where the last layer's gradient
    reads the loss instead of a next layer's."""
    n = graph.n
    ops = graph.meta.get("op")
    if ops is None and n and sum(":" in s for s in graph.names) >= 0.9 * n:
        ops = [s.split(":", 1)[-1] for s in graph.names]     # the loss, say, may be named without an op
    cols = [graph.bytes.astype(np.int64), graph.phase.astype(np.int64)]
    if ops is not None:
        cols.append(_op_codes(ops, n))
    elif shape:
        cols += list(_input_offsets(graph).T)
    return _row_ids(cols)


def _op_codes(ops, n: int) -> np.ndarray:
    """Per node the index of its op name in order of first appearance (the
    names' first appearances, then one C-level look-up per node: 0.01 s at
    100k nodes where a Python loop of ``setdefault`` took 0.1 s and a sort
    of the strings 0.05 s)."""
    codes = {o: i for i, o in enumerate(dict.fromkeys(ops))}
    return np.fromiter(map(codes.__getitem__, ops), dtype=np.int64, count=n)


def _row_ids(cols: list) -> np.ndarray:
    """One int64 id per row of the columns ``cols``: equal rows, equal ids."""
    n = cols[0].size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort(cols)
    new = np.zeros(n, dtype=bool)
    for c in cols:
        cs = c[order]
        new[1:] |= cs[1:] != cs[:-1]
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.cumsum(new)
    return ids


def _input_offsets(graph, last: int = 8) -> np.ndarray:
    """Per node, the offsets ``v - u`` to its ``last`` (8: rows of 64 bytes) highest-numbered inputs
    ``u`` of its own phase (in increasing ``u``), padded: an ``(n, last)``
    array, equal rows for equal offset lists."""
    n = graph.n
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.pred_ptr))
    src = graph.pred_idx.astype(np.int64)
    same = graph.phase[src] == graph.phase[dst]
    src, dst = src[same], dst[same]
    order = np.lexsort((src, dst))
    src, dst = src[order], dst[order]
    end = np.searchsorted(dst, dst, side="right")          # one past each node's last input
    rank = end - 1 - np.arange(dst.size)                    # 0 for the highest-numbered input
    keep = rank < last
    out = np.full((n, last), np.iinfo(np.int64).min, dtype=np.int64)
    out[dst[keep], last - 1 - rank[keep]] = dst[keep] - src[keep]
    return out


def _longest_run(eq: np.ndarray) -> tuple[int, int]:
    """Start and length of the longest run of ``True`` in ``eq``."""
    if not eq.any():
        return 0, 0
    x = np.concatenate([[0], eq.astype(np.int8), [0]])
    d = np.diff(x)
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    i = int(np.argmax(ends - starts))
    return int(starts[i]), int(ends[i] - starts[i])


def _periods(sig: np.ndarray, min_copies: int, max_candidates: int = 24, limits=None) -> list[tuple[int, int, int]]:
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
        _tick(limits)
        start, run = _longest_run(sig[:-P] == sig[P:])
        if run + P >= min_copies * P:
            out.append((P, start, run + P))
    return out


def _phase_edges(graph, nodes: np.ndarray) -> tuple:
    """``(src position, dst position, src node)`` of the edges between nodes
    of one phase (positions in ``nodes``), sorted by source position."""
    pos = np.full(graph.n, -1, dtype=np.int64)
    pos[nodes] = np.arange(nodes.size)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr))
    ps, pd = pos[src], pos[graph.succ_idx]
    keep = (ps >= 0) & (pd >= 0)
    order = np.argsort(ps[keep], kind="stable")
    return ps[keep][order], pd[keep][order], src[keep][order]


def _edges_within(edges: tuple, lo: int, hi: int) -> tuple:
    """The edges of :func:`_phase_edges` between positions ``lo:hi``, as
    positions in that stretch (what :func:`_phase_edges` gives for
    ``nodes[lo:hi]``, without a pass over the whole graph)."""
    ps, pd, src = edges
    i, j = np.searchsorted(ps, lo), np.searchsorted(ps, hi)
    ps, pd, src = ps[i:j], pd[i:j], src[i:j]
    keep = (pd >= lo) & (pd < hi)
    return ps[keep] - lo, pd[keep] - lo, src[keep]


def _crossing_bytes(graph, edges: tuple, P: int, offset: int, copies: int) -> int:
    """Bytes of the values that cross a block boundary when the phase's
    nodes ``offset:`` are cut every ``P`` positions (``edges``:
    :func:`_phase_edges`)."""
    ps, pd, src = edges
    lo, hi = offset, offset + copies * P
    inside = (ps >= lo) & (ps < hi) & (pd >= lo) & (pd < hi)
    cross = (ps[inside] - lo) // P != (pd[inside] - lo) // P
    return int(graph.bytes[np.unique(src[inside][cross])].sum())


def _blocks_of_phase(graph, nodes: np.ndarray, sig: np.ndarray, min_copies: int, edges=None,
                     limits=None) -> np.ndarray | None:
    """``(copies, P)`` node ids of the best repeated block of one phase: the
    most nodes covered, then the fewest boundary bytes (within 1 %: the
    earliest alignment)."""
    options = []
    edges = _phase_edges(graph, nodes) if edges is None else edges
    for P, start, length in _periods(sig[nodes], min_copies, limits=limits):
        for offset in range(start, start + min(P, length - min_copies * P + 1)):
            copies = (start + length - offset) // P
            if copies < min_copies:
                break
            _tick(limits)
            options.append((copies * P, _crossing_bytes(graph, edges, P, offset, copies), P, offset, copies))
    if not options:
        return None
    cover = max(o[0] for o in options)
    options = [o for o in options if o[0] == cover]
    least = min(o[1] for o in options)
    _, _, P, offset, copies = min((o for o in options if o[1] <= 1.01 * least), key=lambda o: (o[3], o[2]))
    return nodes[offset:offset + copies * P].reshape(copies, P)


def _runs_of_phase(graph, nodes: np.ndarray, sig: np.ndarray, min_copies: int, depth: int = 0,
                   edges: tuple | None = None, at: int = 0, limits=None) -> list:
    """Every run of repetition of one phase: the best run
    (:func:`_blocks_of_phase`), then, recursively, the runs of the stretches
    before and after it (ResNet stages of different widths, U-Net levels);
    in node order.  ``edges``: :func:`_phase_edges` of the whole phase, of
    which ``nodes`` is the stretch from position ``at``."""
    if edges is None:
        edges, at = _phase_edges(graph, nodes), 0
        _tick(limits)
    if nodes.size < 2 * min_copies or depth > 12:
        return []
    _tick(limits)
    F = _blocks_of_phase(graph, nodes, sig, min_copies, _edges_within(edges, at, at + nodes.size), limits)
    if F is None or F.shape[1] < 2:       # one node repeated is no layer
        return []
    lo = int(np.searchsorted(nodes, F.min()))
    hi = int(np.searchsorted(nodes, F.max())) + 1
    return (_runs_of_phase(graph, nodes[:lo], sig, min_copies, depth + 1, edges, at, limits) + [F]
            + _runs_of_phase(graph, nodes[hi:], sig, min_copies, depth + 1, edges, at + hi, limits))


def _edges(graph) -> tuple:
    """``(src, dst)`` of every edge."""
    return np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr)), graph.succ_idx.astype(np.int64)


def _internal_keys(graph, blocks: np.ndarray, sig: np.ndarray) -> list:
    """Per row of ``blocks`` (``(copies, m)`` node ids, matched by position)
    a hash of its nodes' signatures and the edges inside it (equal rows: the
    same nodes and internal edges)."""
    L, m = blocks.shape
    blk = np.full(graph.n, -1, dtype=np.int64)
    loc = np.full(graph.n, -1, dtype=np.int64)
    blk[blocks] = np.arange(L)[:, None]
    loc[blocks] = np.arange(m)[None, :]
    src, dst = _edges(graph)
    inside = (blk[src] >= 0) & (blk[src] == blk[dst])
    b, key = blk[src[inside]], loc[src[inside]] * m + loc[dst[inside]]
    order = np.lexsort((key, b))
    b, key = b[order], key[order]
    cut = np.searchsorted(b, np.arange(L + 1))
    return [hash(key[cut[k]:cut[k + 1]].tobytes() + sig[blocks[k]].tobytes()) for k in range(L)]


@dataclass
class Run:
    """One run of repetition: ``fwd[k]``/``bwd[k]`` are block ``k``'s
    forward and backward nodes, matched by position (see
    :class:`BlockStructure`)."""

    fwd: np.ndarray
    bwd: np.ndarray
    same_costs: bool = True

    @property
    def n_blocks(self) -> int:
        return int(self.fwd.shape[0])

    @property
    def n_nodes(self) -> int:
        return int(self.fwd.size + self.bwd.size)


@dataclass
class Structure:
    """What :func:`detect_runs` found: the runs of repetition in forward
    order (possibly none), and ``notes``, what it tried and why something
    was left out (for ``info``)."""

    runs: list
    notes: list = field(default_factory=list)
    #: its limits stopped it before the end (``runs`` is empty, ``notes`` ends with :data:`STOPPED`)
    stopped: bool = False

    @property
    def why_not(self) -> str:
        return "" if self.runs else (self.notes[-1] if self.notes else "no repeated blocks")


def _same_costs(graph, F: np.ndarray, Bk: np.ndarray) -> bool:
    """Every block of the run costs what its first block does, node by node, on every device."""
    cost = np.stack([graph.costs[k] for k in graph.cost_kinds]) if graph.cost_kinds else np.zeros((1, graph.n))
    return bool((cost[:, F] == cost[:, F[:1]]).all() and (cost[:, Bk] == cost[:, Bk[:1]]).all())


def _paired_runs(graph, fwd_runs: list, bwd_runs: list, sig: np.ndarray, min_copies: int, notes: list,
                 limits=None) -> list:
    """Forward runs paired with backward ones: for each forward block the
    backward block (of any backward run) that reads most from it; a run keeps
    its longest stretch of blocks paired with consecutive rows of one
    backward run in reverse order whose forward-plus-backward internal edges
    equal the middle block's (blocks that differ, like the first and last
    layer next to the embedding and the head, are left to the stages around)."""
    if not bwd_runs:
        return []
    rows = [(r, i) for r, Bk in enumerate(bwd_runs) for i in range(Bk.shape[0])]
    owner = np.full(graph.n, -1, dtype=np.int64)
    for j, (r, i) in enumerate(rows):
        owner[bwd_runs[r][i]] = j
    src, dst = _edges(graph)
    plain = node_signatures(graph, shape=False)
    _tick(limits)
    out = []
    for F in fwd_runs:
        _tick(limits)
        fblk = np.full(graph.n, -1, dtype=np.int64)
        fblk[F] = np.arange(F.shape[0])[:, None]
        both = (fblk[src] >= 0) & (owner[dst] >= 0)
        counts = np.bincount(fblk[src[both]] * len(rows) + owner[dst[both]],
                             minlength=F.shape[0] * len(rows)).reshape(F.shape[0], len(rows))
        best_row, has = counts.argmax(axis=1), counts.max(axis=1, initial=0) > 0
        _tick(limits)
        pair = [rows[int(j)] if h else (-1, -1) for j, h in zip(best_row.tolist(), has.tolist())]
        best = (0, 0)
        k = 0
        while k < len(pair):         # longest stretch paired with consecutive backward rows, reversed
            j = k
            while (j + 1 < len(pair) and pair[j][0] >= 0 and pair[j + 1][0] == pair[j][0]
                   and pair[j + 1][1] == pair[j][1] - 1):
                j += 1
            if pair[k][0] >= 0 and j + 1 - k > best[1] - best[0]:
                best = (k, j + 1)
            k = j + 1
        lo, hi = best
        if hi - lo < min_copies:
            notes.append(f"a forward run of {F.shape[0]} blocks of {F.shape[1]} nodes: its backward parts do not "
                         "pair up (no backward blocks read from it in reverse order)")
            continue
        r = pair[lo][0]
        Fk = F[lo:hi]
        Bk = bwd_runs[r][[pair[k][1] for k in range(lo, hi)]]
        _tick(limits)
        keys = _internal_keys(graph, np.concatenate([Fk, Bk], axis=1), plain)
        mid = keys[len(keys) // 2]
        a = b = len(keys) // 2
        while a > 0 and keys[a - 1] == mid:
            a -= 1
        while b + 1 < len(keys) and keys[b + 1] == mid:
            b += 1
        if b + 1 - a < min_copies:
            notes.append(f"a run of {hi - lo} blocks of {F.shape[1]}+{Bk.shape[1]} nodes: internal edges differ")
            continue
        if (lo, hi) != (0, F.shape[0]) or (a, b + 1) != (0, len(keys)):
            notes.append(f"{F.shape[0] - (b + 1 - a)} of {F.shape[0]} blocks of a run differ from the others "
                         "(boundary blocks): left to the stages around")
        Fk, Bk = Fk[a:b + 1], Bk[a:b + 1]
        out.append(Run(Fk, Bk, _same_costs(graph, Fk, Bk)))
    return out


def detect_runs(graph, *, min_copies: int = 2, limits=None) -> Structure:
    """Every run of repeated blocks of a training graph (:class:`Structure`):
    runs of each phase by periods of the node signatures
    (:func:`node_signatures`), paired forward-to-backward, boundary blocks
    that differ left out (:func:`_paired_runs`); ``runs`` is empty, with the
    reason in ``notes``, when nothing repeats.

    ``limits`` (a :class:`~hybrid_remat.limits.Limits`): checked between the
    steps (the longest about 0.05 s at 100k nodes); once they expire it
    returns at once a structure with no runs, :attr:`Structure.stopped` set
    and :data:`STOPPED` as its last note (a detection that finishes finds
    what it finds without limits).

    Examples
    --------
    >>> import threading
    >>> from hybrid_remat.families import decoder_checkmate
    >>> from hybrid_remat.limits import Limits
    >>> g = decoder_checkmate(layers=6)
    >>> len(detect_runs(g).runs), detect_runs(g).stopped
    (1, False)
    >>> flag = threading.Event(); flag.set()          # limits already spent
    >>> st = detect_runs(g, limits=Limits(stop=flag))
    >>> st.runs, st.stopped, st.why_not
    ([], True, 'structure detection stopped at the limit')
    """
    try:
        return _detect_runs(graph, min_copies, limits)
    except _Stopped:
        return Structure([], [STOPPED], stopped=True)


def _detect_runs(graph, min_copies: int, limits) -> Structure:
    notes: list = []
    _tick(limits)
    fwd_nodes = np.flatnonzero(graph.phase == 0)
    bwd_nodes = np.flatnonzero(graph.phase != 0)
    if fwd_nodes.size == 0 or bwd_nodes.size == 0:
        return Structure([], ["no backward phase (not a training graph)"])
    if fwd_nodes[-1] > bwd_nodes[0]:
        return Structure([], ["forward and backward nodes interleave in the node order"])
    sig = node_signatures(graph)
    _tick(limits)
    fwd_runs = _runs_of_phase(graph, fwd_nodes, sig, min_copies, limits=limits)
    bwd_runs = _runs_of_phase(graph, bwd_nodes, sig, min_copies, limits=limits)
    if not fwd_runs or not bwd_runs:
        notes.append(f"no block repeated {min_copies} times in the "
                     + ("forward" if not fwd_runs else "backward") + " phase")
        return Structure([], notes)
    runs = _paired_runs(graph, fwd_runs, bwd_runs, sig, min_copies, notes, limits)
    runs = [r for r in runs if _contiguous(graph, r)] if runs else runs
    if not runs and not notes:
        notes.append("no run of blocks pairs its forward and backward parts")
    _tick(limits)
    return Structure(sorted(runs, key=lambda r: int(r.fwd[0, 0])), notes)


def _contiguous(graph, run: Run) -> bool:
    """The run's forward nodes, and its backward nodes, fill one stretch of the node order each."""
    f, b = np.sort(run.fwd.ravel()), np.sort(run.bwd.ravel())
    return bool(f[-1] - f[0] + 1 == f.size and b[-1] - b[0] + 1 == b.size)


def detect_blocks(graph, *, min_copies: int = 2) -> BlockStructure | None:
    """The main run of repeated blocks of a training graph (the run with the
    most nodes, :func:`detect_runs`), with every other node in the prologue
    or the epilogue; ``None`` when nothing repeats.

    Parameters
    ----------
    graph : Graph
    min_copies : int
        Fewest repetitions that count as repeated structure.
    """
    runs = graph.derived("runs", detect_runs) if min_copies == 2 else detect_runs(graph, min_copies=min_copies)
    return graph_blocks(graph, runs)


def graph_blocks(graph, structure: Structure) -> BlockStructure | None:
    """The :class:`BlockStructure` of ``structure``'s main run (``None``: no run)."""
    if not structure.runs:
        return None
    run = max(structure.runs, key=lambda r: r.n_nodes)
    F, Bk = run.fwd, run.bwd
    fwd_nodes = np.flatnonzero(graph.phase == 0)
    bwd_nodes = np.flatnonzero(graph.phase != 0)
    L = F.shape[0]
    stage = np.full(graph.n, -1, dtype=np.int64)
    stage[F] = np.arange(L)[:, None]
    stage[Bk] = np.arange(L)[:, None]
    epi_f = fwd_nodes[fwd_nodes > F.max()]
    epi_b = bwd_nodes[bwd_nodes < Bk.min()]
    pro_f = fwd_nodes[fwd_nodes < F.min()]
    pro_b = bwd_nodes[bwd_nodes > Bk.max()]
    stage[epi_f] = L
    stage[epi_b] = L
    return BlockStructure(F, Bk, (pro_f, pro_b), (epi_f, epi_b), stage, run.same_costs)
