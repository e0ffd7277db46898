"""The exact makespan model (hetero/makespan.py) against an exhaustive
search of its plan class on tiny CPU+GPU problems."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hybrid_remat.core.staged import decode
from hybrid_remat.graph import Graph
from hybrid_remat.hetero.heft import HeftScheduler
from hybrid_remat.hetero.makespan import StagedTimer, XEngineMakespan
from hybrid_remat.hetero.xengine import XEngineMILP
from hybrid_remat.limits import Limits
from hybrid_remat.objective import MAKESPAN
from hybrid_remat.problem import Device, Link, Problem
from hybrid_remat.simulate import simulate

NODES = 50_000


def staged_class(p):
    """Every staged plan of ``p`` (one stage per node): ``(R, S, X)`` arrays
    enumerated stage by stage and slot by slot under the model's rules
    (frontier on one device, an arrival only where the value is absent, at
    most one per device and stage, copies from a value kept or computed in
    the slot, any kept subset of what is present)."""
    g = p.graph
    n, D = g.n, p.n_devices
    can = p.can_compute
    bw, _ = p.link_arrays
    links = [(a, b) for a in range(D) for b in range(D) if a != b and bw[a, b] > 0]
    preds = [g.preds(v).tolist() for v in range(n)]
    budget = p.budgets

    def stage(t, R, S, X):
        if t == n:
            yield R.copy(), S.copy(), X.copy()
            return
        yield from slot(t, 0, R, S, X, S[:, t].copy() if t < n else None)

    def slot(t, k, R, S, X, pres):
        if k > t:
            cands = [(d, i) for d in range(D) for i in range(t + 1) if pres[d, i]]
            if t + 1 == n:
                yield from stage(t + 1, R, S, X)
                return
            for keep in itertools.product((0, 1), repeat=len(cands)):
                S[:, t + 1] = False
                for (d, i), kbit in zip(cands, keep, strict=True):
                    S[d, t + 1, i] = bool(kbit)
                if (S[:, t + 1] @ g.bytes > budget).any():
                    continue  # what is kept alone is over a budget: no valid plan follows
                yield from stage(t + 1, R, S, X)
            S[:, t + 1] = False
            return
        ok = [d for d in range(D) if can[d] and not pres[d, k] and all(pres[d, u] for u in preds[k])]
        subsets = [(d,) for d in ok] if k == t else [c for r in range(len(ok) + 1)
                                                     for c in itertools.combinations(ok, r)]
        for comp in subsets:
            for d in comp:
                R[d, t, k] = pres[d, k] = True
            src = [d for d in range(D) if S[d, t, k] or R[d, t, k]]
            cl = [(a, b) for a, b in links if a in src and not pres[b, k]]
            for r in range(len(cl) + 1):
                for cps in itertools.combinations(cl, r):
                    if len({b for _, b in cps}) < len(cps):
                        continue  # one arrival per device
                    for a, b in cps:
                        X[a, b, t, k] = pres[b, k] = True
                    yield from slot(t, k + 1, R, S, X, pres)
                    for a, b in cps:
                        X[a, b, t, k] = pres[b, k] = False
            for d in comp:
                R[d, t, k] = pres[d, k] = False

    R = np.zeros((D, n, n), bool)
    S = np.zeros((D, n, n), bool)
    X = np.zeros((D, D, n, n), bool)
    yield from stage(0, R, S, X)


def brute(p):
    """``(best serial time, best makespan)`` over the staged class.

    Candidates are ranked by the model's own timing (:class:`StagedTimer`)
    and serial cost, then simulated in that order until one is valid; the
    simulator confirms the timing of every plan it checks."""
    g, D = p.graph, p.n_devices
    cost = np.where(p.can_compute[:, None], p.cost_matrix, 0.0)
    bw, lat = p.link_arrays
    copy = np.zeros((D, D, g.n))
    for a in range(D):
        for b in range(D):
            if a != b and bw[a, b] > 0:
                copy[a, b] = lat[a, b] + g.bytes / bw[a, b]
    cands = []
    timer = StagedTimer(p)
    for arrs in staged_class(p):
        R, S, X = arrs
        serial = float((R * cost[:, None, :]).sum() + (X * copy[:, :, None, :]).sum())
        cands.append((timer(arrs, range(g.n))[3], serial, arrs))
    best = []
    for key in (1, 0):
        for c in sorted(cands, key=lambda c: c[key]):
            r = simulate(p, decode(p, *c[2]))
            if r.valid:
                assert r.makespan == pytest.approx(c[0]) and r.total_time == pytest.approx(c[1])
                best.append(c[key])
                break
        else:
            best.append(np.inf)
    return best[0], best[1]


def tiny(rng, scale=1.0, n_hi=4, objective="makespan"):
    """A random CPU+GPU problem of 2 to ``n_hi - 1`` nodes, costs and link
    times multiplied by ``scale``."""
    n = int(rng.integers(2, n_hi))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if j == i + 1 or rng.random() < 0.4]
    g = Graph.from_arrays(rng.integers(1, 3, n), edges, {"gpu": rng.integers(1, 6, n) * scale,
                                                         "cpu": rng.integers(2, 12, n) * scale})
    need = int(max(g.bytes[v] + g.bytes[g.preds(v)].sum() for v in range(n)))
    return Problem(g, [Device("gpu", "gpu", need + int(rng.integers(0, 2))),
                       Device("cpu", "cpu", need + int(rng.integers(0, 3)))],
                   [Link("gpu", "cpu", 1.0 / scale, float(rng.integers(0, 2)) * scale),
                    Link("cpu", "gpu", 1.0 / scale, float(rng.integers(0, 2)) * scale)]).with_objective(objective)


def test_makespan_model_equals_the_exhaustive_search_of_its_class():
    """Optimal over the staged class at cost scales 1e-9, 1 and 1e6 (the
    class optimum scales with the costs), with an honest bound."""
    rng = np.random.default_rng(3)
    for _ in range(3):
        seed = int(rng.integers(1 << 30))
        best_s, best_m = brute(tiny(np.random.default_rng(seed)))
        for scale in (1e-9, 1.0, 1e6):
            p = tiny(np.random.default_rng(seed), scale)
            # the enumerated class is the serial model's class too
            assert XEngineMILP().solve(p, limits=Limits(nodes=NODES), frontier="reference").objective == \
                pytest.approx(best_s * scale)
            res = XEngineMakespan().solve(p, limits=Limits(nodes=NODES))
            r = simulate(p, res.plan)
            assert r.valid and r.makespan == pytest.approx(res.objective)
            assert res.status == "optimal"
            if res.stats.get("frontier") != "incumbent order":  # else another order's class
                assert res.objective == pytest.approx(best_m * scale)
                assert res.stats["staged_lower_bound"] <= best_m * scale * (1 + 1e-12)
            assert MAKESPAN.trivial_bound(p) * (1 - 1e-12) <= res.lower_bound <= res.objective * (1 + 1e-12)


def test_makespan_model_never_worse_than_its_start_and_its_bound_is_honest():
    rng = np.random.default_rng(8)
    for _ in range(2):
        p = tiny(rng)
        start = HeftScheduler("makespan").run(p)
        mk0 = simulate(p, start).makespan
        res = XEngineMakespan().solve(p, incumbent=start, limits=Limits(nodes=NODES))
        assert simulate(p, res.plan).valid and res.objective <= mk0 + 1e-12
        best_s, best_m = brute(p)
        if res.stats.get("frontier") != "incumbent order":  # the reference order's class
            assert res.objective == pytest.approx(best_m)
            assert res.stats["staged_lower_bound"] <= best_m * (1 + 1e-12)


def test_makespan_formulation_declares_its_objective():
    f = XEngineMakespan()
    assert "makespan" in f.capabilities and "serial" not in f.capabilities
    assert f.bound_scope == "staged" and "scoped_bound" in f.capabilities
