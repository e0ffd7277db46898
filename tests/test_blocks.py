"""Repeated blocks: detection finds the layers of repeat_layers graphs; the
block staircase is the exact Pareto front; the block bound never exceeds the
all-plans optimum; the block solver's plans pass the simulator and agree with
the brute-force and flat (staged Checkmate) optima on small repeated graphs."""

import itertools
import pathlib

import networkx as nx
import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.blocks import BlocksFormulation, detect_blocks, solve_blocks
from hybrid_remat.blocks.staircase import closure_staircase
from hybrid_remat.bounds.blocks import block_lower_bound
from hybrid_remat.bounds.cut import cut_lower_bound
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import random_dag, repeat_layers, training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.scip import ObjectiveScale
from hybrid_remat.simulate import simulate

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def llama():
    return load_graph(str(ROOT / "datasets" / "llama_8l_b4_s512.json.gz"))


def _tiny(seed):
    """A stem and two blocks of (wide, narrow), random sizes and costs per
    position, as a training graph (11 nodes: brute force works)."""
    rng = np.random.default_rng(seed)
    pb, pc = rng.integers(1, 6, 2), rng.integers(1, 5, 2).astype(float)
    fw = nx.DiGraph()
    for v in range(5):
        j = 0 if v % 2 else 1
        fw.add_node(v, bytes=int(pb[j]), cost=float(pc[j]))
        if v:
            fw.add_edge(v - 1, v)
    return training_graph(fw)


def _chain_of_blocks(n_blocks, seed=3):
    """A stem, ``n_blocks`` blocks of three nodes with a skip edge inside, a head."""
    rng = np.random.default_rng(seed)
    pb, pc = rng.integers(1, 9, 3), rng.integers(1, 9, 3).astype(float)
    fw = nx.DiGraph()
    for v in range(3 * n_blocks + 2):
        j = (v - 1) % 3 if 1 <= v <= 3 * n_blocks else 2
        fw.add_node(v, bytes=int(pb[j]), cost=float(pc[j]))
        if v:
            fw.add_edge(v - 1, v)
        if 2 <= v <= 3 * n_blocks and (v - 1) % 3 == 2:
            fw.add_edge(v - 2, v)
    return training_graph(fw)


@pytest.mark.parametrize("layers", [2, 3, 12])
def test_detection_finds_the_layers_of_repeat_layers(llama, layers):
    g = repeat_layers(llama, layers)
    bs = detect_blocks(g)
    assert bs is not None and bs.n_blocks == layers and bs.same_costs
    ops = g.meta["op"]
    # every block holds the same ops at the same positions, forward then backward, one layer each
    for k in range(layers):
        assert [ops[v] for v in bs.fwd[k]] == [ops[v] for v in bs.fwd[0]]
        assert [ops[v] for v in bs.bwd[k]] == [ops[v] for v in bs.bwd[0]]
    assert bs.fwd.shape[1] + bs.bwd.shape[1] == (repeat_layers(llama, layers + 1).n - g.n)
    # blocks follow each other in the forward phase; their backward parts run in reverse order
    assert (np.diff(bs.fwd[:, 0]) == bs.fwd.shape[1]).all()
    assert (np.diff(bs.bwd[:, 0]) == -bs.bwd.shape[1]).all()
    assert (bs.stage[bs.fwd[1]] == 1).all() and (bs.stage[bs.prologue[0]] == -1).all()


def test_detection_of_the_original_layers_and_of_no_repetition(llama):
    bs = detect_blocks(llama)                  # measured costs differ from layer to layer
    assert bs.n_blocks == 8 and not bs.same_costs
    assert detect_blocks(random_dag(10, seed=1)) is None      # no backward phase
    assert detect_blocks(_chain_of_blocks(4)).n_blocks == 4


