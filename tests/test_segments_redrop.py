"""The re-drop class (segments/redrop.py): values not kept that come back
from kept ones are recomputed at every backward stage that needs them.
The kernel follows its rule (a plain-Python reference), reduces to the
keep-or-recompute-once rule with nothing re-dropped, its counts are the
simulator's (time = base + recomputations counted with multiplicity), a
skip read by two distant backward stages leaves memory between them for
exactly its own cost, the chain's figures of its plans add up to the
simulated time, and the segment chain with both classes plans a small
U-Net better than the first class alone, within the budget."""

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.core.keepset import keep_sequence
from hybrid_remat.core.sequence import minimal_plan
from hybrid_remat.families import unet
from hybrid_remat.generators import random_layered, training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.segments.chain import segment_chain
from hybrid_remat.segments.menus import compute_menus, menu_tasks
from hybrid_remat.segments.redrop import RedropPlanner, from_kept, redrop_sequence
from hybrid_remat.segments.solver import chain_figures, solve_segments, stage_menus
from hybrid_remat.simulate import simulate


def _graphs():
    for seed in range(6):
        fw = random_layered(14 + 3 * seed, seed=seed).to_networkx()
        yield training_graph(fw, cost_attr="cost_cost"), np.random.default_rng(seed)


def _reference(g, keep, again, group):
    """The rule in plain Python (module docstring of segments/redrop.py)."""
    fwd = [v for v in range(g.n) if g.phase[v] == 0]
    bwd = [v for v in range(g.n) if g.phase[v] != 0]
    state, inst, seq, count = {}, {}, [], np.zeros(g.n, dtype=np.int64)

    def missing(u, gb):
        s = state.get(u, 0)
        return s == 2 or (s == 1 and again[u] and not keep[u] and inst[u] != gb)

    def make(v, gb, root):
        for u in g.preds(v).tolist():
            if missing(u, gb):
                make(u, gb, root)
        seq.append(v)
        if v != root:
            count[v] += 1
        state[v], inst[v] = 1, gb

    for v in fwd:
        seq.append(v)
        state[v] = 1 if keep[v] else 2
    for b in bwd:
        make(b, group[b], b)
    return seq, count


def test_kernel_follows_the_rule():
    for g, rng in _graphs():
        for _ in range(4):
            keep = rng.random(g.n) < 0.4
            again = (rng.random(g.n) < 0.6) & (g.phase == 0)
            group = rng.integers(0, 4, g.n)
            seq, count = redrop_sequence(g, keep, again, group)
            ref_seq, ref_count = _reference(g, keep, again, group)
            assert seq.tolist() == ref_seq
            assert count.tolist() == ref_count.tolist()


def test_nothing_redropped_is_the_keep_set_rule():
    for g, rng in _graphs():
        keep = rng.random(g.n) < 0.5
        seq, count = redrop_sequence(g, keep, np.zeros(g.n, dtype=bool), rng.integers(0, 3, g.n))
        assert seq.tolist() == keep_sequence(g, keep).tolist()
        assert count.max() <= 1


def test_from_kept_is_the_closure_rule():
    for g, rng in _graphs():
        keep = rng.random(g.n) < 0.5
        for cap in (0, 1, 3):
            got = from_kept(g, keep, cap)
            for v in range(g.n):
                if g.phase[v] != 0 or keep[v]:
                    assert not got[v]
                    continue
                seen, todo = set(), [v]       # the values not kept that recomputing v needs
                while todo:
                    for u in g.preds(todo.pop()).tolist():
                        if not keep[u] and u not in seen:
                            seen.add(u)
                            todo.append(u)
                assert got[v] == (len(seen) <= cap)


def test_counts_are_the_simulators():
    for g, rng in _graphs():
        p = Problem.single(g, "100%")
        ch = segment_chain(g)
        planner = RedropPlanner(p, "t", ch.stage, cap=2)
        cost = np.asarray(p.cost_matrix[0])
        for _ in range(3):
            keep = rng.random(g.n) < 0.4
            plan, peak, count = planner.plan(keep)
            sim = simulate(p, plan, check_budget=False)
            assert sim.valid
            computes = np.bincount(plan.node[plan.op == 0], minlength=g.n)
            assert computes.tolist() == (1 + count).tolist()
            assert p.objective.value(sim) == pytest.approx(cost.sum() + float((cost * count).sum()))
            assert int(sim.peak_bytes[p.primary.name]) == peak


