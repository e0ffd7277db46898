"""Probe of the bound side of ``random_layered`` (session s33rlbound): the
*suffix moment bound* (a valid bound over every plan, below) and the
measurements that decide whether a one-moment argument can beat the cut
bound there.  Not registered in the portfolio: on every family at 2k nodes it
equals the cut bound or is weaker (``benchmarks/results/rl_bound_s33.md``).

Usage (from the repository root)::

    python -m benchmarks.rl_bound_probe positions --size 2000        # per suffix: crossing, node order, min over y
    python -m benchmarks.rl_bound_probe families --size 2000         # suffix bound vs the cut bound's LP
    python -m benchmarks.rl_bound_probe check --count 500 --seed 11  # brute force, rescaled costs
    python -m benchmarks.rl_bound_probe jit --size 2000              # the LP picture's plan: its memory

The *suffix moment bound*: the memory at the first computation of any
node of a suffix of the topological order.  Valid for every single-device
plan in any order, with any recomputation; serial time.

The cut bound (:mod:`hybrid_remat.bounds.cut`) asks what must be resident
when one node ``t`` is first computed; only ``t``'s descendants are known to
come later, so a value counts only when a descendant of ``t`` reads it.  On
a training graph the descendants of a backward node are the backward of its
forward ancestors (a cone): a value that the rest of the backward reads
elsewhere is not counted, although some plan order must still hold it.
Here the moment is the first computation of *any* node of the suffix
``U = {k, ..., n-1}`` of the graph's node order (a topological order): at
that moment no node of ``U`` has been computed yet, so every value read by
a node of ``U`` (not only by one cone) is still needed.

Proof
-----
Fix a valid single-device plan (a sequence of computes and frees, memory
counted after each allocation, every node computed at least once) and a
position ``k``; ``U`` is the set of nodes ``>= k``.  Let ``T`` be the first
compute step of any node of ``U`` and ``y`` the node it computes.

a. ``y`` is a *minimal* node of ``U``: all its inputs are ``< k`` (an input
   in ``U`` is computed before ``y``, against the choice of ``T``).  So the
   minimum over the minimal nodes of ``U`` of what follows bounds the plan.
b. Every strict ancestor ``x`` of ``y`` is ``< k`` and was computed before
   ``T`` (a compute reads its inputs).  Call ``x`` an *item* when it is not
   an input of ``y`` and some node ``w >= k`` reads it: ``w``'s first
   computation comes after ``T`` and needs ``x`` resident, so ``x`` is
   resident at ``T`` or computed again after ``T``.
c. At ``T``, after the allocation, ``y`` and its inputs are resident
   (distinct from the items), so the resident items ``X`` satisfy
   ``bytes(X) + bytes(y) + bytes(inputs of y) <= budget``.
d. Every item outside ``X`` is computed after ``T`` although its first
   computation came before: distinct nodes, distinct steps, so the plan's
   recomputation cost is at least the sum of their costs, i.e. at least
   the covering knapsack ``min {cost(I \\ X) : bytes(X) <= room}``, and at
   least its LP value (greedy by cost per byte, the last item fractional).
   Where the items cannot cover the excess, ``y`` cannot be first
   (``+inf`` for that ``y``).

So ``base cost + max over k of min over minimal y of knapsack_LP(k, y)``
bounds every plan's serial time (any set of positions gives a valid
bound; fewer positions examined only weaken it).  With ``U = {t} + desc(t)``
in place of a suffix this is the cut bound; a suffix counts every reader
after ``k`` at once, and the minimum over ``y`` replaces the cone.

Scale.  For each position the minimal nodes are those whose inputs all lie
before ``k``; each takes a graph search of its ancestors (``O(n + m)``)
and a pass over the items by cost per byte.  A position stops at the first
``y`` whose value is no better than the best position so far (its minimum
cannot beat it), and positions are examined by decreasing bytes crossing
``k`` while the unrestricted knapsack of everything crossing ``k`` (an
upper bound of every ``y``'s value there) can beat the best: at 2k nodes a
few hundred positions in well under a second.  A kernel work budget
derived from the deadline stops it early, weaker but valid.

Examples
--------
>>> import networkx as nx
>>> from hybrid_remat.generators import training_graph
>>> from hybrid_remat.oracle import brute_force
>>> from hybrid_remat.problem import Problem
>>> g = training_graph(nx.path_graph(5, create_using=nx.DiGraph))   # unit bytes and costs
>>> p = Problem.single(g, 6)
>>> r = suffix_moment_lower_bound(p)
>>> p.base_cost <= r.value <= brute_force(p)[0]
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from hybrid_remat.bounds.cut import _reach_kernel, serial_single_device
from hybrid_remat.interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from hybrid_remat.limits import Limits, now

__all__ = ["SuffixMomentResult", "suffix_moment_lower_bound", "SuffixMomentBound", "warmup", "positions",
           "jit_sequence", "jit_profile", "check", "main"]

#: kernel steps per second (measured ~5e7 at 10k nodes, idle machine: cache misses of the searches)
_STEPS_PER_SECOND = 5e7


@dataclass
class SuffixMomentResult:
    """``value`` bounds every plan's serial time (``base + extra``).

    Attributes
    ----------
    value, extra : float
    position : int
        The suffix start ``k`` of the best bound (-1: none binding).
    first : int
        The minimal node ``y`` of that suffix whose knapsack is the minimum.
    stats : dict
        Positions examined, kernel steps, seconds.
    """

    value: float
    extra: float
    position: int
    first: int
    stats: dict = field(default_factory=dict, repr=False)


@njit(cache=True)
def _cover_lp(anc, stamp, k, maxsucc, pmark, order, cost, size, need):
    """Greedy LP of the covering knapsack over the items of (k, y) (marked
    ``anc == stamp``, not ``pmark == stamp``, read at or after ``k``);
    ``(value, steps)``, ``inf`` when they cannot cover ``need``."""
    cum = np.int64(0)
    val = 0.0
    steps = 0
    for i in range(order.shape[0]):
        v = order[i]
        steps += 1
        if v >= k or anc[v] != stamp or pmark[v] == stamp or maxsucc[v] < k:
            continue
        s = size[v]
        if cum + s >= need:
            return val + cost[v] * (float(need - cum) / float(s)), steps
        cum += s
        val += cost[v]
    return np.inf, steps


@njit(cache=True)
def _suffix_kernel(ks, pred_ptr, pred_idx, succ_ptr, succ_idx, maxsucc, maxpred, order, cost, size, budget,
                   upper, work):
    """Best ``(value, k, y)`` over the positions ``ks`` (in that order) and
    the number examined within ``work`` steps.  ``upper[k]``: an upper bound
    of every ``y``'s value at ``k`` (positions are skipped where it cannot
    beat the best)."""
    n = size.shape[0]
    anc = np.zeros(n, dtype=np.int64)
    pmark = np.zeros(n, dtype=np.int64)
    stack = np.empty(max(n, 1), dtype=np.int64)
    best, best_k, best_y = 0.0, -1, -1
    steps = 0
    stamp = 0
    done = 0
    for q in range(ks.shape[0]):
        if steps >= work:
            break
        done = q + 1
        k = ks[q]
        if upper[k] <= best:
            continue
        low = np.inf
        low_y = -1
        for y in range(k, n):
            steps += 1
            if maxpred[y] >= k:
                continue
            stamp += 1
            steps += _reach_kernel(pred_ptr, pred_idx, y, stamp, anc, stack)
            need = np.int64(size[y])
            for j in range(pred_ptr[y], pred_ptr[y + 1]):
                u = pred_idx[j]
                if pmark[u] != stamp:
                    pmark[u] = stamp
                    need += size[u]
            for v in range(k):
                if anc[v] == stamp and pmark[v] != stamp and maxsucc[v] >= k:
                    need += size[v]
            steps += k
            need -= budget
            if need <= 0:
                val = 0.0
            else:
                val, s = _cover_lp(anc, stamp, k, maxsucc, pmark, order, cost, size, need)
                steps += s
            if val < low:
                low, low_y = val, y
            if low <= best or steps >= work:
                break
        if steps >= work and low > best:   # stopped inside the position: its minimum is unknown
            done = q
            break
        if low > best and math.isfinite(low):
            best, best_k, best_y = low, k, low_y
        elif low > best:   # no minimal node can be first: no plan fits
            return np.inf, k, -1, done, steps
    return best, best_k, best_y, done, steps


@njit(cache=True)
def _crossing(size, maxsucc, n):
    """Bytes crossing each position ``k``: values ``< k`` read at or after ``k``."""
    diff = np.zeros(n + 1, dtype=np.int64)
    for v in range(n):
        if maxsucc[v] > v:
            diff[v + 1] += size[v]
            diff[maxsucc[v] + 1] -= size[v]
    cross = np.zeros(n, dtype=np.int64)
    run = np.int64(0)
    for k in range(n):
        run += diff[k]
        cross[k] = run
    return cross


@njit(cache=True)
def _upper_values(ks, size, cost, order, maxsucc, budget, maxin):
    """For each position of ``ks``: the knapsack LP over everything crossing
    it with the room ``budget - maxin[k]`` (``maxin[k]``: at least the
    allocation, bytes plus inputs', of every node ``>= k``).  It bounds each
    ``y``'s value there from above: restricting its drop set to ``y``'s items
    removes at most the bytes of the other crossing values, ``y``'s inputs
    among them, so it still covers ``y``'s excess at no more cost."""
    n = size.shape[0]
    out = np.zeros(n)
    for q in range(ks.shape[0]):
        k = ks[q]
        need = maxin[k] - budget
        for v in range(k):
            if maxsucc[v] >= k:
                need += size[v]
        if need <= 0:
            continue
        cum = np.int64(0)
        val = 0.0
        hit = False
        for i in range(order.shape[0]):
            v = order[i]
            if v >= k or maxsucc[v] < k:
                continue
            s = size[v]
            if cum + s >= need:
                val += cost[v] * (float(need - cum) / float(s))
                hit = True
                break
            cum += s
            val += cost[v]
        out[k] = val if hit else np.inf
    return out


def _degrees(g):
    n = g.n
    maxsucc = np.full(n, -1, dtype=np.int64)
    maxpred = np.full(n, -1, dtype=np.int64)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.succ_ptr))
    if src.size:
        np.maximum.at(maxsucc, src, g.succ_idx.astype(np.int64))
        dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.pred_ptr))
        np.maximum.at(maxpred, dst, g.pred_idx.astype(np.int64))
    return maxsucc, maxpred


