"""Structure detection in every convention (Checkmate's, our tracer's, graphs
with node names only), boundary blocks that differ, noisy costs, several
runs; the segment chain's plans pass the simulator and its bound is a bound
over every plan (brute force on tiny graphs, the flat model on small ones),
with cost classes included; the chain DP is exact on integer figures."""

import itertools
import pathlib

import networkx as nx
import numpy as np
import pytest

from hybrid_remat import plugins
from hybrid_remat.blocks import detect_blocks
from hybrid_remat.blocks.detect import detect_runs
from hybrid_remat.bounds import blocks as block_bound_mod
from hybrid_remat.bounds.blocks import block_lower_bound
from hybrid_remat.bounds.segments import segment_lower_bound
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.families import decoder_checkmate, resnet_stages, unet, with_cost_noise
from hybrid_remat.generators import repeat_layers, training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.loaders import load_graph
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.segments import compute_menus, menu_tasks, segment_chain, solve_segments
from hybrid_remat.segments.formulation import SegmentsFormulation
from hybrid_remat.segments.menus import greedy_menu
from hybrid_remat.segments.solver import chain_dp
from hybrid_remat.simulate import simulate

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _decoder(layers, *, first_ffn=3, op_names=True):
    """A small decoder in the Checkmate convention (training_graph): embedding,
    ``layers`` layers (attention-like and FFN-like parts, two residual adds),
    a head; the first layer's FFN is ``first_ffn`` wide (3: like the others)."""
    fw = nx.DiGraph()
    names = []

    def add(op, b, c, preds):
        v = f"{len(names)}:{op}" if op_names else f"n{len(names)}"
        names.append(v)
        fw.add_node(v, bytes=b, cost=c)
        for u in preds:
            fw.add_edge(names[u], v)
        return len(names) - 1

    x = add("embed", 4, 1.0, [])
    for i in range(layers):
        n1 = add("norm", 4, 0.5, [x])
        q, k = add("q", 4, 4.0, [n1]), add("k", 1, 1.0, [n1])
        a = add("attn", 4, 6.0, [q, k])
        x = add("add", 4, 0.2, [x, add("o", 4, 4.0, [a])])
        w = first_ffn if i == 0 else 3
        up = add("up", 4 * w, 10.0, [add("norm", 4, 0.5, [x])])
        x = add("add", 4, 0.2, [x, add("down", 4, 10.0, [add("act", 4 * w, 1.0, [up])])])
    add("head", 32, 30.0, [add("norm", 4, 0.5, [x])])
    return training_graph(fw, name=f"decoder{layers}")


@pytest.mark.parametrize("op_names", [True, False])
def test_checkmate_convention_decoder_is_detected(op_names):
    """The issue's failure: the last layer's backward reads the head's gradient,
    not a next layer's; detection now finds the repeated layers anyway."""
    g = _decoder(6, op_names=op_names)
    bs = detect_blocks(g)
    assert bs is not None and 5 <= bs.n_blocks <= 6 and bs.fwd.shape[1] == bs.bwd.shape[1] == 11
    assert bs.same_costs or not op_names      # names only: the backward period may start one node off
    # every block's nodes have the same sizes position by position, forward and backward
    for k in range(bs.n_blocks):
        assert (g.bytes[bs.fwd[k]] == g.bytes[bs.fwd[0]]).all() and (g.bytes[bs.bwd[k]] == g.bytes[bs.bwd[0]]).all()
    # and the generator of the families (its own exporter's names)
    for names in (True, False):
        h = decoder_checkmate(layers=8, op_names=names)
        assert detect_blocks(h).n_blocks >= 7


def test_tracer_convention_is_detected():
    llama = load_graph(str(ROOT / "datasets" / "llama_8l_b4_s512.json.gz"))
    g = repeat_layers(llama, 5)
    assert detect_blocks(g).n_blocks == 5
    noisy = with_cost_noise(g, 0.05, seed=1)
    bs = detect_blocks(noisy)
    assert bs.n_blocks == 5 and not bs.same_costs


