"""The stream class of the block solver (blocks/stream.py): blocks that drop
the output the next block reads, recomputed from a checkpoint every ``m``
blocks.  Its menu figures are the simulator's (each block's recomputation
time is its menu entry's), its recomputations never reach past the last
checkpoint, its plans pass the simulator within the budget, and the block
solver keeps the better of its two classes."""

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.blocks import detect_blocks, solve_blocks
from hybrid_remat.blocks.schedule import KeepSetPlanner
from hybrid_remat.blocks.stream import solve_stream, stream_keep, stream_menu, stream_positions
from hybrid_remat.bounds.blocks import block_lower_bound
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.families import decoder_checkmate
from hybrid_remat.generators import training_graph
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate
from hybrid_remat.testing.instances import recompute_reach


@pytest.fixture(scope="module")
def decoder():
    g = decoder_checkmate(layers=10)
    p = Problem.single(g, "30%")
    bs = detect_blocks(g)
    return g, p, bs, stream_menu(p, bs)


def _residual(n_blocks, seed=0):
    """A stem, ``n_blocks`` residual blocks (x -> a -> b, out = x + b), a head."""
    rng = np.random.default_rng(seed)
    sizes, costs = rng.integers(1, 6, 3), rng.integers(1, 5, 3).astype(float)
    fw = nx.DiGraph()
    fw.add_node(0, bytes=2, cost=1.0)
    x = 0
    for k in range(n_blocks):
        a, b, out = 3 * k + 1, 3 * k + 2, 3 * k + 3
        for j, v in enumerate((a, b, out)):
            fw.add_node(v, bytes=int(sizes[j]), cost=float(costs[j]))
        fw.add_edges_from([(x, a), (a, b), (b, out), (x, out)])
        x = out
    fw.add_node(x + 1, bytes=1, cost=1.0)
    fw.add_edge(x, x + 1)
    return training_graph(fw)


def test_the_stream_is_the_residual_output(decoder):
    g, p, bs, menu = decoder
    out = stream_positions(g, bs)
    assert out.sum() == 1 and out[-1]          # the second residual add, read by the next layer's norm and add
    assert menu and all(not x[out].any() for x, _, _ in menu)
    held = [h for _, _, h in menu]
    assert held == sorted(held, reverse=True)


@pytest.mark.parametrize("period", [2, 3, 4])
def test_menu_figures_are_the_simulators_and_recomputation_stops_at_a_checkpoint(decoder, period):
    g, p, bs, menu = decoder
    L = bs.n_blocks
    cost = np.asarray(p.cost_matrix[0], dtype=np.float64)
    out = stream_positions(g, bs)
    planner = KeepSetPlanner(p, "test")
    for o in sorted({0, len(menu) // 3, len(menu) // 2, len(menu) - 1}):
        keep = stream_keep(g, bs, [o] * L, menu, period, out)
        plan, peak, rec = planner.plan(keep)
        sim = simulate(p, plan, check_budget=False)
        assert sim.peak_bytes[p.primary.name] == peak
        assert sim.total_time == pytest.approx(p.base_cost + cost[rec].sum(), rel=1e-12)
        for k in range(L):
            extra = cost[bs.fwd[k]][rec[bs.fwd[k]]].sum()
            if (k + 1) % period:       # an ordinary block: exactly its menu entry's recomputation
                assert extra == pytest.approx(menu[o][1], rel=1e-9, abs=1e-15)
            else:                      # a checkpoint holds its output too: never more
                assert extra <= menu[o][1] * (1 + 1e-9) + 1e-15
        # every recomputation of block j's values serves the backward of a block k at most period - 1 above it
        seq, _ = planner.sequence(keep)
        for j, k in recompute_reach(g, seq, bs.stage):   # k: the stage whose backward it serves (L: the epilogue)
            if 0 <= j < L:
                assert j <= k + 1 and k - j < period
        assert np.bincount(seq, minlength=g.n).max() <= 2 and rec.any()


@pytest.mark.parametrize("budget", ["25%", "30%", "50%"])
def test_stream_plans_stay_within_the_budget_and_the_solver_keeps_the_better(decoder, budget):
    g, _, bs, menu = decoder
    p = Problem.single(g, budget)
    got = solve_stream(p, bs, menu=menu)
    if got is not None:
        plan, value, info = got
        sim = simulate(p, plan)
        assert sim.valid and sim.peak_bytes[p.primary.name] <= p.budgets[0]
        assert sim.total_time == pytest.approx(value) and info["period"] >= 2
    held = solve_blocks(p, stream=False)
    both = solve_blocks(p)
    assert both.plan is not None and simulate(p, both.plan).valid
    assert both.objective <= held.objective + 1e-12 * held.objective
    if got is not None:
        assert both.objective <= got[1] + 1e-12 * got[1]


def test_the_stream_pays_on_a_decoder_at_30_percent(decoder):
    """Where dropping the residual stream pays (the decoder at 30 %: the
    block bound's staircase drops it), the stream class beats the
    held-stream class."""
    g, p, bs, menu = decoder
    got = solve_stream(p, bs, menu=menu)
    held = solve_blocks(p, stream=False)
    assert got is not None and got[1] < held.objective


def test_stream_plans_are_never_below_the_block_bound_on_small_residual_graphs():
    """(Brute force stops at 12 nodes, too few for three blocks: the block
    bound, a bound over every plan, checked against brute force in
    test_blocks.py, stands in.)"""
    g = _residual(4)
    bs = detect_blocks(g)
    assert bs is not None and bs.n_blocks >= 3 and stream_positions(g, bs).any()
    found = 0
    for B in range(min_feasible_budget(g), keep_all_peak(g) + 1):
        p = Problem.single(g, B)
        got = solve_stream(p, bs, periods=[2, 3])
        if got is None:
            continue
        sim = simulate(p, got[0])
        assert sim.valid and sim.total_time == pytest.approx(got[1])
        lb = block_lower_bound(p, structure=bs)
        assert got[1] >= lb.value - lb.tolerance - 1e-9
        found += 1
    assert found
