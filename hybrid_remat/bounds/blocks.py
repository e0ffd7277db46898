"""The block bound: the cut bound with recomputation chains, solved exactly
block by block (a lower bound over every plan).

Statement.  Let ``t`` be a node, ``A`` its ancestors and ``N`` those with a
consumer among ``t``'s descendants, without ``t``'s inputs.  Group ``A`` by
stage (prologue, each block, epilogue; :mod:`hybrid_remat.blocks.detect`).
For each group ``g`` let ``E_g(h)`` be the least recomputation time of the
group's *closure model* (:mod:`hybrid_remat.blocks.staircase`: ``x_v + r_v
>= 1`` for ``v`` in ``N``, ``r_v <= x_u + r_u`` for inputs ``u`` inside the
group, ``x_v = 1`` for ``t``'s inputs) with at most ``h`` bytes held.  Then
every valid plan costs at least::

    base + min { sum_g E_g(h_g) : sum_g h_g <= B - bytes(t) }

Proof.  (1) At the first computation of ``t`` (cut bound, see
:mod:`hybrid_remat.bounds.cut`) each ``v`` in ``N`` is resident or
computed again later; a value computed again later needs each input resident
at the cut or computed again too; ``t``'s inputs are resident; the resident
ancestors fit in ``B - bytes(t)``; with ``x_v`` = resident at the cut and
``r_v`` = computed after it (a second computation: ancestors were computed
before the cut), every plan gives a feasible ``(x, r)`` of the chains model
whose ``sum c_v r_v`` is at most the plan's cost beyond ``base``.  (2)
Dropping the rows ``r_v <= x_u + r_u`` whose ``u`` lies in another group
enlarges the feasible set, and what remains couples the groups only through
the memory row: the minimum is the expression above.  (3) Each group's
staircase (its exact Pareto front by the epsilon-constraint method) gives
points ``i`` with ``E_g(h) >= extra_bound_i`` for every ``h`` in
``[covers_from_i, query_i]`` and no held set outside the union of these
ranges; choosing one point per group with memory ``covers_from_i`` and cost
``extra_bound_i`` is therefore a relaxation, solved as an integer program
over how many groups of each kind take each point; SCIP's dual bound is at
most its optimum.  Identical blocks (same positions in ``A`` and ``N``, same
costs) share one staircase, so the bound costs a few small SCIP models at
any depth.

(4) Stages of one kind whose costs differ (a profiler's measurements) have
the same closure model but for the objective.  Kinds of up to
:data:`EXACT_COST_BLOCKS` stages are solved stage by stage with their own
costs.  The stages ``U`` of larger kinds are bounded together: keep the rows
of step (1) between nodes of ``U`` (drop only those to other groups, as in
step 2) and let ``L(lam) = min { c . r + lam * s . x }`` over that joint
model, for a price ``lam >= 0`` per byte.  Every feasible ``(x, r)`` of it
holding ``H`` bytes has ``c . r >= L(lam) - lam * H``, for every ``lam`` at
once; so with ``phi >= L(lam_j) - lam_j * H`` for any finite set of prices
(and ``phi >= 0``), ``phi`` and ``H`` replace the items of these stages in
the integer program of step (3) (``sum h_g + H <= B - bytes(t)``) and its
optimum stays at most the plan's cost.  :mod:`hybrid_remat.blocks.lagrange`
computes a lower bound on ``L(lam)`` as a minimum cut (proof there), so each
line lies below the true one; the prices are chosen by bisection towards the
one whose line is highest at the program's ``H`` (any choice is valid).  A
stopped or failed price search only leaves fewer lines.  A group whose
staircase was stopped by the limits before any point,
or of more than :data:`MAX_GROUP_NODES` nodes (not solved at all), keeps
only the item (bytes of its inputs of ``t``, 0 s), which every held set of
it dominates (every held set holds ``t``'s inputs and recomputes at least
nothing).  Any partition of the nodes into groups gives a valid
bound (step 2 never uses what the groups are), so the same statement holds
for the segment chains of :mod:`hybrid_remat.segments`.

It is at most the chains MILP of the same cut (step 2 relaxes it) and in
practice equal to it on layered models, whose groups touch only through the
residual stream.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.oracle import brute_force
>>> fw = nx.DiGraph()
>>> for i in range(5):          # a stem and two blocks of (wide, narrow)
...     fw.add_node(i, bytes=3 if i % 2 else 1, cost=1.0 + i % 2)
...     if i:
...         fw.add_edge(i - 1, i)
>>> p = Problem.single(training_graph(fw), 9)
>>> lb = block_lower_bound(p)
>>> p.base_cost < lb.value <= brute_force(p)[0]
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..blocks.detect import BlockStructure, detect_blocks, missing_structure
from ..blocks.staircase import closure_staircase
from ..blocks.structure import RemembersBlocks, block_partition, blocks_applicable, coverage, runs_chain
from ..interfaces import ALL_PLANS, Bound, BoundResult
from ..limits import Limits, now

__all__ = ["BlockBound", "block_lower_bound", "BlockBoundSource", "blocks_applicable", "RemembersBlocks",
           "block_partition", "coverage", "runs_chain"]


@dataclass
class BlockBound:
    """``value`` bounds every plan's total compute time (``base + extra``);
    ``node`` is the cut (-1: none, the trivial bound); ``tolerance``: how
    far SCIP's tolerances may have lowered it (a plan within it of the bound
    reaches it)."""

    value: float
    extra: float
    node: int
    stats: dict = field(default_factory=dict)
    tolerance: float = 0.0


#: kinds of more stages than this whose costs differ (measured with noise) are bounded together by the
#: closure model's Lagrangian (a minimum cut per price, :mod:`hybrid_remat.blocks.lagrange`); smaller kinds are
#: solved stage by stage with their own costs
EXACT_COST_BLOCKS = 16
#: a group of more ancestors of the cut than this keeps only its item (bytes of its inputs of ``t``, 0 s):
#: building and freeing the closure model of a 20k-node prologue outlasted the deadline (ResNet stages at 32k)
MAX_GROUP_NODES = 4096


class _Prices:
    """The Lagrangian lines ``phi >= L(lam) - lam * H`` of the stages bounded
    together (module docstring, step 4): evaluated prices, their lower bounds
    ``L`` and the bytes their minimum cut held (nonincreasing in the price)."""

    def __init__(self, lg):
        self.lg = lg
        self.seen: dict = {}

    def at(self, lam: float):
        lam = float(lam)
        if lam not in self.seen:
            low, held, _ = self.lg.value(lam)
            self.seen[lam] = (low, held)
        return self.seen[lam]

    def lines(self) -> list:
        return [(lam, low) for lam, (low, _) in self.seen.items()]

    def start(self, limits) -> None:
        """Prices at quantiles of the nodes' time per byte (and 0)."""
        lg = self.lg
        pos = lg.size > 0
        self.at(0.0)
        if pos.any():
            ratio = lg.cost[pos] / lg.size[pos]
            for q in (0.05, 0.3, 0.6, 0.9):
                if limits.expired():
                    return
                self.at(float(np.quantile(ratio, q)))

    def best_at(self, H: float) -> float:
        return max(low - lam * H for lam, low in self.lines())

    def search(self, H: float, limits, steps: int = 14) -> None:
        """Prices towards the one whose line is highest at ``H`` bytes: where
        the held bytes of the cut cross ``H`` (bisection on the price; the
        line's value is concave in it)."""
        if self.at(0.0)[1] <= H:       # holding every forced value fits: the line of price 0 is the best
            return
        for _ in range(steps):
            if limits.expired():
                return
            pts = sorted(self.seen.items())
            lo = max((lam for lam, (_, h) in pts if h >= H), default=0.0)
            hi = min((lam for lam, (_, h) in pts if h <= H and lam > lo), default=None)
            if hi is None:                         # every price seen holds more than H: raise it
                top = max(lam for lam, _ in pts)
                self.at(4.0 * top if top > 0 else 1.0)
                continue
            if lo <= 0.0:
                lo = hi / 64.0
                if lo not in self.seen:
                    self.at(lo)
                    continue
            if hi <= lo * (1 + 1e-6):
                return
            self.at(math.sqrt(lo * hi))