def test_boundary_blocks_that_differ_are_left_to_the_stages_around():
    g = _decoder(6, first_ffn=5)            # the first layer's FFN is wider
    st = detect_runs(g)
    assert len(st.runs) == 1 and st.runs[0].n_blocks in (4, 5)
    bs = detect_blocks(g)
    first_layer = [v for v in range(g.n) if g.phase[v] == 0 and 1 <= v <= 11]
    assert (bs.stage[first_layer] == -1).all()          # in the prologue
    assert (bs.stage[bs.fwd[0]] == 0).all() and bs.fwd[0][0] > 11


def test_noisy_costs_keep_the_structure():
    g = decoder_checkmate(layers=10)
    a, b = detect_runs(g).runs, detect_runs(with_cost_noise(g, 0.05, seed=3)).runs
    assert len(a) == len(b) == 1 and a[0].same_costs and not b[0].same_costs
    assert np.array_equal(a[0].fwd, b[0].fwd) and np.array_equal(a[0].bwd, b[0].bwd)


@pytest.mark.parametrize("family", [resnet_stages, unet])
def test_several_runs(family):
    g = family(1200, 0)
    st = detect_runs(g)
    assert len(st.runs) >= 2
    assert len({r.fwd.shape[1] for r in st.runs} | {int(g.bytes[r.fwd[0]].sum()) for r in st.runs}) >= 2
    ch = segment_chain(g, structure=st)
    assert len(ch.runs) >= 2 and (ch.stage >= 0).all()
    # stages follow the forward order, every node in exactly one stage
    firsts = [int(f.min()) for f in ch.fwd]
    assert firsts == sorted(firsts)
    assert sum(f.size + b.size for f, b in zip(ch.fwd, ch.bwd, strict=True)) == g.n


def test_no_repetition_gives_segments_and_a_reason(tiny_training_graph):
    g = tiny_training_graph(4, n=12)
    st = detect_runs(g)
    ch = segment_chain(g, structure=st, segment_size=3)
    assert ch.n_stages >= 3 and not ch.runs and (ch.kind < 0).all()
    assert not st.runs and st.why_not


def test_chain_dp_is_exact_on_integer_figures():
    rng = np.random.default_rng(0)
    for _ in range(20):
        S, n_opt = 4, 3
        held = rng.integers(0, 6, (S, n_opt)).astype(float)
        inside = held + rng.integers(0, 6, (S, n_opt))
        extra = rng.integers(0, 9, (S, n_opt)).astype(float)
        cap = float(rng.integers(8, 20))
        best = np.inf
        for ch in itertools.product(range(n_opt), repeat=S):
            prefix, ok = 0.0, True
            for s, o in enumerate(ch):
                ok &= prefix + inside[s, o] <= cap
                prefix += held[s, o]
            if ok:
                best = min(best, sum(extra[s, o] for s, o in enumerate(ch)))
        got = chain_dp(held, inside, extra, cap, resolution=int(cap))      # unit 1 byte: no rounding
        if got is None:
            assert best == np.inf
        else:
            assert sum(extra[s, o] for s, o in enumerate(got)) == best


