"""Search for the fastest checkpoint-region plan within a budget.

Candidates are sets of module paths (see :mod:`._regions`), evaluated by the
simulator on the order the checkpoint runtime performs, their step time
predicted as the simulated time plus the runtime's own cost
(:class:`~._overheads.Overheads`).  Families:

* *level pools*: the checkpointable modules at one depth of the module tree
  (``layer1.0``, ``layer1.1``...: what per-block checkpointing picks by
  hand), and a greedy pool over every depth; within a pool, the shortest
  prefix that fits, in three orders (most dropped bytes per replay second
  first, first-called first, last-called first);
* *fill*: a pool whose every module checkpointed is over the budget, with
  the fewest modules of other depths added (disjoint, best ratio first);
* *polish* of the best plan: replace a region by some of its child modules
  when that fits and runs faster (*split*), leave out regions the budget does not need,
  and keep the outputs of heavy ops (convolutions, matmuls) in a region
  through a selective-checkpoint context when the time saved pays for the
  memory and the dispatch mode.
"""

from __future__ import annotations

import time

import numpy as np

from ..simulate import simulate
from ._candidate import Candidate
from ._regions import Region, RegionModel

__all__ = ["search_regions", "RegionEvaluator", "checkpoint_pools"]


class RegionEvaluator:
    """Simulates region plans (cached by the set of regions)."""

    def __init__(self, problem, rm: RegionModel, overheads):
        self.problem = problem
        self.rm = rm
        self.oh = overheads
        self.device = problem.primary.name
        self.budget = int(problem.budgets[0])
        self.cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
        self.seen: dict = {}
        self.n_calls = {p: len(ids) for p, ids in rm.calls_of.items()}
        self.n_nodes = {p: sum(rm.calls[i][2] - rm.calls[i][1] for i in ids) for p, ids in rm.calls_of.items()}

    def overhead(self, regions) -> float:
        s = 0.0
        for r in regions:
            s += self.oh.checkpoint_s(self.n_calls[r.path], self.n_nodes[r.path])
            if r.save_ops:
                s += 2 * self.n_nodes[r.path] * self.oh.sac_op_s
        return s

    def __call__(self, regions, family: str):
        regions = tuple(sorted(regions, key=lambda r: r.path))
        key = regions
        c = self.seen.get(key)
        if c is not None:
            return c
        plan = self.rm.plan(list(regions), self.device)
        res = simulate(self.problem, plan, check_budget=False)
        if not res.valid:
            from ..errors import HybridRematError

            raise HybridRematError(f"internal: region plan invalid: {res.error}")
        keep = self.rm.analyse(list(regions))[0]
        c = Candidate(family, keep, plan, res, mechanism="regions", regions=regions,
                      overhead_s=self.overhead(regions))
        self.seen[key] = c
        return c

    def fits(self, c) -> bool:
        return c.peak <= self.budget


def _depth(path: str) -> int:
    return 0 if not path else path.count(".") + 1


def _standalone(rm: RegionModel, cost: np.ndarray, nbytes: np.ndarray, path: str) -> tuple[float, float]:
    """(bytes dropped, replay seconds) of checkpointing ``path`` alone."""
    keep, batches = rm.analyse([Region(path)])
    dropped = float(nbytes[: rm.n_fwd][~keep].sum())
    replay = 0.0
    for _, _, nodes, _ in batches:
        replay += float(sum(cost[v] for v in nodes if not keep[v] or rm.overwritten[v]))
    return dropped, replay


def _prefix_search(ev: RegionEvaluator, order: list, family: str):
    """Shortest prefix of ``order`` that fits (binary search), or None."""
    best = None
    lo, hi = 1, len(order)
    while lo <= hi:
        mid = (lo + hi) // 2
        c = ev([Region(p) for p in order[:mid]], family)
        if ev.fits(c):
            best, hi = c, mid - 1
        else:
            lo = mid + 1
    return best


