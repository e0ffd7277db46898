"""The dedicated ``belady`` kernel (the same steps as the generic executor,
faster) and the stop flag every DTR-family kernel polls.  No wall clock:
steps, statuses and prefixes are compared."""

import threading

import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.families import family_graph
from hybrid_remat.heuristics.belady import belady_kernel
from hybrid_remat.heuristics.common import WATCH_NODES, GraphArrays, WorkMeter, empty_drop, stop_flag
from hybrid_remat.heuristics.dtr import STEP_FACTOR
from hybrid_remat.heuristics.executor import SCORE_BELADY, SCORE_NAMES, STATUS_OK, STATUS_STOPPED, execute_kernel
from hybrid_remat.limits import UNLIMITED_WORK, Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

FAMILIES = ("random_layered", "unet", "decoder_checkmate", "resnet_stages", "decoder_varied")


def _flag(v=0):
    return np.full(1, v, dtype=np.uint8)


def _base(p, weights=None, drop=None, steps=None):
    a = GraphArrays.from_problem(p)
    dptr, didx = drop if drop is not None else empty_drop(a.n)
    w = np.ones(a.n) if weights is None else weights
    return a, (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx, w)


def _drop(n, seed):
    """A random drop CSR: after target t, drop a few earlier values."""
    rng = np.random.default_rng(seed)
    idx = [sorted(set(rng.integers(0, max(t, 1), size=2).tolist())) if t % 7 == 3 else [] for t in range(n)]
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in idx])
    return ptr, np.asarray([v for x in idx for v in x], dtype=np.int64)


def _same(r1, r2, *, used=True):
    ok = r1[0] == r2[0] and np.array_equal(r1[1], r2[1]) and np.array_equal(r1[2], r2[2]) and r1[3] == r2[3]
    ok = ok and r1[4] == pytest.approx(r2[4])
    return ok and (not used or r1[5] == r2[5])


@pytest.mark.parametrize("family", ["random_layered", "unet", "decoder_checkmate"])
def test_belady_kernel_matches_py_func(family):
    p = Problem.single(family_graph(family, 400, 1), "50%")
    n = p.graph.n
    for weights, drop in ((None, None), (np.random.default_rng(3).random(n) + 0.5, _drop(n, 1))):
        _, base = _base(p, weights, drop)
        args = base + (0, 20 * n, UNLIMITED_WORK)
        assert _same(belady_kernel(*args, _flag()), belady_kernel.py_func(*args, _flag()))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("pct", ["50%", "30%"])
def test_belady_kernel_takes_the_generic_kernels_steps(family, pct):
    """Step for step what ``execute_kernel`` does with the ``belady`` score
    (its work count may be lower: a full heap drops its stale entries)."""
    p = Problem.single(family_graph(family, 2000, 0), pct)
    n = p.graph.n
    for seed, weights in ((0, None), (5, np.random.default_rng(5).random(n) + 0.5)):
        _, base = _base(p, weights)
        steps = int(STEP_FACTOR * n) + 1000
        ref = execute_kernel(*base, SCORE_BELADY, True, seed, steps, 2048, 256, UNLIMITED_WORK, _flag())
        new = belady_kernel(*base, seed, steps, UNLIMITED_WORK, _flag())
        assert _same(new, ref, used=False), (family, pct, seed)
        assert new[5] <= ref[5]


@pytest.mark.parametrize("score", range(len(SCORE_NAMES)))
def test_a_preset_stop_flag_returns_at_once(score):
    p = Problem.single(family_graph("random_layered", 400, 0), "50%")
    _, base = _base(p)
    for kernel in (execute_kernel, execute_kernel.py_func):
        r = kernel(*base, score, True, 0, 20 * p.graph.n, 2048, 256, UNLIMITED_WORK, _flag(1))
        assert r[0] == STATUS_STOPPED and len(r[1]) == 0 and r[5] == 0
    if score == SCORE_BELADY:
        for kernel in (belady_kernel, belady_kernel.py_func):
            r = kernel(*base, 0, 20 * p.graph.n, UNLIMITED_WORK, _flag(1))
            assert r[0] == STATUS_STOPPED and len(r[1]) == 0 and r[5] == 0


class _StopAfter:
    """A stop flag that reads 0 for the first ``k`` polls, then 1 (what a
    watching thread does at the deadline, at a known point of the run)."""

    def __init__(self, k):
        self.k = k

    def __getitem__(self, i):
        self.k -= 1
        return 1 if self.k < 0 else 0


@pytest.mark.parametrize("score", ["belady", "dtr_eq", "next_use_full", "dtr"])
def test_a_stop_mid_run_keeps_the_prefix_of_the_full_run(score):
    """Stopped after ``k`` computations, a run returned what the full run did up to there (py_func, flag polled
    once per computation)."""
    p = Problem.single(family_graph("unet", 300, 0), "70%")
    n = p.graph.n
    _, base = _base(p)
    if score == "belady":
        def run(flag):
            return belady_kernel.py_func(*base, 0, 20 * n, UNLIMITED_WORK, flag)
    else:
        def run(flag):
            return execute_kernel.py_func(*base, SCORE_NAMES.index(score), True, 0, 20 * n, 2048, 256,
                                          UNLIMITED_WORK, flag)
    full = run(_flag())
    assert full[0] == STATUS_OK
    computes = int((full[1] == 0).sum())
    for k in (1, computes // 3, computes - 1):
        part = run(_StopAfter(k))
        assert part[0] == STATUS_STOPPED
        assert int((part[1] == 0).sum()) == k
        assert np.array_equal(part[1], full[1][:len(part[1])]) and np.array_equal(part[2], full[2][:len(part[2])])


def _wait_for(flag):
    pause = threading.Event()
    for _ in range(1000):          # the watcher wakes at the deadline or every POLL_S: wait for it (no time asserted)
        if flag[0]:
            return True
        pause.wait(0.01)
    return False


def test_stop_flag_follows_the_stop_event_and_the_deadline():
    ev = threading.Event()
    with stop_flag(Limits(stop=ev)) as flag:
        assert flag[0] == 0
        ev.set()
        assert _wait_for(flag)
    with stop_flag(Limits.seconds(0.05)) as flag:
        assert _wait_for(flag)
    with stop_flag(Limits(work=10)) as flag:   # no deadline, no stop: never set, no thread
        assert flag[0] == 0


@pytest.mark.parametrize("name", ["dtr_belady", "dtr_eq", "dtr_next_use", "dtr", "dtr_size"])
def test_dtr_heuristics_return_no_plan_when_stopped(name):
    """Above WATCH_NODES the kernels stop by their flag: an expired deadline or a set stop gives no plan, never an
    invalid one; the same run without limits plans validly."""
    h = plugins.heuristics()[name]
    p = Problem.single(family_graph("decoder_checkmate", WATCH_NODES + 500, 0), "50%")
    assert p.graph.n >= WATCH_NODES
    ev = threading.Event()
    ev.set()
    for lim in (Limits.seconds(0.0), Limits(stop=ev), Limits.seconds(60.0, stop=ev)):
        assert h.run(p, limits=lim) is None
    res = WorkMeter(Limits.seconds(0.0)).execute(GraphArrays.from_problem(p), score=h.score)
    assert res.stopped and len(res.seq) == 0
    plan = h.run(p, limits=Limits(work=UNLIMITED_WORK))
    if plan is not None:
        assert simulate(p, plan).valid
