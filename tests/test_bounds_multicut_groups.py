"""Issue 20: the chain-of-cuts bound grouped by stages (identical groups
solved once) holds for every plan (brute force on tiny graphs, any partition,
any chain, costs rescaled 1e-12..1e12, bytes up to 5e17), its aggregated LP
equals the relaxed LP it stands for, with one group it is the chain-of-cuts
LP itself, and ``multicut_bound`` uses it above ``MAX_NODES`` nodes."""

import networkx as nx
import numpy as np

from hybrid_remat import plugins
from hybrid_remat.bounds import multicut
from hybrid_remat.bounds.cut_chains import _certified_lp
from hybrid_remat.bounds.multicut_groups import _groups, grouped_model, grouped_multicut_lower_bound, node_roles
from hybrid_remat.budgets import budget_lower_bound, keep_all_peak
from hybrid_remat.generators import training_graph
from hybrid_remat.graph import Graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.testing.instances import rescaled


class _Part:
    """A partition into stages: ``stage`` per node, ``stage_nodes(s)`` in a given order."""

    def __init__(self, lists, n):
        self.lists = [np.asarray(x, dtype=np.int64) for x in lists]
        self.n_stages = len(self.lists)
        self.stage = np.full(n, -1, dtype=np.int64)
        for s, x in enumerate(self.lists):
            self.stage[x] = s

    def stage_nodes(self, s):
        return self.lists[s]


def _training(rng, layers, *, same=False, skip=False):
    fw = nx.path_graph(layers, create_using=nx.DiGraph)
    if skip and layers > 3:
        fw.add_edge(0, layers - 1)
    for i in fw:
        fw.nodes[i]["bytes"] = 2 if same else int(rng.integers(1, 6))
        fw.nodes[i]["cost"] = 3.0 if same else float(rng.integers(1, 10))
    return training_graph(fw)


def _layer_part(g, layers):
    """Stage ``i``: forward node ``i`` and its backward node ``2L - i``; the loss in none."""
    return _Part([[i, 2 * layers - i] for i in range(layers)], g.n)


