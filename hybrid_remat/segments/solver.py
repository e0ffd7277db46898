"""The segment-chain solver: one menu per kind of stage, figures measured
by the simulator, options chosen across the chain by a dynamic program,
a simulator-checked plan.

Plan class: keep-or-recompute-once (:mod:`hybrid_remat.blocks.schedule`):
each stage keeps the forward values of its chosen option (values read by a
later stage's forward part always), the backward pass recomputes the rest
once, just in time.  Repeated blocks are stages that share a menu; a graph
with no repetition is a chain of segments of its own (HiRemate's idea,
with exact menus where small and a simulator-checked plan).

1. **Menus** (:mod:`.menus`): independent tasks, exact with SCIP where small.
   The stages of a run of repeated blocks also get the *stream options*
   where they pay (:mod:`.stream`: the block drops the output the next
   block reads, recomputed from a checkpoint every ``m`` blocks), options
   like the others for the figures and the DP.
2. **Figures** (:func:`chain_figures`): ``J`` simulations of the whole
   graph, in the ``j``-th every stage takes its ``j``-th option (spread
   over its menu): per stage and option the bytes it adds to what later
   stages see (``held``), its peak above what earlier stages hold, forward
   or backward (``inside``), and its recomputation time (``extra``).
3. **Across the chain** (:func:`chain_dp`): stage ``k`` runs with the bytes
   of stages ``0..k-1`` held, so ``base + sum_{j<k} held_j + inside_k <=
   B`` for every ``k``.  A dynamic program over the stages in forward order
   (:mod:`.dp`: prefixes bucketed by ``B / resolution``, each bucket with its
   exact prefix) minimises the extra time; every choice fits the measured
   figures exactly.
4. **Plan** and rounds as in :func:`~hybrid_remat.blocks.solver.solve_blocks`:
   over the budget, the capacity shrinks by the excess; well under, it grows
   once by the room left.  Where stream options exist, the last rounds are
   run twice: on every option, then on the held-stream options alone (the
   same figures), the better plan kept.

Anytime: before the menus, a first plan from one simulation (every stage
keeps only its fixed values: :func:`quick_keep`); after the menus, the
figures of three columns of the sweep (the least memory and the two
predicted to straddle the budget, :func:`budget_columns`; else both ends
and the middle, :func:`sweep_order`) and their DP plan; then the rest of
the sweep, nearest the budget first, and the final rounds.  Every better valid plan goes to ``on_incumbent`` at once.

It returns the best simulator-valid plan and proves nothing itself; the
bound over every plan is :func:`~hybrid_remat.bounds.segments.segment_lower_bound`.
The DP's value is the least extra time of the class *as measured* (figures
of mixed options are approximations), so it is no bound of any kind and is
not reported as one.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> g = training_graph(nx.path_graph(16, create_using=nx.DiGraph))
>>> p = Problem.single(g, "60%")
>>> r = solve_segments(p)
>>> r.plan is not None and simulate(p, r.plan).valid
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..blocks.detect import missing_structure
from ..blocks.schedule import KeepSetPlanner, capacity_rounds
from ..limits import Limits, now
from ..simulate import simulate
from .chain import SegmentChain, segment_chain
from .dp import chain_dp_kernel
from .menu_exec import executor_for
from .menus import compute_menus, menu_tasks
from .redrop import PrunedPlans, RedropPlanner
from .stream import stream_groups, stream_options, with_stream

__all__ = ["SegmentResult", "chain_figures", "chain_dp", "budget_columns", "stage_groups", "quick_keep", "sweep_order", "solve_segments", "stage_menus", "REDROP_CAP"]


@dataclass
class SegmentResult:
    """The best valid plan (or ``None``), its simulated objective, the
    option per stage and figures."""

    plan: object
    objective: float
    choice: list
    stats: dict


def stage_menus(chain: SegmentChain, menus: dict) -> list:
    """The menu of every stage (stages of one kind share theirs)."""
    return [menus[("kind", chain.kind_of(s)) if chain.kind_of(s) is not None else ("stage", s)]
            for s in range(chain.n_stages)]


def _keep(graph, chain, per_stage, choice) -> np.ndarray:
    keep = np.ones(graph.n, dtype=bool)
    for s, o in enumerate(choice):
        keep[chain.fwd[s]] = per_stage[s].options[o]
    return keep


def _probe(problem, chain, plan, rec):
    """Per stage ``held``, ``inside`` and ``extra`` of one simulated plan,
    and ``base`` (bytes before the first stage)."""
    sim = simulate(problem, plan, check_budget=False)
    tl = sim.timeline[:, 0]
    comp = np.flatnonzero(plan.op == 0)
    nodes = plan.node[comp]
    n = problem.graph.n
    first = np.full(n, -1, dtype=np.int64)
    last = np.full(n, -1, dtype=np.int64)
    last[nodes] = comp
    first[nodes[::-1]] = comp[::-1]
    S = chain.n_stages
    start = np.array([int(first[chain.fwd[s]].min()) for s in range(S)] + [int(last[chain.fwd[-1]].max()) + 1])
    a = np.array([int(tl[x - 1]) if x > 0 else 0 for x in start], dtype=np.int64)
    ends = np.array([int(last[chain.bwd[s]].max()) if chain.bwd[s].size else -1 for s in range(S)])
    inside = np.zeros(S, dtype=np.int64)
    prev_end = int(start[S]) - 1
    for s in range(S - 1, -1, -1):
        fwd_peak = int(tl[start[s]:max(start[s + 1], start[s] + 1)].max())
        bwd_peak = int(tl[prev_end + 1:ends[s] + 1].max()) if ends[s] > prev_end else 0
        inside[s] = max(fwd_peak, bwd_peak) - a[s]
        prev_end = max(prev_end, int(ends[s]))
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    spent = cost * rec       # ``rec``: recomputed (bool) or how many times (the re-drop rule's counts)
    extra = np.array([float(spent[chain.fwd[s]].sum()) for s in range(S)])
    return int(a[0]), np.diff(a), inside, extra, sim


def sweep_order(J: int) -> list:
    """The columns ``0..J-1`` in the order :func:`chain_figures` simulates
    them: both ends, then midpoints (a sweep stopped early still spans the
    menus)."""
    if J <= 1:
        return list(range(J))
    order, seen = [0, J - 1], {0, J - 1}
    step = J - 1
    while len(order) < J:
        step = max(1, step // 2)
        for j in range(step, J, step):
            if j not in seen:
                seen.add(j)
                order.append(j)
    return order


def chain_figures(problem, chain, per_stage, *, planner=None, limits: Limits | None = None, columns=None,
                  into=None, done: list | None = None):
    """``(base, held, inside, extra)``: arrays ``(S, O)`` per stage and
    option (``O``: the longest menu; options a stage lacks, or not
    simulated yet, are ``inf``), from one simulation per column ``j`` of
    ``columns`` (default all, in :func:`sweep_order`; module docstring,
    step 2), added to ``into`` (figures of earlier columns) when given;
    ``None`` when ``limits`` stopped it before any column.  ``done``: a list
    the simulated columns are appended to."""
    limits = limits or Limits()
    planner = planner or KeepSetPlanner(problem, "segments")
    S = chain.n_stages
    J = max(len(m.options) for m in per_stage)
    if into is None:
        held = np.full((S, J), np.inf)
        inside = np.full((S, J), np.inf)
        extra = np.full((S, J), np.inf)
        base, count = 0, 0
    else:
        base, held, inside, extra = into
        count = 1
    for j in (sweep_order(J) if columns is None else columns):
        if limits.expired():
            break
        choice = _column_choice(per_stage, j, J)
        plan, _, rec = planner.plan(_keep(problem.graph, chain, per_stage, choice))
        b, h, ins, ex, _ = _probe(problem, chain, plan, rec)
        base = max(base, b)
        rows = np.arange(S)
        cols = np.array(choice)
        held[rows, cols] = np.where(np.isfinite(held[rows, cols]), np.maximum(held[rows, cols], h), h)
        inside[rows, cols] = np.where(np.isfinite(inside[rows, cols]), np.maximum(inside[rows, cols], ins), ins)
        extra[rows, cols] = ex
        count += 1
        if done is not None:
            done.append(j)
    if not count:
        return None
    return base, held, inside, extra


def _column_choice(per_stage, j: int, J: int) -> list:
    """The option every stage takes in column ``j`` (:func:`chain_figures`)."""
    return [int(round(j * (len(m.options) - 1) / max(1, J - 1))) for m in per_stage]


def budget_columns(per_stage, fig, capacity: float, measured: int) -> list:
    """The two columns predicted to straddle ``capacity`` (bytes above
    ``base``): the most-memory column predicted to fit and the one before
    it, the prediction being column ``measured``'s modelled peak (the DP's
    rows on its figures ``fig``) plus the menus' held bytes it adds; the
    columns not measured yet come first in the early sweep (a plan near the
    budget from three simulations: at 100k nodes the sweep's ends and middle
    left the DP far from it)."""
    base, held, inside, _ = fig
    J = max(len(m.options) for m in per_stage)
    rows = np.arange(len(per_stage))
    c = np.array(_column_choice(per_stage, measured, J))
    h, ins = held[rows, c], inside[rows, c]
    if not (np.isfinite(h).all() and np.isfinite(ins).all()):
        return []
    peak = float((np.concatenate([[0.0], np.cumsum(np.maximum(h, 0))[:-1]]) + ins).max())
    menu_held = [np.asarray(m.held, dtype=np.float64) for m in per_stage]
    at = float(sum(mh[o] for mh, o in zip(menu_held, c, strict=True)))
    fits = [j for j in range(J)
            if peak + sum(mh[o] for mh, o in zip(menu_held, _column_choice(per_stage, j, J), strict=True)) - at
            <= capacity]
    if not fits:
        return []
    j = min(fits)
    return [x for x in (j, j - 1) if 0 <= x < J and x != measured]


def stage_groups(kind, target: int = 256) -> list:
    """Ranges ``(first, end)`` of consecutive stages that :func:`chain_dp`
    treats as one: stages of one run (one ``kind`` >= 0) in chunks of ``m``
    (``m`` such that the chain has about ``target`` groups), every segment
    of its own alone.  A chunk takes one option for all its stages, so that
    each group's held bytes are many prefix buckets wide (thousands of
    blocks each holding less than a bucket made the bucketed DP drift to its
    cheapest options: no choice fit at 100k nodes)."""
    kind = np.asarray(kind)
    S = kind.size
    m = max(1, -(-S // max(1, target)))
    out = []
    s = 0
    while s < S:
        e = s + 1
        if kind[s] >= 0:
            while e < S and e - s < m and kind[e] == kind[s]:
                e += 1
        out.append((s, e))
        s = e
    return out


def chain_dp(held, inside, extra, capacity: float, *, resolution: int = 2048, groups: list | None = None):
    """The options (one per stage, in forward order) of least total extra
    time with ``sum_{j<k} held_j + inside_k <= capacity`` for every ``k``
    (checked on exact prefix sums; prefixes bucketed by ``capacity /
    resolution``: :mod:`.dp`), or ``None`` when none fits.
    ``held``/``inside``/``extra``: ``(S, O)``, ``inf`` where a stage lacks
    the option.  ``groups`` (:func:`stage_groups`): stages that take one
    option together (their figures summed, their rows kept exactly)."""
    if capacity <= 0:
        return None
    held = np.asarray(held, dtype=np.float64)
    inside = np.asarray(inside, dtype=np.float64)
    extra = np.asarray(extra, dtype=np.float64)
    if groups is not None and len(groups) < held.shape[0]:
        hg = np.empty((len(groups), held.shape[1]))
        ig = np.empty_like(hg)
        eg = np.empty_like(hg)
        for i, (a, b) in enumerate(groups):
            h = np.where(np.isfinite(held[a:b]), np.maximum(held[a:b], 0), 0.0)
            before = np.cumsum(h, axis=0) - h            # held by the group's earlier stages
            lacks = ~np.isfinite(held[a:b]).all(axis=0)   # an option some stage of the group lacks
            hg[i] = np.where(lacks, np.inf, h.sum(axis=0))
            ig[i] = np.where(lacks, np.inf, (before + inside[a:b]).max(axis=0))
            eg[i] = np.where(lacks, np.inf, extra[a:b].sum(axis=0))
        got = chain_dp(hg, ig, eg, capacity, resolution=resolution)
        if got is None:
            return None
        return [o for (a, b), o in zip(groups, got, strict=True) for _ in range(b - a)]
    got = chain_dp_kernel(np.ascontiguousarray(held), np.ascontiguousarray(inside), np.ascontiguousarray(extra),
                          float(capacity), int(resolution))
    return None if got.size == 0 else [int(o) for o in got]


def quick_keep(chain, tasks, n: int) -> np.ndarray:
    """The keep set of the least memory the menus can offer, without them:
    every stage keeps only its ``fixed`` values (a block's values read by
    the next block; a segment of its own, none), all else is recomputed once
    (the greedy menus' last option)."""
    by_key = {t.key: t for t in tasks}
    keep = np.ones(n, dtype=bool)
    for s in range(chain.n_stages):
        k = chain.kind_of(s)
        t = by_key[("kind", k) if k is not None else ("stage", s)]
        keep[chain.fwd[s]] = t.fixed
    return keep


def _option_counts(streams: dict) -> dict:
    """The number of stream points per run (what the stages' option lists depend on)."""
    return {k: len(so.points) for k, so in streams.items()}


def _reserve(limits: Limits, seconds: float) -> Limits:
    """``limits`` ending ``seconds`` earlier (no earlier than now)."""
    left = limits.left()
    return limits.share(max(0.0, left - seconds)) if math.isfinite(left) else limits


def solve_segments(problem, *, limits: Limits | None = None, chain: SegmentChain | None = None,
                   menus: dict | None = None, on_incumbent=None, max_rounds: int = 8,
                   stream: bool = True, redrop=None, menu_executor=None) -> SegmentResult:
    """The segment-chain solver (module docstring).  ``menus``: computed
    already (:func:`~.menus.compute_menus` of :func:`~.menus.menu_tasks`);
    ``on_incumbent(plan, source)`` is called with every better valid plan;
    ``stream``: the runs' stages may also drop the residual stream where it
    pays (:mod:`.stream`: more options for the same figures and DP);
    ``menu_executor``: where the menus run (:mod:`.menu_exec`; default:
    :func:`~.menu_exec.executor_for` the limits, the portfolio's worker
    count).

    ``redrop``: ``None`` (default) the keep-or-recompute-once class alone; an int
    ``c`` the re-drop class alone (:mod:`.redrop`: values that come back
    from kept ones through at most ``c`` others are recomputed at every
    stage that needs them, the stream positions include the values later
    stages read, its figures measured on its own plans, each plan of its
    rounds without the recomputations the budget does not need); ``"both"``
    the first class with half the time, then the re-drop class
    (``c`` = :data:`REDROP_CAP`) with the rest, the better plan returned (not the default: halving the first class's
    time cost U-Net 100k at 50 % 4.54 -> 7.15 % TDI in a 20 s solve, while
    U-Net 10k/32k at 30 % gained 0.7-0.8 point)."""
    limits = limits or Limits()
    if redrop != "both":
        return _solve(problem, limits, chain, menus, on_incumbent, max_rounds, stream, redrop, math.inf,
                      menu_executor)
    left = limits.left()
    first = _solve(problem, limits.share(0.5 * left) if math.isfinite(left) else limits, chain, menus,
                   on_incumbent, max_rounds, stream, None, math.inf, menu_executor)
    if first.stats.get("skipped") or limits.expired():
        return first
    second = _solve(problem, limits, chain, menus, on_incumbent, max_rounds, stream, REDROP_CAP, first.objective,
                    menu_executor)
    won = second if second.objective < first.objective else first
    return SegmentResult(won.plan, won.objective, won.choice,
                         {**first.stats, "redrop": second.stats, "class": "redrop" if won is second else "once"})


#: the re-drop class of :func:`solve_segments`' second pass: values that come back through at most this many
#: others not kept (a skip of a residual stream with a checkpoint every 3 blocks: 2)
REDROP_CAP = 2


def _solve(problem, limits, chain, menus, on_incumbent, max_rounds, stream, redrop, floor,
           menu_executor=None) -> SegmentResult:
    """One class of :func:`solve_segments`; ``on_incumbent`` hears of plans
    under ``floor`` only (what an earlier class found)."""
    t0 = now()
    chain = chain if chain is not None else segment_chain(problem.graph)
    if chain is None:
        return SegmentResult(None, math.inf, [], {"skipped": missing_structure(
            problem.graph, "not a training graph (no backward phase after the forward phase)")})
    stats: dict = {"chain": chain.describe()}
    planner = (KeepSetPlanner(problem, "segments") if redrop is None
               else RedropPlanner(problem, "segments", chain.stage, cap=redrop))
    rounds_planner = planner if redrop is None else PrunedPlans(planner, limits)
    best = [None, math.inf, None]
    stats["rounds"] = []

    def offer(plan, value, choice):
        if plan is not None and value < best[1]:
            best[:] = [plan, value, choice]
            if on_incumbent is not None and value < floor:
                on_incumbent(plan, "segments")

    # menus and figures do not depend on the budget's use: kept with the problem for a later call
    memo = problem.__dict__.setdefault("_segments_memo", {}) if menus is None else {}
    key = (id(chain), chain.n_stages, bool(stream), redrop)
    kept = memo.get(key)
    fig, done, streams, cut = None, [], None, False
    if kept is not None:
        menus, fig, done, streams = kept["menus"], kept["fig"], kept["done"], kept["stream"]
        stats["memo"] = {"columns": len(done)}
        if kept["stream_cut"]:      # the earlier call's limits cut the stream menus: again, with this call's
            streams, old = None, streams
        if kept["best"][0] is not None:
            best[:] = kept["best"]          # the earlier call's plan: this one returns no worse
    elif menus is None and memo.get(("menus", id(chain))) is not None:
        menus = memo[("menus", id(chain))]      # another class's call: the menus are the same
    elif menus is None:
        tasks = menu_tasks(problem, chain)
        quick = quick_keep(chain, tasks, problem.graph.n)     # a first plan in one simulation
        t1 = now()
        plan, _, _ = planner.plan(quick)
        sim = simulate(problem, plan)
        stats["quick"] = {"valid": bool(sim.valid), "seconds": now() - t0}
        memo["sim_s"] = now() - t1
        if sim.valid:
            offer(plan, problem.objective.value(sim), None)
        left = limits.left()
        ex = executor_for(limits, menu_executor)
        menus = compute_menus(tasks, limits=limits.share(0.5 * left) if math.isfinite(left) else limits, executor=ex)
        if ex is not None:
            stats["menu_executor"] = dict(ex.stats)
    per_stage = stage_menus(chain, menus)
    if streams is None:
        t1, left = now(), limits.left()
        # a cap, seldom reached (a few SCIP solves per run): with 0.15 of the time left the portfolio's share
        # at 2k-10k nodes under load cut the staircases before any stream point and the class was lost
        share = limits.share(0.35 * left) if math.isfinite(left) else limits
        streams = stream_options(problem, chain, menus, limits=share, distant=redrop is not None) if stream else {}
        cut = share.expired()
        stats["stream_s"] = now() - t1
        if kept is not None and _option_counts(streams) != _option_counts(old):
            fig, done = None, []    # other options per stage: the kept figures do not apply
    per_stage = with_stream(chain, per_stage, streams)
    stats["stream"] = {int(k): {**so.stats, "period": so.period} for k, so in streams.items()}
    # a column or a round (one plan, one simulation) starts only where it can end before the deadline
    limits = _reserve(limits, memo.get("sim_s", 0.0))
    stats["menus"] = {"exact": sum(m.exact for m in menus.values()), "total": len(menus),
                      "seconds": now() - t0}
    plain_groups = stage_groups(chain.kind)
    groups = stream_groups(chain, streams, plain_groups)       # stream runs: one option between checkpoints

    def least():    # the least memory everywhere, once
        choice = [len(m.options) - 1 for m in per_stage]
        return _keep(problem.graph, chain, per_stage, choice), choice

    n_opt = max(len(m.options) for m in per_stage)
    streamed = np.zeros((chain.n_stages, n_opt), dtype=bool)    # the stream options (:mod:`.stream`), per stage
    for s, m in enumerate(per_stage):
        if m.stream:
            streamed[s, :len(m.stream)] = m.stream

    def rounds_on(fig, n_rounds, held_only=False):
        base, held, inside, extra = fig
        if held_only:     # the held-stream class alone, on the same figures, stage groups as without the stream
            extra = np.where(streamed, np.inf, extra)
        by = plain_groups if held_only else groups

        def choose(capacity):
            choice = chain_dp(held, inside, extra, capacity, groups=by)
            return None if choice is None else (_keep(problem.graph, chain, per_stage, choice), choice)

        plan, value, choice, rounds = capacity_rounds(problem, rounds_planner, base, choose, least, limits=limits,
                                                      max_rounds=n_rounds, source="segments")
        stats["rounds"] += rounds
        offer(plan, value, choice)

    # a few columns (the least memory and two near the budget): a plan early; then the rest of the sweep
    J = max(len(m.options) for m in per_stage)
    todo = [j for j in sweep_order(J) if j not in done]
    if fig is None:
        # the least memory first, then the two columns predicted to straddle the budget (else the ends and middle)
        fig = chain_figures(problem, chain, per_stage, planner=planner, limits=limits, columns=[J - 1], done=done)
        near = [] if fig is None else budget_columns(per_stage, fig, float(problem.budgets[0]) - fig[0], J - 1)
        first = near or [j for j in todo if j not in done][:2]
        if fig is not None and not limits.expired():
            fig = chain_figures(problem, chain, per_stage, planner=planner, limits=limits, columns=first, into=fig,
                                done=done)
        todo = [j for j in todo if j not in done]
        if near:      # the rest nearest the budget first (a sweep stopped early still has the columns that matter)
            todo.sort(key=lambda j: abs(j - near[0]))
        if fig is None:
            stats["stopped"] = "limits"
        else:
            rounds_on(fig, 3)
            stats["early"] = {"columns": len(done), "seconds": now() - t0, "value": best[1]}
    if fig is not None and not limits.expired():
        if todo:      # the rounds keep a third of the time left
            left = limits.left()
            fig = chain_figures(problem, chain, per_stage, planner=planner, columns=todo, into=fig, done=done,
                                limits=limits.share(0.67 * left) if math.isfinite(left) else limits)
        rounds_on(fig, max_rounds)
        if streamed.any() and not limits.expired():     # the better of the two classes wins
            rounds_on(fig, max_rounds, held_only=True)
    if fig is not None:
        memo[("menus", id(chain))] = menus      # for the other class's call
        memo[key] = {"menus": menus, "fig": fig, "done": done, "best": list(best), "stream": streams,
                     "stream_cut": cut}
    plan, value, choice = best
    if choice and streams:
        stats["stream_stages"] = sum(bool(per_stage[s].stream and o < len(per_stage[s].stream)
                                          and per_stage[s].stream[o]) for s, o in enumerate(choice))
    stats["seconds"] = now() - t0
    return SegmentResult(plan, value, choice or [], stats)
