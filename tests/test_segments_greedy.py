"""The marginal greedy menu (segments/greedy.py): the Numba kernel agrees
with its Python version; every point is a held set of the closure model
whose extra time is the class's recomputation sum; no point is below the
exact front (brute force over every held set of tiny stages)."""

import itertools

import numpy as np
import pytest

from hybrid_remat.problem import Problem
from hybrid_remat.segments.chain import segment_chain
from hybrid_remat.segments.greedy import marginal_drops, marginal_front
from hybrid_remat.segments.menus import _recomputed, greedy_menu, menu_tasks


def _random_stage(rng, k):
    preds = [sorted(set(rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False).tolist()))
             if i else [] for i in range(k)]
    needed = rng.random(k) < 0.6
    fixed = needed & (rng.random(k) < 0.2)
    cost = rng.choice([0.0, 1e-9, 0.5, 3.0, 1e6], size=k) * rng.random(k)
    size = rng.integers(0, 9, size=k) * int(rng.choice([1, 10 ** 12]))
    return preds, needed, fixed, cost, size.astype(np.int64)


def _csr(preds):
    ptr = np.zeros(len(preds) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(p) for p in preds])
    return ptr, np.array([j for p in preds for j in p], dtype=np.int64)


@pytest.mark.parametrize("seed", range(30))
def test_marginal_drops_agrees_with_python_and_the_class(seed):
    rng = np.random.default_rng(seed)
    preds, needed, fixed, cost, size = _random_stage(rng, int(rng.integers(1, 12)))
    ptr, idx = _csr(preds)
    got = marginal_drops(ptr, idx, needed, fixed, cost, size)
    ref = marginal_drops.py_func(ptr, idx, needed, fixed, cost, size)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_array_equal(a, b)
    order, held, extra = got
    x = needed | fixed
    for i in range(order.size + 1):
        if i:
            x[order[i - 1]] = False
        assert not (fixed & ~x).any()
        r = _recomputed(preds, needed, x)
        assert held[i] == size[x].sum()
        assert extra[i] == pytest.approx(cost[r].sum(), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_marginal_front_points_lie_on_or_above_the_exact_front(seed):
    rng = np.random.default_rng(100 + seed)
    k = int(rng.integers(1, 9))
    preds, needed, fixed, cost, size = _random_stage(rng, k)
    exact = []        # every held set: (held, least extra) of the class
    for bits in itertools.product([False, True], repeat=k):
        x = np.array(bits) & (needed | fixed) | fixed
        exact.append((int(size[x].sum()), float(cost[_recomputed(preds, needed, x)].sum())))
    for h, e, x in marginal_front(preds, needed, fixed, cost, size, n_options=4):
        assert h == size[x].sum()
        assert not (fixed & ~x).any()
        assert e == pytest.approx(cost[_recomputed(preds, needed, x)].sum(), rel=1e-9, abs=1e-12)
        assert e >= min(ee for hh, ee in exact if hh <= h) - 1e-9


def test_greedy_menu_options_are_measured_in_the_class(tiny_training_graph):
    g = tiny_training_graph(3, n=40)
    p = Problem.single(g, "60%")
    for task in menu_tasks(p, segment_chain(g, segment_size=10)):
        m = greedy_menu(task, n_options=64)
        for h, e, x in zip(m.held, m.extra, m.options, strict=True):
            assert h == task.size[x].sum()
            assert e == pytest.approx(task.cost[_recomputed(task.preds, task.needed, x)].sum())
