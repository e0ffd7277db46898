"""A training graph as a chain of segments: every run of repeated blocks
(:func:`~hybrid_remat.blocks.detect.detect_runs`) gives one segment per
block, all of one *kind* (they share a menu), and the forward stretches
between runs are cut where few bytes cross into segments of their own.

Segment ``k`` is a stretch of the forward order with the backward nodes
that differentiate it.  A backward node outside the runs goes to the
earliest stage among its inputs' (a backward node reads the forward
values of its own segment and the gradients of later ones); one with no
assigned input to the last segment (the loss's seed).  Values a segment's
forward part passes to a later segment's forward part cross a *boundary*;
the cuts are chosen where the bytes crossing are least, near a target
length.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import random_layered, training_graph
>>> fw = nx.path_graph(80, create_using=nx.DiGraph)        # 40 blocks of (wide, narrow)
>>> nx.set_node_attributes(fw, {v: 1 + 3 * (v % 2) for v in fw}, "bytes")
>>> segment_chain(training_graph(fw)).describe()["runs"]   # merged two at a time: 4 forward nodes each
[{'blocks': 19, 'nodes_per_block': 8, 'same_costs': True}]
>>> g = training_graph(random_layered(60, seed=1).to_networkx(), cost_attr="cost_cost")
>>> ch = segment_chain(g)                                          # no repetition: segments
>>> ch.n_stages, ch.describe()["segments"], int((ch.stage < 0).sum()), ch.notes
(8, 8, 0, ['no block repeated 2 times in the forward phase'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ..blocks.detect import STOPPED, STOPPED_KEY, Structure, detect_runs
from ..limits import now

__all__ = ["SegmentChain", "segment_chain", "crossing_bytes", "derive_structure", "forget_stopped",
           "STRUCTURE_KEYS"]

#: what :func:`derive_structure` keeps with a graph (:meth:`~hybrid_remat.graph.Graph.derived`): every
#: component that reads the structure asks for one of these
STRUCTURE_KEYS = ("runs", "blocks", "segment_chain")
#: seconds per node and edge that :func:`derive_structure` needs at least (0.6-1.5 us measured at 100k nodes
#: on an idle core): with a shorter limit it does not start
DETECT_S_PER_ITEM = 5e-7


@dataclass
class SegmentChain:
    """Stages in forward order.

    Attributes
    ----------
    fwd, bwd : list of ndarray
        Per stage its forward and backward nodes (blocks of a run: matched by
        position, like :class:`~hybrid_remat.blocks.detect.BlockStructure`).
    kind : ndarray (S,)
        Per stage its kind: stages of one run share a kind (and a menu);
        ``-1`` a segment of its own.
    stage : ndarray (n,)
        The stage of every node.
    runs : list of (first, count, same_costs)
        The runs of repeated blocks, as stage ranges.
    notes : list of str
        What detection found and why not.
    n_bwd_block : list of int
        Per stage the backward nodes matched by position within its run
        (the first ones of ``bwd[s]``).
    """

    fwd: list
    bwd: list
    kind: np.ndarray
    stage: np.ndarray = field(repr=False)
    runs: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    n_bwd_block: list = field(default_factory=list)

    @property
    def n_stages(self) -> int:
        return len(self.fwd)

    def kind_of(self, s: int):
        """The kind of stage ``s`` (``None``: a segment of its own)."""
        k = int(self.kind[s])
        return None if k < 0 else k

    def stage_nodes(self, s: int) -> np.ndarray:
        """Forward then backward nodes of stage ``s`` (by position within a run)."""
        return np.concatenate([self.fwd[s], self.bwd[s]])

    def positioned(self, s: int) -> int:
        """How many of :meth:`stage_nodes` match the other blocks of the run by
        position (a block's own nodes; backward nodes assigned to it later
        come after them and match nothing)."""
        return int(self.fwd[s].size + self.n_bwd_block[s])

    def same_costs_of(self, kind) -> bool:
        return bool(self.runs[kind][2])

    def count_of(self, kind) -> int:
        return int(self.runs[kind][1])

    def describe(self) -> dict:
        """Counts for reports: stages, runs (blocks and nodes per block) and
        segments of their own."""
        return {"stages": self.n_stages, "segments": int((self.kind < 0).sum()),
                "runs": [{"blocks": c, "nodes_per_block": int(self.fwd[f].size + self.bwd[f].size),
                          "same_costs": bool(same)} for f, c, same in self.runs],
                "largest_segment": max((int(self.fwd[s].size) for s in range(self.n_stages)), default=0)}


def crossing_bytes(graph, fwd_nodes: np.ndarray) -> np.ndarray:
    """``cross[c]``: bytes of the forward values computed before position
    ``c`` of ``fwd_nodes`` (the forward order) and read by a forward node at
    ``c`` or later (``c = 0..len``)."""
    m = fwd_nodes.size
    pos = np.full(graph.n, -1, dtype=np.int64)
    pos[fwd_nodes] = np.arange(m)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.succ_ptr))
    dst = graph.succ_idx.astype(np.int64)
    ok = (pos[src] >= 0) & (pos[dst] >= 0)
    last = np.full(graph.n, -1, dtype=np.int64)
    np.maximum.at(last, src[ok], pos[dst[ok]])
    has = last[fwd_nodes] > np.arange(m)
    diff = np.zeros(m + 2, dtype=np.int64)
    b = graph.bytes[fwd_nodes].astype(np.int64)
    np.add.at(diff, np.arange(m)[has] + 1, b[has])
    np.add.at(diff, last[fwd_nodes][has] + 1, -b[has])
    return np.cumsum(diff)[:m + 1]


@njit(cache=True)
def _assign_backward(stage, bwd_nodes, pred_ptr, pred_idx, S):
    """In place: each backward node without a stage takes the earliest stage
    among its inputs' (in node order, so gradients assigned before count),
    ``S - 1`` when none has one."""
    for i in range(bwd_nodes.shape[0]):
        v = bwd_nodes[i]
        if stage[v] >= 0:
            continue
        best = -1
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            q = stage[pred_idx[j]]
            if q >= 0 and (best < 0 or q < best):
                best = q
        stage[v] = best if best >= 0 else S - 1


def _cuts(cross: np.ndarray, lo: int, hi: int, size: int) -> list:
    """Cut positions in ``(lo, hi)``: each next cut the position of fewest
    crossing bytes between half and twice ``size`` past the last (ties: the
    nearest to ``size``)."""
    cuts = []
    at = lo
    while hi - at > 2 * size:
        a, b = at + max(1, size // 2), min(hi - 1, at + 2 * size)
        window = cross[a:b + 1]
        dist = np.abs(np.arange(a, b + 1) - (at + size))
        c = int(a + np.lexsort((dist, window))[0])
        cuts.append(c)
        at = c
    return cuts


def _superblocks(run, min_block: int):
    """``(fwd, bwd, blocks used)``: consecutive blocks of a run merged, ``m``
    at a time, so that each holds at least ``min_block`` forward nodes (a
    block's values read by the next block are always held: tiny blocks would
    leave nothing to choose)."""
    m = max(1, -(-min_block // run.fwd.shape[1]))
    L = run.n_blocks // m
    if L == 0:
        return run.fwd[:0], run.bwd[:0], 0
    F = run.fwd[:L * m].reshape(L, -1)
    Bk = run.bwd[:L * m].reshape(L, -1)
    return F, Bk, L * m


def segment_chain(graph, *, segment_size: int | None = None, structure: Structure | None = None,
                  min_copies: int = 2, min_block: int = 4) -> SegmentChain | None:
    """The chain of stages of a training graph (module docstring); ``None``
    when the graph has no backward phase after its forward phase.

    Parameters
    ----------
    graph : Graph
    segment_size : int, optional
        Target forward nodes per segment of its own (default: an eighth of
        the forward nodes, between 2 and 48).
    structure : Structure, optional
        The runs, when already detected.
    min_block : int
        Fewest forward nodes of a stage of a run (consecutive blocks are
        merged to reach it, :func:`_superblocks`).  Runs of fewer forward
        nodes than half a segment are cut like the rest (each segment's own
        menu is as good; sharing one pays at scale).
    """
    fwd_nodes = np.flatnonzero(graph.phase == 0)
    bwd_nodes = np.flatnonzero(graph.phase != 0)
    if fwd_nodes.size == 0 or bwd_nodes.size == 0 or fwd_nodes[-1] > bwd_nodes[0]:
        return None
    if structure is not None:
        st = structure
    elif min_copies == 2:
        st = graph.derived("runs", detect_runs)      # detection once per graph (``info``, every component)
    else:
        st = detect_runs(graph, min_copies=min_copies)
    m = fwd_nodes.size
    size = segment_size or int(np.clip(m // 8, 2, 48))
    pos = np.full(graph.n, -1, dtype=np.int64)
    pos[fwd_nodes] = np.arange(m)
    cross = crossing_bytes(graph, fwd_nodes)
    runs = sorted(st.runs, key=lambda r: int(pos[r.fwd.min()]))
    fwd, bwd, kind, run_info = [], [], [], []
    stage = np.full(graph.n, -1, dtype=np.int64)
    at = 0

    def stretch(lo, hi):
        for a, b in zip([lo] + _cuts(cross, lo, hi, size), _cuts(cross, lo, hi, size) + [hi], strict=True):
            if b > a:
                stage[fwd_nodes[a:b]] = len(fwd)
                fwd.append(fwd_nodes[a:b])
                bwd.append(None)
                kind.append(-1)

    for r in runs:
        F, Bk, used = _superblocks(r, min_block)
        if F.shape[0] < min_copies or r.fwd.size < size // 2:
            continue                         # too few blocks once merged, or a small run: cut like the rest
        lo, hi = int(pos[r.fwd.min()]), int(pos[r.fwd[used - 1].max()]) + 1
        stretch(at, lo)
        run_info.append((len(fwd), F.shape[0], r.same_costs))
        for k in range(F.shape[0]):
            stage[F[k]] = len(fwd)
            stage[Bk[k]] = len(fwd)
            fwd.append(F[k])
            bwd.append(Bk[k])
            kind.append(len(run_info) - 1)
        at = hi
    stretch(at, m)
    S = len(fwd)
    # backward nodes outside the runs: the earliest stage among their inputs'
    _assign_backward(stage, bwd_nodes.astype(np.int64), graph.pred_ptr, graph.pred_idx, S)
    n_bwd_block = [0 if b is None else int(b.size) for b in bwd]
    bs = stage[bwd_nodes]
    order = np.argsort(bs, kind="stable")
    cuts = np.searchsorted(bs[order], np.arange(S + 1))
    for s in range(S):
        mine = bwd_nodes[order[cuts[s]:cuts[s + 1]]]
        if bwd[s] is None:
            bwd[s] = mine
        elif mine.size > bwd[s].size:   # a block's backward part, then the nodes assigned to it (no position)
            bwd[s] = np.concatenate([bwd[s], np.setdiff1d(mine, bwd[s])])
    return SegmentChain(fwd, bwd, np.array(kind, dtype=np.int64), stage, run_info, list(st.notes), n_bwd_block)


def derive_structure(graph, limits=None) -> dict:
    """Structure detection once per graph, within ``limits``: the runs
    (:func:`~hybrid_remat.blocks.detect.detect_runs`), the main blocks and
    the segment chain, kept with the graph under :data:`STRUCTURE_KEYS`
    (where every component finds them; ``anytime_solve`` calls it inside its
    time limit, after the first plan).  Where the limits leave less than
    :data:`DETECT_S_PER_ITEM` seconds per node and edge it does not start.

    Returns what happened: ``status`` ``"cached"`` (found before: nothing
    done), ``"done"`` or ``"stopped"``, ``seconds`` and ``note``.  When the
    limits expire first the graph keeps stand-ins until
    :func:`forget_stopped`: no runs (their note :data:`~hybrid_remat.blocks.detect.STOPPED`),
    no blocks and no segment chain, so that the components that need the
    structure decline the problem at once instead of detecting it again
    without limits; the solve goes on without them.

    Examples
    --------
    >>> import threading
    >>> from hybrid_remat.families import decoder_checkmate
    >>> from hybrid_remat.limits import Limits
    >>> g = decoder_checkmate(layers=6)
    >>> flag = threading.Event(); flag.set()
    >>> derive_structure(g, Limits(stop=flag))["note"]
    'structure detection stopped at the limit'
    >>> g.derived("segment_chain", segment_chain) is None   # a stand-in until forgotten
    True
    >>> forget_stopped(g); derive_structure(g)["status"], g.derived("segment_chain", segment_chain).n_stages
    ('done', 8)
    >>> derive_structure(g)["status"]
    'cached'
    """
    from ..blocks.detect import graph_blocks

    t0 = now()
    cache = graph.__dict__.setdefault("_derived", {})
    if all(k in cache for k in STRUCTURE_KEYS):
        return {"status": "cached", "seconds": 0.0, "note": STOPPED if cache.get(STOPPED_KEY) else ""}
    st = cache.get("runs")
    if st is None and limits is not None and limits.left() < DETECT_S_PER_ITEM * (graph.n + graph.m):
        st = Structure([], [STOPPED], stopped=True)     # it cannot finish: do not start
    elif st is None:
        st = detect_runs(graph, limits=limits)
    if not st.stopped and not (limits is not None and limits.expired()):   # then the blocks and the chain
        cache["runs"] = st                                                      # (0.02-0.06 s at 100k nodes)
        cache.setdefault("blocks", graph_blocks(graph, st))
        if "segment_chain" not in cache:
            cache["segment_chain"] = segment_chain(graph, structure=st)
        return {"status": "done", "seconds": now() - t0, "note": ""}
    for key, value in zip(STRUCTURE_KEYS, (Structure([], [STOPPED], stopped=True), None, None), strict=True):
        cache.setdefault(key, value)
    cache[STOPPED_KEY] = True
    return {"status": "stopped", "seconds": now() - t0, "note": STOPPED}


def forget_stopped(graph) -> None:
    """Drop the stand-ins of a stopped :func:`derive_structure` (a later call detects again)."""
    cache = graph.__dict__.get("_derived", {})
    if cache.pop(STOPPED_KEY, False):
        for key in STRUCTURE_KEYS:
            cache.pop(key, None)
