"""Decomposition for large graphs: segments solved exactly inside the incumbent.

The full staged model has ``O(n^2)`` variables and cannot be built within a
minute beyond a few hundred nodes.  This formulation ("decomposed") works on
segments instead:

* **Segments.**  The forward graph is split at its articulation points (cut
  vertices of the undirected forward graph), consecutive pieces are merged up
  to ``segment_size`` forward nodes and longer pieces are cut into windows of
  that size; a segment also holds the backward nodes that read its forward
  nodes.  Graphs without backward labels or without cut vertices (e.g. the
  random layered benchmark graphs) are cut into windows of ``segment_size``
  consecutive nodes of the incumbent's order.  See :func:`segments`.
* **Exact sub-solves, stitched by construction.**  The incumbent is put in
  its own order of first computations (the graph relabelled) and in staged
  form ``R0``/``S0``.  For each segment a *window model*
  (:class:`~hybrid_remat.exact.checkmate.CheckmateModel` with ``fix=``)
  keeps every other node's decisions as constants and optimises the
  segment's recomputations and checkpoints exactly, with the memory of the
  rest of the plan as a constant in each memory row, warm started with the
  incumbent.  A better solution is a whole plan: it replaces the incumbent
  at once (after the simulator accepts it), so the next segment starts from
  it.  Segments are visited by decreasing recomputation cost in the
  incumbent; each gets an equal share of the time left.
* **Global improvement.**  After each pass the plan is polished by
  :func:`~hybrid_remat.pruning.drop_recomputations` and passes
  repeat (windows shifted by half a segment) until one improves nothing.

Bound.  A window optimum is the best plan in a neighbourhood of the
incumbent; it bounds nothing.  The formulation reports a bound for the whole
from the parts, :func:`~hybrid_remat.bounds.cut.partition_lower_bound` over
its segments: each part's induced problem (inputs from other parts free) is
a relaxation of the whole restricted to the part, so the parts' cut bounds
add up, for every plan.  (The parts' *staged* bounds would not add up: the
projection of a staged plan on a part need not be staged.)  It equals the
trivial bound whenever every part fits the budget on its own, as on the
Moccasin graphs; it pays on graphs made of independent towers.

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
>>> from hybrid_remat.heuristics.lifetime_split import LifetimeSplit
>>> g = random_layered(20, seed=1)
>>> p = Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)
>>> start = LifetimeSplit().run(p)
>>> from hybrid_remat.limits import Limits
>>> r = DecomposedFormulation(segment_size=8, min_nodes=0).solve(p, incumbent=start, limits=Limits(nodes=50))
>>> r.status, r.objective <= simulate(p, start).total_time, simulate(p, r.plan).valid
('feasible', True, True)
"""

from __future__ import annotations

import math
import time

import networkx as nx
import numpy as np

from ..core.staged import first_compute_order, staged_rs
from ..errors import PlanError
from ..interfaces import Formulation, FormulationResult
from ..simulate import simulate

__all__ = ["segments", "solve_window", "DecomposedFormulation", "MAX_NODES"]

#: above this many nodes the formulation does not run: the incumbent's staged ``R``/``S`` are ``n x n`` booleans
#: (2 x 144 MB at 12k nodes, 2 x 10 GB at 100k); ``lns`` re-solves windows of large plans instead
MAX_NODES = 12_000


def _forward_pieces(graph, order_pos) -> list[list[int]] | None:
    """Forward nodes cut at articulation points, as lists in incumbent order;
    ``None`` when the graph has no backward labels or no cut vertex."""
    bwd = graph.is_backward
    if not bwd.any():
        return None
    fwd = np.flatnonzero(~bwd)
    G = nx.Graph()
    G.add_nodes_from(fwd.tolist())
    e = graph.edges()
    keep = ~bwd[e[:, 0]] & ~bwd[e[:, 1]] if len(e) else np.zeros(0, bool)
    G.add_edges_from(map(tuple, e[keep].tolist()))
    cuts = set(nx.articulation_points(G))
    if not cuts:
        return None
    seq = sorted(fwd.tolist(), key=lambda v: order_pos[v])
    pieces, cur = [], []
    for v in seq:
        cur.append(v)
        if v in cuts:
            pieces.append(cur)
            cur = []
    if cur:
        pieces.append(cur)
    return pieces