def _random_part(g, rng):
    lab = rng.integers(0, max(1, g.n // 2), g.n)
    lists = [rng.permutation(np.flatnonzero(lab == s)) for s in np.unique(lab)]
    return _Part(lists, g.n)


def _random_chain(g, rng):
    v = int(rng.integers(0, max(1, g.n // 2)))
    path = [v]
    while g.succs(path[-1]).size:
        path.append(int(rng.choice(g.succs(path[-1]))))
    k = int(rng.integers(1, len(path) + 1))
    return sorted(rng.choice(len(path), size=k, replace=False).tolist()), path


def test_never_above_the_optimum_for_any_partition_and_chain():
    rng = np.random.default_rng(0)
    checked = binding = 0
    for k in range(14):
        layers = int(rng.integers(3, 6))
        g = _training(rng, layers, same=k % 3 == 0, skip=k % 2 == 1)
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        for B in range(lo, hi):
            p = Problem.single(g, B)
            opt = brute_force(p)[0]
            pos, path = _random_chain(g, rng)
            for part in (_layer_part(g, layers), _random_part(g, rng), None):
                for ch in ([path[i] for i in pos], None):
                    r = grouped_multicut_lower_bound(p, chain=ch, part=part, limits=Limits(nodes=300))
                    assert p.base_cost * (1 - 1e-12) <= r.value <= opt * (1 + 1e-9), (k, B, ch, r, opt)
                    checked += 1
                    binding += r.value > p.base_cost * (1 + 1e-9)
    assert checked > 100 and binding >= 10      # the bound is not only the trivial one


def test_rescaled_costs_and_huge_bytes_stay_below_the_optimum():
    rng = np.random.default_rng(1)
    for k in range(10):
        layers = int(rng.integers(3, 6))
        g = _training(rng, layers, same=k % 2 == 0, skip=k % 3 == 0)
        g = rescaled(g, rng, huge_bytes=bool(k % 2))
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        p = Problem.single(g, int(rng.integers(lo, hi + 1)))
        opt = brute_force(p)[0]
        pos, path = _random_chain(g, rng)
        r = grouped_multicut_lower_bound(p, chain=[path[i] for i in pos], part=_layer_part(g, layers))
        assert p.base_cost * (1 - 1e-12) <= r.value <= opt * (1 + 1e-9), (k, r, opt)


def _lp(p, ch, part, aggregate=True, cross=True):
    c, A, b, lb, ub, cscale, classes = grouped_model(p, ch, part, aggregate=aggregate, cross=cross)
    return _certified_lp(c, A, b, lb, ub, Limits()) * cscale, classes


def test_identical_groups_solved_once_give_the_relaxed_lp_value():
    # 24 identical layers: the aggregated LP has far fewer classes than groups and the same value
    rng = np.random.default_rng(2)
    layers = 24
    g = _training(rng, layers, same=True)
    part = _layer_part(g, layers)
    B = (budget_lower_bound(g) + keep_all_peak(g)) // 2
    p = Problem.single(g, B)
    path = list(range(layers, g.n))               # the loss and the backward pass
    for ch in (path[::6], path[2::5], path[1:4]):
        agg, n_agg = _lp(p, ch, part, cross=False)
        full, n_full = _lp(p, ch, part, aggregate=False, cross=False)
        assert n_agg < n_full and n_full == layers + 1      # the layers and the loss (in no stage)
        assert abs(agg - full) <= 1e-7 * max(1.0, full), (ch, agg, full)
    assert agg > 0


def test_every_group_a_class_of_its_own_with_rows_5_is_the_chain_of_cuts_lp():
    # rows 5 with m = e = d = 1 are the chain rows between groups: any partition gives multicut's LP
    rng = np.random.default_rng(5)
    for k in range(6):
        layers = int(rng.integers(5, 12))
        g = _training(rng, layers, skip=True, same=k % 2 == 0)
        p = Problem.single(g, int(rng.integers(budget_lower_bound(g), keep_all_peak(g))))
        pos, path = _random_chain(g, rng)
        ch = [path[i] for i in pos]
        c, A, b, lb, ub, cscale = multicut._model(p, ch, Limits())
        ref = _certified_lp(c, A, b, lb, ub, Limits()) * cscale
        for part in (_layer_part(g, layers), _random_part(g, rng)):
            got, _ = _lp(p, ch, part, aggregate=False)
            assert abs(got - ref) <= 1e-7 * max(1.0, abs(ref)), (k, got, ref)


def test_summed_rows_5_lie_between_the_relaxed_and_the_full_lp_and_bind_on_small_unets():
    from hybrid_remat.blocks.structure import block_partition
    from hybrid_remat.families import unet

    lifted = fewer = 0
    for levels, size in ((1, 100), (2, 400)):
        g = unet(size, levels=levels, res=8 * 2 ** (levels - 1))
        part = block_partition(g)
        for budget in ("30%", "50%"):
            p = Problem.single(g, budget)
            ch = grouped_multicut_lower_bound(p, part=part).chain
            loose, _ = _lp(p, ch, part, cross=False)
            agg, n_agg = _lp(p, ch, part)
            full, n_full = _lp(p, ch, part, aggregate=False)
            tol = 1e-7 * max(1.0, full)
            assert n_agg <= n_full and loose - tol <= agg <= full + tol, (levels, budget, loose, agg, full)
            lifted += agg > loose * (1 + 1e-3)
            fewer += n_agg < n_full
    assert fewer >= 1 and lifted >= 2          # the rows bind where a block would be recomputed without its input


def _identical_blocks(rng, blocks, width, skip):
    """``blocks`` copies of a path of ``width`` nodes (one set of random costs), in a row; groups: each
    block's forward nodes and their backward nodes."""
    by, co = rng.integers(1, 6, width).tolist(), rng.integers(1, 10, width).astype(float).tolist()
    fw = nx.DiGraph()
    for v in range(blocks * width):
        fw.add_node(v, bytes=by[v % width], cost=co[v % width])
        if v:
            fw.add_edge(v - 1, v)
    nf = blocks * width
    if skip and nf > 2:
        fw.add_edge(0, nf - 1)
    g = training_graph(fw)
    lists = [list(range(b * width, (b + 1) * width)) + [2 * nf - v for v in range(b * width, (b + 1) * width)]
             for b in range(blocks)]
    return g, _Part(lists, g.n), list(range(nf, g.n))


def test_rows_5_stay_below_the_brute_force_optimum_on_identical_blocks():
    rng = np.random.default_rng(7)
    checked = lifted = 0
    for k in range(40):
        blocks = int(rng.integers(2, 4))
        g, part, backward = _identical_blocks(rng, blocks, int(rng.integers(1, 5 // blocks + 1)), k % 2 == 1)
        if k % 4 == 3:
            g = rescaled(g, rng, huge_bytes=bool(k % 8 == 7))
        lo, hi = budget_lower_bound(g), keep_all_peak(g)
        for B in sorted({lo + max(0, hi - 1 - lo) * j // 3 for j in range(4)}):      # exact at 5e17 bytes
            p = Problem.single(g, B)
            opt = brute_force(p)[0]
            for ch in (backward, None):
                r = grouped_multicut_lower_bound(p, chain=ch, part=part, limits=Limits(nodes=300))
                assert p.base_cost * (1 - 1e-12) <= r.value <= opt * (1 + 1e-9), (k, B, ch, r, opt)
                checked += 1
            loose, _ = _lp(p, backward, part, cross=False)
            lifted += r.value > p.base_cost and _lp(p, backward, part)[0] > loose * (1 + 1e-6)
    assert checked > 100 and lifted >= 5       # rows 5 bind on some of them


def test_one_group_is_the_chain_of_cuts_lp():
    rng = np.random.default_rng(3)
    for _ in range(4):
        layers = int(rng.integers(5, 12))
        g = _training(rng, layers, skip=True)
        p = Problem.single(g, int(rng.integers(budget_lower_bound(g), keep_all_peak(g))))
        pos, path = _random_chain(g, rng)
        ch = [path[i] for i in pos]
        c, A, b, lb, ub, cscale = multicut._model(p, ch, Limits())
        ref = _certified_lp(c, A, b, lb, ub, Limits()) * cscale
        got, classes = _lp(p, ch, None)
        assert classes <= 1 and abs(got - ref) <= 1e-7 * max(1.0, abs(ref)), (got, ref)


def test_skip_linked_stages_are_joined_but_hubs_are_not():
    # stages 0..5 in a row; stage 1 feeds stage 4 (a skip), stage 0 feeds every stage (a hub of 9 links)
    edges = [(s, s + 1) for s in range(11)] + [(1, 4)] + [(0, s) for s in range(2, 12)]
    g = Graph.from_arrays([1] * 12, edges, {"gpu": [1.0] * 12})
    part = _Part([[s] for s in range(12)], 12)
    groups = sorted(sorted(x.tolist()) for x in _groups(g, part))
    assert [1, 4] in groups and [0] in groups and len(groups) == 11


def test_roles_mark_inputs_needs_and_outsiders():
    rng = np.random.default_rng(4)
    g = _training(rng, 4)
    ch = [4, 5, 7]                                   # the loss, bwd(3), bwd(1)
    r = node_roles(g, ch)
    assert r[3, 0] == 1 and r[8, 0] == 0             # the loss's input; bwd(0) is no ancestor
    assert (r[np.unique(g.preds(7)), 2] == 1).all()
    anc = r > 0
    assert (anc[:, :-1] <= anc[:, 1:]).all()         # the ancestor sets grow along the chain


def test_an_expired_limit_gives_the_trivial_bound_and_the_source_uses_it_above_max_nodes(monkeypatch):
    rng = np.random.default_rng(5)
    g = _training(rng, 5, same=True)
    p = Problem.single(g, budget_lower_bound(g) + 1)
    assert grouped_multicut_lower_bound(p, limits=Limits(deadline=0.0)).value == p.base_cost
    monkeypatch.setattr(multicut, "MAX_NODES", 3)
    r = plugins.bounds()["multicut_bound"].bound(p)
    assert r.scope == "all plans" and r.stats["method"] in ("grouped_lp", "none")
    assert p.base_cost <= r.value <= brute_force(p)[0] * (1 + 1e-9)


def test_overlapping_stage_lists_still_give_disjoint_groups():
    # a node listed in two stages is counted in one group only (twice would count its bytes twice)
    g = Graph.from_arrays([1] * 4, [(0, 1), (1, 2), (2, 3)], {"gpu": [1.0] * 4})
    part = _Part([[0, 1, 2], [2, 3, 3]], 4)
    groups = _groups(g, part)
    nodes = np.concatenate(groups)
    assert sorted(nodes.tolist()) == [0, 1, 2, 3]


def test_the_heaviest_path_kernel_agrees_with_its_python_function():
    from hybrid_remat.bounds.cut_chains import _heaviest_paths
    from hybrid_remat.generators import random_layered

    rng = np.random.default_rng(6)
    for k in range(6):
        g = random_layered(int(rng.integers(5, 40)), seed=k)
        w = rng.uniform(0, 1, g.n) * (rng.uniform(0, 1, g.n) < 0.5)
        args = (np.asarray(g.pred_ptr, dtype=np.int64), np.asarray(g.pred_idx, dtype=np.int64), w)
        b1, p1 = _heaviest_paths(*args)
        b2, p2 = _heaviest_paths.py_func(*args)
        assert np.array_equal(b1, b2) and np.array_equal(p1, p2)


def test_a_partition_with_few_groups_alike_is_skipped_before_the_screen(monkeypatch):
    from hybrid_remat.bounds import multicut_groups as mg
    from hybrid_remat.segments.chain import segment_chain

    rng = np.random.default_rng(7)
    g = _training(rng, 6)
    ch = segment_chain(g, segment_size=2)                 # segments of their own: no run
    assert mg.unique_nodes(ch, g.n) == g.n
    assert mg.unique_nodes(_Part([list(range(g.n))], g.n), g.n) == 0     # not a chain: nothing counted
    assert mg.too_few_alike(ch, g.n, max_vars=10 * g.n) == ""
    assert "outside every run" in mg.too_few_alike(ch, g.n, max_vars=1)
    p = Problem.single(g, budget_lower_bound(g) + 1)
    monkeypatch.setattr(mg, "MAX_GROUPED_VARS", 1)
    r = mg.grouped_multicut_lower_bound(p, part=ch)
    assert r.value == p.base_cost and "outside every run" in r.stats["skipped"] and "screen_s" not in r.stats
    monkeypatch.setattr(multicut, "MAX_NODES", 3)
    monkeypatch.setattr("hybrid_remat.blocks.structure.block_partition", lambda graph: ch)
    ok, why = plugins.bounds()["multicut_bound"].applicable(p)
    assert not ok and "outside every run" in why
