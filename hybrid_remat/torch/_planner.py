"""Plans that an eager training step can execute: keep or drop each forward
node's output, recompute dropped ones lazily in backward.

What eager PyTorch can follow is a *keep set* ``K`` over the forward nodes:
the forward runs once in program order; a saved tensor whose producer is not
in ``K`` is dropped and recomputed when backward first needs it (from kept
inputs, recomputing dropped ancestors on the way); a recomputed value that
backward reads again stays cached until its last reader, intermediates are
freed at once.  :func:`executable_order` writes exactly that compute sequence
for a graph, so :func:`~hybrid_remat.simulate.simulate` predicts the memory
and time of what the runtime does.

The search tries several families of keep sets and keeps the fastest one
that the simulator confirms under the budget:

* ``drop-cheap``: drop the forward outputs with the most bytes per second of
  recompute first (binary search on how many);
* ``segments``: keep only *cut* nodes (every path from the forward past to
  the forward future goes through them) at about every ``S`` bytes of
  saved activations (Chen et al.'s sqrt(n) idea), then keep back the outputs
  that are most expensive to recompute while the budget allows;
* any plan from ``hybrid_remat.anytime.anytime_solve`` (when installed) or
  from the registered heuristics, mapped to the keep set it holds when
  backward starts and re-simulated as executed.
"""

from __future__ import annotations

import time

import numpy as np

from .._cli_signals import signal_name
from ..budgets import format_bytes, keep_all_peak
from ..core.keepset import KeepSetPlanner
from ..errors import BudgetError, HybridRematError
from ..graph import Graph
from ..plan import OP_COMPUTE, Plan
from ..problem import Problem
from ..simulate import simulate
from ._candidate import Candidate
from ._overheads import Overheads
from ._result import MECHANISMS, TorchPlan, budget_bytes

__all__ = [
    "TorchPlan", "PlanInterrupted", "executable_order", "executable_plan", "held_closure", "search_keep_set", "keep_set_from_plan",
]


class PlanInterrupted(KeyboardInterrupt):
    """A signal stopped the search; ``plan`` is the best plan found so far
    (simulated, ``plan.interrupted`` names the signal) or ``None`` when none
    was found yet, ``signal`` the signal's name."""

    def __init__(self, plan: TorchPlan | None, signal: str = "SIGINT"):
        super().__init__(f"planning interrupted by {signal}")
        self.plan = plan
        self.signal = signal


def interrupted_with(tp: TorchPlan | None, stop: BaseException) -> PlanInterrupted:
    """``stop`` (a ``KeyboardInterrupt``) as :class:`PlanInterrupted` carrying
    ``tp`` marked interrupted."""
    name = signal_name(stop)
    if tp is not None:
        tp.interrupted = name
    return PlanInterrupted(tp, name)


def _best_so_far(graph, problem, evaluators, overheads) -> TorchPlan | None:
    """The fastest fitting candidate any evaluator has seen, as a simulated plan."""
    fitting = [c for ev in evaluators for c in list(ev.seen.values()) if ev.fits(c)]
    if not fitting:
        return None
    best = min(fitting, key=lambda c: (c.step_s, c.peak))
    return _to_plan(graph, problem, best, [_row(best, int(problem.budgets[0]))], overheads)


class _Structure:
    """Python-list views of a traced graph used by the order builder."""

    def __init__(self, graph: Graph):
        tm = graph.meta.get("torch")
        if not tm:
            raise HybridRematError(f"graph {graph.name!r} was not traced by hybrid_remat.torch.trace")
        self.g = graph
        self.n = graph.n
        self.n_fwd = int(tm["n_forward"])
        self.preds = [graph.preds(v).tolist() for v in range(self.n)]
        self.overwritten = np.asarray(tm["overwritten"], dtype=bool)
        self.takes_from = [list(x) for x in tm.get("takes_from", [[] for _ in range(self.n)])]
        readers = np.zeros(self.n, dtype=np.int64)
        for b in range(self.n_fwd, self.n):
            for u in set(self.preds[b]):
                if u < self.n_fwd:
                    readers[u] += 1
        self.bwd_readers = readers


