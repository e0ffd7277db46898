"""``dtr_belady`` (the next-use-and-closure score in a heap), the DTR step
limit that stops thrashing runs, and the heuristics that decline graphs
above 30k nodes.  No wall clock: work and steps are counted."""

import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.families import family_graph
from hybrid_remat.heuristics.common import UNLIMITED_WORK, GraphArrays, empty_drop
from hybrid_remat.heuristics.dtr import DTR, STEP_FACTOR
from hybrid_remat.heuristics.executor import SCORE_NAMES, STATUS_STEP_LIMIT, STATUS_WORK_SPENT, execute_kernel
from hybrid_remat.interfaces import accepts
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

BELADY = SCORE_NAMES.index("belady")
FAMILIES = ("random_layered", "unet", "decoder_checkmate", "resnet_stages", "decoder_varied")


def _args(p, work=UNLIMITED_WORK, steps=None, weights=None):
    a = GraphArrays.from_problem(p)
    dptr, didx = empty_drop(a.n)
    w = np.ones(a.n) if weights is None else weights
    return a, (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx, w,
               BELADY, True, 0, 20 * a.n if steps is None else steps, 2048, 256, np.int64(work), np.zeros(1, dtype=np.uint8))


@pytest.mark.parametrize("family", ["random_layered", "unet", "decoder_checkmate"])
@pytest.mark.parametrize("pct", ["50%", "40%"])
def test_belady_kernel_matches_py_func_on_families(family, pct):
    p = Problem.single(family_graph(family, 400, 1), pct)
    w = np.random.default_rng(3).random(p.graph.n) + 0.5   # weights enter the keys
    for weights in (None, w):
        _, args = _args(p, weights=weights)
        r1 = execute_kernel(*args)
        r2 = execute_kernel.py_func(*args)
        assert r1[0] == r2[0] and np.array_equal(r1[1], r2[1]) and np.array_equal(r1[2], r2[2])
        assert r1[3] == r2[3] and r1[4] == pytest.approx(r2[4]) and r1[5] == r2[5]


def test_dtr_belady_plans_are_valid_on_several_families():
    h = plugins.heuristics()["dtr_belady"]
    assert isinstance(h, DTR) and h.score == "belady"
    for family in FAMILIES:
        p = Problem.single(family_graph(family, 600, 0), "50%")
        plan = h.run(p)
        assert plan is not None, family          # a plan on each family at half the keep-all peak
        r = simulate(p, plan)
        assert r.valid and r.peak_bytes[p.primary.name] <= p.budgets[0], family
        assert r.n_recompute > 0


def test_dtr_belady_plans_random_layered_graphs_where_the_size_rule_thrashes():
    p = Problem.single(family_graph("random_layered", 2000, 0), "50%")
    assert plugins.heuristics()["dtr_size"].run(p) is None
    plan = plugins.heuristics()["dtr_belady"].run(p)
    assert plan is not None and simulate(p, plan).valid


def test_belady_stops_when_its_work_is_spent_and_keeps_its_prefix():
    p = Problem.single(family_graph("random_layered", 500, 2), "50%")
    _, args = _args(p)
    full = execute_kernel(*args)
    assert full[0] == 0 and full[5] > 100
    for frac in (0.1, 0.5, 0.9):
        half = int(full[5] * frac)
        _, pargs = _args(p, work=half)
        part = execute_kernel(*pargs)
        assert part[0] == STATUS_WORK_SPENT
        # within one eviction of the budget: its heap entries (stale ones included) and the fresh keys
        assert half <= part[5] <= half + 4 * p.graph.n
        assert np.array_equal(part[1], full[1][:len(part[1])]) and np.array_equal(part[2], full[2][:len(part[2])])
    h = plugins.heuristics()["dtr_belady"]
    for work in (0, 1, half, 10 * full[5]):
        a, b = h.run(p, limits=Limits(work=work)), h.run(p, limits=Limits(work=work))
        assert (a is None and b is None) or a == b
        if a is not None:
            assert simulate(p, a).valid
    assert h.run(p, limits=Limits(work=half)) is None
    assert h.run(p, limits=Limits(work=10 * full[5])) is not None


def _node_max(op, node):
    """The last target reached: the largest node computed."""
    return np.asarray(node)[np.asarray(op) == 0].max()


def test_a_thrashing_run_stops_at_the_step_limit():
    """On a random layered graph at 50 % the size rule thrashes: it stops
    after ``STEP_FACTOR n + 1000`` steps, not ``10 n``, and, since it thrashes
    from the backward's start, after at most ``1000 + STEP_FACTOR (t + 1)``
    steps at the target ``t`` it had reached."""
    p = Problem.single(family_graph("random_layered", 2000, 0), "50%")
    a = GraphArrays.from_problem(p)
    dptr, didx = empty_drop(a.n)
    steps = int(STEP_FACTOR * a.n) + 1000
    args = (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx,
            np.ones(a.n), SCORE_NAMES.index("size"), True, 0, steps, 2048, 256, UNLIMITED_WORK, np.zeros(1, dtype=np.uint8))
    status, op, node, _, _, used = execute_kernel(*args)
    # (it checks after each compute: the evictions just before it come on top)
    assert status == STATUS_STEP_LIMIT and len(op) <= steps + 64 < 10 * a.n
    reached = int(_node_max(op, node))  # the target then, or the one before it
    assert 1000 + STEP_FACTOR * (reached + 1) < len(op) <= 1000 + STEP_FACTOR * (reached + 2) + 64 < steps
    # the plans that do come take fewer steps: belady on the same graph
    _, bargs = _args(p, steps=steps)
    assert execute_kernel(*bargs)[0] == 0


def test_slow_first_phase_heuristics_decline_graphs_above_30k_nodes():
    from hybrid_remat.generators import chain

    big = Problem.single(chain(30_001, bytes=1), 10)
    small = Problem.single(chain(300, bytes=1), 10)
    hs = plugins.heuristics()
    for name in ("dtr_lru", "staged_evict"):
        ok, why = accepts(hs[name], big)
        assert not ok and "30000 nodes" in why, name
        assert accepts(hs[name], small)[0], name
    for name in ("dtr_belady", "dtr_next_use", "dtr_size"):
        assert accepts(hs[name], big)[0], name