def test_staircase_is_the_exact_pareto_front():
    """Checked against enumeration of every held set on a random block."""
    rng = np.random.default_rng(0)
    k = 7
    preds = [[j for j in range(i) if rng.random() < 0.4] for i in range(k)]
    needed = rng.random(k) < 0.6
    cost, size = rng.integers(1, 9, k).astype(float), rng.integers(1, 6, k)

    def least_extra(cap):
        best = np.inf
        for xs in itertools.product([0, 1], repeat=k):
            x = np.array(xs, bool)
            if size[x].sum() > cap:
                continue
            r = needed & ~x      # recompute what is needed and not held, then the missing inputs
            changed = True
            while changed:
                changed = False
                for i in np.flatnonzero(r):
                    for j in preds[i]:
                        if not x[j] and not r[j]:
                            r[j] = changed = True
            best = min(best, cost[r].sum())
        return best

    st = closure_staircase(np.arange(k), preds, needed=needed, cost=cost, size=size, resolution=0)
    assert st.complete and len(st.points) >= 3
    held = [p.held for p in st.points]
    extra = [p.extra for p in st.points]
    assert held == sorted(held, reverse=True) and extra == sorted(extra)
    for p in st.points:
        assert p.extra == pytest.approx(least_extra(p.held))
        # the point's bound is SCIP's trusted dual bound: the optimum, lowered by at most SCIP's tolerance
        assert p.extra - ObjectiveScale.of(cost).tolerance(p.extra) <= p.extra_bound <= p.extra
        assert size[p.x].sum() == p.held and cost[p.r].sum() == pytest.approx(p.extra)
        for cap in range(p.covers_from, p.query + 1):       # every budget the point covers
            assert least_extra(cap) >= p.extra_bound - 1e-9
    assert least_extra(st.points[-1].covers_from - 1) == np.inf


def test_staircase_solves_print_nothing(capfd):
    """A segment of ``random_layered_training(1000, 0)`` (24 nodes, bytes of
    a real graph) whose closure LPs SCIP re-solves with a 1000x tighter
    feasibility tolerance: with ``numerics/feastol`` 1e-8 that is 1e-11,
    below what SoPlex takes without GMP, and it printed "Cannot set
    feasibility tolerance ..." once per re-solve (thousands of lines in one
    `hybrid-remat solve` on a 2k-node random layered graph)."""
    preds = [[]] * 17 + [[16], [1, 10], [], [6, 7, 14], [8, 15], [8, 9], [1]]
    cost = np.array([100.80289471428572, 477.07504571428575, 58.402223000000004, 71.82345014285715,
                     159.6978925714286, 329.04108057142857, 64.11231892857143, 589.1793417142857,
                     69.73807114285714, 65.58842471428571, 382.5711365714286, 74.85791828571429,
                     50.92228707142857, 85.37933107142857, 1336.3257411428573, 55.29084964285715,
                     88.72300514285714, 44.787239000000004, 302.4154291428572, 50.859648285714284,
                     202.60282564285714, 48.701360357142855, 201.31270685714287, 98.32769721428572]) * 1e-6
    size = np.array([13349656, 21767976, 1959944, 2829016, 5654308, 13323816, 2194244, 27044968, 4073616,
                     23788392, 16581280, 1522536, 17261836, 29034380, 66265000, 4294396, 1217276, 4656904,
                     11952756, 9942928, 1194236, 1193716, 6517752, 40362628])
    k = len(preds)
    st = closure_staircase(np.arange(k), preds, needed=np.ones(k, bool), cost=cost, size=size, max_points=48,
                           resolution=1 / 24)
    out, err = capfd.readouterr()
    assert "feasibility tolerance" not in out + err
    assert st.complete and len(st.points) >= 10
    assert st.points[0].held == size.sum() and st.points[0].extra == 0
    for a, b in zip(st.points[:-1], st.points[1:]):
        assert b.held < a.held and b.extra > a.extra
    for p in st.points:
        assert size[p.x].sum() == p.held and cost[p.r].sum() == pytest.approx(p.extra)
        assert p.extra_bound <= p.extra


@pytest.mark.parametrize("seed", [3, 7, 8])
def test_block_bound_and_plan_agree_with_brute_force(seed):
    g = _tiny(seed)
    assert detect_blocks(g).n_blocks == 2
    found = optimal = tight = 0
    budgets = range(min_feasible_budget(g), keep_all_peak(g) + 1)
    for B in budgets:
        p = Problem.single(g, B)
        opt = brute_force(p)[0]
        lb = block_lower_bound(p)
        assert p.base_cost - 1e-9 <= lb.value <= opt + 1e-9
        # a relaxation of the chains cut (whose MILP bound is lowered by SCIP's tolerance, relative to the data)
        assert lb.value <= cut_lower_bound(p).value * (1 + 1e-5)
        tight += lb.value == pytest.approx(opt)
        r = solve_blocks(p)
        if r.plan is not None:
            sim = simulate(p, r.plan)
            assert sim.valid and sim.total_time == pytest.approx(r.objective) and r.objective >= opt - 1e-9
            found += 1
            optimal += r.objective == pytest.approx(opt)
    assert found >= 3 and optimal >= found - 1 and tight >= len(budgets) // 2


