"""The cone recomputation heuristic (hybrid_remat.heuristics.cone_recompute)
and benchmarks/tight_floor, which measures its plan class."""

import numpy as np
import pytest

from benchmarks.tight_floor import floor_row
from hybrid_remat.budgets import keep_all_peak, node_need_bytes
from hybrid_remat.core.sequence import minimal_plan, sequence_peak
from hybrid_remat.families import FAMILIES
from hybrid_remat.generators import random_layered
from hybrid_remat.heuristics.cone_recompute import HORIZONS, ConeRecompute, cone_plan_kernel, cone_sequence
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate
from hybrid_remat.testing import check_heuristic


def _args(g, h):
    ph = np.asarray(g.phase)
    same = np.arange(g.n)
    for v in range(g.n):
        s = g.succs(v)
        s = s[ph[s] == ph[v]]
        if len(s):
            same[v] = int(s.max())
    return g.pred_ptr, g.pred_idx, ph != 0, same, h, 400 * g.n


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("h", [0, 1, 3])
def test_cone_plan_is_valid_computes_gradients_once_and_matches_py_func(seed, h):
    g = FAMILIES["random_layered"](120, seed)
    seq, ok = cone_plan_kernel(*_args(g, h))
    ref, ok2 = cone_plan_kernel.py_func(*_args(g, h))
    assert ok and ok2 and np.array_equal(seq, ref)
    counts = np.bincount(seq, minlength=g.n)
    assert (counts[np.asarray(g.phase) != 0] == 1).all() and (counts >= 1).all()
    assert counts.sum() > g.n                    # the backward recomputes forward values
    plan, _ = minimal_plan(g, seq, "gpu")
    assert simulate(Problem.single(g, "100%"), plan, check_budget=False).valid


def test_cone_plan_without_drops_is_the_reference_order():
    g = FAMILIES["random_layered"](120, 0)
    seq, ok = cone_plan_kernel(*_args(g, g.n))  # every value stays past the last stage: nothing recomputed
    assert ok and seq.tolist() == list(range(g.n))


def test_too_long_is_reported_not_truncated():
    g = FAMILIES["random_layered"](120, 0)
    a = list(_args(g, 0))
    a[-1] = g.n
    seq, ok = cone_plan_kernel(*a)
    assert not ok and seq.size == 0


def test_floor_row_fractions():
    r = floor_row(FAMILIES["random_layered"](120, 0), horizons=(0,))
    c = r["cone"][0]
    assert c["valid"] and 0 < r["grads"] <= 1 and 0 < r["fwd_ref"] <= 1
    assert c["grads_at_peak"] + c["fwd_at_peak"] == pytest.approx(c["peak"])


# ------------------------------------------------------------------ the heuristic
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_plans_are_valid_at_budgets_the_reference_order_misses(seed):
    g = FAMILIES["random_layered"](160, seed)
    low = min(sequence_peak(g, cone_sequence(g, h, 400 * g.n)[0]) for h in HORIZONS)
    p = Problem.single(g, low)
    assert keep_all_peak(g) > low           # a tight budget: keep-all does not fit
    plan = ConeRecompute().run(p, limits=Limits(work=10**7))
    assert plan is not None
    r = simulate(p, plan)
    assert r.valid and r.peak_bytes[p.primary.name] <= low and r.n_recompute > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_no_plan_below_what_it_can_do(seed):
    g = FAMILIES["random_layered"](160, seed)
    low = min(sequence_peak(g, cone_sequence(g, h, 400 * g.n)[0]) for h in HORIZONS)
    assert ConeRecompute().run(Problem.single(g, low - 1), limits=Limits(work=10**7)) is None


def test_forward_only_graphs_get_keep_all_or_nothing():
    g = random_layered(60, seed=1)
    full = Problem.single(g, "100%")
    tight = Problem.single(g, max(int(0.95 * keep_all_peak(g)), int(node_need_bytes(g).max())))
    assert tight.budgets[0] < keep_all_peak(g)
    plan = ConeRecompute().run(full)
    assert plan is not None and simulate(full, plan).n_recompute == 0
    assert ConeRecompute().run(tight) is None


def test_runs_out_of_work_honestly():
    g = FAMILIES["random_layered"](400, 0)
    p = Problem.single(g, "50%")
    assert ConeRecompute().run(p, limits=Limits(work=1)) is None   # the floor (4 n) builds nothing this long


def test_conformance_battery():
    check_heuristic(ConeRecompute())


def test_registered_but_not_run_by_default():
    from hybrid_remat import plugins

    h = plugins.heuristics()["cone_recompute"]
    assert getattr(h, "run_by_default", True) is False


def test_warmup_compiles_the_kernel_it_runs():
    h = ConeRecompute()
    h.warmup()
    assert cone_plan_kernel.signatures  # compiled (or loaded from the cache) for the run's argument types
    g = FAMILIES["random_layered"](120, 0)
    n_sigs = len(cone_plan_kernel.signatures)
    cone_sequence(g, 0, 400 * g.n)
    assert len(cone_plan_kernel.signatures) == n_sigs  # no new compilation inside a run
