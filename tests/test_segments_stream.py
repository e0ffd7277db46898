"""The stream class in the segment chain (segments/stream.py): a run of
repeated blocks between segments of their own may drop the output the next
block reads, recomputed from a checkpoint every ``m`` blocks.  Its menu
figures are the simulator's, its recomputations never reach past the last
checkpoint, every value is computed at most twice, and the chain solver's
plans with it pass the simulator within the budget (and never go below the
segment chain's bound over every plan)."""

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.blocks.schedule import KeepSetPlanner
from hybrid_remat.bounds.segments import segment_lower_bound
from hybrid_remat.generators import training_graph
from hybrid_remat.problem import Problem
from hybrid_remat.segments.chain import segment_chain
from hybrid_remat.segments.menus import compute_menus, menu_tasks
from hybrid_remat.segments.solver import budget_columns, chain_figures, solve_segments, stage_menus
from hybrid_remat.segments.stream import is_checkpoint, run_blocks, stream_options, with_stream
from hybrid_remat.simulate import simulate
from hybrid_remat.testing.instances import recompute_reach


def _graph(n_blocks=16, stem=6, head=4, seed=0):
    """A stem of layers that all differ, ``n_blocks`` residual blocks (x -> a
    -> b, out = x + b), a head of layers that all differ."""
    rng = np.random.default_rng(seed)
    fw = nx.DiGraph()
    for i in range(stem):
        fw.add_node(i, bytes=5 + 3 * i + int(rng.integers(0, 3)), cost=1.0 + 0.5 * i)
        if i:
            fw.add_edge(i - 1, i)
        if i >= 2 and i % 2 == 0:
            fw.add_edge(i - 2, i)
    x, nid = stem - 1, stem
    for _ in range(n_blocks):
        a, b, out = nid, nid + 1, nid + 2
        nid += 3
        for j, u in enumerate((a, b, out)):
            fw.add_node(u, bytes=[40, 30, 20][j], cost=[1.0, 2.0, 1.0][j])
        fw.add_edges_from([(x, a), (a, b), (b, out), (x, out)])
        x = out
    for i in range(head):
        fw.add_node(nid, bytes=6 + 2 * i + int(rng.integers(0, 3)), cost=2.0 + 0.3 * i)
        fw.add_edge(x, nid)
        x, nid = nid, nid + 1
    return training_graph(fw)


@pytest.fixture(scope="module")
def chain():
    g = _graph()
    ch = segment_chain(g, min_block=3)
    p = Problem.single(g, "35%")
    menus = compute_menus(menu_tasks(p, ch))
    opts = stream_options(p, ch, menus)
    return g, p, ch, menus, opts, with_stream(ch, stage_menus(ch, menus), opts)


def test_a_run_between_segments_gets_stream_options(chain):
    g, p, ch, menus, opts, per_stage = chain
    assert len(ch.runs) == 1 and (ch.kind < 0).sum() >= 2 and ch.kind[0] < 0 and ch.kind[-1] < 0
    assert list(opts) == [0]
    so = opts[0]
    first, count, _ = ch.runs[0]
    assert so.out.any() and so.period >= 2 and all(not x[so.out].any() for x, _, _ in so.points)
    base = menus[("kind", 0)]
    for j in range(count):
        m = per_stage[first + j]
        assert m.held == sorted(m.held, reverse=True) and sum(m.stream) == len(so.points)
        held_opts = [x for x, f in zip(m.options, m.stream, strict=True) if not f]
        assert all((a == b).all() for a, b in zip(held_opts, base.options, strict=True))
        for x, f in zip(m.options, m.stream, strict=True):
            if f:          # a checkpoint holds the stream, an ordinary block drops it
                assert x[so.out].all() == is_checkpoint(j, count, so.period)
                assert x[so.out].any() == is_checkpoint(j, count, so.period)
    assert all(per_stage[s] is stage_menus(ch, menus)[s] for s in range(ch.n_stages) if ch.kind[s] < 0)


def test_menu_figures_are_the_simulators_and_recomputation_stops_at_a_checkpoint(chain):
    g, p, ch, menus, opts, per_stage = chain
    so = opts[0]
    first, count, _ = ch.runs[0]
    bs = run_blocks(ch, 0)
    cost = np.asarray(p.cost_matrix[0], dtype=np.float64)
    planner = KeepSetPlanner(p, "test")
    stream_idx = [o for o, f in enumerate(per_stage[first].stream) if f]
    for o in stream_idx:
        keep = np.ones(g.n, dtype=bool)
        for j in range(count):
            keep[ch.fwd[first + j]] = per_stage[first + j].options[o]
        plan, peak, rec = planner.plan(keep)
        sim = simulate(p, plan, check_budget=False)
        assert sim.peak_bytes[p.primary.name] == peak
        assert sim.total_time == pytest.approx(p.base_cost + cost[rec].sum(), rel=1e-12)
        for j in range(count):
            extra = cost[ch.fwd[first + j]][rec[ch.fwd[first + j]]].sum()
            if is_checkpoint(j, count, so.period):       # holds its output too: never more
                assert extra <= per_stage[first].extra[o] * (1 + 1e-9) + 1e-12
            else:                                          # exactly its menu entry's recomputation
                assert extra == pytest.approx(per_stage[first].extra[o], rel=1e-9, abs=1e-12)
        assert not rec[np.concatenate([ch.fwd[s] for s in range(ch.n_stages) if ch.kind[s] < 0])].any()
        # every recomputation of block j's values serves the backward of a block k at most period - 1 above it
        seq, _ = planner.sequence(keep)
        for j, k in recompute_reach(g, seq, bs.stage):
            if 0 <= j < count:
                assert j <= k + 1 and k - j < so.period
        assert np.bincount(seq, minlength=g.n).max() <= 2 and rec.any()