def executable_order(
    graph: Graph, keep, structure: _Structure | None = None, groups: list | None = None
) -> list[int]:
    """The compute sequence the eager runtime performs for keep set ``keep``.

    Parameters
    ----------
    keep : array of bool, shape (n_forward,) or (n,)
        ``True``: the forward output is kept for backward (and may serve as
        a recompute input); ``False``: dropped after forward.
    groups : list, optional
        Receives ``(u, nodes)`` for each recomputation triggered by backward
        needing dropped node ``u`` (``nodes``: what it replays, in order).
    """
    st = structure or _Structure(graph)
    n_fwd = st.n_fwd
    keep = np.asarray(keep, dtype=bool)[:n_fwd]
    avail = keep & ~st.overwritten[:n_fwd]
    remaining = st.bwd_readers.copy()
    materialized = np.zeros(st.n, dtype=bool)
    seq = list(range(n_fwd))
    preds = st.preds

    def recompute(u):
        # what must be replayed, then replayed in forward order (as the runtime does): a reader of a
        # buffer's old value always runs before the in-place op that overwrites it
        need: set[int] = set()
        stack = [u]
        while stack:
            x = stack.pop()
            if x in need or avail[x] or materialized[x]:
                continue
            need.add(x)
            for a in preds[x]:
                if not (avail[a] or materialized[a] or a in need):
                    stack.append(a)
        nodes = sorted(need)
        seq.extend(nodes)
        for x in nodes:
            if remaining[x] > 0:
                materialized[x] = True
        if groups is not None:
            groups.append((u, nodes))

    for b in range(n_fwd, st.n):
        for u in preds[b]:
            if u < n_fwd and not keep[u] and not materialized[u]:
                recompute(u)
        seq.append(b)
        for u in set(preds[b]):
            if u < n_fwd:
                remaining[u] -= 1
                if remaining[u] <= 0:
                    materialized[u] = False
    return seq


def keep_set_planner(graph: Graph, device: str, structure: _Structure | None = None) -> KeepSetPlanner:
    """The library's keep-set plan class (:class:`~hybrid_remat.core.keepset.KeepSetPlanner`)
    with what the eager runtime executes (:func:`executable_order`) as its rule."""
    st = structure or _Structure(graph)
    return KeepSetPlanner.on_graph(graph, device, "torch_keep_set", rule=lambda keep: executable_order(graph, keep, st))


def executable_plan(graph: Graph, keep, device: str, structure: _Structure | None = None) -> Plan:
    """:func:`executable_order` as a plan (each value freed after its last use)."""
    return keep_set_planner(graph, device, structure).plan(keep)[0]


def held_closure(graph: Graph, keep, w: int, structure: _Structure | None = None, replayed: set | None = None) -> list[int]:
    """Kept nodes whose outputs recomputing ``w`` reads (through dropped or
    overwritten ancestors).  ``replayed``, when given, receives ``w`` and the
    ancestors that must be replayed with it."""
    st = structure or _Structure(graph)
    keep = np.asarray(keep, dtype=bool)
    out, seen, stack = set(), {w}, [w]
    if replayed is not None:
        replayed.add(w)
    while stack:
        x = stack.pop()
        for a in st.preds[x]:
            if a in seen:
                continue
            seen.add(a)
            if keep[a] and not st.overwritten[a]:
                out.add(a)
            else:
                stack.append(a)
                if replayed is not None:
                    replayed.add(a)
    return sorted(out)


def keep_set_from_plan(graph: Graph, plan: Plan, n_fwd: int) -> np.ndarray:
    """Forward nodes resident once every forward node has been computed
    (before the next compute step: a recompute or the first backward node)."""
    resident = np.zeros(graph.n, dtype=bool)
    seen = np.zeros(n_fwd, dtype=bool)
    n_seen = 0
    for o, v in zip(plan.op.tolist(), plan.node.tolist(), strict=True):
        if o == OP_COMPUTE:
            if n_seen == n_fwd or v >= n_fwd:
                break
            resident[v] = True
            if not seen[v]:
                seen[v] = True
                n_seen += 1
        elif o == 1:
            resident[v] = False
    return resident[:n_fwd]


