"""A staged greedy plan builder: the reference order (and a memory-greedy
topological order) with Belady-style evictions and on-demand recomputation.  It gives the exact models a staged
incumbent quickly (its index-ordered variants are staged plans; the
depth-first variants, tried only when those fail, are not) and is
registered as the heuristic ``staged_evict``.

Cost.  It is plain Python and each eviction scans the live values, so a run
is quadratic in the graph size (``benchmarks/results/heuristic_scaling.md``):
it counts its steps (chain members and scanned values) against a work
budget and gives up (``None``) when the budget or the deadline runs out.

The builder walks the frontier ``t = 0..n-1``.  To compute ``t`` it first
recomputes, in increasing index order, every missing input (recursively);
before each allocation that would pass the budget it evicts resident values
not needed by the current step, preferring large values whose next use is
far and whose recomputation is cheap.  Values are freed as soon as no later
frontier node reads them.  The compute sequence goes through
:func:`~hybrid_remat.plan.plan_from_order` (frees after last use) and the
simulator.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(6, bytes=1), 2)
>>> StagedEvict().run(p).n_computes()
6
"""

from __future__ import annotations

import math

import numpy as np

from ..core.reductions import memory_greedy_order, plan_to_original, relabel
from ..interfaces import Heuristic
from ..limits import Limits, now
from ..plan import plan_from_order
from ..simulate import simulate

__all__ = ["staged_evict_order", "StagedEvict", "STAGED_RATE"]

#: steps (chain members and scanned live values) per CPU second: 1.0e6-1.1e6 measured at 1k-100k nodes on the
#: repeated llama graphs (the deadline is also checked every 16 frontier nodes)
STAGED_RATE = 1e6


class _Budget:
    """Steps left; ``take`` says whether the run may go on."""

    def __init__(self, work):
        self.left = work

    def take(self, k: int) -> bool:
        self.left -= k
        return self.left > 0


def staged_evict_order(graph, cost, budget: int, *, alpha: float = 1.0, beta: float = 1.0,
                       deadline: float | None = None, dfs: bool = False, work: _Budget | None = None):
    """A staged compute sequence within ``budget`` or ``None`` (also when
    ``deadline`` passes or ``work`` runs out).

    Victims maximise ``bytes**beta * distance / (recompute cost)**alpha``
    where ``distance`` is how far the next frontier reader is.
    """
    work = work or _Budget(math.inf)
    n = graph.n
    b = graph.bytes.astype(np.int64)
    pp, pi, sp, si = graph.pred_ptr, graph.pred_idx, graph.succ_ptr, graph.succ_idx
    preds = [pi[pp[v]:pp[v + 1]].tolist() for v in range(n)]
    succs = [si[sp[v]:sp[v + 1]].tolist() for v in range(n)]
    last_reader = np.array([max(s) if s else -1 for s in succs], dtype=np.int64)
    resident = np.zeros(n, dtype=bool)
    live: set[int] = set()
    mem = 0
    seq: list[int] = []
    eps = 1e-9 * (float(np.max(cost)) if n else 1.0) + 1e-12

    def next_reader(v, t):
        for j in succs[v]:
            if j >= t:
                return j
        return n + 1

    def missing_closure(t):
        """Nodes to recompute so that t's inputs are resident: sorted (a
        staged stage) or, with ``dfs``, in depth-first post-order (each input
        subtree finished before the next starts: fewer values held)."""
        need = set()
        stack = [u for u in preds[t] if not resident[u]]
        while stack:
            u = stack.pop()
            if u in need:
                continue
            need.add(u)
            stack.extend(w for w in preds[u] if not resident[w] and w not in need)
        if not dfs or len(need) > 500:  # (the post-order below is recursive)
            return sorted(need)
        out, done = [], set()

        def visit(u):
            done.add(u)
            for w in sorted(preds[u], key=lambda x: -int(b[x])):
                if w in need and w not in done:
                    visit(w)
            out.append(u)

        for u in sorted(preds[t], key=lambda x: -int(b[x])):
            if u in need and u not in done:
                visit(u)
        return out

    for t in range(n):
        if deadline is not None and t % 16 == 0 and now() > deadline:
            return None
        chain = missing_closure(t) + [t]
        if not work.take(len(chain) * len(chain)):
            return None
        for x in chain:
            pinned = set(preds[x]) | {x}
            # inputs still needed later in this chain must stay
            for y in chain:
                if y > x:
                    pinned.update(preds[y])
            while mem + b[x] > budget:
                if not work.take(len(live)):
                    return None
                best, best_score = -1, -1.0
                for v in live:
                    if v in pinned:
                        continue
                    dist = next_reader(v, t + 1) - t
                    rc = float(cost[v]) + sum(float(cost[u]) for u in preds[v] if not resident[u])
                    score = (float(b[v]) ** beta) * dist / ((rc + eps) ** alpha)
                    if score > best_score:
                        best, best_score = v, score
                if best < 0:
                    return None
                resident[best] = False
                live.discard(best)
                mem -= b[best]
            seq.append(x)
            resident[x] = True
            live.add(x)
            mem += b[x]
            # free what nobody reads any more (no later chain member, no later frontier node)
            for u in preds[x] + [x]:
                if resident[u] and last_reader[u] <= t and not any(y > x and u in preds[y] for y in chain):
                    resident[u] = False
                    live.discard(u)
                    mem -= b[u]
    return seq