def _positions(part, n: int) -> np.ndarray:
    """Every node's position in its stage's :meth:`stage_nodes` (``-1``
    outside the stages of a kind), computed once per partition (one array,
    not one per stage: 4352 stages of a 100k-node U-Net took seconds)."""
    pos = part.__dict__.get("_positions")
    if pos is None or pos.size != n:
        pos = np.full(n, -1, dtype=np.int64)
        for s in range(part.n_stages if hasattr(part, "n_stages") else part.n_blocks):
            if part.kind_of(s) is not None:
                block = part.stage_nodes(s)
                pos[block] = np.arange(block.size)
        part.__dict__["_positions"] = pos
    return pos


def _groups(problem, part, t: int, anc, items):
    """``({key: [count, share, cost, size, preds, needed, fixed]}, together)``:
    the cut's groups (``part``: a :class:`~.detect.BlockStructure` or a
    segment chain: ``stage`` per node, ``kind_of(s)``, ``stage_nodes(s)``,
    ``same_costs_of(kind)``, ``count_of(kind)``, ``positioned(s)``: how many of
    ``stage_nodes(s)`` are matched by position across the kind) and the nodes
    of the stages bounded together by the Lagrangian (kinds of more than
    :data:`EXACT_COST_BLOCKS` stages whose costs differ; module docstring,
    step 4).  Stages of one kind with the same positions in the cut share a
    key; with different costs the key also holds the costs.  Groups of one
    ``share`` key use one staircase."""
    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    inputs = np.zeros(g.n, dtype=bool)
    inputs[g.preds(t)] = True
    stage = part.stage
    out: dict = {}
    together: list = []
    members = np.flatnonzero(anc)
    ms = stage[members]
    order = np.argsort(ms, kind="stable")      # members by stage, in node order within one
    uniq, first = np.unique(ms[order], return_index=True)
    bounds = np.append(first, order.size)
    for i, s in enumerate(uniq.tolist()):
        nodes = members[order[bounds[i]:bounds[i + 1]]]
        needed = items[nodes]
        fixed = inputs[nodes]
        kind = part.kind_of(s)
        if kind is not None:
            pos = _positions(part, g.n)
            if (pos[nodes] >= part.positioned(s)).any():
                kind = None            # nodes without a position in the kind: a group of its own
        if kind is not None:
            if not part.same_costs_of(kind) and part.count_of(kind) > EXACT_COST_BLOCKS:
                if needed.any():
                    together.append(nodes)
                    continue
            share = ("kind", kind, tuple(pos[nodes].tolist()), tuple(np.flatnonzero(needed).tolist()),
                     tuple(np.flatnonzero(fixed).tolist()))
            if not part.same_costs_of(kind):
                share = share + (tuple(cost[nodes].tolist()),)
        else:
            share = ("stage", s)
        if share in out:
            out[share][0] += 1
            continue
        loc = np.full(g.n, -1, dtype=np.int64)
        loc[nodes] = np.arange(nodes.size)
        preds = [[int(loc[u]) for u in g.preds(v).tolist() if loc[u] >= 0] for v in nodes.tolist()]
        out[share] = [1, share, cost[nodes], g.bytes[nodes], preds, needed, fixed]
    return out, (np.concatenate(together) if together else None)


