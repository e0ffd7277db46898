"""Block plans that drop the residual stream: every block may drop the
values the next block reads (its output), recomputed in the backward pass
from a checkpoint held every ``m`` blocks.

The block solver's main class (:mod:`hybrid_remat.blocks.solver`) holds
every block output the next block reads, so that no recomputation reaches
beyond its block.  The block bound's closure model lets a block drop its
output and recompute it from its input taken as available; in a real plan
that input is the previous block's output, dropped too, so the keep-or-
recompute-once rule (:mod:`hybrid_remat.core.keepset`) recomputes the
stream back to the last output that is held.  This class makes that
explicit:

* **menu**: the closure staircase of the middle block with the positions
  only the next block's forward reads (the stream) dropped: recomputed in
  the backward pass, from the block's values and its input;
* **checkpoints**: the blocks ``k`` with ``(k + 1) % m == 0`` hold those
  positions besides their option's held set; the recomputation the rule
  makes during the backward of a block then stops at the last checkpoint
  below it (a held value ends the rule's recursion), so it reaches at most
  ``m`` blocks back, each value still computed at most twice;
* **figures**: measured on the plan itself (the simulator): for a uniform
  option the peak is monotone enough in the option's held bytes to search,
  then a share ``n`` of the blocks takes the next option up (bisection on
  ``n``), every candidate simulated.

Every plan it returns passed the simulator; it proves nothing.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> fw = nx.DiGraph()
>>> for i in range(26):
...     fw.add_node(i, bytes=4 if i % 3 == 1 else 1, cost=1.0 + (i % 3))
...     if i:
...         fw.add_edge(i - 1, i)
>>> p = Problem.single(training_graph(fw), "45%")
>>> from hybrid_remat.blocks.detect import detect_blocks
>>> bs = detect_blocks(p.graph)
>>> r = solve_stream(p, bs)
>>> r is None or simulate(p, r[0]).valid
True
"""

from __future__ import annotations

import math

import numpy as np

from ..limits import Limits
from ..simulate import simulate
from .menu import _spread, _staircase_of, least_extra
from .schedule import KeepSetPlanner

__all__ = ["stream_positions", "stream_pays", "stream_menu", "stream_keep", "solve_stream"]


def stream_positions(graph, bs, *, distant: bool = False) -> np.ndarray:
    """Positions of a block's forward part read by the next block's forward
    nodes and by no other stage's forward node (the residual stream), as
    seen in the middle block; ``distant``: also those read by later stages
    beyond the next block (a skip, as in a U-Net's encoder: for a plan
    class that recomputes it at its distant readers, :mod:`hybrid_remat.segments.redrop`)."""
    L = bs.n_blocks
    k = L // 2
    fwd = graph.phase == 0
    st = bs.stage
    out = np.zeros(bs.fwd.shape[1], dtype=bool)
    if L < 2:
        return out
    for i, v in enumerate(bs.fwd[k].tolist()):
        s = graph.succs(v)
        s = s[fwd[s] & (st[s] != k)]
        nxt = st[s] == k + 1
        out[i] = bool(nxt.any()) and bool((nxt | (distant & (st[s] > k + 1))).all())
    return out


def stream_menu(problem, bs, *, limits: Limits | None = None, max_options: int = 48, distant: bool = False) -> list:
    """``[(x, extra, held)]``: the middle block's closure staircase with the
    stream positions dropped (never held: recomputed in the backward pass),
    most memory first (``x``: bool over the block's forward positions;
    ``distant``: :func:`stream_positions`')."""
    g = problem.graph
    out = stream_positions(g, bs, distant=distant)
    if not out.any():
        return []
    k = bs.n_blocks // 2
    others = g.phase == 0
    others = others.copy()
    others[bs.fwd[k]] = False
    others[bs.fwd[k + 1] if k + 1 < bs.n_blocks else []] = False
    st = _staircase_of(problem, bs.fwd[k], others, limits or Limits(), dropped=out)
    return [(p.x, p.extra, p.held) for p in _spread(st.points, max_options)]