def test_blocks_formulation_proves_the_optimum_over_every_plan():
    """A stem, 5 blocks with a skip edge, a head (35 nodes): the plan reaches
    the block bound, so it is optimal over every plan (the flat staged model
    needs 7-15 s for the same values, see the slow test)."""
    g = _chain_of_blocks(5)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    got = []
    for f in (0.4, 0.6, 0.8):
        p = Problem.single(g, int(lo + f * (hi - lo)))
        r = BlocksFormulation().solve(p)
        assert simulate(p, r.plan).valid
        assert r.status == "optimal" and r.objective == pytest.approx(r.lower_bound)
        # at most the chains MILP of the cut, within SCIP's tolerance (both are trusted dual bounds, lowered
        # by it; the formulation's is clamped to the plan that reaches it)
        assert r.lower_bound <= cut_lower_bound(p).value + 1e-5 * max(1.0, r.lower_bound)
        got.append(r.objective)
    assert got == [215.0, 213.0, 211.0]


@pytest.mark.slow
def test_blocks_agree_with_the_flat_staged_model():
    from hybrid_remat.exact.checkmate import CheckmateFormulation

    g = _chain_of_blocks(5)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    for f in (0.4, 0.8):
        p = Problem.single(g, int(lo + f * (hi - lo)))
        flat = CheckmateFormulation().solve(p, limits=Limits(nodes=20_000))
        blocks = BlocksFormulation().solve(p)
        assert flat.status == "optimal" and blocks.objective == pytest.approx(flat.objective)


def test_blocks_on_a_llama_like_graph(llama):
    """Four llama layers at 50 %: a valid plan within a fraction of a percent of
    the cut bound; stopping early (expired limits) returns without a plan."""
    g = repeat_layers(llama, 4)
    p = Problem.single(g, "50%")
    r = solve_blocks(p)
    sim = simulate(p, r.plan)
    assert sim.valid and sim.peak_bytes["gpu"] <= p.budgets[0]
    lb = block_lower_bound(p, cuts=1)
    assert lb.value <= r.objective and (r.objective - lb.value) / r.objective < 0.005
    stopped = solve_blocks(p, limits=Limits(deadline=0.0))
    assert stopped.plan is None


def test_registered():
    assert "blocks" in plugins.formulations()
    assert {"cut_bound", "block_bound"} <= set(plugins.bounds())
    p = Problem.single(_tiny(3), 14)
    res = plugins.bounds()["block_bound"].bound(p, limits=Limits(nodes=1000))
    assert res.scope == "all plans" and res.value == pytest.approx(brute_force(p)[0])


@pytest.mark.parametrize("seed", range(6))
def test_node_signatures_are_equal_exactly_where_the_keys_are(seed):
    """The vectorised signatures (ids of (op or input offsets, bytes, phase))
    against the definition written node by node: equal ids exactly for
    equal keys, with op names, without (the offsets to the last 8 inputs of
    the node's own phase) and with ``shape=False``."""
    import dataclasses

    from hybrid_remat.blocks.detect import node_signatures

    rng = np.random.default_rng(seed)
    fwd = nx.DiGraph()
    for v in range(10 + 2 * seed):
        fwd.add_node(v, bytes=int(rng.integers(1, 3)), cost=1.0)     # few distinct bytes: many equal keys
        for u in range(v):
            if rng.random() < 0.3:
                fwd.add_edge(u, v)
    g = training_graph(fwd)
    assert len(set(g.phase.tolist())) > 1
    ops = [str(x) for x in rng.integers(0, 3, g.n)]
    with_ops = dataclasses.replace(g, meta={**g.meta, "op": ops})
    bare = dataclasses.replace(g, meta={k: v for k, v in g.meta.items() if k != "op"},
                               names=tuple(f"v{i}" for i in range(g.n)))

    def offsets(v):
        inputs = [int(u) for u in g.preds(v) if g.phase[u] == g.phase[v]]
        return tuple(v - u for u in sorted(inputs)[-8:])

    cases = [(with_ops, True, lambda v: ops[v]), (bare, True, offsets), (bare, False, lambda v: "")]
    for graph, shape, key_of in cases:
        sig = node_signatures(graph, shape=shape)
        keys = [(key_of(v), int(g.bytes[v]), int(g.phase[v])) for v in range(g.n)]
        for a, b in itertools.combinations(range(g.n), 2):
            assert (sig[a] == sig[b]) == (keys[a] == keys[b]), (shape, a, b)