class StagedEvict(Heuristic):
    """Staged greedy with evictions (a few scoring variants, best kept).

    ``max_seconds`` caps one call (on top of its limits)."""

    name = "staged_evict"
    version = "2"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})
    rank = 5.0
    max_seconds = 5.0
    VARIANTS = ((1.0, 1.0), (2.0, 1.0), (0.5, 1.0), (1.0, 0.5), (0.0, 1.0))

    #: larger graphs are declined: plain Python, quadratic (2.5 s for no plan at 100k nodes)
    max_nodes = 30_000

    def applicable(self, problem) -> tuple[bool, str]:
        if problem.graph.n > self.max_nodes:
            return False, (f"above {self.max_nodes} nodes (plain Python, quadratic: 2.5 s for no plan at 100k "
                           "nodes; the Numba DTR kernels plan faster)")
        return True, ""

    def predict_seconds(self, problem) -> float:
        """Seconds of a run: ``5.4e-6 n^1.5`` (fitted at 1k-10k nodes,
        ``benchmarks/results/heuristic_scaling.md``), at most ``max_seconds``."""
        return min(self.max_seconds, 5.4e-6 * float(problem.graph.n) ** 1.5)

    def run(self, problem, *, seed: int = 0, limits=None):
        return self.run_detailed(problem, seed=seed, limits=limits)["plan"]

    def run_detailed(self, problem, *, seed: int = 0, limits=None) -> dict:
        """``{"plan": Plan | None}``; variants stop at the deadline of
        ``limits`` (or after ``max_seconds``) and when the work budget
        (``limits.work`` steps) is spent."""
        lim = (limits if limits is not None else Limits()).share(self.max_seconds)
        deadline = lim.deadline if math.isfinite(lim.deadline) else None
        work = _Budget(math.inf if lim.work is None else int(lim.work))
        if lim.expired():
            return {"plan": None}

        best = None
        orders = [None, "memory_greedy"]  # reference first: it wins ties
        start = now()
        for k, order in enumerate(orders):
            if lim.expired() or work.left <= 0:
                break
            if order is not None:
                if not work.take(problem.graph.n) or lim.left() < 3e-5 * problem.graph.n:
                    break  # (the order costs about 3e-5 s a node)
                order = memory_greedy_order(problem.graph)
            order_deadline = None if deadline is None else start + (deadline - start) * (k + 1) / len(orders)
            prob, order = relabel(problem, order) if order is not None else (problem, None)
            g = prob.graph
            cost = np.asarray(prob.cost_matrix[0], dtype=np.float64)
            budget = int(prob.budgets[0])
            found = False
            for k2, (alpha, beta) in enumerate(self.VARIANTS + self.VARIANTS[:2]):
                dfs = k2 >= len(self.VARIANTS)
                if (order_deadline is not None and now() > order_deadline) or (dfs and found) or work.left <= 0:
                    break
                seq = staged_evict_order(g, cost, budget, alpha=alpha, beta=beta, deadline=order_deadline, dfs=dfs,
                                         work=work)
                if seq is None:
                    continue
                plan = plan_from_order(g, seq, problem.primary.name, {"solver": self.name})
                if order is not None:
                    plan = plan_to_original(plan, order)
                sim = simulate(problem, plan)
                if sim.valid and (best is None or sim.total_time < best[0]):
                    best = (sim.total_time, plan)
                found = found or sim.valid
        return {"plan": None if best is None else best[1]}