def _fill(ev: RegionEvaluator, rm: RegionModel, pool: list, orders: list, family: str):
    """Every module of ``pool`` and the fewest modules outside it (of other
    depths, none nested in the pool's or in each other) that fit, the extras
    taken in each of ``orders`` (e.g. most dropped bytes per replay second
    first, most dropped bytes first); the fastest that fits, or None.
    Per-layer checkpointing can be over the budget by what the layers'
    surroundings keep (an embedding's normalised output): this adds the
    cheapest replay of those surroundings."""
    best = None
    for order in orders:
        extras = _disjoint(rm, list(pool) + [p for p in order if p not in pool])[len(pool):]
        lo, hi = 1, len(extras)
        while lo <= hi:
            mid = (lo + hi) // 2
            c = ev([Region(p) for p in list(pool) + extras[:mid]], family)
            if ev.fits(c):
                hi = mid - 1
                if best is None or (c.step_s, c.peak) < (best.step_s, best.peak):
                    best = c
            else:
                lo = mid + 1
    return best


def _disjoint(rm: RegionModel, paths: list) -> list:
    """Greedy: keep paths (in the given order) none of whose calls nests in
    or contains an already chosen one's."""
    chosen: list = []
    spans = []
    for p in paths:
        mine = [(rm.calls[i][1], rm.calls[i][2]) for i in rm.calls_of[p]]
        if any(not (e1 <= f2 or e2 <= f1) for f1, e1 in mine for f2, e2 in spans):
            continue
        chosen.append(p)
        spans.extend(mine)
    return chosen


def checkpoint_pools(rm: RegionModel, paths=None) -> dict:
    """``{"depthD": paths}``: the checkpointable module paths (of ``paths``,
    default all) at each depth of the module tree, none nested in another,
    in order of first call (``"depth1"``... ; the model itself is
    ``"depth0"``)."""
    paths = rm.valid_paths() if paths is None else list(paths)
    first_call = {p: rm.calls[rm.calls_of[p][0]][1] for p in paths}
    pools: dict[str, list] = {}
    for p in paths:
        pools.setdefault(f"depth{_depth(p)}", []).append(p)
    return {name: _disjoint(rm, sorted(ps, key=lambda p: first_call[p])) for name, ps in pools.items()}


def search_regions(problem, rm: RegionModel, overheads, *, t_end: float, evaluators: list | None = None) -> tuple:
    """``(best candidate or None, every candidate tried, evaluator)``; the
    evaluator is appended to ``evaluators`` too (its candidates so far are
    the best plan so far when a signal stops the search)."""
    ev = RegionEvaluator(problem, rm, overheads)
    if evaluators is not None:
        evaluators.append(ev)
    g = problem.graph
    cost = ev.cost
    nbytes = g.bytes.astype(np.float64)
    stats = {}
    for p in rm.valid_paths():
        d, r = _standalone(rm, cost, nbytes, p)
        if d > 0:
            stats[p] = (d, r + overheads.checkpoint_s(ev.n_calls[p], ev.n_nodes[p]))
    tried = []
    if not stats:
        return None, tried, ev
    first_call = {p: rm.calls[rm.calls_of[p][0]][1] for p in stats}

    def ratio(p):
        d, r = stats[p]
        return d / (r + 1e-9)

    pools = checkpoint_pools(rm, stats)
    pools["greedy"] = _disjoint(rm, sorted(_disjoint(rm, sorted(stats, key=ratio, reverse=True)),
                                           key=lambda p: first_call[p]))
    # the whole model (lowest memory) first: a reference for BudgetError
    if "" in stats:
        tried.append(ev([Region("")], "regions:model"))
    orders = (
        ("ratio", lambda ps: sorted(ps, key=ratio, reverse=True)),
        ("first", lambda ps: sorted(ps, key=lambda p: first_call[p])),
        ("last", lambda ps: sorted(ps, key=lambda p: -first_call[p])),
    )
    fill_orders = [sorted(stats, key=ratio, reverse=True), sorted(stats, key=lambda p: -stats[p][0])]
    # every pool checkpointed whole first (one simulation each, whatever the clock): the lowest-memory plans
    # every search sees, so a short search still finds per-block checkpointing and a refusal's hint is the
    # same on every rerun
    ranked = sorted(pools.items(), key=lambda kv: -len(kv[1]))
    wholes = {name: ev([Region(p) for p in paths], f"regions:{name}:all") for name, paths in ranked}
    tried.extend(wholes.values())
    for name, paths in ranked:
        if time.perf_counter() > t_end and tried:
            break
        whole = wholes[name]
        for oname, sort in orders:
            c = _prefix_search(ev, sort(paths), f"regions:{name}:{oname}")
            if c is not None:
                tried.append(c)
        if not ev.fits(whole) and name != "greedy":
            c = _fill(ev, rm, paths, fill_orders, f"regions:{name}:fill")
            if c is not None:
                tried.append(c)
    fitting = [c for c in tried if ev.fits(c)]
    if not fitting:
        return None, tried, ev
    best = min(fitting, key=lambda c: (c.step_s, c.peak))
    best = _polish(ev, rm, best, t_end, set(stats))
    tried.append(best)
    return best, tried, ev


