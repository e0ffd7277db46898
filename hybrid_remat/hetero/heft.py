"""Memory-aware list scheduling (HEFT) with eviction, recomputation and offload.

For each node, in a topological *processing order* (the reference order or
HEFT's decreasing upward rank), the kernel

1. scores every compute device ``d`` by the time it would add (serial mode:
   the node's cost on ``d`` plus the copies or recomputations that bring its
   inputs to ``d``; makespan mode: its earliest finish time on ``d`` with the
   same streams as the simulator), plus the restore cost of what ``d`` would
   have to evict to make room; devices where the node cannot fit at all are
   refused;
2. brings the inputs to the chosen device: a value resident on another
   device is copied (a *prefetch*), a value resident nowhere is recomputed,
   recursively, in index order (DTR's rematerialization), on the device
   where recomputing plus copying the results over is cheapest;
3. evicts, when the device is short of memory, the resident unpinned value
   with the lowest DTR score ``restore / (bytes x staleness)`` (or, as an
   option, ``restore / (bytes x distance to next use)``), where ``restore``
   is the cheaper of recomputing it later and offloading it (copy to a
   device with room and back), the offload weighted by ``offload_weight``;
   an offload is emitted as ``copy`` then ``free``; a value that also lives
   elsewhere is simply dropped on ``d``;
4. frees every value whose consumers have all run (on every device).

HEFT's *insertion* (placing a task into an idle gap of an earlier schedule)
is a post-pass here (:mod:`hybrid_remat.hetero.insertion`): the simulator
runs each stream in plan order, so a computation moves earlier in the plan,
and since that changes the memory of every step in between, each move is
checked by the simulator.  It runs for the makespan objective (insertion
cannot change the serial time).

The kernel returns raw step arrays; :func:`heft_plan` wraps them into a
:class:`~hybrid_remat.plan.Plan` and :class:`HeftScheduler` is the registered
heuristic (a small portfolio of orders, modes and scores, each checked by the
simulator).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(6, bytes=10).with_costs({"gpu": [1.0] * 6, "cpu": [5.0] * 6})
>>> p = Problem(g, [Device("gpu", "gpu", 20), Device("cpu", "cpu", 1000)],
...             [Link("gpu", "cpu", 10.0), Link("cpu", "gpu", 10.0)])
>>> from hybrid_remat.simulate import simulate
>>> simulate(p, heft_plan(p)).valid
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import PlanError
from ..interfaces import Heuristic
from ..plan import Plan
from ..problem import Problem
from ..simulate import simulate

__all__ = [
    "heft_kernel", "upward_rank", "rank_order", "heft_plan", "HeftScheduler", "objective_value",
    "MODE_SERIAL", "MODE_MAKESPAN", "SCORE_STALENESS", "SCORE_NEXT_USE",
]

MODE_SERIAL = 0
MODE_MAKESPAN = 1
SCORE_STALENESS = 0
SCORE_NEXT_USE = 1

ST_OK = 0
ST_NO_DEVICE = 1
ST_CAPACITY = 2
ST_STUCK = 3


# ----------------------------------------------------------------- ranks
@njit(cache=True)
def upward_rank(bytes_, succ_ptr, succ_idx, cost, can_compute, bw, lat):
    """HEFT's upward rank with mean compute and mean link costs.

    ``rank(i) = w_i + max_{j in succ(i)} (c_i + rank(j))`` where ``w_i`` is
    the mean of node ``i``'s cost over compute devices and ``c_i`` the mean
    copy time of its output over the links.
    """
    n = bytes_.shape[0]
    D = cost.shape[0]
    mean_w = np.zeros(n)
    nd = 0
    for d in range(D):
        if can_compute[d]:
            nd += 1
            for i in range(n):
                mean_w[i] += cost[d, i]
    if nd > 0:
        mean_w /= nd
    nl = 0
    mlat = 0.0
    minv = 0.0
    for a in range(D):
        for b in range(D):
            if a != b and bw[a, b] > 0.0:
                nl += 1
                mlat += lat[a, b]
                minv += 1.0 / bw[a, b]
    rank = np.zeros(n)
    for i in range(n - 1, -1, -1):
        c = 0.0
        if nl > 0:
            c = mlat / nl + bytes_[i] * minv / nl
        best = 0.0
        for k in range(succ_ptr[i], succ_ptr[i + 1]):
            r = c + rank[succ_idx[k]]
            if r > best:
                best = r
        rank[i] = mean_w[i] + best
    return rank


def rank_order(problem: Problem) -> np.ndarray:
    """Nodes by decreasing upward rank, ties by index (a topological order)."""
    g = problem.graph
    bw, lat = problem.link_arrays
    cost = problem.cost_matrix
    cost = np.where(np.isfinite(cost), cost, 0.0)
    rank = upward_rank(g.bytes, g.succ_ptr, g.succ_idx, cost, problem.can_compute, bw, lat)
    order = np.lexsort((np.arange(g.n), -rank)).astype(np.int64)
    # repair any tie-induced violation (zero-cost chains): keep it topological
    pos = np.empty(g.n, dtype=np.int64)
    pos[order] = np.arange(g.n)
    src, dst = (g.edges()[:, 0], g.edges()[:, 1]) if g.m else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if g.m and np.any(pos[src] > pos[dst]):
        return np.arange(g.n, dtype=np.int64)
    return order


# ---------------------------------------------------------------- kernel
@njit(cache=True)
def _copy_time(bw, lat, s, t, b):
    return lat[s, t] + b / bw[s, t]


@njit(cache=True)
def _emit(ops, nodes, devs, dsts, k, o, v, d, t):
    if k < ops.shape[0]:
        ops[k] = o
        nodes[k] = v
        devs[k] = d
        dsts[k] = t
    return k + 1


@njit(cache=True)
def _best_source(resident, bw, lat, bytes_, u, d):
    """Device holding ``u`` with the cheapest copy to ``d`` (-1: none)."""
    D = resident.shape[0]
    best = -1
    bt = np.inf
    for s in range(D):
        if s != d and resident[s, u] and bw[s, d] > 0.0:
            c = _copy_time(bw, lat, s, d, bytes_[u])
            if c < bt:
                bt = c
                best = s
    return best


@njit(cache=True)
def _next_use(succ_ptr, succ_idx, pos, done, w):
    nu = 1 << 60
    for k in range(succ_ptr[w], succ_ptr[w + 1]):
        j = succ_idx[k]
        if not done[j] and pos[j] < nu:
            nu = pos[j]
    return nu


@njit(cache=True)
def _restore(w, d, resident, bytes_, pred_ptr, pred_idx, cost, can_compute, budget, mem, bw, lat, offload_weight):
    """Cheapest way to get ``w`` back on ``d`` after evicting it:
    returns ``(cost, target)``; target -1 = drop (recompute or copy back
    from an existing holder), >= 0 = offload to that device first."""
    D = resident.shape[0]
    # already elsewhere: a copy back is enough
    hold = _best_source(resident, bw, lat, bytes_, w, d)
    if hold >= 0:
        return _copy_time(bw, lat, hold, d, bytes_[w]), -1
    rc = np.inf
    if can_compute[d]:
        rc = cost[d, w]
    else:
        for e in range(D):
            if can_compute[e] and cost[e, w] < rc:
                rc = cost[e, w]
    for k in range(pred_ptr[w], pred_ptr[w + 1]):
        u = pred_idx[k]
        anywhere = False
        for e in range(D):
            if resident[e, u]:
                anywhere = True
                break
        if not anywhere:
            if can_compute[d]:
                rc += cost[d, u]
            else:
                rc += rc
    best_t = -1
    best = rc
    for t in range(D):
        if t != d and bw[d, t] > 0.0 and bw[t, d] > 0.0 and budget[t] - mem[t] >= bytes_[w]:
            oc = (_copy_time(bw, lat, d, t, bytes_[w]) + _copy_time(bw, lat, t, d, bytes_[w])) * offload_weight
            if oc < best:
                best = oc
                best_t = t
    return best, best_t


@njit(cache=True)
def _pick_victim(d, resident, pin, mark, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, cost, can_compute, budget,
                 mem, bw, lat, offload_weight, last_use, clock, score_kind, pos, done, remaining):
    n = bytes_.shape[0]
    best = -1
    best_score = np.inf
    best_restore = 0.0
    best_t = -1
    for w in range(n):
        if not resident[d, w] or pin[w] > 0 or mark[w] or bytes_[w] <= 0:
            continue
        if remaining[w] == 0:
            return w, -1.0, 0.0, -1
        r, t = _restore(w, d, resident, bytes_, pred_ptr, pred_idx, cost, can_compute, budget, mem, bw, lat,
                        offload_weight)
        if score_kind == 0:
            dist = clock - last_use[d, w] + 1.0
        else:
            dist = float(_next_use(succ_ptr, succ_idx, pos, done, w) - clock) + 1.0
            if dist < 1.0:
                dist = 1.0
        s = r / (bytes_[w] * dist)
        if s < best_score:
            best_score = s
            best = w
            best_restore = r
            best_t = t
    return best, best_score, best_restore, best_t


@njit(cache=True)
def _make_room(dd, need, resident, pin, mark, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, cost, can_compute,
               budget, mem, bw, lat, offload_weight, last_use, clock, score_kind, pos, done, remaining,
               cstream, ready, ops, nodes, devs, dsts, k):
    """Evict (offload as copy + free, or drop) victims on ``dd`` until
    ``need`` more bytes fit; ``(False, k)`` when no victim is left."""
    while mem[dd] + need > budget[dd]:
        x, sc, r, t = _pick_victim(dd, resident, pin, mark, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, cost,
                                   can_compute, budget, mem, bw, lat, offload_weight, last_use, clock, score_kind,
                                   pos, done, remaining)
        if x < 0:
            return False, k
        if t >= 0:
            a = cstream[dd, t]
            if ready[dd, x] > a:
                a = ready[dd, x]
            a += _copy_time(bw, lat, dd, t, bytes_[x])
            cstream[dd, t] = a
            ready[t, x] = a
            resident[t, x] = True
            mem[t] += bytes_[x]
            k = _emit(ops, nodes, devs, dsts, k, 2, x, dd, t)
        resident[dd, x] = False
        mem[dd] -= bytes_[x]
        k = _emit(ops, nodes, devs, dsts, k, 1, x, dd, -1)
    return True, k


@njit(cache=True)
def heft_kernel(bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx, cost, can_compute, budget, bw, lat, order, mode,
                offload_weight, score_kind, cap):
    """Memory-aware list scheduling; see the module docstring.

    Parameters
    ----------
    bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx : int64 arrays
        The graph.
    cost : float64 (D, n)
        Operator times (``inf`` where a device cannot compute).
    can_compute : bool (D); budget : int64 (D); bw, lat : float64 (D, D)
    order : int64 (n)
        Topological processing order of first computations.
    mode : int
        0 = serial time, 1 = makespan (earliest finish time).
    offload_weight : float
        Multiplies offload round trips when weighing them against
        recomputation (1 = their serial cost; < 1 favours offload, e.g.
        when copies overlap with compute).
    score_kind : int
        0 = DTR staleness, 1 = distance to next use.
    cap : int
        Capacity of the step arrays.

    Returns
    -------
    status : int
        0 ok, 1 no device can take a node, 2 capacity too small (retry with
        ``n_steps``), 3 eviction found nothing to evict.
    aux : int
        The offending node (status 1, 3).
    n_steps : int
    op, node, dev, dst : arrays of length ``cap``
    """
    n = bytes_.shape[0]
    D = cost.shape[0]
    ops = np.zeros(cap, dtype=np.int8)
    nodes = np.zeros(cap, dtype=np.int64)
    devs = np.zeros(cap, dtype=np.int64)
    dsts = np.full(cap, -1, dtype=np.int64)
    k = 0
    resident = np.zeros((D, n), dtype=np.bool_)
    mem = np.zeros(D, dtype=np.int64)
    ready = np.zeros((D, n))
    stream = np.zeros(D)
    cstream = np.zeros((D, D))
    last_use = np.zeros((D, n))
    pin = np.zeros(n, dtype=np.int64)
    mark = np.zeros(n, dtype=np.bool_)
    marked = np.zeros(n, dtype=np.int64)
    need = np.zeros(n, dtype=np.int64)  # stamp: member of the current recompute set
    localuse = np.zeros(n, dtype=np.int64)
    remaining = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=np.bool_)
    pos = np.zeros(n, dtype=np.int64)
    stack = np.zeros(n, dtype=np.int64)
    members = np.zeros(n, dtype=np.int64)
    for i in range(n):
        pos[order[i]] = i
        remaining[i] = succ_ptr[i + 1] - succ_ptr[i]
    clock = 0.0

    for step in range(n):
        v = order[step]
        clock = float(step)
        # ---------------------------------------------------- choose a device
        best_d = -1
        best_score = np.inf
        for d in range(D):
            if not can_compute[d]:
                continue
            needb = bytes_[v]
            for q in range(pred_ptr[v], pred_ptr[v + 1]):
                needb += bytes_[pred_idx[q]]
            if needb > budget[d]:
                continue
            est = cost[d, v]
            extra = bytes_[v]
            start = stream[d]
            for q in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[q]
                if resident[d, u]:
                    if ready[d, u] > start:
                        start = ready[d, u]
                    continue
                extra += bytes_[u]
                s = _best_source(resident, bw, lat, bytes_, u, d)
                if s >= 0:
                    c = _copy_time(bw, lat, s, d, bytes_[u])
                    est += c
                    a = cstream[s, d]
                    if ready[s, u] > a:
                        a = ready[s, u]
                    if a + c > start:
                        start = a + c
                else:
                    rc = cost[d, u]
                    for e in range(D):
                        if e != d and can_compute[e] and bw[e, d] > 0.0:
                            c2 = cost[e, u] + _copy_time(bw, lat, e, d, bytes_[u])
                            if c2 < rc:
                                rc = c2
                    est += rc
                    if stream[d] + rc > start:
                        start = stream[d] + rc
            penalty = 0.0
            if mem[d] + extra > budget[d]:
                # dry-run eviction with v's resident inputs pinned
                for q in range(pred_ptr[v], pred_ptr[v + 1]):
                    pin[pred_idx[q]] += 1
                freeb = budget[d] - mem[d]
                nm = 0
                ok = True
                while freeb < extra:
                    w, sc, r, t = _pick_victim(d, resident, pin, mark, bytes_, pred_ptr, pred_idx, succ_ptr,
                                               succ_idx, cost, can_compute, budget, mem, bw, lat, offload_weight,
                                               last_use, clock, score_kind, pos, done, remaining)
                    if w < 0:
                        ok = False
                        break
                    mark[w] = True
                    marked[nm] = w
                    nm += 1
                    freeb += bytes_[w]
                    penalty += r
                for q in range(nm):
                    mark[marked[q]] = False
                for q in range(pred_ptr[v], pred_ptr[v + 1]):
                    pin[pred_idx[q]] -= 1
                if not ok:
                    continue
            if mode == 0:
                score = est + penalty
            else:
                score = start + cost[d, v] + penalty
            if score < best_score:
                best_score = score
                best_d = d
        if best_d < 0:
            return ST_NO_DEVICE, v, k, ops, nodes, devs, dsts
        d = best_d

        # ------------------------------------------- the recompute set of v
        nst = 0
        nmem = 0
        stamp = step + 1
        for q in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[q]
            anywhere = False
            for e in range(D):
                if resident[e, u]:
                    anywhere = True
                    break
            if not anywhere and need[u] != stamp:
                need[u] = stamp
                stack[nst] = u
                nst += 1
        while nst > 0:
            nst -= 1
            w = stack[nst]
            members[nmem] = w
            nmem += 1
            for q in range(pred_ptr[w], pred_ptr[w + 1]):
                u = pred_idx[q]
                anywhere = False
                for e in range(D):
                    if resident[e, u]:
                        anywhere = True
                        break
                if not anywhere and need[u] != stamp:
                    need[u] = stamp
                    stack[nst] = u
                    nst += 1
        mlist = np.sort(members[:nmem])
        # local uses: how many computations of this materialization read each value
        for j in range(nmem + 1):
            w = v if j == nmem else mlist[j]
            for q in range(pred_ptr[w], pred_ptr[w + 1]):
                u = pred_idx[q]
                localuse[u] += 1
                if localuse[u] == 1:
                    pin[u] += 1
        # the recompute set runs on one device: the cheapest, copies included
        rdev = d
        if nmem > 0:
            best_r = np.inf
            for r in range(D):
                if not can_compute[r]:
                    continue
                est = 0.0
                ok = True
                for j in range(nmem):
                    w = mlist[j]
                    needw = bytes_[w]
                    for q in range(pred_ptr[w], pred_ptr[w + 1]):
                        u = pred_idx[q]
                        needw += bytes_[u]
                        if need[u] != stamp and not resident[r, u]:
                            s2 = _best_source(resident, bw, lat, bytes_, u, r)
                            if s2 < 0:
                                ok = False
                            else:
                                est += _copy_time(bw, lat, s2, r, bytes_[u])
                    if needw > budget[r]:
                        ok = False
                    est += cost[r, w]
                if r != d:
                    for q in range(pred_ptr[v], pred_ptr[v + 1]):
                        u = pred_idx[q]
                        if need[u] == stamp:
                            if bw[r, d] <= 0.0:
                                ok = False
                            else:
                                est += _copy_time(bw, lat, r, d, bytes_[u])
                if ok and est < best_r:
                    best_r = est
                    rdev = r
        # ------------------------------------------------ run the set, then v
        for j in range(nmem + 1):
            w = v if j == nmem else mlist[j]
            dd = d if j == nmem else rdev
            # inputs on dd
            for q in range(pred_ptr[w], pred_ptr[w + 1]):
                u = pred_idx[q]
                if resident[dd, u]:
                    continue
                s = _best_source(resident, bw, lat, bytes_, u, dd)
                if s < 0:
                    return ST_STUCK, u, k, ops, nodes, devs, dsts
                ok, k = _make_room(dd, bytes_[u], resident, pin, mark, bytes_, pred_ptr, pred_idx, succ_ptr,
                                   succ_idx, cost, can_compute, budget, mem, bw, lat, offload_weight, last_use,
                                   clock, score_kind, pos, done, remaining, cstream, ready, ops, nodes, devs, dsts, k)
                if not ok:
                    return ST_STUCK, u, k, ops, nodes, devs, dsts
                a = cstream[s, dd]
                if ready[s, u] > a:
                    a = ready[s, u]
                a += _copy_time(bw, lat, s, dd, bytes_[u])
                cstream[s, dd] = a
                ready[dd, u] = a
                resident[dd, u] = True
                mem[dd] += bytes_[u]
                last_use[dd, u] = clock
                k = _emit(ops, nodes, devs, dsts, k, 2, u, s, dd)
            # room for w's output
            ok, k = _make_room(dd, bytes_[w], resident, pin, mark, bytes_, pred_ptr, pred_idx, succ_ptr, succ_idx,
                               cost, can_compute, budget, mem, bw, lat, offload_weight, last_use, clock, score_kind,
                               pos, done, remaining, cstream, ready, ops, nodes, devs, dsts, k)
            if not ok:
                return ST_STUCK, w, k, ops, nodes, devs, dsts
            # compute w on dd
            start = stream[dd]
            for q in range(pred_ptr[w], pred_ptr[w + 1]):
                u = pred_idx[q]
                if ready[dd, u] > start:
                    start = ready[dd, u]
                last_use[dd, u] = clock
            stream[dd] = start + cost[dd, w]
            ready[dd, w] = stream[dd]
            resident[dd, w] = True
            mem[dd] += bytes_[w]
            last_use[dd, w] = clock
            k = _emit(ops, nodes, devs, dsts, k, 0, w, dd, -1)
            if w == v:
                done[v] = True
                for q in range(pred_ptr[v], pred_ptr[v + 1]):
                    remaining[pred_idx[q]] -= 1
            # release inputs whose local uses are over; free the dead ones
            for q in range(pred_ptr[w], pred_ptr[w + 1]):
                u = pred_idx[q]
                localuse[u] -= 1
                if localuse[u] == 0:
                    pin[u] -= 1
                    if remaining[u] == 0:
                        for e in range(D):
                            if resident[e, u]:
                                resident[e, u] = False
                                mem[e] -= bytes_[u]
                                k = _emit(ops, nodes, devs, dsts, k, 1, u, e, -1)
        if remaining[v] == 0:
            resident[d, v] = False
            mem[d] -= bytes_[v]
            k = _emit(ops, nodes, devs, dsts, k, 1, v, d, -1)
    if k > cap:
        return ST_CAPACITY, -1, k, ops, nodes, devs, dsts
    return ST_OK, -1, k, ops, nodes, devs, dsts


# ---------------------------------------------------------------- wrappers
def objective_value(result, objective: str) -> float:
    """``result.total_time`` (serial) or ``result.makespan``."""
    if objective == "serial":
        return result.total_time
    if objective == "makespan":
        return result.makespan
    raise PlanError(f"unknown objective {objective!r}: use 'serial' or 'makespan'")


def heft_plan(problem: Problem, *, order=None, mode: int = MODE_SERIAL, offload_weight: float = 1.0,
              score_kind: int = SCORE_STALENESS, devices=None) -> Plan | None:
    """Run :func:`heft_kernel` once; ``None`` when it finds no placement.

    Parameters
    ----------
    problem : Problem
    order : array of int, optional
        Processing order (default: the reference order ``0..n-1``).
    mode, offload_weight, score_kind
        See :func:`heft_kernel`.
    devices : sequence of str, optional
        Restrict computation to these devices (others stay storage).
    """
    g = problem.graph
    order = np.arange(g.n, dtype=np.int64) if order is None else np.ascontiguousarray(order, dtype=np.int64)
    if sorted(order.tolist()) != list(range(g.n)):
        raise PlanError("order must be a permutation of the nodes")
    cost = problem.cost_matrix.copy()
    can = problem.can_compute.copy()
    if devices is not None:
        for i, dv in enumerate(problem.devices):
            if dv.name not in devices:
                can[i] = False
                cost[i] = np.inf
    bw, lat = problem.link_arrays
    cap = 8 * g.n + 64
    for _ in range(8):
        st, aux, k, op, node, dev, dst = heft_kernel(
            g.bytes, g.pred_ptr, g.pred_idx, g.succ_ptr, g.succ_idx, cost, can, problem.budgets, bw, lat, order,
            int(mode), float(offload_weight), int(score_kind), int(cap))
        if st == ST_CAPACITY:
            cap = int(k) * 2 + 64
            continue
        if st != ST_OK:
            return None
        names = [d.name for d in problem.devices]
        return Plan(op[:k], node[:k], dev[:k], dst[:k], names,
                    {"solver": "heft", "mode": int(mode), "offload_weight": float(offload_weight),
                     "score": int(score_kind)})
    return None


class HeftScheduler(Heuristic):
    """Memory-aware HEFT over all devices (see :mod:`hybrid_remat.hetero.heft`).

    Runs a small portfolio (reference and upward-rank orders; serial and
    makespan device choice; offload weights 1 and 0.25; staleness and
    next-use eviction scores), simulates every plan and returns the best by
    ``objective``.

    Parameters
    ----------
    objective : {"serial", "makespan"}
    full : bool
        ``False`` runs only the reference-order, serial-mode variant.
    insertion_time : float
        With the makespan objective, seconds for HEFT's insertion step
        (:func:`~hybrid_remat.hetero.insertion.insert_earlier`) on the best plan.
    """

    name = "hetero_heft"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "multi_device", "needs_budget"})
    rank = 2.0

    def __init__(self, objective: str = "serial", full: bool = True, name: str | None = None,
                 insertion_time: float = 0.25):
        self.insertion_time = float(insertion_time)
        if objective not in ("serial", "makespan"):
            raise PlanError(f"unknown objective {objective!r}: use 'serial' or 'makespan'")
        self.objective = objective
        self.full = full
        if name:
            self.name = name

    def variants(self, problem: Problem):
        orders = [("ref", None)]
        if self.full:
            orders.append(("rank", rank_order(problem)))
        modes = (MODE_SERIAL, MODE_MAKESPAN) if self.full else (MODE_SERIAL,)
        weights = (1.0, 0.25) if self.full else (1.0,)
        scores = (SCORE_STALENESS, SCORE_NEXT_USE) if self.full else (SCORE_STALENESS,)
        for oname, order in orders:
            for m in modes:
                for w in weights:
                    for s in scores:
                        yield oname, order, m, w, s

    def run(self, problem: Problem, *, seed: int = 0):
        best, best_val = None, np.inf
        for oname, order, m, w, s in self.variants(problem):
            plan = heft_plan(problem, order=order, mode=m, offload_weight=w, score_kind=s)
            if plan is None:
                continue
            r = simulate(problem, plan)
            if not r.valid:
                continue
            val = objective_value(r, self.objective)
            if val < best_val - 1e-15:
                best, best_val = plan, val
                plan.meta["order"] = oname
        if best is not None and self.objective == "makespan":
            from .insertion import insert_earlier  # HEFT's insertion, checked step by step

            best = insert_earlier(problem, best, time_limit=self.insertion_time)
        return best