def suffix_moment_lower_bound(problem, *, limits: Limits | None = None, max_seconds: float | None = None,
                              max_positions: int | None = None) -> SuffixMomentResult:
    """The suffix moment bound of a single-device problem (module docstring).

    Parameters
    ----------
    problem : Problem
        Single device, serial time.
    limits : Limits, optional
        Deadline and work budget; stopped early the bound is weaker, never
        invalid.
    max_seconds : float, optional
        Return within this many seconds even when ``limits`` allow more.
    max_positions : int, optional
        Examine at most this many positions (the most bytes crossing first).

    Returns
    -------
    SuffixMomentResult

    Raises
    ------
    ValueError
        On a multi-device problem.
    """
    if not problem.is_single_device:
        raise ValueError("the suffix moment bound covers single-device problems only")
    limits = limits or Limits()
    if max_seconds is not None:
        limits = limits.share(max_seconds)
    t0 = now()
    g = problem.graph
    n = g.n
    base = float(problem.base_cost)
    cost = np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.ascontiguousarray(g.bytes, dtype=np.int64)
    B = np.int64(int(problem.budgets[0]))
    if n == 0:
        return SuffixMomentResult(base, 0.0, -1, -1, {"examined": 0})
    maxsucc, maxpred = _degrees(g)
    pos = np.flatnonzero(size > 0)
    order = pos[np.argsort(cost[pos] / size[pos], kind="stable")]
    cross = _crossing(size, maxsucc, n)
    # the largest allocation (bytes + inputs) of any node at or after k: a bound on y's own share
    alloc = size.copy()
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.pred_ptr))
    np.add.at(alloc, dst, size[g.pred_idx])
    maxin = np.maximum.accumulate(alloc[::-1])[::-1].astype(np.int64)
    ks = np.flatnonzero(cross + maxin > B).astype(np.int64)   # below: every y fits with all items
    ks = ks[np.argsort(-cross[ks], kind="stable")]
    if max_positions is not None:
        ks = ks[:max_positions]
    work = limits.work_for(_STEPS_PER_SECOND)
    # the upper values cost O(n) each: a share of the work
    upper_ks = ks[: max(1, min(ks.size, int(0.25 * work // max(2 * n, 1))))] if ks.size else ks
    upper = np.full(n, np.inf)
    if upper_ks.size:
        upper = _upper_values(upper_ks, size, cost, order, maxsucc, B, maxin)
        upper[np.setdiff1d(np.arange(n), upper_ks)] = np.inf
    ks_sorted = ks[np.argsort(-upper[ks], kind="stable")] if ks.size else ks
    best, k, y, done, steps = _suffix_kernel(ks_sorted, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx, maxsucc,
                                             maxpred, order, cost, size, B, upper,
                                             np.int64(max(0, work - 2 * n * upper_ks.size)))
    stats = {"positions": int(ks.size), "examined": int(done), "steps": int(steps), "seconds": now() - t0}
    if not math.isfinite(best):
        return SuffixMomentResult(math.inf, math.inf, int(k), -1, {**stats, "infeasible": True})
    return SuffixMomentResult(base + float(best), float(best), int(k), int(y), stats)


def warmup() -> None:
    """Compile or load the kernels (call it outside any time limit)."""
    from hybrid_remat.generators import chain
    from hybrid_remat.problem import Problem

    suffix_moment_lower_bound(Problem.single(chain(4, bytes=1), 2))


class SuffixMomentBound(Bound):
    """The suffix moment bound as a registered bound (``suffix_moment_bound``,
    scope: every plan; serial time, one device, any size).  It returns
    within the ``limits`` it is given and within :attr:`max_seconds`.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = SuffixMomentBound().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value >= 6.0
    ('all plans', True)
    """

    name = "suffix_moment_bound"
    version = "1"
    #: seconds it takes at most
    max_seconds = 2.5
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 5.5
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        return serial_single_device(problem)

    def predict_seconds(self, problem) -> float:
        """Seconds worth giving it: well under a second at 2k nodes; at most :attr:`max_seconds`."""
        return min(self.max_seconds, 0.3 + 2e-5 * (problem.graph.n + problem.graph.m))

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        r = suffix_moment_lower_bound(problem, limits=limits, max_seconds=self.max_seconds)
        return BoundResult(r.value, ALL_PLANS, {"extra": r.extra, "position": r.position, "first": r.first,
                                                **r.stats})


# ----------------------------------------------------------------- probes
def _order_value(k, preds, maxsucc, order, cost, size, B) -> float:
    """The knapsack LP at ``k`` when every node ``< k`` is computed before
    ``k`` (first computations in node order): the items are all values
    crossing ``k`` but ``k``'s inputs, the excess theirs plus ``k``'s
    allocation over ``B``."""
    it = np.zeros(size.shape[0], dtype=bool)
    it[:k] = maxsucc[:k] >= k
    it[preds] = False
    need = int(size[it].sum()) + int(size[k]) + int(size[np.unique(preds)].sum()) - int(B)
    if need <= 0:
        return 0.0
    o = order[it[order]]
    cs = np.cumsum(size[o])
    j = int(np.searchsorted(cs, need))
    if j >= o.size:
        return math.inf
    return float(cost[o[:j]].sum() + cost[o[j]] * (need - (cs[j - 1] if j else 0)) / size[o[j]])


def positions(problem, ks) -> list[dict]:
    """Per position ``k``: bytes crossing ``k`` (fraction of the budget), the
    knapsack at ``k`` when the first computations follow the node order (a
    bound of that order class only, not of every plan) and the bound, the
    minimum over the minimal nodes ``y`` (TDI %)."""
    g = problem.graph
    base = float(problem.base_cost)
    cost = np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64)
    size = np.ascontiguousarray(g.bytes, dtype=np.int64)
    B = np.int64(int(problem.budgets[0]))
    maxsucc, maxpred = _degrees(g)
    pos = np.flatnonzero(size > 0)
    order = pos[np.argsort(cost[pos] / size[pos], kind="stable")]
    cross = _crossing(size, maxsucc, g.n)
    out = []
    for k in np.asarray(ks, dtype=np.int64).tolist():
        r = _suffix_kernel(np.array([k], dtype=np.int64), g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx, maxsucc,
                           maxpred, order, cost, size, B, np.full(g.n, np.inf), np.int64(10**15))
        fixed = _order_value(k, g.preds(k), maxsucc, order, cost, size, B)
        out.append({"k": k, "cross_over_budget": float(cross[k] / B), "order_tdi": 100 * fixed / base,
                    "bound_tdi": 100 * float(r[0]) / base, "first": int(r[2]),
                    "minimal": int(sum(1 for y in range(k, g.n) if maxpred[y] < k))})
    return out


def jit_sequence(graph, drop) -> list[int]:
    """A compute sequence for a forward-then-backward graph (loss at
    ``L = (n - 1) // 2``): the forward and the loss in node order, then the
    backward in node order, each dropped forward value (``drop``) recomputed
    right before its first backward reader (its dropped inputs first) and
    kept from then on: the plan the cut bound's LP picture suggests."""
    L = (graph.n - 1) // 2
    seq = list(range(L + 1))
    back = np.zeros(graph.n, dtype=bool)
    for b in range(L + 1, graph.n):
        for v in graph.preds(b).tolist():
            todo = [(v, False)] if v < L and drop[v] and not back[v] else []
            while todo:
                x, ready = todo.pop()
                if ready:
                    if not back[x]:
                        back[x] = True
                        seq.append(x)
                    continue
                if back[x]:
                    continue
                todo.append((x, True))
                todo += [(u, False) for u in graph.preds(x).tolist() if drop[u] and not back[u]]
        seq.append(b)
    return seq


def jit_profile(problem, fractions) -> list[dict]:
    """For each fraction ``f``: drop the ``f`` share of forward values with
    the least cost per byte, build :func:`jit_sequence` and report the
    memory at the loss, the backward's peak (fractions of the budget) and
    the sequence's recomputation (TDI %)."""
    from hybrid_remat.core.sequence import sequence_profile_kernel

    g = problem.graph
    B = int(problem.budgets[0])
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    L = (g.n - 1) // 2
    order = np.argsort(cost[:L] / np.maximum(g.bytes[:L], 1), kind="stable")
    rows = []
    for f in fractions:
        drop = np.zeros(g.n, dtype=bool)
        drop[order[: int(f * L)]] = True
        seq = np.asarray(jit_sequence(g, drop), dtype=np.int64)
        _, mem, _ = sequence_profile_kernel(seq, np.ones(seq.size, dtype=np.bool_), g.bytes.astype(np.int64),
                                            g.pred_ptr, g.pred_idx)
        rows.append({"fraction": f, "loss": mem[L] / B, "backward_peak": mem[L + 1:].max() / B,
                     "tdi": 100 * (cost[seq].sum() / problem.base_cost - 1)})
    return rows


def check(count: int, seed: int) -> dict:
    """The suffix moment bound against the all-plans brute force on the
    bounds battery's rescaled instances (costs 1e-12..1e12, bytes to 5e17)."""
    from benchmarks.bounds_battery import rescaled_instances, violations
    from hybrid_remat.oracle import brute_force

    found, feasible = [], 0
    for i, p in enumerate(rescaled_instances(count, seed)):
        opt = brute_force(p)[0]
        feasible += math.isfinite(opt)
        bad = violations(p, opt, bounds={"suffix_moment_bound": SuffixMomentBound()})
        r = suffix_moment_lower_bound(p)
        if math.isfinite(opt) and not math.isfinite(r.value):
            bad.append(f"suffix_moment_bound: +inf where a plan of {opt!r} exists")
        found += [f"instance {i}: {b}" for b in bad]
    return {"instances": count, "with_plan": feasible, "violations": found}


def main(argv=None) -> int:
    import argparse
    import time

    from hybrid_remat.families import FAMILIES, random_layered_training
    from hybrid_remat.problem import Problem

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["positions", "families", "check", "bound", "jit"])
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--budget", default="50%")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args(argv)
    warmup()
    if a.what == "check":
        r = check(a.count, a.seed)
        print(f"{r['instances']} instances ({r['with_plan']} with a plan): {len(r['violations'])} violations")
        for v in r["violations"]:
            print(" ", v)
        return 1 if r["violations"] else 0
    if a.what == "families":
        from hybrid_remat.bounds.cut import cut_lower_bound

        for name, build in FAMILIES.items():
            p = Problem.single(build(a.size, 0), a.budget)
            t = time.time()
            s = suffix_moment_lower_bound(p, limits=Limits.seconds(2.5))
            ts = time.time() - t
            c = cut_lower_bound(p, exact_nodes=0, limits=Limits.seconds(2.5))
            print(f"| {name} | {p.graph.n} | {a.budget} | {100 * s.extra / p.base_cost:.3f} | {ts:.2f} | "
                  f"{100 * c.extra / p.base_cost:.3f} |")
        return 0
    p = Problem.single(random_layered_training(a.size, 0), a.budget)
    if a.what == "bound":
        t = time.time()
        r = suffix_moment_lower_bound(p, limits=Limits.seconds(2.5))
        print(f"{p.graph.n} {a.budget}: {100 * r.extra / p.base_cost:.3f} % at k={r.position} y={r.first} "
              f"({time.time() - t:.2f} s) {r.stats}")
        return 0
    if a.what == "jit":
        for row in jit_profile(p, (0.1, 0.2, 0.3, 0.4, 0.5)):
            print("| {fraction:.1f} | {loss:.3f} | {backward_peak:.3f} | {tdi:.3f} |".format(**row))
        return 0
    L = (p.graph.n - 1) // 2
    ks = sorted({int(L * f) for f in (0.9, 1.0)}
                | {L + 1 + int(L * f) for f in (0.01, 0.05, 0.052, 0.1, 0.2, 0.3, 0.5, 0.7)})
    for row in positions(p, ks):
        print("| {k} | {cross_over_budget:.3f} | {order_tdi:.3f} | {bound_tdi:.3f} | {first} | {minimal} |"
              .format(**row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