def test_greedy_menu_is_a_pareto_front(tiny_training_graph):
    g = tiny_training_graph(2, n=30)
    p = Problem.single(g, "60%")
    for task in menu_tasks(p, segment_chain(g, segment_size=10)):
        m = greedy_menu(task)
        assert m.held == sorted(m.held, reverse=True) and m.extra == sorted(m.extra)
        assert len(set(m.held)) == len(m.held) and len(m.options) >= 2


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_segment_chain_plan_and_bound_against_brute_force(seed, tiny_training_graph):
    g = tiny_training_graph(seed)
    ch = segment_chain(g, segment_size=2)
    assert ch.n_stages >= 2
    found = 0
    for B in range(min_feasible_budget(g), keep_all_peak(g) + 1):
        p = Problem.single(g, B)
        opt = brute_force(p)[0]
        lb = segment_lower_bound(p, ch)
        assert p.base_cost - 1e-9 <= lb.value <= opt + 1e-6 * opt      # a bound over every plan
        r = solve_segments(p, chain=ch)
        if r.plan is not None:
            sim = simulate(p, r.plan)
            assert sim.valid and sim.total_time == pytest.approx(r.objective) and r.objective >= opt - 1e-9
            found += 1
        f = SegmentsFormulation().solve(p)
        assert f.lower_bound <= opt + 1e-6 * opt
        if f.status == "optimal":
            assert f.objective == pytest.approx(opt)
    assert found >= 1      # at least at the keep-all budget


def test_cost_classes_give_a_valid_bound(monkeypatch):
    """Blocks with noisy costs: the representative's front times the cost
    ratio (forced on a graph brute force can solve) bounds every plan and is
    at most the bound with every block's own costs."""
    fw = nx.DiGraph()
    rng = np.random.default_rng(1)
    for v in range(5):                # a stem, two blocks of (wide, narrow), noisy costs
        fw.add_node(v, bytes=3 if v % 2 else 1, cost=(2.0 if v % 2 else 1.0) * float(rng.lognormal(0, 0.2)))
        if v:
            fw.add_edge(v - 1, v)
    g = training_graph(fw)
    bs = detect_blocks(g)
    assert bs.n_blocks >= 2 and not bs.same_costs
    for B in (min_feasible_budget(g) + 1, (min_feasible_budget(g) + keep_all_peak(g)) // 2):
        p = Problem.single(g, B)
        own = block_lower_bound(p, structure=bs).value
        monkeypatch.setattr(block_bound_mod, "EXACT_COST_BLOCKS", 0)
        scaled = block_lower_bound(p, structure=bs).value
        monkeypatch.setattr(block_bound_mod, "EXACT_COST_BLOCKS", 16)
        opt = brute_force(p)[0]
        assert p.base_cost - 1e-9 <= scaled <= own + 1e-6 * own and own <= opt + 1e-6 * opt


def test_segments_against_the_flat_model(tiny_training_graph):
    """A 12-node forward graph (25 nodes): the segment bound is at most the
    flat staged model's plan, the segment plan close to it."""
    from hybrid_remat.exact.checkmate import CheckmateFormulation

    g = tiny_training_graph(7, n=12)
    lo, hi = min_feasible_budget(g), keep_all_peak(g)
    for f in (0.5, 0.8):
        p = Problem.single(g, int(lo + f * (hi - lo)))
        flat = CheckmateFormulation().solve(p, limits=Limits(nodes=5_000))
        seg = SegmentsFormulation().solve(p)
        assert simulate(p, seg.plan).valid and simulate(p, flat.plan).valid
        assert seg.lower_bound <= flat.objective * (1 + 1e-6)
        assert seg.objective <= 1.05 * flat.objective


def test_menus_are_independent_tasks():
    g = decoder_checkmate(layers=4)
    p = Problem.single(g, "50%")
    ch = segment_chain(g)
    tasks = menu_tasks(p, ch)
    assert len(tasks) == len({t.key for t in tasks}) == len(ch.runs) + int((ch.kind < 0).sum())
    # computed in any order, the same menus; the solver takes them as given
    a = compute_menus(tasks)
    b = compute_menus(tasks[::-1])
    assert all(a[k].held == b[k].held for k in a)
    r = solve_segments(p, chain=ch, menus=a)
    assert r.plan is not None and simulate(p, r.plan).valid


def test_registered_and_conformant():
    from hybrid_remat import testing

    assert "segments" in plugins.formulations()
    report = testing.check_formulation(plugins.formulations()["segments"])
    assert set(report["checks"].values()) == {"passed"} and "optimal" in report["status"].values()
