"""The block solver: one exact trade-off per repeated block, combined across
the chain of blocks into a whole plan (Rockmate's idea, with SCIP and the
simulator).

Plan class (:mod:`hybrid_remat.blocks.schedule`): every node is computed in
the reference order; each stage (prologue, every block, epilogue) keeps a
chosen set of its forward values for the backward pass and recomputes the
others it needs once, just in time, from the held values and the block's
inputs.  Values a block passes to later blocks' forward nodes (the residual
stream) are always held, so a recomputation never reaches beyond its block
(step 5 searches a second class that drops them too).

1. **Menus** (:func:`block_menus`): for one block of each kind (identical
   blocks share one solve) and for the epilogue, SCIP gives the exact
   ``(held, extra)`` Pareto front of its closure model
   (:func:`~hybrid_remat.blocks.staircase.closure_staircase`).  The
   block's front is anytime (:class:`LayerFront`): a coarse walk gives a
   first plan (steps 2-4), then its gaps are refined gap by gap and the plan
   rebuilt on each finer menu (the epilogue's figures kept); every better
   plan is reported.  Each refined point is an exact Pareto point, so a
   refinement stopped anywhere leaves a valid menu, and the best plan is
   never worse than the unrefined one.
2. **Peaks inside** (:func:`probe`): each menu option is measured by the
   simulator on the whole graph with every block taking that option: the
   bytes a block adds to what later blocks see (``held``) and its peak above
   what earlier blocks hold (``inside``: forward or backward, with its
   recomputations).
3. **Across blocks** (:func:`allocate`): block ``k`` runs with the bytes of
   blocks ``0..k-1`` held, so the chain constraint is ``base + sum_{j<k}
   held_j + inside_k <= B`` for every ``k`` and ``base + sum held +
   inside(epilogue) <= B``.  For interchangeable blocks an order exists iff
   it holds in the order of decreasing ``inside - held`` (an exchange
   argument), so the chain DP over blocks becomes a small integer program
   over how many blocks take each option (SCIP), whatever the depth.
4. **Plan**: the keep set of the chosen options, its compute sequence and the
   simulator.  When the simulated peak is over the budget (the measured
   figures are per option, the chain mixes options) the budget of step 3
   shrinks by the excess and the plan is rebuilt, a few times; when it is
   well under, step 3 gets the room left once.
5. **The stream class** (:mod:`hybrid_remat.blocks.stream`): blocks that
   drop their output too, recomputed from a checkpoint held every ``m``
   blocks, searched on simulated plans; the better of the two plans wins.

It returns the best simulator-valid plan; it proves nothing by itself (the
block bound, :mod:`hybrid_remat.bounds.blocks`, does).

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> fw = nx.DiGraph()
>>> for i in range(14):
...     fw.add_node(i, bytes=4 if i % 3 == 1 else 1, cost=1.0 + (i % 3))
...     if i:
...         fw.add_edge(i - 1, i)
>>> p = Problem.single(training_graph(fw), "60%")
>>> r = solve_blocks(p)
>>> r.plan is not None and simulate(p, r.plan).valid
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..limits import Limits, now
from ..simulate import simulate
from .detect import BlockStructure, detect_blocks
from .menu import _closure_masks, _least_first, _spread, _staircase_of
from .schedule import KeepSetPlanner, capacity_rounds
from .staircase import closure_staircase
from .stream import solve_stream, stream_pays

__all__ = ["BlockMenus", "BlockResult", "block_menus", "probe", "measure_options", "allocate", "solve_blocks",
           "keep_mask"]


@dataclass
class BlockMenus:
    """Options per block kind: ``layer[i]`` (a bool mask over positions of a
    block's forward part: held) and ``epilogue[i]`` (over the epilogue's
    forward nodes), with their staircases' figures."""

    layer: list
    epilogue: list
    layer_extra: list
    epilogue_extra: list
    complete: bool
    stats: dict = field(default_factory=dict)


@dataclass
class BlockResult:
    """What :func:`solve_blocks` found: the best valid plan (or ``None``), its
    simulated objective, the options chosen and figures."""

    plan: object
    objective: float
    choice: dict
    stats: dict