# ------------------------------------------------------------------ search
class _Evaluator:
    def __init__(self, problem: Problem, overheads=None):
        self.oh = overheads or Overheads()
        self.problem = problem
        self.g = problem.graph
        self.st = _Structure(self.g)
        self.device = problem.primary.name
        self.planner = keep_set_planner(self.g, self.device, self.st)
        self.budget = int(problem.budgets[0])
        self.seen: dict[bytes, Candidate] = {}
        self.n_evals = 0

    def __call__(self, keep: np.ndarray, family: str) -> Candidate:
        keep = np.asarray(keep, dtype=bool)
        key = np.packbits(keep).tobytes()
        if key in self.seen:
            return self.seen[key]
        self.n_evals += 1
        plan = self.planner.plan(keep)[0]
        res = simulate(self.problem, plan, check_budget=False)
        if not res.valid:  # an order-builder bug, never a budget matter
            raise HybridRematError(f"internal: executable plan invalid: {res.error}")
        c = Candidate(family, keep.copy(), plan, res, "ops", (),
                       self.oh.ops_fixed_s + res.n_recompute * self.oh.replay_node_s)
        self.seen[key] = c
        return c

    def fits(self, c: Candidate) -> bool:
        return c.peak <= self.budget


def _cut_nodes(st: _Structure) -> np.ndarray:
    """Forward nodes ``v`` with no forward edge from before ``v`` to after ``v``."""
    n_fwd = st.n_fwd
    reach = np.arange(n_fwd)
    for v in range(n_fwd):
        for u in st.preds[v]:
            if u < n_fwd and v > reach[u]:
                reach[u] = v
    cut = np.zeros(n_fwd, dtype=bool)
    far = -1
    for v in range(n_fwd):
        if far <= v and not st.overwritten[v]:
            cut[v] = True
        far = max(far, reach[v])
    return cut


def _binary_search(ev: _Evaluator, make, lo: int, hi: int, family: str, increasing_memory: bool):
    """Smallest (or largest) parameter in [lo, hi] whose keep set fits."""
    best = None
    a, b = lo, hi
    while a <= b:
        mid = (a + b) // 2
        c = ev(make(mid), family)
        ok = ev.fits(c)
        if ok:
            best = c
        if ok == increasing_memory:
            a = mid + 1
        else:
            b = mid - 1
    return best


