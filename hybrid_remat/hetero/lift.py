"""Single-device plans lifted to CPU+GPU: host offload instead of recomputation.

A GPU-only plan recomputes a value ``v`` after freeing it.  The lifted plan
copies ``v`` to host memory just before that free (``copy(v, gpu, host)``)
and replaces the recomputation by a copy back (``copy(v, host, gpu)``)
wherever the cost model says the round trip is cheaper than recomputing
(policy ``"serial"``: recompute cost > copy in + copy out, the copy out
charged once), or everywhere (policy ``"all"``: useful for the makespan,
where copies overlap with computation).  GPU memory is unchanged at every
step (the copy out happens while ``v`` is resident anyway; the copy back
allocates exactly what the recomputation allocated); host memory grows by
the offloaded values, each freed on the host after its last copy back.
Recomputations that only fed a replaced recomputation become dead and are
removed (which can only lower memory).

:class:`LiftedSingleDevice` runs every registered single-device heuristic
on the GPU alone through the portfolio runner, lifts the best plans and
keeps the best by ``problem.objective``.  ``anytime_solve`` does more on a
multi-device problem (the whole one-device portfolio of every device, lifted
the same way: the :class:`~hybrid_remat.portfolio.reduce.OneDevice`
reduction), so it runs this heuristic only when named.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.plan import Plan
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(3, bytes=1).with_costs({"gpu": [5.0, 5.0, 5.0], "cpu": [9.0] * 3})
>>> p = Problem(g, [Device("gpu", "gpu", 3), Device("cpu", "cpu", 10)],
...             [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)])
>>> plan = Plan.from_steps([("compute", 0, "gpu"), ("compute", 1, "gpu"), ("free", 0, "gpu"),
...                         ("compute", 0, "gpu"), ("compute", 2, "gpu")])
>>> lift_plan(p, plan).steps()[2:5]  # doctest: +NORMALIZE_WHITESPACE
[Step(op='copy', node=0, device='gpu', target='cpu'), Step(op='free', node=0, device='gpu', target=None),
 Step(op='copy', node=0, device='cpu', target='gpu')]
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import BudgetError, HybridRematError, PlanError
from ..interfaces import Heuristic
from ..limits import NO_LIMITS, Limits
from ..plan import OP_COMPUTE, OP_COPY, OP_FREE, Plan
from ..problem import Problem
from ..simulate import simulate

__all__ = ["lift_plan", "remove_dead_computes", "gpu_only_problem", "host_device", "single_device_portfolio",
           "LiftedSingleDevice"]


def host_device(problem: Problem, compute: str) -> str | None:
    """The largest other device with links both ways to ``compute``."""
    bw, _ = problem.link_arrays
    ci = problem.device_index(compute)
    best, best_mem = None, -1
    for j, d in enumerate(problem.devices):
        if j != ci and bw[ci, j] > 0 and bw[j, ci] > 0 and d.memory_bytes > best_mem:
            best, best_mem = d.name, d.memory_bytes
    return best


def gpu_only_problem(problem: Problem, device: str | None = None) -> Problem | None:
    """The one-device problem of ``device`` (default: the primary device);
    ``None`` when the graph cannot fit on it at all."""
    dev = problem.devices[problem.device_index(device)] if device else problem.primary
    try:
        return Problem(problem.graph, [dev])
    except BudgetError:
        return None


def remove_dead_computes(graph, steps: list) -> list:
    """Drop recomputations whose value is freed (or left) unread, repeatedly.

    ``steps`` are ``[op, node, dev, dst]`` lists; the first computation of
    every node is kept.
    """
    changed = True
    while changed:
        changed = False
        first_seen = set()
        open_at: dict = {}  # (node, dev) -> (index of compute, read?)
        dead = set()
        for i, (o, v, d, t) in enumerate(steps):
            if o == OP_COMPUTE:
                for u in graph.preds(v):
                    key = (int(u), d)
                    if key in open_at:
                        open_at[key][1] = True
                first = v not in first_seen
                first_seen.add(v)
                open_at[(v, d)] = [i, first]  # a first computation counts as read
            elif o == OP_COPY:
                key = (v, d)
                if key in open_at:
                    open_at[key][1] = True
                open_at[(v, t)] = [i, True]
            else:
                inst = open_at.pop((v, d), None)
                if inst is not None and not inst[1] and steps[inst[0]][0] == OP_COMPUTE:
                    dead.add(inst[0])
                    dead.add(i)
        for inst in open_at.values():
            if not inst[1] and steps[inst[0]][0] == OP_COMPUTE:
                dead.add(inst[0])
        if dead:
            steps = [s for i, s in enumerate(steps) if i not in dead]
            changed = True
    return steps


def lift_plan(problem: Problem, plan: Plan, *, host: str | None = None, policy: str = "serial",
              max_offloads: int | None = None) -> Plan:
    """Replace recomputations of a one-device plan by host round trips.

    Parameters
    ----------
    problem : Problem
        The multi-device problem (the plan's device must be one of its
        compute devices).
    plan : Plan
        A single-device plan without copies.
    host : str, optional
        Offload target (default: :func:`host_device`).
    policy : {"serial", "all"}
        ``"serial"``: only where recomputing costs more than the round trip;
        ``"all"``: every recomputation that a copy can replace.
    max_offloads : int, optional
        Keep only the ``max_offloads`` offloads with the largest gain (to
        respect a small host budget).

    Returns
    -------
    Plan
        Over the problem's devices (unchanged steps when nothing pays off).
    """
    if len(set(plan.devices[i] for i in set(plan.device.tolist()))) > 1 or (plan.op == OP_COPY).any():
        raise PlanError("lift_plan needs a single-device plan without copies")
    if policy not in ("serial", "all"):
        raise PlanError(f"unknown lift policy {policy!r}: use 'serial' or 'all'")
    names = [d.name for d in problem.devices]
    gname = plan.devices[int(plan.device[0])] if len(plan) else problem.primary.name
    if gname not in names:
        gname = problem.primary.name
    gi = names.index(gname)
    host = host or host_device(problem, gname)
    g = problem.graph
    steps = [[int(o), int(v), gi, -1] for o, v in zip(plan.op.tolist(), plan.node.tolist(), strict=False)]
    if host is None:
        return Plan.from_steps(_named(steps, names), names, dict(plan.meta))
    hi = names.index(host)
    bw, lat = problem.link_arrays
    cost = problem.cost_matrix[gi]
    t_out = lat[gi, hi] + g.bytes / bw[gi, hi]
    t_in = lat[hi, gi] + g.bytes / bw[hi, gi]

    # pass 1: which recomputations to replace, with their gains
    computed = np.zeros(g.n, dtype=bool)
    last_free = {}
    cands = []  # (gain, compute index, free index, node)
    for i, (o, v, _, _) in enumerate(steps):
        if o == OP_COMPUTE:
            if computed[v] and v in last_free:
                cands.append((cost[v] - t_in[v], i, last_free[v], v))
            computed[v] = True
        elif o == OP_FREE:
            last_free[v] = i
    # the copy out is paid once per node: charge it to the node's first candidate
    seen = set()
    chosen = []
    for gain, i, f, v in cands:
        if v not in seen:
            gain -= t_out[v]
        if policy == "all" or gain > 0:
            chosen.append((gain, i, f, v))
            seen.add(v)
    if max_offloads is not None and len(chosen) > max_offloads:
        chosen = sorted(chosen, key=lambda c: -c[0])[:max_offloads]
    if not chosen:
        return Plan.from_steps(_named(steps, names), names, dict(plan.meta))
    replace = {i: v for _, i, _, v in chosen}
    # copy out before the free preceding each replaced recomputation (once per host residency)
    out_before: dict = {}
    by_node: dict = {}
    for _, i, f, v in sorted(chosen, key=lambda c: c[1]):
        by_node.setdefault(v, []).append((f, i))
    host_free_after: dict = {}
    for v, lst in by_node.items():
        lst.sort()
        out_before.setdefault(lst[0][0], []).append(v)  # one host copy serves all of v's copies back
        host_free_after.setdefault(lst[-1][1], []).append(v)
    new = []
    for i, s in enumerate(steps):
        for v in out_before.get(i, ()):
            new.append([OP_COPY, v, gi, hi])
        if i in replace:
            new.append([OP_COPY, s[1], hi, gi])
        else:
            new.append(s)
        for v in host_free_after.get(i, ()):
            new.append([OP_FREE, v, hi, -1])
    new = remove_dead_computes(g, new)
    meta = dict(plan.meta)
    meta.update({"lifted": policy, "offloads": len(chosen), "host": host})
    return Plan.from_steps(_named(new, names), names, meta)


def _named(steps, names):
    out = []
    for o, v, d, t in steps:
        if o == OP_COPY:
            out.append(("copy", v, names[d], names[t]))
        else:
            out.append(("compute" if o == OP_COMPUTE else "free", v, names[d]))
    return out


def single_device_portfolio(sub: Problem, *, exclude=(), seed: int = 0, limits: Limits | None = None,
                            top: int = 4) -> list[tuple[str, Plan, float]]:
    """The best plans of every registered heuristic that accepts ``sub`` (a
    one-device problem), run by the portfolio runner
    (:func:`~hybrid_remat.portfolio.run_portfolio`, in this process) within
    ``limits``: ``[(name, plan, value)]``, best first, at most ``top``.  Our
    own HEFT restricted to the device is always included."""
    from .. import plugins
    from ..portfolio import Ledger, run_portfolio
    from .heft import HeftScheduler

    heurs = {}
    try:
        heurs.update(plugins.heuristics())
    except HybridRematError as e:  # a broken plugin must not break planning
        warnings.warn(f"plugin heuristics unavailable: {e}", stacklevel=2)
    heurs.setdefault("hetero_heft", HeftScheduler())
    chosen = [h for name, h in heurs.items()
              if name not in exclude and "bound_only" not in set(getattr(h, "capabilities", ()))]
    limits = limits or NO_LIMITS
    ledger = Ledger(sub, pool_size=top)
    run_portfolio(sub, deadline=limits.deadline, heuristics=chosen, workers=1, seed=seed, node_limit=limits.nodes,
                  work_limit=limits.work, stop=limits.stop, signals=(), ledger=ledger)
    return [(source, plan, value) for value, source, plan in ledger.best_plans(top)]


class LiftedSingleDevice(Heuristic):
    """The best single-device (GPU) plans of the portfolio, lifted with host
    offload (:func:`lift_plan`, both policies); best by ``problem.objective``.

    Not run by default: ``anytime_solve`` reduces a multi-device problem to
    each device alone and lifts the whole one-device portfolio's plans
    (:mod:`hybrid_remat.portfolio.reduce`), which includes what this does."""

    name = "hetero_lift"
    version = "3"
    capabilities = frozenset({"dag", "chain", "multi_device", "needs_budget", "honours_limits", "serial", "makespan"})
    rank = 5.0
    run_by_default = False

    #: share of the limits that the single-device portfolio may use (the rest lifts and simulates)
    PORTFOLIO_SHARE = 0.8

    def __init__(self, top: int = 3):
        self.top = top

    def warmup(self) -> None:
        """Nothing of its own to compile: its heuristics are warmed with the rest."""

    def run(self, problem: Problem, *, seed: int = 0, limits: Limits | None = None):
        from ..portfolio.reduce import OneDevice

        limits = limits or NO_LIMITS
        if problem.is_single_device:
            return None
        red = OneDevice(problem.primary.name)
        sub = red.apply(problem)
        if sub is None:
            return None
        left = limits.left()
        inner = limits.share(self.PORTFOLIO_SHARE * left) if np.isfinite(left) else limits
        best, best_val = None, np.inf
        for name, plan, _ in single_device_portfolio(sub, exclude=(self.name,), seed=seed, limits=inner)[: self.top]:
            if limits.expired() and best is not None:
                break
            for _, lifted in red.invert(problem, plan, ("serial", "all")):
                r = simulate(problem, lifted)
                if not r.valid:
                    continue
                val = problem.objective.value(r)
                if val < best_val - 1e-15:
                    lifted.meta["source"] = name
                    best, best_val = lifted, val
        return best
