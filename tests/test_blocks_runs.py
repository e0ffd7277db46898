"""Several runs of blocks (U-Net levels) through the blocks formulation and
the block bound: the segment chain as the partition (valid over every plan:
brute force on tiny graphs, with the chain forced and with groups too large
to solve), the anytime segment solver's plans all pass the simulator, and
the chain's fast paths agree with their plain versions."""

import numpy as np
import pytest

from hybrid_remat.blocks import structure as structure_mod
from hybrid_remat.blocks.formulation import BlocksFormulation
from hybrid_remat.blocks.structure import block_partition
from hybrid_remat.bounds import blocks as bound_mod
from hybrid_remat.bounds.blocks import BlockBoundSource
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.families import unet
from hybrid_remat.generators import random_layered, training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.segments.chain import SegmentChain, segment_chain
from hybrid_remat.segments.solver import solve_segments, sweep_order
from hybrid_remat.simulate import simulate


@pytest.mark.parametrize("seed", [0, 3, 4])
@pytest.mark.parametrize("max_group", [4096, 2])
def test_block_bound_over_the_chain_is_a_bound_over_every_plan(seed, max_group, monkeypatch, tiny_training_graph):
    """The chain forced as the partition (coverage threshold above 1); with
    ``max_group`` 2 most groups are too large and keep their item only."""
    monkeypatch.setattr(structure_mod, "MIN_COVERAGE", 1.01)
    monkeypatch.setattr(bound_mod, "MAX_GROUP_NODES", max_group)
    g = tiny_training_graph(seed)
    src = BlockBoundSource()
    checked = 0
    for B in range(min_feasible_budget(g), keep_all_peak(g) + 1):
        p = Problem.single(g, B)
        opt = brute_force(p)[0]
        lb = bound_mod.block_lower_bound(p, structure=block_partition(g)).value
        assert p.base_cost - 1e-9 <= lb <= opt + 1e-6 * opt
        if src.applicable(p)[0]:
            assert p.base_cost - 1e-9 <= src.bound(p).value <= opt + 1e-6 * opt
        checked += 1
    assert checked


def test_unet_is_solved_as_a_chain_of_runs():
    g = unet(600)
    p = Problem.single(g, "50%")
    f = BlocksFormulation()
    assert f.applicable(p)[0]
    ch = f.runs_chain(g)
    assert ch is not None and len(ch.runs) >= 2
    assert isinstance(block_partition(g), SegmentChain)       # one run covers little: the bound groups by the chain
    assert not BlockBoundSource().applicable(p)[0]             # the formulation bounds the chain itself
    seen = []
    r = f.solve(p, limits=Limits.seconds(30), on_incumbent=lambda plan, source: seen.append(plan))
    assert r.plan is not None and seen
    sim = simulate(p, r.plan)
    assert sim.valid and sim.total_time == pytest.approx(r.objective)
    assert p.base_cost - 1e-9 <= r.lower_bound <= r.objective + 1e-9
    assert all(simulate(p, plan).valid for plan in seen)


def test_anytime_segments_plans_improve_and_pass_the_simulator():
    g = unet(600)
    p = Problem.single(g, "50%")
    values = []
    r = solve_segments(p, on_incumbent=lambda plan, source: values.append(simulate(p, plan)))
    assert "quick" in r.stats and values     # the quick plan (least memory) need not fit: then the DP's first
    assert all(s.valid for s in values)
    totals = [s.total_time for s in values]
    assert totals == sorted(totals, reverse=True) and totals[-1] == pytest.approx(r.objective)


def test_sweep_order_spans_the_menus_first():
    for J in range(0, 30):
        o = sweep_order(J)
        assert sorted(o) == list(range(J))
        if J >= 3:
            assert o[:2] == [0, J - 1] and o[2] == (J - 1) // 2


def _assign_reference(graph, stage, S):
    stage = stage.copy()
    for v in np.flatnonzero(graph.phase != 0).tolist():
        if stage[v] >= 0:
            continue
        q = stage[graph.preds(v)]
        q = q[q >= 0]
        stage[v] = int(q.min()) if q.size else S - 1
    return stage


def test_backward_assignment_kernel_matches_the_plain_loop():
    g = training_graph(random_layered(80, seed=2).to_networkx(), cost_attr="cost_cost")
    ch = segment_chain(g, segment_size=6)
    start = np.full(g.n, -1, dtype=np.int64)
    fwd = np.flatnonzero(g.phase == 0)
    start[fwd] = ch.stage[fwd]
    assert _assign_reference(g, start, ch.n_stages).tolist() == ch.stage.tolist()
    for s in range(ch.n_stages):
        assert (ch.stage[ch.bwd[s]] == s).all()


def test_a_second_solve_reuses_menus_and_figures_and_is_no_worse():
    g = unet(600)
    p = Problem.single(g, "50%")
    ch = segment_chain(g)
    first = solve_segments(p, chain=ch)
    again = solve_segments(p, chain=ch)
    assert "memo" in again.stats and "quick" not in again.stats
    assert again.objective <= first.objective + 1e-12
    assert simulate(p, again.plan).valid


def test_block_bound_is_at_least_its_cut_screen():
    from hybrid_remat.bounds.cut import cut_lower_bound

    g = unet(600)
    p = Problem.single(g, "50%")
    bb = bound_mod.block_lower_bound(p, structure=block_partition(g))
    screen = cut_lower_bound(p, exact_nodes=0)
    r = solve_segments(p)
    assert screen.value - 1e-9 <= bb.value <= r.objective + bb.tolerance + 1e-9