def _skip_graph():
    """x -> s -> a -> b -> c -> cat(s, c) -> head: ``cat`` (cheap, large) is
    read by the backward of the head and of ``c`` (an early stage) and by
    the backward of ``s`` (a late one)."""
    fw = nx.DiGraph()
    for v, (size, cost) in enumerate([(2, 5.0), (2, 1.0), (2, 5.0), (2, 5.0), (2, 5.0), (10, 1.0)]):
        fw.add_node(v, bytes=size, cost=cost)
    fw.add_edges_from([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (1, 5)])
    return training_graph(fw)


def _resident_after(plan, node):
    """The values resident right after the backward node ``node`` is computed."""
    held = set()
    for op, v in zip(plan.op.tolist(), plan.node.tolist(), strict=True):
        if op == 0:
            held.add(v)
            if v == node:
                return held
        elif op == 1:
            held.discard(v)
    raise AssertionError(node)


def test_a_skip_leaves_between_its_stages_for_its_own_cost():
    g = _skip_graph()
    p = Problem.single(g, "100%")
    cat = 5
    readers = sorted(int(u) for u in g.succs(cat) if g.phase[u] != 0)
    late = readers[-1]
    group = np.zeros(g.n, dtype=np.int64)
    bwd = np.flatnonzero(g.phase != 0)
    group[bwd] = np.where(bwd < late, 1, 0)                  # two backward stages, ``cat`` read in both
    assert len({int(group[u]) for u in readers}) == 2
    keep = np.ones(g.n, dtype=bool)
    keep[cat] = False
    again = from_kept(g, keep)
    assert np.flatnonzero(again).tolist() == [cat]
    once = minimal_plan(g, keep_sequence(g, keep))[0]
    seq, count = redrop_sequence(g, keep, again, group)
    plan = minimal_plan(g, seq)[0]
    sim, sim_once = simulate(p, plan, check_budget=False), simulate(p, once, check_budget=False)
    assert sim.valid and sim_once.valid
    assert count.tolist() == [2 if v == cat else 0 for v in range(g.n)]     # once per stage that reads it
    cost = np.asarray(p.cost_matrix[0])
    assert p.objective.value(sim) == pytest.approx(p.objective.value(sim_once) + cost[cat])
    between = [int(v) for v in bwd if readers[-2] < v < late]
    assert between
    for v in between:     # not resident between its stages; its kept inputs are, to its second recomputation
        held, held_once = _resident_after(plan, v), _resident_after(once, v)
        assert cat in held_once and held == (held_once - {cat}) | {int(u) for u in g.preds(cat)}
    assert sum(int(g.bytes[u]) for u in _resident_after(plan, between[-1])) < \
        sum(int(g.bytes[u]) for u in _resident_after(once, between[-1]))


def test_chain_figures_add_up_to_the_simulated_time():
    g = unet(300, levels=3)
    p = Problem.single(g, "50%")
    ch = segment_chain(g)
    menus = compute_menus(menu_tasks(p, ch), limits=Limits(work=20_000))
    per_stage = stage_menus(ch, menus)
    planner = RedropPlanner(p, "t", ch.stage, cap=2)
    J = max(len(m.options) for m in per_stage)
    cost = np.asarray(p.cost_matrix[0])
    for j in (0, J - 1):
        base, held, inside, extra = chain_figures(p, ch, per_stage, planner=planner, columns=[j])
        choice = [int(round(j * (len(m.options) - 1) / max(1, J - 1))) for m in per_stage]
        keep = np.ones(g.n, dtype=bool)
        for s, o in enumerate(choice):
            keep[ch.fwd[s]] = per_stage[s].options[o]
        plan, _, count = planner.plan(keep)
        value = p.objective.value(simulate(p, plan, check_budget=False))
        total = sum(float(extra[s, o]) for s, o in enumerate(choice))
        assert total == pytest.approx(value - cost.sum())


def test_both_classes_plan_a_small_unet_better():
    g = unet(300, levels=3)
    for budget in ("50%", "60%"):
        once = solve_segments(Problem.single(g, budget), limits=Limits(), redrop=None)
        p = Problem.single(g, budget)
        both = solve_segments(p, limits=Limits(), redrop="both")
        sim = simulate(p, both.plan)
        assert sim.valid and int(sim.peak_bytes[p.primary.name]) <= p.budgets[0]
        assert both.objective == pytest.approx(p.objective.value(sim))
        assert both.objective < once.objective
        assert both.stats["class"] == "redrop"