def search_keep_set(problem: Problem, *, time_limit: float = 10.0, use_solvers: bool = True, overheads=None,
                    evaluators: list | None = None) -> tuple:
    """Find the fastest executable keep set within ``problem``'s budget
    (for the op-replay runtime).

    Returns
    -------
    (best, tried, evaluator) : (Candidate or None, list of dict, _Evaluator)
        ``tried`` summarises each candidate; ``evaluator.seen`` holds every
        keep set evaluated; it is appended to ``evaluators`` too (its
        candidates so far are the best plan so far when a signal stops the
        search).
    """
    t_end = time.perf_counter() + max(float(time_limit), 0.0)
    ev = _Evaluator(problem, overheads)
    if evaluators is not None:
        evaluators.append(ev)
    st = ev.st
    g = ev.g
    n_fwd = st.n_fwd
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    nbytes = g.bytes.astype(np.float64)
    tried: list[Candidate] = []

    all_keep = np.ones(n_fwd, dtype=bool)
    tried.append(ev(all_keep, "keep_all"))

    # family A: drop the most bytes per recompute second first
    fwd = np.arange(n_fwd)
    cand = fwd[nbytes[:n_fwd] > 0]
    rc = cost[cand] + np.array([cost[st.takes_from[v]].sum() if st.takes_from[v] else 0.0 for v in cand])
    score = nbytes[cand] / (rc + 1e-9)
    order_a = cand[np.argsort(-score, kind="stable")]

    def drop_prefix(p):
        k = all_keep.copy()
        k[order_a[:p]] = False
        return k

    best_a = _binary_search(ev, drop_prefix, 0, len(order_a), "drop-cheap", increasing_memory=False)
    if best_a is not None:
        tried.append(best_a)
    tried.append(ev(drop_prefix(len(order_a)), "drop-all"))

    # family B: segments between kept cut nodes, then keep back expensive outputs
    cuts = np.flatnonzero(_cut_nodes(st))
    saved = nbytes[:n_fwd] * (st.bwd_readers[:n_fwd] > 0)
    total_saved = float(saved.sum())
    seg_best = []
    if len(cuts) and total_saved > 0:
        csum = np.cumsum(saved)
        for i in range(12):
            S = total_saved / (2.0 ** (i / 1.5))
            keep = np.zeros(n_fwd, dtype=bool)
            last = 0.0
            for v in cuts:
                if csum[v] - last >= S:
                    keep[v] = True
                    last = csum[v]
            c = ev(keep, f"segments(S={format_bytes(S)})")
            if ev.fits(c):
                seg_best.append(c)
        seg_best.sort(key=lambda c: c.step_s)
        for base in seg_best[:2]:
            dropped = np.flatnonzero(~base.keep & (nbytes[:n_fwd] > 0))
            if not len(dropped):
                continue
            worth = cost[dropped] / (nbytes[dropped] + 1.0)
            order_c = dropped[np.argsort(-worth, kind="stable")]

            def keep_back(q, base=base, order_c=order_c):
                k = base.keep.copy()
                k[order_c[:q]] = True
                return k

            c = _binary_search(ev, keep_back, 0, len(order_c), base.family + "+expensive", increasing_memory=True)
            if c is not None:
                tried.append(c)
        tried.extend(seg_best[:2])

    # plans from the library's solvers, as executed
    if use_solvers and time.perf_counter() < t_end:
        for family, plan in _solver_plans(problem, max(t_end - time.perf_counter(), 0.5)):
            try:
                keep = keep_set_from_plan(g, plan, n_fwd)
            except Exception:  # noqa: BLE001 - a foreign plan that does not map is skipped
                continue
            tried.append(ev(keep, family))

    uniq: dict[int, Candidate] = {}
    for c in tried:
        uniq.setdefault(id(c), c)
    tried = list(uniq.values())
    fitting = [c for c in tried if ev.fits(c)]
    best = min(fitting, key=lambda c: (c.step_s, c.peak)) if fitting else None

    # polish: keep back dropped outputs one by one, most recompute time per byte first, while the
    # budget still holds (bounded by the time limit and an evaluation count)
    if best is not None:
        dropped = np.flatnonzero(~best.keep & (nbytes[:n_fwd] > 0))
        dropped = dropped[np.argsort(-(cost[dropped] / (nbytes[dropped] + 1.0)), kind="stable")]
        cur = best
        for v in dropped[:300]:
            if time.perf_counter() > t_end:
                break
            k = cur.keep.copy()
            k[v] = True
            c = ev(k, best.family + "+polish")
            if ev.fits(c) and c.step_s <= cur.step_s:
                cur = c
        if cur is not best:
            tried.append(cur)
            best = cur
    report = [
        {"family": c.family, "mechanism": c.mechanism, "peak_bytes": c.peak, "time_s": c.step_s,
         "fits": ev.fits(c), "n_dropped": int((~c.keep).sum())}
        for c in tried
    ]
    return best, report, ev


