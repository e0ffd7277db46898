"""Each kind of stage's trade-off menu: keep sets of its forward part with
the bytes they hold and the time they recompute, as independent tasks.

A :class:`MenuTask` carries all a menu needs (the stage's local DAG, which
values a backward node reads, which a later stage's forward part reads,
costs and sizes) as plain arrays, so the tasks of a chain can run anywhere
(threads, the portfolio's workers, Ray tasks): :func:`menu_tasks` lists
them, :func:`compute_menu` runs one, :func:`compute_menus` runs a list
within limits: in order here, or on an executor of :mod:`.menu_exec`
(worker processes, Ray tasks) with the same menus where the exact solves
finish.

A menu is exact where the stage is small enough: the Pareto front of the
closure model (:func:`~hybrid_remat.blocks.staircase.closure_staircase`,
SCIP); otherwise, or once the exact share of the limits is spent, a
heuristic front (:func:`greedy_menu`: drop the needed values of most bytes
per second of their own cost first).  Either way every option is a keep
set; the plan built from the options is checked by the simulator, so a
heuristic menu costs quality, never validity.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.segments.chain import segment_chain
>>> g = training_graph(nx.path_graph(12, create_using=nx.DiGraph))
>>> p = Problem.single(g, "60%")
>>> tasks = menu_tasks(p, segment_chain(g, segment_size=4))
>>> menus = compute_menus(tasks)
>>> all(m.options[0].sum() >= m.options[-1].sum() for m in menus.values())
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..blocks.staircase import closure_staircase
from ..limits import Limits
from .greedy import marginal_front

__all__ = ["MenuTask", "Menu", "menu_tasks", "compute_menu", "compute_menus", "greedy_menu", "EXACT_NODES"]

#: stages of at most this many forward nodes get the exact (SCIP) menu
EXACT_NODES = 96


@dataclass
class MenuTask:
    """One menu to compute: ``key`` (the kind, or ``("stage", s)``), the
    local DAG ``preds``, masks ``needed``/``fixed``, ``cost``/``size`` per
    local node."""

    key: object
    preds: list
    needed: np.ndarray
    fixed: np.ndarray
    cost: np.ndarray
    size: np.ndarray
    exact: bool = True


@dataclass
class Menu:
    """Options (bool masks over the stage's forward nodes: held), most
    memory first, with their held bytes and extra time; ``exact``: the
    front is the closure model's proved Pareto front; ``stream``: per
    option whether it drops the residual stream (:mod:`.stream`; ``None``:
    none does)."""

    options: list
    held: list
    extra: list
    exact: bool
    stats: dict = field(default_factory=dict)
    stream: list | None = None


def menu_tasks(problem, chain, *, exact_nodes: int = EXACT_NODES) -> list:
    """The independent menu tasks of a chain: one per kind (the middle block
    of a run stands for it) and one per segment of its own.

    A block holds the values the next block reads (``fixed``: the residual
    stream, as in :mod:`hybrid_remat.blocks.solver`; the options that drop
    it are :mod:`.stream`'s, added by the solver); a segment of its own
    may drop the values later segments read (``needed``: the menu charges
    their recomputation; the simulator measures what the plan does)."""
    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    is_fwd = g.phase == 0
    src = np.repeat(np.arange(g.n, dtype=np.int64), np.diff(g.succ_ptr))
    dst = g.succ_idx.astype(np.int64)
    read_by_bwd = np.zeros(g.n, dtype=bool)
    read_by_bwd[src[~is_fwd[dst]]] = True
    other = is_fwd[dst] & (chain.stage[src] != chain.stage[dst])
    read_by_later = np.zeros(g.n, dtype=bool)
    read_by_later[src[other]] = True
    tasks = []
    done = set()
    for s in range(chain.n_stages):
        k = chain.kind_of(s)
        if k is not None:
            if k in done:
                continue
            first, count, _ = chain.runs[k]
            s = first + count // 2
            done.add(k)
        nodes = chain.fwd[s]
        loc = np.full(g.n, -1, dtype=np.int64)
        loc[nodes] = np.arange(nodes.size)
        preds = [[int(loc[u]) for u in g.preds(v).tolist() if loc[u] >= 0] for v in nodes.tolist()]
        if k is not None:       # a block's values read by the next block (the residual stream): held
            needed, fixed = read_by_bwd[nodes], read_by_later[nodes]
        else:                   # a segment's values read later: held or recomputed when read again
            needed, fixed = read_by_bwd[nodes] | read_by_later[nodes], np.zeros(nodes.size, dtype=bool)
        tasks.append(MenuTask(("kind", k) if k is not None else ("stage", s), preds, needed, fixed, cost[nodes],
                              g.bytes[nodes].astype(np.int64), nodes.size <= exact_nodes))
    return tasks


def _recomputed(preds, needed, x):
    """What the keep-or-recompute-once class recomputes with ``x`` held:
    the needed values not held, and recursively their inputs not held."""
    r = needed & ~x
    for i in range(len(preds) - 1, -1, -1):
        if r[i]:
            for j in preds[i]:
                if not x[j]:
                    r[j] = True
    return r


def greedy_menu(task: MenuTask, *, n_options: int = 16) -> Menu:
    """A heuristic front: held sets that drop the needed values of most
    bytes per second of their own cost first, at ``n_options`` fractions
    (fixed values are always held), with the points of the marginal greedy
    (:func:`~.greedy.marginal_front`: bytes per second its drop adds),
    Pareto-filtered, at most ``n_options`` points."""
    k = task.needed.size
    x_all = task.needed | task.fixed
    cand = np.flatnonzero(task.needed & ~task.fixed)
    score = task.size[cand] / np.maximum(task.cost[cand], 1e-12)
    cand = cand[np.argsort(-score, kind="stable")]
    pts = []
    for f in np.linspace(0.0, 1.0, n_options):
        x = x_all.copy()
        x[cand[:int(round(f * cand.size))]] = False
        r = _recomputed(task.preds, task.needed, x)
        pts.append((int(task.size[x].sum()), float(task.cost[r].sum()), x))
    pts += marginal_front(task.preds, task.needed, task.fixed, task.cost, task.size, n_options=n_options)
    front = _front(pts)
    if len(front) > n_options:     # spread over the held bytes, both ends kept
        idx = np.unique(np.round(np.linspace(0, len(front) - 1, n_options)).astype(int))
        front = [front[i] for i in idx]
    if not front:
        front = [(0, 0.0, np.zeros(k, dtype=bool))]
    return Menu([p[2] for p in front], [p[0] for p in front], [p[1] for p in front], False,
                {"kind": "greedy", "points": len(front)})


def compute_menu(task: MenuTask, *, limits: Limits | None = None, max_options: int = 24) -> Menu:
    """One task's menu: exact (SCIP) when ``task.exact`` and the front is
    complete within ``limits``, else the greedy front (merged with the exact
    points found)."""
    limits = limits or Limits()
    if task.exact and not limits.expired():
        st = closure_staircase(np.arange(task.needed.size), task.preds, needed=task.needed, fixed=task.fixed,
                               cost=task.cost, size=task.size, limits=limits, max_points=2 * max_options,
                               resolution=1 / max_options)
        pts = st.points
        if pts:
            idx = np.unique(np.round(np.linspace(0, len(pts) - 1, min(max_options, len(pts)))).astype(int))
            pts = [pts[i] for i in idx]
            menu = Menu([p.x for p in pts], [p.held for p in pts], [p.extra for p in pts], st.complete,
                        {"kind": "exact" if st.complete else "exact_partial", "points": len(st.points),
                         "solves": st.stats["solves"]})
            if st.complete:
                return menu
            return _merge(menu, greedy_menu(task))
    return greedy_menu(task)


def _front(pts: list) -> list:
    """The Pareto front (most memory first) of ``[(held, extra, x)]``."""
    front: list = []
    for h, e, x in sorted(pts, key=lambda p: (-p[0], p[1])):
        if front and h == front[-1][0]:
            continue           # as much memory, no less time
        while front and e <= front[-1][1]:
            front.pop()        # as cheap with less memory: it replaces the last point
        front.append((h, e, x))
    return front


def _merge(a: Menu, b: Menu) -> Menu:
    """The Pareto front of two menus' options."""
    front = _front(list(zip(a.held + b.held, a.extra + b.extra, a.options + b.options, strict=True)))
    return Menu([p[2] for p in front], [p[0] for p in front], [p[1] for p in front], False,
                {**a.stats, "merged": True})


def compute_menus(tasks: list, *, limits: Limits | None = None, exact_share: float = 0.6, executor=None) -> dict:
    """``{key: Menu}`` of every task: exact ones while ``exact_share`` of
    the limits' time is left for them, greedy after.  ``executor``: where
    they run (:mod:`.menu_exec`: worker processes, Ray tasks; each task
    gets these exact limits, a menu not back by ``limits``' deadline is the
    greedy one); ``None``: here, in order."""
    import math

    limits = limits or Limits()
    left = limits.left()
    exact_limits = limits.share(exact_share * left) if math.isfinite(left) else limits
    if executor is not None:
        return executor.menus(tasks, exact=exact_limits, limits=limits)
    return {t.key: compute_menu(t, limits=exact_limits) for t in tasks}