def block_menus(problem, bs: BlockStructure, *, limits: Limits | None = None, max_options: int = 64) -> BlockMenus:
    """The exact held/extra trade-offs of a block (the middle one stands for
    all: the blocks share structure and sizes) and of the epilogue."""
    limits = limits or Limits()
    others = problem.graph.phase == 0
    others[bs.fwd[bs.n_blocks // 2]] = False
    st_layer = _staircase_of(problem, bs.fwd[bs.n_blocks // 2], others, limits.share(0.5 * limits.left())
                             if math.isfinite(limits.left()) else limits)
    return _menus_of(st_layer, _epilogue_staircase(problem, bs, limits), max_options)


def _epilogue_staircase(problem, bs: BlockStructure, limits: Limits):
    epi = bs.epilogue[0]
    others = problem.graph.phase == 0
    others[epi] = False
    return _staircase_of(problem, epi, others, limits) if epi.size else None


def _menus_of(st_layer, st_epi, max_options: int) -> BlockMenus:
    """The menus of a layer staircase and an epilogue staircase (``None``:
    no epilogue): at most ``max_options`` layer points spread over the held
    range, at most 16 epilogue points least memory first."""
    lay = _spread(st_layer.points, max_options)
    ep = _spread(st_epi.points, min(max_options, 16)) if st_epi is not None else []   # one probe each
    ep = _least_first(ep)     # measured in this order: a stopped measurement keeps the extremes
    return BlockMenus([p.x for p in lay], [p.x for p in ep], [p.extra for p in lay], [p.extra for p in ep],
                      st_layer.complete and (st_epi is None or st_epi.complete),
                      {"layer_points": len(st_layer.points), "epilogue_points": 0 if st_epi is None
                       else len(st_epi.points), "solves": st_layer.stats["solves"]
                       + (st_epi.stats["solves"] if st_epi is not None else 0)})


class LayerFront:
    """The middle block's staircase (it stands for every block), coarse
    first and then refined one round at a time: the walk of
    :func:`~hybrid_remat.blocks.menu._staircase_of` (at most 8 rounds, each
    refining every gap from the back, until no gap is left or the front
    holds 64 points), so that the plan can be rebuilt after each round.

    ``work`` (``Limits.work`` of :meth:`step`): closure-model solves the
    refinement may spend in all, checked before each gap (deterministic).
    Call :meth:`close` when done (frees the SCIP model)."""

    max_rounds = 8
    max_points = 64

    def __init__(self, problem, bs: BlockStructure, limits: Limits):
        g = problem.graph
        nodes = bs.fwd[bs.n_blocks // 2]
        others = g.phase == 0
        others[nodes] = False
        preds, needed, fixed = _closure_masks(problem, nodes, others)
        cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)[nodes]
        self.staircase = closure_staircase(nodes, preds, needed=needed, fixed=fixed, cost=cost, size=g.bytes[nodes],
                                           limits=limits, resolution=1 / 24, keep_open=True)
        self.rounds = 0
        self.pending: list = []     # the gaps of the current round still to refine (indices, decreasing)
        self.coarse_solves = self.staircase.stats["solves"]

    @property
    def refine_solves(self) -> int:
        """Closure-model solves spent refining."""
        return self.staircase.stats["solves"] - self.coarse_solves

    def _stopped(self, limits: Limits) -> bool:
        return limits.expired() or (limits.work is not None and self.refine_solves >= limits.work)

    def done(self, limits: Limits | None = None) -> bool:
        """No refinement is left (or ``limits`` stop the next gap)."""
        st = self.staircase
        if limits is not None and self._stopped(limits):
            return True
        if self.pending:
            return False
        return (self.rounds >= self.max_rounds or len(st.points) >= self.max_points
                or not any(p.covers_from < p.held for p in st.points))

    def step(self, limits: Limits, min_seconds: float = math.inf) -> bool:
        """Refine gaps within ``limits``, from the back, until the round ends
        or ``min_seconds`` have passed (then the round resumes at the next
        call: the gaps before stay at their indices); True when it added
        points."""
        st = self.staircase
        before = len(st.points)
        t0 = now()
        if not self.pending:
            if self.done(limits):
                return False
            self.pending = sorted((i for i, p in enumerate(st.points) if p.covers_from < p.held), reverse=True)
            self.rounds += 1
        while self.pending:
            if self._stopped(limits) or now() - t0 >= min_seconds:
                break
            if not st.refine(self.pending.pop(0), limits):
                self.pending = []         # as the one-shot walk: a stopped gap ends the round
                break
        return len(st.points) > before

    def close(self) -> None:
        self.staircase.close()


def keep_mask(graph, bs: BlockStructure, layer_options, menus: BlockMenus, epi_option) -> np.ndarray:
    """The keep set of a choice: every node held except the blocks' and the
    epilogue's forward values their options drop."""
    keep = np.ones(graph.n, dtype=bool)
    for k, o in enumerate(layer_options):
        keep[bs.fwd[k]] = menus.layer[o]
    if epi_option is not None and bs.epilogue[0].size:
        keep[bs.epilogue[0]] = menus.epilogue[epi_option]
    return keep


def probe(problem, bs: BlockStructure, keep, arrays: KeepSetPlanner | None = None) -> dict:
    """Figures of the plan of ``keep`` measured on its simulation, per block
    ``k``: ``held[k]`` (what it adds to the bytes later blocks see) and
    ``inside[k]`` (its peak, forward or backward with its recomputations,
    above the bytes held before it), ``extra[k]`` (its recomputation time);
    and ``base`` (bytes before the first block), ``inside_epilogue``,
    ``extra_epilogue``, ``peak``."""
    arrays = arrays or KeepSetPlanner(problem, "blocks")
    plan, peak, rec = arrays.plan(keep)
    sim = simulate(problem, plan, check_budget=False)
    tl = sim.timeline[:, 0]
    comp = np.flatnonzero(plan.op == 0)
    nodes = plan.node[comp]
    first = np.full(problem.graph.n, -1, dtype=np.int64)
    last = np.full(problem.graph.n, -1, dtype=np.int64)
    last[nodes] = comp                       # later writes win: last computation
    first[nodes[::-1]] = comp[::-1]          # earlier writes win: first computation

    def before(step):
        return int(tl[step - 1]) if step > 0 else 0

    L = bs.n_blocks
    epi_f, epi_b = bs.epilogue
    start = [int(first[bs.fwd[j][0]]) for j in range(L)]
    epi_start = int(first[epi_f].min()) if epi_f.size else int(first[bs.fwd[L - 1]].max()) + 1
    start.append(epi_start)
    a = np.array([before(x) for x in start], dtype=np.int64)
    ends = [int(last[bs.bwd[j]].max()) for j in range(L)]
    epi_end = int(last[epi_b].max()) if epi_b.size else epi_start
    inside = np.zeros(L, dtype=np.int64)
    for k in range(L):
        prev_end = ends[k + 1] if k + 1 < L else epi_end
        fwd_peak = int(tl[start[k]:start[k + 1]].max())
        bwd_peak = int(tl[prev_end + 1:ends[k] + 1].max()) if ends[k] > prev_end else 0
        inside[k] = max(fwd_peak, bwd_peak) - a[k]
    inside_e = int(tl[epi_start:epi_end + 1].max()) - int(a[L]) if epi_end >= epi_start else 0
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    extra = np.array([float(cost[bs.block_nodes(j)][rec[bs.block_nodes(j)]].sum()) for j in range(L)])
    extra_epi = float(cost[epi_f][rec[epi_f]].sum()) if epi_f.size else 0.0
    return {"base": int(a[0]), "held": np.diff(a), "inside": inside, "inside_epilogue": inside_e,
            "peak": int(sim.peak_bytes[problem.primary.name]), "extra": extra, "extra_epilogue": extra_epi,
            "plan": plan, "sim": sim}


def measure_options(problem, bs: BlockStructure, menus: BlockMenus, *, arrays: KeepSetPlanner | None = None,
                    limits: Limits | None = None, epilogue: tuple | None = None) -> dict | None:
    """``held``, ``inside`` and ``extra`` of every block option and
    ``inside``/``extra`` of every epilogue option, from as few simulations as
    the depth allows: the inner blocks of one probe take different options
    (each measured where it sits, its worst figure kept), the first and last
    block a neutral one.  ``None`` when ``limits`` stopped it.
    ``epilogue``: ``(epi_inside, epi_extra)`` measured before for the same
    epilogue menu (its options are not measured again)."""
    limits = limits or Limits()
    arrays = arrays or KeepSetPlanner(problem, "blocks")
    L = bs.n_blocks
    n_opt = len(menus.layer)
    mid = n_opt // 2
    held = np.zeros(n_opt, dtype=np.int64)
    inside = np.zeros(n_opt, dtype=np.int64)
    extra = np.zeros(n_opt)
    seen = np.zeros(n_opt, dtype=bool)
    inner = list(range(1, L - 1)) if L >= 3 else list(range(L))
    todo = list(range(n_opt))
    base = None
    while todo:
        if limits.expired():
            return None
        options = [mid] * L
        placed = {}
        for pos, o in zip(inner, todo, strict=False):
            options[pos] = o
            placed.setdefault(o, []).append(pos)
        todo = todo[len(placed):]
        f = probe(problem, bs, keep_mask(problem.graph, bs, options, menus, 0 if menus.epilogue else None), arrays)
        base = f["base"] if base is None else base
        for o, ks in placed.items():
            held[o] = max(int(f["held"][ks].max()), held[o] if seen[o] else 0)
            inside[o] = max(int(f["inside"][ks].max()), inside[o] if seen[o] else 0)
            extra[o] = float(f["extra"][ks].mean())
            seen[o] = True
    epi_inside, epi_extra = ([], []) if epilogue is None else (list(epilogue[0]), list(epilogue[1]))
    took = 0.0
    for e in range(len(menus.epilogue) if epilogue is None else 0):
        # the options measured so far (a prefix: least memory first, block_menus), leaving time for a plan
        if epi_inside and limits.left() < 2.5 * took:
            break
        if limits.expired():
            return None
        t0 = now()
        f = probe(problem, bs, keep_mask(problem.graph, bs, [mid] * L, menus, e), arrays)
        took = now() - t0
        epi_inside.append(f["inside_epilogue"])
        epi_extra.append(f["extra_epilogue"])
    return {"base": base, "held": held, "inside": inside, "extra": extra, "epi_inside": epi_inside,
            "epi_extra": epi_extra}


def allocate(L: int, held, inside, extra, epi_inside, epi_extra, capacity: float, *, limits: Limits | None = None):
    """How many of ``L`` interchangeable blocks take each option, and the
    epilogue's option, at least extra time subject to the chain constraint
    (module docstring, step 3) within ``capacity`` bytes (SCIP).

    Returns ``(counts, epilogue_option, order)`` with ``order`` the options
    in the order blocks take them (decreasing ``inside - held``), or ``None``
    when nothing fits."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model

    limits = limits or Limits()
    held = np.asarray(held, dtype=np.float64)
    inside = np.asarray(inside, dtype=np.float64)
    order = np.argsort(-(inside - held), kind="stable")
    unit = max(1.0, capacity / 1e6)
    sc = ObjectiveScale.of(np.concatenate([np.asarray(extra, dtype=np.float64).ravel(),
                                           np.asarray(epi_extra, dtype=np.float64).ravel()]))
    with scip_model("blocks_allocate") as m:
        n = {o: m.addVar(vtype="I", lb=0, ub=L, obj=sc.coef(extra[o])) for o in order.tolist()}
        y = {o: m.addVar(vtype="B") for o in order.tolist()}
        z = [m.addVar(vtype="B", obj=sc.coef(e)) for e in epi_extra]
        m.addCons(quicksum(n.values()) == L)
        cap = capacity / unit
        prefix = []
        for o in order.tolist():
            m.addCons(n[o] <= L * y[o])
            m.addCons(y[o] <= n[o])
            m.addCons(quicksum(held[p] / unit * n[p] for p in prefix) + held[o] / unit * n[o]
                      + (inside[o] - held[o]) / unit * y[o] <= cap)
            prefix.append(o)
        if z:
            m.addCons(quicksum(z) == 1)
            m.addCons(quicksum(held[p] / unit * n[p] for p in prefix)
                      + quicksum(float(epi_inside[i]) / unit * z[i] for i in range(len(z))) <= cap)
        res = run(m, limits=cap_nodes(limits, 1_000_000))
        got = None
        if res.has_solution:
            sol = m.getBestSol()
            counts = {o: int(round(m.getSolVal(sol, n[o]))) for o in order.tolist()}
            epi = int(np.argmax([m.getSolVal(sol, v) for v in z])) if z else None
            got = counts, epi, order.tolist()
        res.reraise()
        return got


def _assign(counts, order):
    out = []
    for o in order:
        out += [o] * counts.get(o, 0)
    return out


def _stream_may_pay(problem, bs, menus, info, limits) -> bool:
    """The stream class is searched when one of the held-stream plan's
    options (without a plan, the least-memory option) costs more than the
    same memory with the stream dropped (:func:`~hybrid_remat.blocks.stream.stream_pays`)."""
    counts = (info or {}).get("counts") or {}
    chosen = sorted((o for o, c in counts.items() if c > 0), key=lambda o: -counts[o]) or [len(menus.layer) - 1]
    size = problem.graph.bytes[bs.fwd[bs.n_blocks // 2]]
    return any(stream_pays(problem, bs, int(size[menus.layer[o]].sum()), float(menus.layer_extra[o]), limits=limits)
               for o in chosen[:4])


def solve_blocks(problem, *, limits: Limits | None = None, structure: BlockStructure | None = None,
                 on_incumbent=None, max_rounds: int = 8, stream: bool = True, anytime: bool = True) -> BlockResult:
    """The block solver (module docstring).  ``on_incumbent(plan, source)``
    is called with every better valid plan.  ``stream``: also search the
    class that drops the residual stream (:mod:`hybrid_remat.blocks.stream`)
    and keep the better plan.  ``anytime``: plan first on the coarse layer
    staircase, then refine it a round at a time (:class:`LayerFront`;
    ``limits.work`` caps its closure solves) and plan again after each round
    (step 1); ``False``: refine first (within the menus' share of the
    limits), plan once.  With no limit both end on the same staircase and
    the anytime run's plan is the best of its rounds, the last one that of
    the other run."""
    limits = limits or Limits()
    t0 = now()
    stats: dict = {}
    bs = structure if structure is not None else problem.graph.derived("blocks", detect_blocks)
    if bs is None or bs.n_blocks < 2:
        return BlockResult(None, math.inf, {}, {"skipped": "no repeated blocks"})
    finite = math.isfinite(limits.left())
    menu_lim = limits.share(0.4 * limits.left()) if finite else limits
    front = None
    if anytime:
        front = LayerFront(problem, bs, menu_lim.share(0.5 * menu_lim.left()) if finite else menu_lim)
    try:
        return _solve(problem, bs, limits, menu_lim, front, t0, stats, on_incumbent, max_rounds, stream)
    finally:
        if front is not None:
            front.close()


def _solve(problem, bs, limits, menu_lim, front, t0, stats, on_incumbent, max_rounds, stream) -> BlockResult:
    if front is None:
        menus = block_menus(problem, bs, limits=menu_lim)
    else:
        st_epi = _epilogue_staircase(problem, bs, menu_lim)
        menus = _menus_of(front.staircase, st_epi, LayerFront.max_points)
    stats["menu_s"] = now() - t0
    stats.update(menus.stats)
    if not menus.layer:
        return BlockResult(None, math.inf, {}, {**stats, "skipped": "no block option"})
    arrays = KeepSetPlanner(problem, "blocks")
    L = bs.n_blocks

    def plan_with(menus, fig, report):
        held, inside, extra = fig["held"], fig["inside"], fig["extra"]
        epi_inside, epi_extra = fig["epi_inside"], fig["epi_extra"]

        def chosen(got):
            counts, epi, order = got
            keep = keep_mask(problem.graph, bs, _assign(counts, order), menus, epi)
            return keep, {"counts": counts, "epilogue": epi}

        def choose(capacity):
            got = allocate(L, held, inside, extra, epi_inside, epi_extra, capacity, limits=limits)
            return None if got is None else chosen(got)

        def least():    # the measured figures leave no room: the least memory everywhere
            k = int(np.argmin(np.asarray(held) + np.asarray(inside)))
            return chosen(({k: L}, int(np.argmin(epi_inside)) if epi_inside else None, [k]))

        def note(sim, info):
            return {"tdi_pct": sim.tdi_pct, "counts": {int(k): v for k, v in info["counts"].items() if v}}

        return capacity_rounds(problem, arrays, fig["base"], choose, least, limits=limits, max_rounds=max_rounds,
                               on_incumbent=report, source="blocks", note=note)

    t_plan = now()
    fig = measure_options(problem, bs, menus, arrays=arrays, limits=limits)
    stats["probe_s"] = now() - t_plan
    if fig is None:
        return BlockResult(None, math.inf, {}, {**stats, "stopped": "limits"})
    plan, value, info, rounds = plan_with(menus, fig, on_incumbent)
    stats["rounds"] = rounds
    took = now() - t_plan
    best_menus = menus
    if front is not None:
        # step 1, anytime: each refinement round adds points to the layer staircase, the plan is rebuilt on them
        # (the epilogue's figures kept), the best plan kept; rounds stop leaving time for one more plan and, where
        # the stream class may pay, half of what is left to it
        may = stream and _stream_may_pay(problem, bs, menus, info, limits)
        epilogue = (fig["epi_inside"], fig["epi_extra"])
        stats["refine"] = []
        while not front.done(limits):
            room = limits.left()
            room = (0.5 * room if may else room) - 1.5 * took
            if room <= 0:
                break
            lim = limits.share(room) if math.isfinite(room) else limits
            t1 = now()
            added = front.step(lim, min_seconds=2.0 * took if math.isfinite(room) else math.inf)
            if not added:
                if lim.expired():
                    break
                continue
            menus_r = _menus_of(front.staircase, st_epi, LayerFront.max_points)
            t_plan = now()
            fig_r = measure_options(problem, bs, menus_r, arrays=arrays, limits=limits, epilogue=epilogue)
            if fig_r is None:
                break
            plan_r, value_r, info_r, rounds_r = plan_with(menus_r, fig_r, None)
            took = now() - t_plan
            stats["refine"].append({"round": front.rounds, "points": len(front.staircase.points),
                                    "refine_s": t_plan - t1, "plan_s": took, "objective": value_r,
                                    "tdi_pct": rounds_r[-1].get("tdi_pct") if rounds_r else None})
            if value_r < value:
                plan, value, info, best_menus = plan_r, value_r, info_r, menus_r
                if on_incumbent is not None:
                    on_incumbent(plan, "blocks")
        stats.update({"layer_points": len(front.staircase.points), "refine_rounds": front.rounds,
                      "refine_solves": front.refine_solves})
    if stream and not limits.expired() and _stream_may_pay(problem, bs, best_menus, info, limits):
        epi = (info or {}).get("epilogue")     # the class that drops the residual stream (blocks/stream.py)
        got = solve_stream(problem, bs, limits=limits, arrays=arrays,
                           epilogue_keep=best_menus.epilogue[epi] if epi is not None and best_menus.epilogue
                           else None)
        stats["stream"] = None if got is None else {**got[2], "objective": got[1]}
        if got is not None and got[1] < value:
            plan, value, info = got[0], got[1], {"stream": got[2]}
            if on_incumbent is not None:
                on_incumbent(plan, "blocks")
    stats["seconds"] = now() - t0
    return BlockResult(plan, value, info or {}, stats)