def _solver_plans(problem: Problem, time_limit: float):
    """The plan of the library's :func:`~hybrid_remat.anytime.anytime_solve`
    (its portfolio: heuristics, improvers, exact models), when it finds one."""
    try:
        from ..anytime import anytime_solve
    except ImportError:  # pragma: no cover - the library always has it
        return
    import signal

    # under the command line (whose SIGTERM handler yields to a solve) the solve stops on SIGTERM as on
    # Ctrl-C, raising SolveInterrupted; a library caller's SIGTERM keeps its own behaviour
    names = ("SIGINT", "SIGTERM") if getattr(signal.getsignal(signal.SIGTERM), "yields_to_solve", False) \
        else ("SIGINT",)
    try:
        res = anytime_solve(problem, time_limit, signals=names)
    except Exception as e:  # noqa: BLE001 - a solver failure must not break planning; the families stand
        import warnings

        warnings.warn(f"hybrid_remat.torch: anytime_solve failed ({type(e).__name__}: {e}); planning without it",
                      RuntimeWarning, stacklevel=3)
        return
    plan = getattr(res, "plan", None)
    if plan is not None:
        yield "anytime_solve", plan




def _problem(graph: Graph, nbytes: int, overheads) -> Problem:
    from ..problem import Device

    kind = graph.cost_kinds[0]
    g = graph
    if overheads is not None and (overheads.per_node_s > 0 or overheads.cost_scale != 1.0):
        g = graph.with_costs({kind: overheads.adjusted_costs(graph, kind)})
    return Problem(g, [Device(kind, kind, int(nbytes))], check=False)


def _to_plan(graph, problem, c: Candidate, tried, overheads) -> TorchPlan:
    checked = simulate(problem, c.plan)
    if not checked.valid:  # cannot happen: the candidate fits by construction
        raise HybridRematError(f"internal: chosen plan failed simulation: {checked.error}")
    c.plan.meta.update({"family": c.family, "mechanism": c.mechanism})
    return TorchPlan(graph, problem, c.plan, c.keep, checked, c.family, tried, c.mechanism, tuple(c.regions),
                     c.overhead_s, overheads)


def plan_graph(graph: Graph, budget, *, time_limit: float = 10.0, use_solvers: bool = True,
               mechanism: str = "auto", overheads=None) -> TorchPlan:
    """Plan a traced graph under ``budget`` (bytes, ``"2GiB"``, ``"60%"``
    or a fraction ``0.6`` of its keep-all peak).

    Parameters
    ----------
    mechanism : {"auto", "regions", "ops"}
        Which runtime to plan for; ``"auto"`` searches both and returns the
        plan with the lowest predicted step time (the other mechanism's best
        and up to two runners-up of other region families stay in
        ``alternatives``, for :func:`hybrid_remat.torch.plan` to measure).
    overheads : Overheads, optional
        The runtimes' measured costs (:func:`hybrid_remat.torch.plan`
        measures them); without, only op times count.

    Raises
    ------
    PlanInterrupted
        On a signal (``KeyboardInterrupt``, SIGTERM's ``Terminated``): the
        best plan found so far, simulated and marked interrupted, or none.
    BudgetError
        When no executable plan fits; the message names the lowest peak an
        executable plan reaches, a budget that plans.
    """
    if mechanism not in ("auto", *MECHANISMS):
        raise HybridRematError(f"mechanism must be 'auto', 'regions' or 'ops', not {mechanism!r}")
    nbytes = budget_bytes(budget, graph)
    problem = _problem(graph, nbytes, overheads)
    if nbytes >= keep_all_peak(graph):  # nothing to drop: the plain step, at no runtime cost
        import dataclasses

        st = _Structure(graph)
        c = _Evaluator(problem, overheads)(np.ones(st.n_fwd, dtype=bool), "keep_all")
        c = dataclasses.replace(c, family="plain step (budget at or above keep-all)", mechanism="regions",
                                regions=(), overhead_s=0.0)
        tp = _to_plan(graph, problem, c, [_row(c, nbytes)], overheads)
        tp.alternatives = []
        return tp
    evaluators: list = []
    try:
        return _search(graph, problem, nbytes, time_limit, use_solvers, mechanism, overheads, evaluators)
    except PlanInterrupted:
        raise
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM, an interrupted anytime_solve: the best plan so far
        raise interrupted_with(_best_so_far(graph, problem, evaluators, overheads), stop) from None