def test_chain_figures_of_stream_options_are_their_menu_entries(chain):
    """The chain's measured figures (one simulation per column) give an
    ordinary block of the run exactly its stream option's menu time."""
    g, p, ch, menus, opts, per_stage = chain
    first, count, _ = ch.runs[0]
    base, held, inside, extra = chain_figures(p, ch, per_stage)
    m = per_stage[first]
    measured = 0
    for o, f in enumerate(m.stream):
        for j in range(count):
            if f and np.isfinite(extra[first + j, o]) and not is_checkpoint(j, count, opts[0].period):
                assert extra[first + j, o] == pytest.approx(m.extra[o], rel=1e-9, abs=1e-12)
                measured += 1
    assert measured


@pytest.mark.parametrize("budget, pays", [("30%", True), ("35%", True), ("40%", False), ("50%", True)])
def test_stream_plans_pass_the_simulator_within_the_budget(budget, pays):
    g = _graph(20)
    ch = segment_chain(g, min_block=3)
    p = Problem.single(g, budget)
    seen = []
    r = solve_segments(p, chain=ch, on_incumbent=lambda plan, source: seen.append(simulate(p, plan)))
    assert r.plan is not None and r.stats["stream"]
    sim = simulate(p, r.plan)
    assert sim.valid and sim.peak_bytes[p.primary.name] <= p.budgets[0]
    assert sim.total_time == pytest.approx(r.objective) and all(s.valid for s in seen)
    held = solve_segments(Problem.single(g, budget), chain=ch, stream=False)
    assert r.objective <= held.objective          # the held-stream class's DP runs too, on the same figures
    if pays:                                      # where the stream pays on this graph
        assert r.stats["stream_stages"] > 0 and r.objective < held.objective
    lb = segment_lower_bound(p, ch)
    assert r.objective >= lb.value - lb.tolerance - 1e-9



def test_budget_columns_straddle_the_budget(chain):
    """The early columns: the most-memory column predicted to fit and the
    one before it; all of them where everything fits, none where not even
    the least-memory column does."""
    g, p, ch, menus, opts, per_stage = chain
    J = max(len(m.options) for m in per_stage)
    fig = chain_figures(p, ch, per_stage, columns=[J - 1])
    assert budget_columns(per_stage, fig, 1e18, J - 1) == [0]
    assert budget_columns(per_stage, fig, 0.0, J - 1) == []
    got = budget_columns(per_stage, fig, float(p.budgets[0]) - fig[0], J - 1)
    assert got and all(0 <= j < J - 1 for j in got) and (len(got) == 1 or got[1] == got[0] - 1)


def test_stream_groups_tile_the_chain_and_end_at_checkpoints(chain):
    """The DP's groups over a stream run are the blocks between checkpoints
    (a stream option's recomputations stay inside its group), the rest as
    :func:`stage_groups` makes them."""
    from hybrid_remat.segments.solver import stage_groups
    from hybrid_remat.segments.stream import stream_groups

    g, p, ch, menus, opts, per_stage = chain
    base = stage_groups(ch.kind, target=4)
    got = stream_groups(ch, opts, base)
    assert [a for a, _ in got][1:] == [b for _, b in got][:-1] and got[0][0] == 0 and got[-1][1] == ch.n_stages
    first, count, _ = ch.runs[0]
    ends = [b - first - 1 for a, b in got if first <= a < first + count]
    assert ends == [j for j in range(count) if is_checkpoint(j, count, opts[0].period)]
    assert [x for x in got if x[0] < first or x[0] >= first + count] == \
        [x for x in base if x[0] < first or x[0] >= first + count]
    assert stream_groups(ch, {}, base) == base



def test_a_later_call_redoes_stream_menus_an_earlier_one_cut(monkeypatch):
    """The chain keeps its menus and figures with the problem; where the
    first call's limits cut the stream menus, the next call computes them
    and measures its own figures (the class is not lost for the run)."""
    import time

    import hybrid_remat.segments.solver as solver
    from hybrid_remat.limits import Limits

    def cut(problem, chain, menus, *, limits, **kw):
        while not limits.expired():      # the stream menus' share spent, nothing found
            time.sleep(0.01)
        return {}

    g = _graph(20)
    ch = segment_chain(g, min_block=3)
    p = Problem.single(g, "30%")
    with monkeypatch.context() as m:
        m.setattr(solver, "stream_options", cut)
        first = solve_segments(p, chain=ch, limits=Limits.seconds(1.5))
    assert first.plan is not None and not first.stats["stream"]
    again = solve_segments(p, chain=ch)
    assert again.stats["memo"] and again.stats["stream"] and again.stats["stream_stages"] > 0
    assert again.objective < first.objective and simulate(p, again.plan).valid