def stream_pays(problem, bs, held: int, extra: float, *, limits: Limits | None = None) -> bool:
    """Whether the middle block with its stream dropped recomputes less than
    ``extra`` holding at most ``held`` bytes (one SCIP solve: a quick test
    before the menu; ``held``/``extra``: the held-stream plan's main option)."""
    g = problem.graph
    out = stream_positions(g, bs)
    if not out.any() or bs.n_blocks < 3:
        return False
    k = bs.n_blocks // 2
    others = (g.phase == 0).copy()
    others[bs.fwd[k]] = False
    others[bs.fwd[k + 1]] = False
    got = least_extra(problem, bs.fwd[k], others, held, limits or Limits(), dropped=out)
    return got is not None and got < extra * (1 - 1e-6) - 1e-15


def stream_keep(graph, bs, options, menu, period: int, out, epilogue_keep=None) -> np.ndarray:
    """The keep set: block ``k`` holds ``menu[options[k]]``'s set, and its
    stream positions too where ``(k + 1) % period == 0``; everything else
    held but ``epilogue_keep`` (a mask over the epilogue's forward nodes)."""
    keep = np.ones(graph.n, dtype=bool)
    for k, o in enumerate(options):
        x = menu[o][0]
        if (k + 1) % period == 0:
            x = x | out
        keep[bs.fwd[k]] = x
    if epilogue_keep is not None and bs.epilogue[0].size:
        keep[bs.epilogue[0]] = epilogue_keep
    return keep


def solve_stream(problem, bs, *, limits: Limits | None = None, epilogue_keep=None, arrays=None,
                 menu=None, periods=None):
    """The best plan of the stream class found by simulation (module
    docstring): ``(plan, value, info)`` or ``None`` (no candidate fits, no
    stream positions, or stopped by ``limits``)."""
    limits = limits or Limits()
    g = problem.graph
    L = bs.n_blocks
    if L < 3:
        return None
    out = stream_positions(g, bs)
    if not out.any():
        return None
    if menu is None:
        left = limits.left()
        menu = stream_menu(problem, bs, limits=limits.share(0.4 * left) if math.isfinite(left) else limits)
    if not menu or limits.expired():
        return None
    arrays = arrays or KeepSetPlanner(problem, "blocks")
    B = int(problem.budgets[0])
    seen: dict = {}
    best = [None, math.inf, None]

    def attempt(options, period):
        key = (tuple(options), period)
        if key in seen:
            return seen[key]
        keep = stream_keep(g, bs, options, menu, period, out, epilogue_keep)
        plan, peak, _ = arrays.plan(keep)
        ok = peak <= B
        if ok:
            sim = simulate(problem, plan)
            ok = bool(sim.valid)
            if ok:
                value = problem.objective.value(sim)
                if value < best[1]:
                    best[:] = [plan, value, {"period": period, "options": sorted(set(options)),
                                             "tdi_pct": sim.tdi_pct}]
        seen[key] = (ok, peak)
        return ok, peak

    def uniform_search(period):
        """The most-memory option whose uniform plan fits (bisection over
        the menu, most memory first): its index or ``None``."""
        lo, hi = 0, len(menu) - 1
        if limits.expired() or not attempt([hi] * L, period)[0]:
            return None
        while hi - lo > 0 and not limits.expired():
            mid = (lo + hi) // 2
            if attempt([mid] * L, period)[0]:
                hi = mid
            else:
                lo = mid + 1
        return hi

    periods = periods or sorted({max(2, int(round(f * math.sqrt(L)))) for f in (0.5, 1.0, 2.0)})
    found = []
    for m in periods:
        if limits.expired():
            break
        i = uniform_search(m)
        if i is not None:
            found.append((i, m))
    if not found:
        return None
    i, m = min(found)
    if i > 0:          # a share of the blocks one option up: the most that still fits (bisection)
        lo, hi = 0, L
        while hi - lo > 1 and not limits.expired():
            n = (lo + hi) // 2
            if attempt([i - 1] * n + [i] * (L - n), m)[0]:
                lo = n
            else:
                hi = n
    if best[0] is None:
        return None
    best[2]["simulations"] = len(seen)
    return tuple(best)