def _search(graph, problem, nbytes, time_limit, use_solvers, mechanism, overheads, evaluators) -> TorchPlan:
    t_end = time.perf_counter() + max(float(time_limit), 0.0)
    found, tried, lows = [], [], []
    if mechanism in ("auto", "regions") and "calls" in graph.meta["torch"]:
        from ._region_search import search_regions
        from ._regions import RegionModel

        share = t_end if mechanism == "regions" else time.perf_counter() + 0.4 * max(float(time_limit), 0.0)
        best_r, _, ev_r = search_regions(problem, RegionModel(graph), overheads or _zero(), t_end=share,
                                          evaluators=evaluators)
        tried += [_row(c, ev_r.budget) for c in ev_r.seen.values()]
        lows += list(ev_r.seen.values())
        if best_r is not None:
            found.append(best_r)
            # every module of the best plan's pool checkpointed (what a user writes by hand, e.g. every
            # block): verification measures it beside the best and keeps it when it runs faster
            pool = best_r.family.split("+")[0].rsplit(":", 1)[0]
            whole = next((c for c in ev_r.seen.values() if c.family == f"{pool}:all"), None)
            if whole is not None and whole is not best_r and ev_r.fits(whole):
                found.append(whole)
            # runners-up of other families: verification measures them too (predictions miss by some %)
            seen_fams = {pool}
            for c in sorted((c for c in ev_r.seen.values() if ev_r.fits(c)), key=lambda c: (c.step_s, c.peak)):
                fam = c.family.split("+")[0].rsplit(":", 1)[0]
                if len(found) >= 4 or c is best_r or fam in seen_fams:
                    continue
                seen_fams.add(fam)
                found.append(c)
    if mechanism in ("auto", "ops"):
        best_o, rows, ev_o = search_keep_set(problem, time_limit=max(t_end - time.perf_counter(), 0.0),
                                             use_solvers=use_solvers, overheads=overheads, evaluators=evaluators)
        tried += rows
        lows += [c for c in ev_o.seen.values() if c.family != "anytime_solve"]
        if best_o is not None:
            found.append(best_o)
    if not found:
        # the hint comes from the families that depend on the graph's structure and bytes alone (not on
        # measured op times or the clock): the same lowest plan on every rerun
        lows = [c for c in lows if _structural(c.family)] or lows
        err = _budget_error(graph, nbytes, lows)
        if lows:  # for hrt.plan: the plan behind the hint, to measure it
            low = min(lows, key=lambda c: (c.peak, c.step_s))
            err.lowest_plan = _to_plan(graph, _problem(graph, max(nbytes, low.peak), overheads), low, [], overheads)
        raise err
    found.sort(key=lambda c: (c.step_s, c.peak))
    tp = _to_plan(graph, problem, found[0], tried, overheads)
    tp.alternatives = [_to_plan(graph, problem, c, tried, overheads) for c in found[1:]]
    return tp


def _structural(family: str) -> bool:
    """Candidates every search evaluates, whatever the op times and the time limit."""
    return (family in ("drop-all", "keep_all", "regions:model") or (family.startswith("segments(") and "+" not in family)
            or (family.startswith("regions:") and family.endswith(":all")))


def _zero():
    return Overheads()


def _row(c: Candidate, budget: int) -> dict:
    return {"family": c.family, "mechanism": c.mechanism, "peak_bytes": c.peak, "time_s": c.step_s,
            "fits": c.peak <= budget, "n_dropped": int((~c.keep).sum())}


def lowest_peak(candidates) -> int:
    return min(c.peak for c in candidates)


def _budget_error(graph: Graph, nbytes: int, candidates) -> BudgetError:
    kap = keep_all_peak(graph)
    low = lowest_peak(candidates) if candidates else kap
    msg = ""
    try:
        Problem.single(graph, nbytes)
    except BudgetError as e:
        msg = f"{e}; "
    pct = 100.0 * low / kap
    return BudgetError(
        f"{msg}no executable plan for {graph.name!r} fits {format_bytes(nbytes)} ({nbytes} B): the lowest "
        f"predicted peak of a plan the eager runtimes can follow is {format_bytes(low)} ({low} B, {pct:.1f}% of "
        f"keep-all); budget={low} plans"
    )
