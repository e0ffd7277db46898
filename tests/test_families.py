"""The training-graph families: valid graphs in the convention each claims,
near the requested size, the same for a seed."""

import numpy as np
import pytest

from hybrid_remat.errors import GraphError
from hybrid_remat.families import (
    FAMILIES,
    ForwardBuilder,
    checkmate_training,
    decoder_checkmate,
    decoder_tracer,
    family_graph,
    llama_layers,
    with_cost_noise,
)
from hybrid_remat.graph import BACKWARD, FORWARD
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

CHECKMATE = [f for f in FAMILIES if not f.startswith("decoder_tracer")]


def _same(a, b) -> bool:
    return (a.n == b.n and np.array_equal(a.succ_idx, b.succ_idx) and np.array_equal(a.succ_ptr, b.succ_ptr)
            and np.array_equal(a.bytes, b.bytes) and all(np.array_equal(a.costs[k], b.costs[k]) for k in a.costs)
            and np.array_equal(a.phase, b.phase))


def _check_checkmate(g) -> None:
    """Every node reads exactly what the Checkmate convention says."""
    n = g.n
    L = (n - 1) // 2
    assert n == 2 * L + 1
    assert (g.phase[: L + 1] == FORWARD).all() and (g.phase[L + 1:] == BACKWARD).all()
    fsucc = [[s for s in g.succs(i).tolist() if s <= L] for i in range(L)]
    assert g.preds(L).tolist() == [L - 1]                  # the loss reads the last forward node
    assert fsucc[L - 1] == [L]
    for i in range(L):
        assert g.preds(i).max(initial=-1) < i and (g.phase[g.preds(i)] == FORWARD).all()
        expected = {i, *fsucc[i], *(2 * L - s for s in fsucc[i] if s < L)}
        if i == L - 1:
            expected.add(L)
        assert set(g.preds(2 * L - i).tolist()) == expected, g.names[2 * L - i]
        assert g.bytes[2 * L - i] == g.bytes[i]
        assert g.names[2 * L - i] == g.names[i] + "_backward"
    # one forward sink (the loss's input) and one backward sink per forward source
    assert [i for i in range(L) if not fsucc[i]] == []


@pytest.mark.parametrize("family", CHECKMATE)
def test_checkmate_families_follow_the_convention(family):
    g = family_graph(family, 1500, 1)
    _check_checkmate(g)
    assert g.cost_kinds == ("gpu", "cpu")
    assert (g.cost("gpu") > 0).all() and (g.cost("cpu") > 0).all()
    assert g.required.any() and not g.required[: g.n // 2 + 1].any()   # parameter gradients are backward


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("size", [2000, 10000])
def test_node_counts_are_near_the_request(family, size):
    assert abs(family_graph(family, size, 0).n - size) <= 0.05 * size


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_seed_gives_the_same_graph_and_a_budget_a_valid_plan(family):
    a, b = family_graph(family, 1200, 7), family_graph(family, 1200, 7)
    assert _same(a, b) and a.name == b.name
    p = Problem.single(a, "50%")
    assert p.keep_all_peak() > p.min_feasible_budget() > 0
    keep_all = Problem.single(a, "100%")
    from hybrid_remat import plugins
    plan = plugins.heuristics()["keep_all"].run(keep_all)
    assert simulate(keep_all, plan).valid


@pytest.mark.parametrize("family", ["decoder_varied", "random_layered", "decoder_checkmate_noise"])
def test_seeds_differ_where_the_family_is_random(family):
    assert not _same(family_graph(family, 1200, 1), family_graph(family, 1200, 2))


def test_identical_layers_cost_the_same_and_boundary_layers_differ():
    g = decoder_checkmate(layers=6)
    L = (g.n - 1) // 2
    per = 17
    layer = [1 + k * per + np.arange(per) for k in range(6)]
    for k in range(1, 6):
        assert np.array_equal(g.cost("gpu")[layer[k]], g.cost("gpu")[layer[0]])
    indeg = np.diff(g.pred_ptr)
    bwd = [2 * L - x for x in layer]
    # the last layer's backward reads the head's gradient, not a next layer's
    assert not np.array_equal(indeg[bwd[5]], indeg[bwd[2]])
    assert np.array_equal(indeg[bwd[3]], indeg[bwd[2]])


def test_layers_per_size_are_realistic():
    """Per layer, the Checkmate decoder costs what the profiled llama layer costs (within 2x)."""
    g = decoder_checkmate(layers=8)
    t = llama_layers(8)
    assert 0.5 < g.cost("gpu").sum() / t.cost("gpu").sum() < 2
    assert 0.5 < g.cost("cpu").sum() / t.cost("cpu").sum() < 2


def test_tracer_convention_is_the_repeated_profiled_layer():
    g = decoder_tracer(4000)
    L = (g.n - 41) // 129
    assert g.n == 129 * L + 41 and g.meta["meta"]["layers"] == L
    fwd = np.flatnonzero(g.phase == FORWARD)
    assert fwd.max() < np.flatnonzero(g.phase == BACKWARD).min()


def test_cost_noise_is_lognormal_and_keeps_structure():
    g = decoder_checkmate(layers=60)
    h = with_cost_noise(g, 0.05, seed=3)
    assert np.array_equal(h.succ_idx, g.succ_idx) and np.array_equal(h.bytes, g.bytes)
    for k in g.cost_kinds:
        r = np.log(h.cost(k) / g.cost(k))
        assert abs(r.mean()) < 0.01 and 0.045 < r.std() < 0.055
    assert _same(with_cost_noise(g, 0.05, seed=3), h)
    assert not _same(with_cost_noise(g, 0.05, seed=4), h)
    with pytest.raises(GraphError, match="sigma"):
        with_cost_noise(g, -1.0)


def test_checkmate_training_of_a_diamond():
    fb = ForwardBuilder()
    a = fb.add("x", "a", 8)
    b = fb.add("x", "b", 8, inputs=[a])
    c = fb.add("x", "c", 8, inputs=[a])
    fb.add("x", "d", 8, inputs=[b, c], params=True)
    g = checkmate_training(fb, name="diamond")
    L = 4
    assert g.n == 9
    assert set(g.preds(2 * L - a).tolist()) == {a, b, c, 2 * L - b, 2 * L - c}
    assert set(g.preds(2 * L - 3).tolist()) == {3, L}
    assert np.flatnonzero(g.required).tolist() == [2 * L - 3]


def test_unknown_family_is_named():
    with pytest.raises(GraphError, match="unknown graph family 'x'"):
        family_graph("x", 100)
