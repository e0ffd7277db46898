"""Blocks equal in structure with different (noisy) costs: the closure
model's Lagrangian by a minimum cut (``blocks/lagrange.py``) and the block
bound that uses it for such kinds (``bounds/blocks.py``, step 4), against
brute force; plans on noisy block graphs pass the simulator."""

import itertools

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.blocks import BlocksFormulation, detect_blocks
from hybrid_remat.blocks.lagrange import ClosureLagrangian
from hybrid_remat.bounds import blocks as block_bound_mod
from hybrid_remat.bounds.blocks import block_lower_bound
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _closure_min(preds, needed, fixed, cost, size, lam):
    best = np.inf
    k = len(needed)
    for x in itertools.product([0, 1], repeat=k):
        xa = np.array(x)
        if (fixed & (xa == 0)).any():
            continue
        for r in itertools.product([0, 1], repeat=k):
            ra = np.array(r)
            if (needed & (xa + ra < 1)).any():
                continue
            if any(ra[v] > xa[u] + ra[u] for v in range(k) for u in preds[v]):
                continue
            best = min(best, float(cost @ ra + lam * (size @ xa)))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_lagrangian_never_above_the_closure_optimum(seed):
    """Random closure models (costs 1e-9..1e3 s, bytes up to 1e8): the
    min-cut value is at most the enumerated optimum of ``c.r + lam s.x`` and
    within 1e-5 of it; the held set it reports is feasible (its value is at
    least the optimum)."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        k = int(rng.integers(1, 7))
        preds = [[u for u in range(v) if rng.random() < 0.4] for v in range(k)]
        needed = rng.random(k) < 0.5
        fixed = rng.random(k) < 0.2
        cost = rng.lognormal(0, 1, k) * 10 ** rng.uniform(-9, 3)
        size = rng.integers(0, 5, k) * int(10 ** rng.integers(0, 9))
        lg = ClosureLagrangian(preds, needed=needed, cost=cost, size=size, fixed=fixed)
        scale = cost.mean() / max(1.0, size.mean())
        for lam in (0.0, 0.1 * scale, scale, 10 * scale):
            opt = _closure_min(preds, needed, fixed, cost, size, lam)
            low, held, extra = lg.value(lam)
            assert low <= opt * (1 + 1e-12)
            assert low >= opt - 1e-5 * opt
            assert extra + lam * held >= opt * (1 - 1e-9)


def _noisy_chain(seed, n, cost_scale, byte_scale):
    rng = np.random.default_rng(seed)
    fw = nx.DiGraph()
    for v in range(n):            # a stem, then blocks of (wide, narrow) with noisy costs
        fw.add_node(v, bytes=(3 if v % 2 else 1) * byte_scale,
                    cost=cost_scale * (2.0 if v % 2 else 1.0) * float(rng.lognormal(0, 0.3)))
        if v:
            fw.add_edge(v - 1, v)
    return training_graph(fw)


@pytest.mark.parametrize("seed,n,cost_scale,byte_scale", [(1, 5, 1.0, 1), (2, 5, 1e-6, 1000), (3, 5, 1e3, 7),
                                                          (4, 5, 1.0, 1), (5, 5, 1e-3, 10 ** 6), (6, 5, 0.5, 3)])
def test_noisy_block_bound_never_above_brute_force(monkeypatch, seed, n, cost_scale, byte_scale):
    """Noisy blocks bounded together by the Lagrangian (forced: every kind
    counts as large) on graphs brute force solves, at several budgets: the
    bound lies between the base cost and the optimum over every plan."""
    g = _noisy_chain(seed, n, cost_scale, byte_scale)
    bs = detect_blocks(g)
    assert bs is not None and bs.n_blocks >= 2 and not bs.same_costs
    monkeypatch.setattr(block_bound_mod, "EXACT_COST_BLOCKS", 0)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    for f in (0.0, 0.3, 0.6, 1.0):
        p = Problem.single(g, int(lo + f * (hi - lo)))
        lb = block_lower_bound(p, structure=bs)
        opt = brute_force(p)[0]
        assert p.base_cost * (1 - 1e-9) <= lb.value <= opt + 1e-9 * opt


def test_noisy_blocks_plan_is_valid_and_under_its_bound():
    """The blocks formulation on a noisy block graph: a simulator-valid plan
    at or above its bound over every plan (the Lagrangian forced on)."""
    g = _noisy_chain(9, 13, 1.0, 1)
    p = Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)
    old = block_bound_mod.EXACT_COST_BLOCKS
    try:
        block_bound_mod.EXACT_COST_BLOCKS = 0
        r = BlocksFormulation().solve(p, limits=Limits(nodes=20_000))
    finally:
        block_bound_mod.EXACT_COST_BLOCKS = old
    sim = simulate(p, r.plan)
    assert sim.valid and sim.total_time == pytest.approx(r.objective)
    assert r.lower_bound <= r.objective * (1 + 1e-9)
