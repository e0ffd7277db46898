"""The stream class in the segment chain: the blocks of a run may drop the
values the next block reads (the residual stream), recomputed in the
backward pass from a checkpoint held every ``m`` blocks
(:mod:`hybrid_remat.blocks.stream`, reused here run by run).

The chain's own menus (:mod:`.menus`) hold the stream of every block
(``fixed``), so that no recomputation reaches beyond its block.  This
module adds, per run of repeated blocks where it pays, the *stream
options*: the points of the closure staircase of the run's middle block
with the stream positions never held
(:func:`~hybrid_remat.blocks.stream.stream_menu`) that no held-stream
option dominates (as much memory or less, no more time).  The blocks ``j``
of the run with ``(j + 1) % m == 0``, and its last block (read by the
stage after the run), are its checkpoints: their stream options hold the
stream positions too (:func:`~hybrid_remat.blocks.stream.stream_keep`'s
rule), so that the keep-or-recompute-once rule's recursion stops there.

The stream options are options like the others of the run's stages
(:func:`with_stream`: a checkpoint stage's menu differs from an ordinary
one's in those positions only): the chain's figures measure them on
simulated plans and the chain DP combines them, stage by stage, with the
held-stream options and the segments of their own.  The figures of mixed
choices are approximations, as everywhere in the chain; the plan is
simulated and only a valid plan leaves the solver.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.segments.chain import segment_chain
>>> from hybrid_remat.segments.menus import compute_menus, menu_tasks
>>> from hybrid_remat.segments.solver import stage_menus
>>> fw = nx.DiGraph()
>>> fw.add_node(0, bytes=2, cost=1.0)
>>> for k in range(12):             # residual blocks: x -> a -> b, out = x + b
...     x, a, b, out = 3 * k, 3 * k + 1, 3 * k + 2, 3 * k + 3
...     fw.add_nodes_from([(a, {"bytes": 4, "cost": 1.0}), (b, {"bytes": 3, "cost": 2.0}),
...                        (out, {"bytes": 2, "cost": 1.0})])
...     fw.add_edges_from([(x, a), (a, b), (b, out), (x, out)])
>>> p = Problem.single(training_graph(fw), "40%")
>>> ch = segment_chain(p.graph, segment_size=2)
>>> menus = compute_menus(menu_tasks(p, ch))
>>> opts = stream_options(p, ch, menus)
>>> sorted(opts), opts[0].period
([0], 2)
>>> per_stage = with_stream(ch, stage_menus(ch, menus), opts)
>>> first = ch.runs[0][0]
>>> o = per_stage[first].stream.index(True)
>>> bool(per_stage[first].options[o][opts[0].out].any()), bool(per_stage[first + 1].options[o][opts[0].out].all())
(False, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..blocks.detect import BlockStructure
from ..blocks.stream import stream_menu, stream_positions
from ..limits import Limits
from .menus import EXACT_NODES, Menu

__all__ = ["StreamOptions", "run_blocks", "stream_options", "with_stream", "stream_period",
           "is_checkpoint", "stream_groups"]


@dataclass
class StreamOptions:
    """One run's stream options: ``points`` ``[(x, extra, held)]`` (the
    closure model's figures with the stream dropped, most memory first;
    ``x``: bool over the block's forward positions), ``out`` (the stream
    positions), ``period`` (a checkpoint every ``period`` blocks)."""

    points: list
    out: np.ndarray
    period: int
    stats: dict = field(default_factory=dict)


def run_blocks(chain, kind: int) -> BlockStructure:
    """Run ``kind`` of the chain as a :class:`~hybrid_remat.blocks.detect.BlockStructure`
    (its stages as blocks, matched by position; the stages before it its
    prologue, those after it its epilogue, by ``stage`` only)."""
    first, count, same = chain.runs[kind]
    nb = chain.n_bwd_block[first]
    fwd = np.stack([chain.fwd[s] for s in range(first, first + count)])
    bwd = np.stack([chain.bwd[s][:nb] for s in range(first, first + count)])
    stage = np.clip(chain.stage - first, -1, count)
    stage[chain.stage < 0] = -1
    empty = np.zeros(0, dtype=np.int64)
    return BlockStructure(fwd, bwd, (empty, empty), (empty, empty), stage, bool(same))


def stream_period(n_blocks: int) -> int:
    """A checkpoint every ``round(sqrt(L))`` blocks (at least 2): about
    ``L / m`` held stream values plus ``m`` blocks of recomputed stream
    alive at a time."""
    return max(2, int(round(math.sqrt(n_blocks))))


def is_checkpoint(j: int, n_blocks: int, period: int) -> bool:
    """Block ``j`` of a run holds its stream: every ``period``-th and the last."""
    return (j + 1) % period == 0 or j == n_blocks - 1


def _undominated(points, held_menu: Menu) -> list:
    """The stream points no held-stream option dominates (held bytes no
    more, extra time no more)."""
    h = np.asarray(held_menu.held, dtype=np.float64)
    e = np.asarray(held_menu.extra, dtype=np.float64)
    out = []
    for x, extra, held in points:
        if not ((h <= held) & (e <= extra * (1 + 1e-9) + 1e-15)).any():
            out.append((x, extra, held))
    return out


def stream_options(problem, chain, menus: dict, *, limits: Limits | None = None, max_options: int = 16,
                   exact_nodes: int = EXACT_NODES, distant: bool = False) -> dict:
    """``{kind: StreamOptions}`` of the runs where the stream class may pay:
    at least 3 blocks, stream positions, a block of at most ``exact_nodes``
    forward nodes, and at least one stream point no held option of the
    kind's menu (``menus[("kind", k)]``) dominates (module docstring).
    Runs are tried in order while ``limits`` allow (each an equal share of
    the time left).  ``distant``: the stream positions include values
    later stages read too (:func:`~hybrid_remat.blocks.stream.stream_positions`;
    for the re-drop class, :mod:`.redrop`)."""
    limits = limits or Limits()
    g = problem.graph
    got = {}
    n_runs = len(chain.runs)
    for k, (_, count, _) in enumerate(chain.runs):
        if limits.expired():
            break
        key = ("kind", k)
        if count < 3 or key not in menus:
            continue
        bs = run_blocks(chain, k)
        if bs.fwd.shape[1] > exact_nodes:
            continue
        out = stream_positions(g, bs, distant=distant)
        if not out.any():
            continue
        left = limits.left()
        share = limits.share(left / (n_runs - k)) if math.isfinite(left) else limits
        pts = _undominated(stream_menu(problem, bs, limits=share, max_options=max_options, distant=distant),
                           menus[key])
        if pts:
            got[k] = StreamOptions(pts, out, stream_period(count), {"points": len(pts)})
    return got


def with_stream(chain, per_stage: list, options: dict) -> list:
    """``per_stage`` with the stream options added to the stages of every
    run in ``options``: each such stage's menu is its kind's options and the
    stream points, most memory first (ties: the held option first); a
    checkpoint stage's stream options hold the stream positions too.  Every
    changed menu has ``stream``: per option whether it is a stream option."""
    out = list(per_stage)
    for k, so in options.items():
        first, count, _ = chain.runs[k]
        base = per_stage[first]
        rows = [(h, 0, e, x) for h, e, x in zip(base.held, base.extra, base.options, strict=True)]
        rows += [(h, 1, e, x) for x, e, h in so.points]
        rows.sort(key=lambda r: (-r[0], r[1]))
        held = [r[0] for r in rows]
        extra = [r[2] for r in rows]
        flag = [bool(r[1]) for r in rows]
        plain = Menu([r[3] for r in rows], held, extra, False, {**base.stats, "stream": len(so.points)}, flag)
        ckpt = Menu([r[3] | so.out if r[1] else r[3] for r in rows], held, extra, False,
                    {**base.stats, "stream": len(so.points), "checkpoint": True}, flag)
        for j in range(count):
            out[first + j] = ckpt if is_checkpoint(j, count, so.period) else plain
    return out


def stream_groups(chain, options: dict, groups: list) -> list:
    """``groups`` (:func:`~.solver.stage_groups`) with the stages of every
    run in ``options`` regrouped by checkpoint: each group the blocks after
    one checkpoint up to the next (the chain DP gives a group one option).
    Within such a group a stream option's recomputations stay inside it (the
    rule's recursion stops at the checkpoint before it, held by every
    option), so the figures measured with the whole run on one option are
    the group's whatever the other groups take; stages free to mix options
    within a period made the DP's plans run over the budget by a tenth."""
    if not options:
        return groups
    spans = {}
    for k, so in options.items():
        first, count, _ = chain.runs[k]
        a = 0
        for j in range(count):
            if is_checkpoint(j, count, so.period):
                spans[first + a] = first + j + 1
                a = j + 1
    inside = np.zeros(chain.n_stages + 1, dtype=bool)
    for a, b in spans.items():
        inside[a:b] = True
    return sorted([g for g in groups if not inside[g[0]]] + list(spans.items()))