def _children(rm: RegionModel, path: str, offered: set) -> list:
    """The offered module paths one level below ``path``, in order of first call."""
    depth = _depth(path)
    kids = [p for p in offered if _depth(p) == depth + 1 and (not path or p.startswith(path + "."))]
    return sorted(kids, key=lambda p: rm.calls[rm.calls_of[p][0]][1])


def _split(ev: RegionEvaluator, rm: RegionModel, cur, fam: str, t_end: float, offered: set):
    """Replace one region by some of its child modules (all of them, one of
    them, all but one) when that fits and runs faster: a block whose
    checkpoint replays its norms and attention for little memory (the last
    block, whose saved tensors backward reads first) keeps those and
    checkpoints only its heavy children.  Last-called regions first; repeated
    while it pays."""
    improved = True
    while improved:
        improved = False
        for r in sorted(cur.regions, key=lambda r: -rm.calls[rm.calls_of[r.path][0]][1]):
            if time.perf_counter() > t_end:
                return cur
            kids = _children(rm, r.path, offered)
            if not kids:
                continue
            rest = [x for x in cur.regions if x != r]
            subsets = [kids] + [[k] for k in kids] + ([[k for k in kids if k != o] for o in kids] if len(kids) > 2 else [])
            for sub in subsets:
                c = ev(rest + [Region(k) for k in sub], fam + "+split")
                if ev.fits(c) and c.step_s < cur.step_s:
                    cur, improved = c, True
            if improved:
                break
    return cur


def _polish(ev: RegionEvaluator, rm: RegionModel, best, t_end: float, offered: set = frozenset()):
    fam = best.family.split("+")[0]
    cur = _split(ev, rm, best, fam, t_end, offered) if offered else best
    # 1. leave out regions the budget does not need (cheapest replays last)
    for r in sorted(cur.regions, key=lambda r: -ev.n_nodes[r.path]):
        if time.perf_counter() > t_end:
            break
        rest = [x for x in cur.regions if x != r]
        if not rest:
            continue
        c = ev(rest, fam + "+drop")
        if ev.fits(c) and c.step_s < cur.step_s:
            cur = c
    # 2. keep heavy ops' outputs in a region when it pays
    for r in list(cur.regions):
        if time.perf_counter() > t_end:
            break
        ops = rm.saveable_ops(r.path)
        if not ops or r.save_ops:
            continue
        trial = [Region(x.path, ops) if x == r else x for x in cur.regions]
        c = ev(trial, fam + "+sac")
        if ev.fits(c) and c.step_s < cur.step_s:
            cur = c
    return cur