def segments(graph, order, segment_size: int) -> list[np.ndarray]:
    """The node sets of the decomposition (see the module docstring).

    Parameters
    ----------
    graph : Graph
    order : array of int
        The incumbent's order of first computations (a topological order).
    segment_size : int
        Forward nodes per segment (at most).

    Returns
    -------
    list of ndarray of int
        Disjoint node sets; their union is every node.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> [s.tolist() for s in segments(chain(5), list(range(5)), 2)]
    [[0, 1], [2, 3], [4]]
    """
    n = graph.n
    size = max(1, int(segment_size))
    order = np.asarray(order, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    pieces = _forward_pieces(graph, pos)
    if pieces is None:
        return [order[i:i + size] for i in range(0, n, size)]
    groups, cur = [], []
    for piece in pieces:
        if len(piece) > size:
            if cur:
                groups.append(cur)
                cur = []
            groups.extend(piece[i:i + size] for i in range(0, len(piece), size))
        elif len(cur) + len(piece) > size:
            groups.append(cur)
            cur = list(piece)
        else:
            cur.extend(piece)
    if cur:
        groups.append(cur)
    owner = np.full(n, -1, dtype=np.int64)
    for k, grp in enumerate(groups):
        owner[grp] = k
    # a backward node joins the segment of its latest forward input (else the previous backward node's)
    bwd = np.flatnonzero(graph.is_backward)
    for v in sorted(bwd.tolist(), key=lambda x: pos[x]):
        fw = [u for u in graph.preds(v).tolist() if owner[u] >= 0 and not graph.is_backward[u]]
        if fw:
            owner[v] = owner[max(fw, key=lambda u: pos[u])]
        else:
            bp = [u for u in graph.preds(v).tolist() if owner[u] >= 0]
            owner[v] = owner[bp[0]] if bp else len(groups) - 1
    return [np.flatnonzero(owner == k) for k in range(len(groups)) if (owner == k).any()]


def solve_window(problem, plan, free_nodes, *, seed: int = 0, params=None, limits=None):
    """Optimise the decisions of ``free_nodes`` exactly, the rest of ``plan`` fixed.

    ``problem`` must be in ``plan``'s order of first computations (see
    :func:`~hybrid_remat.core.reductions.relabel`).  Returns ``(plan, stats)``:
    a valid plan never worse than ``plan`` (``plan`` itself when nothing
    better was found or the window could not be built).  ``limits`` bound
    building and solving.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.plan import plan_from_order
    >>> from hybrid_remat.problem import Problem
    >>> g = chain(4, bytes=1)
    >>> p = Problem.single(g, 3)
    >>> start = plan_from_order(g, [0, 1, 2, 0, 1, 3], "cost")   # recomputes 0 and 1
    >>> from hybrid_remat.limits import Limits
    >>> better, st = solve_window(p, start, [0, 1], limits=Limits(nodes=100))
    >>> simulate(p, better).total_time < simulate(p, start).total_time
    True
    """
    from ..scip import DEFAULT_PARAMS, apply_params, run
    from .checkmate import BuildTimeout, CheckmateModel

    lim = Formulation.limits_of(limits)
    t0 = time.perf_counter()
    stats: dict = {"free": int(len(free_nodes))}
    base = simulate(problem, plan)
    if not base.valid:
        raise PlanError(f"the window's incumbent is not valid: {base.error}")
    n = problem.graph.n
    free = np.zeros(n, dtype=bool)
    free[np.asarray(free_nodes, dtype=np.int64)] = True
    try:
        R0, S0 = staged_rs(problem.graph, plan, np.arange(n + 1, dtype=np.int64))
    except PlanError as e:
        stats["skipped"] = f"incumbent has no staged form: {e}"
        return plan, stats
    try:
        cm = CheckmateModel(problem, fix=(R0, S0, free), limits=lim, seed=seed, name="checkmate_window")
    except BuildTimeout as e:
        stats["skipped"] = str(e)
        return plan, stats
    try:
        with cm:
            stats.update(vars=cm.n_vars, rows=cm.n_rows, build_s=round(time.perf_counter() - t0, 3))
            kind, why = cm.add_start(plan)
            stats["start"] = kind
            if kind == "none":
                stats["start_note"] = why
            apply_params(cm.model, params if params is not None else DEFAULT_PARAMS)
            if lim.left() <= 0.05:
                stats["skipped"] = "no time left after building"
                return plan, stats
            res = run(cm.model, limits=lim)
            stats["scip_status"] = res.scip_status
            cand = cm.decode(cm.model.getBestSol(), {"solver": "decomposed"}) if res.has_solution else None
            res.reraise()
        if cand is None:
            return plan, stats
        sim = simulate(problem, cand)
        if sim.valid and sim.total_time < base.total_time - 1e-12 * max(1.0, base.total_time):
            stats["improved_by"] = base.total_time - sim.total_time
            return cand, stats
        if not sim.valid:
            stats["decode_rejected"] = sim.error
        return plan, stats
    finally:
        stats["seconds"] = round(time.perf_counter() - t0, 3)


class DecomposedFormulation(Formulation):
    """Segments of the graph solved exactly inside the incumbent (module docstring).

    Parameters
    ----------
    segment_size : int or "auto"
        Forward nodes per segment; ``"auto"``: about ``window_items`` model
        variables + rows per window (:meth:`auto_size`).
    min_nodes : int
        Graphs smaller than this are left to the full staged model
        (``solve`` returns ``no_solution`` with a ``skipped`` note).
    max_passes : int
    window_items : float
        Model size (variables + rows) that ``"auto"`` aims at per window.
    max_window_s : float
        Time cap per window solve.
    max_widen : int
        Windows widen (doubling) at most this many times.
    params : dict, optional
        SCIP settings (default: the Checkmate formulation's).
    base_heuristics : sequence of str
        Registered heuristics (:func:`hybrid_remat.plugins.heuristics`) whose
        staged plans may replace the incumbent as the windows' base (found
        through the registry: nothing in ``exact/`` imports a heuristic).
    """

    name = "decomposed"
    rank = 15.0  # after the full models, before search without bounds
    #: measured (benchmarks/decomposition.py): no better plan than the heuristics' on the Moccasin graphs, so
    #: anytime_solve runs it only when named (``formulations=["decomposed"]``, ``--formulation decomposed``)
    run_by_default = False
    capabilities = frozenset({"dag", "chain", "single_device", "serial", "makespan", "needs_budget",
                              "needs_incumbent", "honours_limits"})

    def __init__(self, segment_size="auto", *, min_nodes: int = 150, max_passes: int = 50,
                 window_items: float = 120_000, max_window_s: float = 10.0, max_widen: int = 4,
                 params: dict | None = None, base_heuristics=("split", "staged_evict")):
        self.segment_size = segment_size
        self.base_heuristics = tuple(base_heuristics)
        self.max_window_s = float(max_window_s)
        self.max_widen = int(max_widen)
        self.min_nodes = int(min_nodes)
        self.max_passes = int(max_passes)
        self.window_items = float(window_items)
        self.params = params

    def applicable(self, problem) -> tuple[bool, str]:
        """Graphs under ``min_nodes`` are left to the full staged model (not
        run, no time share); graphs over :data:`MAX_NODES` to ``lns``'s window
        moves (the incumbent's staged form here is ``n x n``)."""
        if problem.graph.n < self.min_nodes:
            return False, f"fewer than {self.min_nodes} nodes: left to the full staged model"
        if problem.graph.n > MAX_NODES:
            return False, (f"more than {MAX_NODES} nodes: the incumbent's staged form is n x n; lns re-solves windows "
                           "of the sequence instead (heuristics/lns_segments.py)")
        return True, ""

    def auto_size(self, problem) -> int:
        """Nodes per window so that a window model has about ``window_items``
        variables + rows (measured: about ``8 n`` per free node on the
        Moccasin graphs); windows widen while every one is solved to
        optimality without improvement."""
        n = problem.graph.n
        return int(max(8, min(n, self.window_items / (8 * max(1, n)))))

    def predict_seconds(self, problem) -> float:
        """Seconds to build the first window model (pyscipopt builds about
        40k variables + rows per second)."""
        from .checkmate import BUILD_RATE

        size = self.auto_size(problem) if self.segment_size == "auto" else int(self.segment_size)
        return 8.0 * size * problem.graph.n / BUILD_RATE

    def solve_window(self, problem, plan, free_nodes, *, limits=None):
        """:func:`solve_window` for callers that find this formulation in the
        registry (an improver below ``exact/``, such as ``lns``)."""
        return solve_window(problem, plan, free_nodes, limits=limits)

    def solve(self, problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent=None,
              on_bound=None) -> FormulationResult:
        from ..core.reductions import plan_to_original
        from ..limits import Limits
        from ..pruning import drop_recomputations
        from ..scip import solve_limits

        t0 = time.perf_counter()
        lim = solve_limits(limits)
        stop = lim.stop
        stats: dict = {"formulation": self.name, "windows": 0, "improved": 0, "passes": 0}
        if not problem.is_single_device:
            return FormulationResult("error", stats={**stats, "error": "decomposed handles one device only"})
        best, best_obj = None, math.inf
        if incumbent is not None:
            sim = simulate(problem, incumbent)
            if sim.valid:
                best, best_obj = incumbent, sim.total_time
        ok, why = self.applicable(problem)
        if not ok:
            stats["skipped"] = why
            return FormulationResult("no_solution" if best is None else "feasible", best, best_obj, -math.inf, stats)
        base = self._staged_base(problem, incumbent, stats)
        if base is None:
            stats["skipped"] = "no plan with a staged form to start from"
            return FormulationResult("no_solution" if best is None else "feasible", best, best_obj, -math.inf, stats)
        rproblem, cur, order = base
        cur_obj = simulate(rproblem, cur).total_time
        stats["base_trace"] = [(0.0, cur_obj)]
        size = self.auto_size(problem) if self.segment_size == "auto" else int(self.segment_size)
        stats["segment_size"] = size

        def time_left():
            return lim.deadline - time.perf_counter() if math.isfinite(lim.deadline) else math.inf

        def offer(plan_r, source_note):
            nonlocal best, best_obj
            plan = plan_to_original(plan_r, order)
            obj = simulate(problem, plan).total_time
            if best is None or obj < best_obj - 1e-12 * max(1.0, best_obj):
                best, best_obj = plan, obj
                stats.setdefault("improvements", []).append(
                    (round(time.perf_counter() - t0, 3), source_note, obj))
                if on_incumbent is not None:
                    on_incumbent(best, self.name)

        offer(cur, f"base {stats['base']}")  # a staged heuristic plan may beat the incumbent already
        # a bound for the whole from the parts (valid for every plan; see partition_lower_bound)
        from ..bounds.cut import partition_lower_bound

        parts = segments(rproblem.graph, np.arange(rproblem.graph.n), size)
        lower, extras = partition_lower_bound(rproblem, parts)
        stats["parts_bound"] = {"value": lower, "parts": len(parts), "parts_with_extra": int(sum(x > 0 for x in extras))}
        if on_bound is not None and lower > problem.base_cost:
            on_bound(lower)
        idle = 0
        for pas in range(self.max_passes):
            if stop.is_set() or time_left() <= 0.5:
                break
            stats["passes"] = pas + 1
            segs = segments(rproblem.graph, np.arange(rproblem.graph.n), size)
            if pas % 2 == 1 and len(segs) > 1:  # shift the windows by half a segment
                flat = np.concatenate(segs)
                half = max(1, size // 2)
                segs = [flat[:half]] + [flat[i:i + size] for i in range(half, len(flat), size)]
            # windows where the base recomputes come first, most recomputation cost first
            counts = _compute_counts(cur, rproblem)
            extra = np.maximum(counts - 1, 0) * np.asarray(rproblem.cost_matrix[0], dtype=np.float64)
            segs.sort(key=lambda sg: -extra[sg].sum())
            segs = [sg for sg in segs if extra[sg].sum() > 0] or segs[:1]
            improved, all_optimal = False, True
            for k, sg in enumerate(segs):
                left = time_left()
                if stop.is_set() or left <= 0.5:
                    all_optimal = False
                    break
                share = min(left / (len(segs) - k), self.max_window_s)
                cand, wst = solve_window(rproblem, cur, sg, limits=lim.share(share), seed=seed, params=self.params)
                stats["windows"] += 1
                all_optimal &= wst.get("scip_status") == "optimal"
                stats.setdefault("window_stats", []).append(
                    {k2: wst[k2] for k2 in ("free", "vars", "rows", "build_s", "seconds", "scip_status", "start",
                                            "skipped") if k2 in wst})
                if cand is not cur:
                    cur, cur_obj = cand, simulate(rproblem, cand).total_time
                    stats.setdefault("base_trace", []).append((round(time.perf_counter() - t0, 3), cur_obj))
                    improved = True
                    stats["improved"] += 1
                    offer(cur, f"window {pas}.{k}")
            # global improvement of the stitched plan: local search (kept as the base only if still staged)
            if time_left() > 0.1 and not stop.is_set():
                polished = drop_recomputations(rproblem, cur, limits=Limits.seconds(min(2.0, time_left())))
                psim = simulate(rproblem, polished)
                if psim.valid and psim.total_time < cur_obj - 1e-12 * max(1.0, cur_obj):
                    offer(polished, f"local search {pas}")
                    staged = _as_staged(rproblem, polished)
                    if staged is not None:
                        cur, cur_obj = staged, psim.total_time
                        stats.setdefault("base_trace", []).append((round(time.perf_counter() - t0, 3), cur_obj))
                        improved = True
            if improved:
                idle = 0
            else:
                idle += 1
                if all_optimal and size < rproblem.graph.n and len(stats.get("widened_to", [])) < self.max_widen:
                    size = min(rproblem.graph.n, 2 * size)  # every window is optimal: widen the neighbourhood
                    stats.setdefault("widened_to", []).append(size)
                    idle = 0
                elif idle >= 2:
                    break
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        if best is None:
            return FormulationResult("no_solution", lower_bound=lower, stats=stats)
        status = "optimal" if best_obj <= lower * (1 + 1e-9) else "feasible"
        return FormulationResult(status, best, best_obj, min(lower, best_obj), stats)

    def _staged_base(self, problem, incumbent, stats):
        """``(relabelled problem, staged plan, order)`` to start the windows
        from: the incumbent when its staged form fits in bytes, else the best
        staged plan of the cheap registered heuristics
        (``base_heuristics``) that have one."""
        from .. import plugins

        cands = []
        if incumbent is not None:
            cands.append(("incumbent", incumbent))
        registered = plugins.heuristics()
        for h in (registered[name] for name in self.base_heuristics if name in registered):
            try:
                pl = h.run(problem)
            except Exception:  # a heuristic failing is not this formulation's error
                pl = None
            if pl is not None:
                cands.append((h.name, pl))
        best = None
        for name, pl in cands:
            staged = _staged_relabelled(problem, pl)
            if staged is None:
                continue
            rproblem, splan, order = staged
            obj = simulate(rproblem, splan).total_time
            if best is None or obj < best[0]:
                best = (obj, name, (rproblem, splan, order))
        if best is None:
            return None
        stats["base"] = best[1]
        return best[2]


def _as_staged(problem, plan):
    """``plan``'s staged re-decode when it is valid in bytes and no costlier, else ``None``."""
    from ..core.staged import plan_from_staged

    try:
        R, S = staged_rs(problem.graph, plan, np.arange(problem.graph.n + 1, dtype=np.int64))
        staged = plan_from_staged(problem.graph, R, S, problem.primary.name, dict(plan.meta))
    except PlanError:
        return None
    sim, orig = simulate(problem, staged), simulate(problem, plan)
    if not sim.valid or sim.total_time > orig.total_time + 1e-9 * max(1.0, orig.total_time):
        return None
    return staged


def _staged_relabelled(problem, plan):
    from ..core.reductions import plan_to_relabelled, relabel

    if not simulate(problem, plan).valid:
        return None
    order = first_compute_order(plan, problem.graph.n)
    if order is None:
        return None
    rproblem, order = relabel(problem, order)
    staged = _as_staged(rproblem, plan_to_relabelled(plan, order))
    return None if staged is None else (rproblem, staged, order)


def _compute_counts(plan, problem) -> np.ndarray:
    from ..plan import OP_COMPUTE

    c = np.zeros(problem.graph.n, dtype=np.int64)
    np.add.at(c, plan.node[plan.op == OP_COMPUTE], 1)
    return c