def _together(problem, t: int, nodes, items) -> _Prices:
    """The Lagrangian of the closure model over ``nodes`` (rows between
    them kept, inputs outside taken as available; module docstring, step 4)."""
    from ..blocks.lagrange import ClosureLagrangian

    g = problem.graph
    nodes = np.sort(nodes)
    loc = np.full(g.n, -1, dtype=np.int64)
    loc[nodes] = np.arange(nodes.size)
    ptr, idx = g.pred_ptr, g.pred_idx
    preds = []
    for v in nodes.tolist():
        lv = loc[idx[ptr[v]:ptr[v + 1]]]
        preds.append(lv[lv >= 0].tolist())
    inputs = np.zeros(g.n, dtype=bool)
    inputs[g.preds(t)] = True
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    return _Prices(ClosureLagrangian(preds, needed=items[nodes], fixed=inputs[nodes], cost=cost[nodes],
                                     size=g.bytes[nodes]))


def _cut_value(problem, bs, t, limits, stats, rounds: int = 12, enough: float = math.inf):
    """``(value, slack)``: the block bound at cut ``t`` and how far SCIP's
    tolerances may have lowered it (``None`` when stopped before any front)."""
    from .cut import cut_items

    g = problem.graph
    anc, items = cut_items(g, t)
    cap = int(problem.budgets[0]) - int(g.bytes[t])
    groups, together = _groups(problem, bs, t, anc, items)
    fronts = []
    fixed_bytes = 0
    shared: dict = {}
    max_points = int(np.clip(2048 // max(1, len(groups)), 8, 256))
    left = limits.left()        # the staircases stop early enough to leave the allocation its time
    stairs = limits.share(0.8 * left) if math.isfinite(left) else limits
    prices = None
    if together is not None:    # the Lagrangian's first prices: a share of the staircases' time
        prices = _together(problem, t, together, items)
        prices.start(limits.share(0.3 * left) if math.isfinite(left) else limits)
    for count, share, c, size, preds, needed, fixed in groups.values():
        if not needed.any():   # nothing of this group must survive the cut: it holds its inputs of t only
            fixed_bytes += int(size[fixed].sum()) * count
            continue
        st = shared.get(share)
        if st is None and size.size > MAX_GROUP_NODES:   # too large to solve in time: its item only (valid)
            fixed_bytes += int(size[fixed].sum()) * count
            continue
        if st is None and not stairs.expired():
            st = closure_staircase(np.arange(size.size), preds, needed=needed, fixed=fixed, cost=c, size=size,
                                   limits=stairs, max_points=max_points, keep_open=True, resolution=1 / 64)
            shared[share] = st
        if st is None or not st.points:   # stopped: the group holds its inputs of t, at no less than no time
            fixed_bytes += int(size[fixed].sum()) * count
            continue
        fronts.append((count, st))
    done = 0
    try:
        if not fronts and not shared and prices is None:
            return None
        value, used, slack, H = _allocate_bound(fronts, cap - fixed_bytes, limits, prices)
        while done < rounds and value + slack < enough:
            # points chosen by the integer program whose range below is a coarse gap: solve them exactly
            gaps = [(k, i) for k, i in used if fronts[k][1].points[i].covers_from < fronts[k][1].points[i].held]
            moved = False
            if prices is not None and H is not None and not limits.expired():
                before = prices.best_at(H)
                prices.search(H, limits)
                moved = prices.best_at(H) > before + 1e-9 * abs(before) + 1e-300
            if (not gaps and not moved) or limits.expired():
                break
            for k, i in sorted(gaps, key=lambda x: -x[1]):     # from the back: indices stay valid
                fronts[k][1].refine(i, limits)
            done += 1
            if limits.expired():
                break
            again, used, again_slack, H = _allocate_bound(fronts, cap - fixed_bytes, limits, prices)
            if again > value:                  # every round's dual bound is valid
                value, slack = again, again_slack
    finally:
        for st in shared.values():
            st.close()
    stats.setdefault("cuts", []).append({"node": int(t), "groups": len(groups), "kinds": len(shared),
                                         "refinements": done,
                                         "solves": sum(st.stats.get("solves", 0) for st in shared.values())})
    if prices is not None:
        stats["cuts"][-1]["lagrangian"] = {"nodes": prices.lg.n_nodes, "prices": len(prices.seen)}
    return value, slack


def _allocate_bound(fronts, cap, limits, prices=None):
    """``(bound, used, slack, H)``: the dual bound of ``min sum cost``
    choosing one item of each staircase's
    :meth:`~.staircase.Staircase.bound_items` per group (``fronts``:
    ``[(count, staircase)]``, counts per kind) plus, with ``prices``, a
    variable ``phi`` above every Lagrangian line ``L - lam * H`` of the stages
    bounded together, ``H`` their bytes, with ``sum memory + H <= cap``
    (``inf`` when infeasible); the items of its best solution as ``(kind,
    item)`` pairs, how far SCIP's tolerances may have lowered the bound (here
    and in the staircases), and the best solution's ``H`` (``None``: none).
    On the SCIP layer: the objective scaled by its largest cost, the memory row
    by ``cap``, only a trusted dual bound counts (lowered by SCIP's tolerance;
    0, the trivial bound, otherwise)."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model

    lines = prices.lines() if prices is not None else []
    if not fronts and not lines:
        return 0.0, [], 0.0, None
    if cap < 0:
        return math.inf, [], 0.0, None
    inherited = sum(count * st.slack for count, st in fronts)
    fronts = [(count, st.bound_items()) for count, st in fronts]
    sc = ObjectiveScale.of([e for _, pts in fronts for _, e in pts] + [low for _, low in lines])
    mu = max(1.0, float(cap))          # the memory row in units of the capacity
    with scip_model("block_bound") as m:
        mem, var = [], {}
        for k, (count, pts) in enumerate(fronts):
            n = [m.addVar(vtype="I", lb=0, ub=count, obj=sc.coef(e)) for _, e in pts]
            m.addCons(quicksum(n) == count)
            mem += [(h, v) for (h, _), v in zip(pts, n, strict=True)]
            var.update({(k, i): v for i, v in enumerate(n)})
        held = quicksum(float(h) / mu * v for h, v in mem)
        hv = None
        if lines:
            hv = m.addVar(vtype="C", lb=0.0, ub=float(cap) / mu)
            phi = m.addVar(vtype="C", lb=0.0, obj=1.0)
            for lam, low in lines:
                m.addCons(phi + sc.coef(lam * mu) * hv >= sc.coef(low))
            held = held + hv
        m.addCons(held <= float(cap) / mu)
        res = run(m, limits=cap_nodes(limits, 100_000))
        used, H = [], None
        if res.has_solution:
            sol = m.getBestSol()
            used = [key for key, v in var.items() if m.getSolVal(sol, v) > 0.5]
            H = None if hv is None else max(0.0, m.getSolVal(sol, hv)) * mu
        res.reraise()
        if res.status == "infeasible":
            return math.inf, [], 0.0, None
        if res.dual is None:
            return 0.0, used, 0.0, H
        return max(0.0, sc.bound(res.dual)), used, inherited + sc.real(res.dual) - sc.bound(res.dual), H


def block_lower_bound(problem, *, structure: BlockStructure | None = None, cuts: int = 3,
                      limits: Limits | None = None, target: float = math.inf) -> BlockBound:
    """The block bound (module docstring) at the ``cuts`` nodes with the best
    knapsack cut (screened by :func:`~hybrid_remat.bounds.cut.cut_lower_bound`),
    or the screen's own value where that is higher (the cut bound, a bound
    over every plan as well: staircases stopped by the limits at 100k nodes);
    the trivial bound when the graph has no repeated blocks.  It stops as
    soon as it reaches ``target`` (e.g. a plan's time: then that plan is
    optimal)."""
    from .cut import cut_lower_bound

    limits = limits or Limits()
    t0 = now()
    base = float(np.asarray(problem.cost_matrix[0], dtype=np.float64).sum())
    if not problem.is_single_device:
        raise ValueError("the block bound covers single-device problems only")
    bs = structure if structure is not None else problem.graph.derived("blocks", detect_blocks)
    stats: dict = {}
    if bs is None:
        return BlockBound(base, 0.0, -1, {"skipped": missing_structure(problem.graph, "no repeated blocks")})
    left = limits.left()
    screen = cut_lower_bound(problem, exact_nodes=0, limits=limits.share(0.3 * left) if math.isfinite(left) else limits)
    per = screen.per_node
    top = [t for t in np.argsort(-per, kind="stable")[:cuts].tolist() if per[t] > 0]
    best, best_t, slack = 0.0, -1, 0.0
    enough = target - base - 1e-9 * abs(target) if math.isfinite(target) else math.inf
    for t in top:
        if limits.expired() or best + slack >= enough:
            break
        got = _cut_value(problem, bs, t, limits, stats, enough=enough)
        if got is not None and got[0] > best:
            (best, slack), best_t = got, int(t)
    stats["seconds"] = now() - t0
    if screen.extra > best and screen.node >= 0:     # the screen is the cut bound itself: over every plan too
        stats["from"] = f"the cut screen ({screen.method})"
        return BlockBound(base + screen.extra, screen.extra, int(screen.node), stats,
                          tolerance=1e-9 * (base + screen.extra))
    return BlockBound(base + best, best, best_t, stats, tolerance=2.0 * slack + 1e-12 * (base + best))


class BlockBoundSource(RemembersBlocks, Bound):
    """The block bound as a registered :class:`~hybrid_remat.interfaces.Bound`
    (``block_bound``, scope: every plan); applicable to graphs with
    repeated blocks; it groups by :func:`block_partition` (the segment chain
    where the blocks cover little of the graph)."""

    name = "block_bound"
    version = "1"
    capabilities = frozenset({"dag", "single_device", "needs_budget", "serial", "honours_limits", "deterministic"})
    rank = 6.0
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        ok, why = super().applicable(problem)
        if ok and runs_chain(problem.graph, self.structure(problem.graph)) is not None:
            return False, ("several runs of blocks: the blocks formulation bounds their segment chain itself "
                           "(the same bound)")
        return ok, why

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        bb = block_lower_bound(problem, structure=block_partition(problem.graph, self.structure(problem.graph)),
                               limits=limits)
        return BoundResult(bb.value, ALL_PLANS, {"extra": bb.extra, "node": bb.node, "tolerance": bb.tolerance,
                                                 **bb.stats})
