"""The segment chain's DP (:mod:`hybrid_remat.segments.dp`): exact on
integer figures against brute force (stage by stage and with grouped
stages), the Numba kernel agrees with its ``.py_func``, and thousands of
stages that each hold less than a prefix bucket still get a choice that fits
(the U-Net at 100k nodes: none fit before)."""

import itertools

import numpy as np

from hybrid_remat.segments.dp import chain_dp_kernel
from hybrid_remat.segments.solver import chain_dp, stage_groups


def _brute(held, inside, extra, cap, groups):
    best, arg = np.inf, None
    for ch in itertools.product(range(held.shape[1]), repeat=len(groups)):
        choice = [o for (a, b), o in zip(groups, ch) for _ in range(b - a)]
        prefix, ok = 0.0, True
        for s, o in enumerate(choice):
            ok &= np.isfinite(extra[s, o]) and prefix + inside[s, o] <= cap
            prefix += max(held[s, o], 0)
        ok &= prefix <= cap
        if ok:
            v = sum(extra[s, o] for s, o in enumerate(choice))
            if v < best:
                best, arg = v, choice
    return best, arg


def _fits(held, inside, choice, cap):
    prefix = 0.0
    for s, o in enumerate(choice):
        if prefix + inside[s, o] > cap:
            return False
        prefix += max(held[s, o], 0)
    return prefix <= cap


def test_grouped_chain_dp_is_exact_on_integer_figures():
    rng = np.random.default_rng(3)
    for _ in range(25):
        S, n_opt = 6, 3
        held = rng.integers(-1, 5, (S, n_opt)).astype(float)
        inside = np.maximum(held, 0) + rng.integers(0, 6, (S, n_opt))
        extra = rng.integers(0, 9, (S, n_opt)).astype(float)
        extra[rng.random((S, n_opt)) < 0.1] = np.inf           # options a stage lacks
        cap = float(rng.integers(10, 24))
        kind = np.array([0, 0, 0, -1, 1, 1])
        for groups in (stage_groups(kind, target=3), [(s, s + 1) for s in range(S)]):
            best, _ = _brute(held, inside, extra, cap, groups)
            got = chain_dp(held, inside, extra, cap, resolution=int(cap), groups=groups)
            if got is None:
                assert best == np.inf
            else:
                assert _fits(held, inside, got, cap)
                assert sum(extra[s, o] for s, o in enumerate(got)) == best
                assert all(got[a] == got[x] for a, b in groups for x in range(a, b))


def test_kernel_agrees_with_py_func():
    rng = np.random.default_rng(1)
    held = rng.random((40, 5)) * 3
    inside = held + rng.random((40, 5)) * 5
    extra = rng.random((40, 5))
    a = chain_dp_kernel(held, inside, extra, 40.0, 256)
    b = chain_dp_kernel.py_func(held, inside, extra, 40.0, 256)
    assert a.tolist() == b.tolist() and a.size == 40


def test_many_small_stages_still_fit():
    """4000 stages each holding a fifth of a bucket: the cheap option holds
    more; the least-memory choice fits with room, so some choice must."""
    S = 4000
    cap = 2048.0
    held = np.tile([0.4, 0.05], (S, 1))          # bucket = 1 byte at resolution 2048
    inside = held + 1.0
    extra = np.tile([0.0, 1.0], (S, 1))
    kind = np.zeros(S, dtype=np.int64)
    got = chain_dp(held, inside, extra, cap, groups=stage_groups(kind))
    assert got is not None and _fits(held, inside, got, cap)
    assert sum(extra[s, o] for s, o in enumerate(got)) < S      # not the least-memory choice everywhere


def test_stage_groups_cover_the_chain_in_order():
    kind = np.array([-1, 0, 0, 0, 0, 0, -1, 1, 1, 2])
    g = stage_groups(kind, target=4)
    assert g[0] == (0, 1) and g[-1][1] == kind.size
    assert all(a < b for a, b in g) and all(g[i][1] == g[i + 1][0] for i in range(len(g) - 1))
    assert all(len(set(kind[a:b].tolist())) == 1 for a, b in g)
    assert all(b - a == 1 for a, b in g if kind[a] < 0)
