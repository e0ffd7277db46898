"""Numba kernels equal their pure-Python versions on random inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hybrid_remat.core.sequence import (
    held_last_uses_kernel,
    minimal_plan,
    prune_kernel,
    sequence_peak_kernel,
    sequence_plan_kernel,
    sequence_profile_kernel,
    unread_kernel,
)
from hybrid_remat.generators import random_dag, random_layered
from hybrid_remat.heuristics.common import GraphArrays, empty_drop
from hybrid_remat.heuristics.executor import SCORE_NAMES, execute_kernel
from hybrid_remat.heuristics.lifetime_split import split_kernel
from hybrid_remat.heuristics.rotor import rotor_dp
from hybrid_remat.limits import UNLIMITED_WORK
from hybrid_remat.plan import plan_from_order
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _py(kernel):
    """The pure-Python version of a kernel (itself when JIT is disabled)."""
    return getattr(kernel, "py_func", kernel)


def _arrays(seed, pct="85%"):
    from hybrid_remat.budgets import min_feasible_budget, parse_budget

    g = random_layered(25, seed=seed) if seed % 2 else random_dag(12, p=0.4, seed=seed)
    p = Problem.single(g, max(parse_budget(pct, g), min_feasible_budget(g)))
    return p, GraphArrays.from_problem(p)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("score", range(len(SCORE_NAMES)))
@pytest.mark.parametrize("scan_all", [4096, 3])
def test_execute_kernel_matches_py_func(seed, score, scan_all):
    """Exhaustive victim scans and sampled ones (``scan_all=3``) alike."""
    p, a = _arrays(seed)
    dptr, didx = empty_drop(a.n)
    w = np.random.default_rng(seed).random(a.n) + 0.5
    args = (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx, w,
            score, True, seed, 20 * a.n, scan_all, 2, UNLIMITED_WORK, np.zeros(1, dtype=np.uint8))
    r1 = execute_kernel(*args)
    r2 = _py(execute_kernel)(*args)
    assert r1[0] == r2[0] and np.array_equal(r1[1], r2[1]) and np.array_equal(r1[2], r2[2])
    assert r1[3] == r2[3] and r1[4] == pytest.approx(r2[4]) and r1[5] == r2[5]


@pytest.mark.parametrize("seed", range(4))
def test_sequence_kernels_match_py_func_and_plan_from_order(seed):
    p, a = _arrays(seed, "100%")
    rng = np.random.default_rng(seed)
    seq = np.arange(a.n)
    extra = rng.integers(0, a.n, size=6)
    seq = np.sort(np.concatenate([seq, extra]), kind="stable")  # recomputations right after the first
    active = np.ones(seq.size, dtype=np.bool_)
    op, node, peak = sequence_plan_kernel(seq, active, a.bytes, a.pred_ptr, a.pred_idx)
    op2, node2, peak2 = _py(sequence_plan_kernel)(seq, active, a.bytes, a.pred_ptr, a.pred_idx)
    assert np.array_equal(op, op2) and np.array_equal(node, node2) and peak == peak2
    assert sequence_peak_kernel(seq, active, a.bytes, a.pred_ptr, a.pred_idx) == peak
    ref = plan_from_order(p.graph, seq, p.primary.name)
    r = simulate(p, ref, check_budget=False)
    assert r.peak_bytes[p.primary.name] == peak
    act1, d1, u1 = prune_kernel(seq, active.copy(), a.bytes, a.cost, a.pred_ptr, a.pred_idx, np.int64(peak), 100)
    act2, d2, u2 = _py(prune_kernel)(seq, active.copy(), a.bytes, a.cost, a.pred_ptr, a.pred_idx, np.int64(peak),
                                     100)
    assert d1 == d2 and u1 == u2 and np.array_equal(act1, act2)
    for k in (sequence_profile_kernel, unread_kernel):  # (unread_kernel switches positions off in place)
        def args(k=k):
            return (seq, active.copy(), a.bytes, a.pred_ptr, a.pred_idx) if k is sequence_profile_kernel else \
                (seq, active.copy(), a.pred_ptr, a.pred_idx, a.succ_ptr)
        for x, y in zip(k(*args()), _py(k)(*args())):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("pick", range(3))
def test_split_kernel_matches_py_func(seed, pick):
    p, a = _arrays(2 * seed + 1, "80%")
    args = (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), 0.3, seed,
            a.n + 10, 3, pick, np.arange(a.n, dtype=np.int64), UNLIMITED_WORK)
    ok1, s1, u1 = split_kernel(*args)
    ok2, s2, u2 = _py(split_kernel)(*args)
    assert ok1 == ok2 and u1 == u2 and np.array_equal(s1, s2)


def test_rotor_dp_matches_py_func():
    rng = np.random.default_rng(0)
    N = 5
    ys = np.r_[0, rng.integers(1, 5, N)].astype(np.int64)
    ds = np.r_[0, rng.integers(1, 5, N - 1), 0].astype(np.int64)
    yc = np.r_[0.0, rng.random(N)]
    dc = np.r_[0.0, rng.random(N - 1), 0.0]
    c1, k1 = rotor_dp(ys, yc, ds, dc, 15)
    c2, k2 = _py(rotor_dp)(ys, yc, ds, dc, 15)
    assert np.array_equal(k1, k2) and np.allclose(c1, c2)


@pytest.mark.parametrize("seed", range(4))
def test_checkpoint_kernels_match_py_func_and_networkx(seed):
    import networkx as nx

    from hybrid_remat.heuristics.checkpoints import (
        _articulation_kernel,
        _chen_greedy_kernel,
        _drop_at_kernel,
        articulation_points,
        forward_nodes,
    )

    g = random_layered(30, seed=seed)
    rng = np.random.default_rng(seed)
    fwd = forward_nodes(g)
    cps = np.zeros(g.n, dtype=np.bool_)
    cps[rng.choice(g.n, size=5, replace=False)] = True
    args = (g.succ_ptr, g.succ_idx, fwd, cps, g.n)
    assert np.array_equal(_drop_at_kernel(*args), _py(_drop_at_kernel)(*args))
    args = (fwd, np.asarray(g.bytes, dtype=np.int64), cps, 20.0)
    assert np.array_equal(_chen_greedy_kernel(*args), _py(_chen_greedy_kernel)(*args))
    und = nx.gnp_random_graph(25, 0.08, seed=seed)
    e = np.array([(u, v) for u, v in und.edges()] + [(v, u) for u, v in und.edges()], dtype=np.int64).reshape(-1, 2)
    e = e[np.lexsort((e[:, 1], e[:, 0]))]
    ptr = np.zeros(26, dtype=np.int64)
    np.add.at(ptr, e[:, 0] + 1, 1)
    ptr = np.cumsum(ptr)
    got = _articulation_kernel(ptr, np.ascontiguousarray(e[:, 1]))
    assert np.array_equal(got, _py(_articulation_kernel)(ptr, np.ascontiguousarray(e[:, 1])))
    assert sorted(np.flatnonzero(got).tolist()) == sorted(nx.articulation_points(und))
    assert articulation_points(g).tolist() == sorted(
        v for v in nx.articulation_points(_forward_undirected(g)) if v >= 0)


def _forward_undirected(g):
    import networkx as nx

    from hybrid_remat.heuristics.checkpoints import forward_nodes

    fwd = forward_nodes(g)
    is_fwd = np.zeros(g.n, dtype=bool)
    is_fwd[fwd] = True
    und = nx.Graph()
    und.add_nodes_from(fwd.tolist())
    und.add_edges_from((u, v) for u, v in g.edges().tolist() if is_fwd[u] and is_fwd[v])
    und.add_edge(-1, int(fwd[0]))
    und.add_edge(int(fwd[-1]), -2)
    return und


@pytest.mark.parametrize("seed", range(4))
def test_holds_keep_values_resident_up_to_their_position(seed):
    """``minimal_plan(..., holds=)`` (the torch runtime's saved inputs): the
    kernel equals its Python version, every held value is resident when its
    position computes, the plan is valid and no held plan peaks lower."""
    p, a = _arrays(seed, "100%")
    rng = np.random.default_rng(seed)
    seq = np.sort(np.concatenate([np.arange(a.n), rng.integers(0, a.n, size=5)]), kind="stable")
    holds = {}
    for _ in range(6):
        pos = int(rng.integers(seq.size))
        holds.setdefault(pos, []).append(int(rng.integers(0, int(seq[pos]) + 1)))
    ptr = np.zeros(seq.size + 1, dtype=np.int64)
    for pos, us in holds.items():
        ptr[pos + 1] += len(us)
    ptr = np.cumsum(ptr)
    idx = np.concatenate([np.asarray(holds[q], dtype=np.int64) for q in sorted(holds)])
    active = np.ones(seq.size, dtype=np.bool_)
    end = held_last_uses_kernel(seq, active, a.pred_ptr, a.pred_idx, a.n, ptr, idx)
    assert np.array_equal(end, _py(held_last_uses_kernel)(seq, active, a.pred_ptr, a.pred_idx, a.n, ptr, idx))
    plan, peak = minimal_plan(p.graph, seq, p.primary.name, holds=holds)
    r = simulate(p, plan, check_budget=False)
    assert r.valid, r.error
    assert r.peak_bytes[p.primary.name] == peak
    assert peak >= minimal_plan(p.graph, seq, p.primary.name)[1]
    resident, k = set(), 0
    for step in plan.steps():     # walk the plan: at the compute of position k, every value held there is resident
        if step.op == "compute":
            # (a hold of the node computed at k itself is the new instance's)
            held = [u for u in holds.get(k, []) if u in set(seq[:k].tolist()) and u != seq[k]]
            assert set(held) <= resident, (k, held, resident)
            resident.add(step.node)
            k += 1
        elif step.op == "free":
            resident.discard(step.node)
