"""Heuristic kernels on the training-graph families: the heap path of the
static eviction scores (pinned values parked until unpinned) agrees with
its Python original, and its plans pass the simulator."""

import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.families import family_graph
from hybrid_remat.heuristics.common import UNLIMITED_WORK, GraphArrays, empty_drop
from hybrid_remat.heuristics.executor import SCORE_NAMES, execute_kernel
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


@pytest.mark.parametrize("family", ["unet", "decoder_checkmate", "random_layered"])
@pytest.mark.parametrize("score", ["lru", "size"])
def test_static_scores_match_py_func_on_families(family, score):
    p = Problem.single(family_graph(family, 500, 1), "40%")
    a = GraphArrays.from_problem(p)
    dptr, didx = empty_drop(a.n)
    args = (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx,
            np.ones(a.n), SCORE_NAMES.index(score), True, 0, 20 * a.n, 2048, 256, UNLIMITED_WORK,
            np.zeros(1, dtype=np.uint8))
    r1 = execute_kernel(*args)
    r2 = execute_kernel.py_func(*args)
    assert r1[0] == r2[0] and np.array_equal(r1[1], r2[1]) and np.array_equal(r1[2], r2[2])
    assert r1[3] == r2[3] and r1[4] == pytest.approx(r2[4]) and r1[5] == r2[5]


@pytest.mark.parametrize("name", ["dtr_lru", "dtr_size"])
def test_static_score_plans_on_families_are_valid(name):
    h = plugins.heuristics()[name]
    found = 0
    for family in ("unet", "decoder_checkmate", "resnet_stages"):
        p = Problem.single(family_graph(family, 800, 0), "50%")
        plan = h.run(p)
        if plan is not None:
            assert simulate(p, plan).valid
            found += 1
    assert found >= 1


def test_dtr_sampling_shrinks_only_above_its_size():
    from hybrid_remat.heuristics.dtr import MIN_SAMPLE, SAMPLING_NODES, sampling

    assert sampling(SAMPLING_NODES) == sampling(10) == (2048, 256)
    scan, smp = sampling(4 * SAMPLING_NODES)
    assert (scan, smp) == (512, 64)
    assert sampling(10**7)[1] == MIN_SAMPLE and sampling(10**7)[0] >= MIN_SAMPLE
    assert sampling(10**5, scan_all=3, sample=2) == (2, 2)   # never more than asked


def test_slow_heuristics_decline_large_graphs_with_a_reason():
    from hybrid_remat.exact.lp_rounding import LPRounding
    from hybrid_remat.generators import chain
    from hybrid_remat.hetero.heft import HeftScheduler
    from hybrid_remat.interfaces import accepts

    big = Problem.single(chain(30_001, bytes=1), 10)
    small = Problem.single(chain(300, bytes=1), 10)
    for h in (LPRounding(), HeftScheduler()):
        ok, why = accepts(h, big)
        assert not ok and "30000 nodes" in why
        assert accepts(h, small)[0]
