"""The cut bound holds for every plan: checked against the all-plans brute
force on tiny graphs (random DAGs and training graphs), and it is not
trivial where memory is tight."""

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.exact.bounds import ancestor_matrix, cut_lower_bound, partition_lower_bound
from hybrid_remat.exact.brute import brute_force_optimum
from hybrid_remat.generators import chain, training_graph
from hybrid_remat.graph import Graph
from hybrid_remat.problem import Problem


def _random_dag(rng, n):
    edges = [(u, v) for v in range(1, n) for u in range(v) if rng.random() < 0.35]
    for v in range(1, n):
        if not any(e[1] == v for e in edges):
            edges.append((int(rng.integers(0, v)), v))
    return Graph.from_arrays(rng.integers(1, 6, n), edges, {"cost": rng.integers(1, 10, n).astype(float)})


def _training(rng, n_fwd):
    fw = nx.DiGraph()
    for i in range(n_fwd):
        fw.add_node(i, bytes=int(rng.integers(1, 6)), cost=float(rng.integers(1, 10)))
    for v in range(1, n_fwd):
        fw.add_edge(v - 1, v)
        if v >= 2 and rng.random() < 0.3:
            fw.add_edge(v - 2, v)
    return training_graph(fw)


def _problems(seed, count):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        g = _random_dag(rng, int(rng.integers(3, 8))) if len(out) % 3 == 2 else _training(rng, int(rng.integers(2, 4)))
        if g.n > 8:
            continue
        lo, hi = min_feasible_budget(g), keep_all_peak(g)
        out.append(Problem.single(g, int(rng.integers(lo, hi + 1))))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cut_bound_never_exceeds_the_all_plans_optimum(seed):
    strict = 0
    for p in _problems(seed, 24):
        lb = cut_lower_bound(p)
        opt = brute_force_optimum(p)
        assert p.base_cost - 1e-9 <= lb.value <= opt + 1e-9, (lb, opt)
        assert lb.extra <= lb.per_node.max() + 1e-9 or lb.method in ("knapsack", "chains")
        strict += lb.value > p.base_cost + 1e-9
    assert strict >= 2  # the bound is not trivial on these problems


def test_cut_bound_is_tight_on_a_small_training_graph():
    """A 4-layer training graph (unit sizes, costs 1..4): at every budget the
    bound equals the all-plans optimum (the loss is the binding cut)."""
    fw = nx.path_graph(4, create_using=nx.DiGraph)
    for i in fw:
        fw.nodes[i]["bytes"], fw.nodes[i]["cost"] = 1, 1.0 + i
    g = training_graph(fw)
    got = []
    for B in range(min_feasible_budget(g), keep_all_peak(g) + 1):
        p = Problem.single(g, B)
        lb = cut_lower_bound(p)
        assert lb.method in ("knapsack", "chains")
        got.append((lb.value, brute_force_optimum(p)))
    assert got == [(36.0, 36.0), (33.0, 33.0), (31.0, 31.0), (30.0, 30.0)]


def test_ancestor_matrix_matches_networkx():
    rng = np.random.default_rng(4)
    g = _random_dag(rng, 12)
    A = ancestor_matrix(g)
    G = g.to_networkx()
    for v in range(g.n):
        assert set(np.flatnonzero(A[v]).tolist()) == {int(u) for u in nx.ancestors(G, v)}


def test_cut_bound_refuses_multi_device():
    from hybrid_remat.problem import Device, Link

    g = chain(3, bytes=1)
    g = g.with_costs({"gpu": g.cost(), "cpu": 2 * g.cost()})
    p = Problem(g, [Device("gpu", "gpu", 3), Device("cpu", "cpu", 10)],
                [Link("gpu", "cpu", 1.0, 0.0), Link("cpu", "gpu", 1.0, 0.0)])
    with pytest.raises(ValueError, match="single-device"):
        cut_lower_bound(p)


@pytest.mark.parametrize("seed, budget, knapsack, chains, optimum", [
    (2, 12, 55.0, 67.0, 67.0), (45, 14, 45.0, 50.0, 52.0), (248, 10, 39.0, 45.0, 45.0)])
def test_recomputation_chains_strengthen_the_cut(seed, budget, knapsack, chains, optimum):
    """Random DAGs where a value dropped at the cut needs an input that cannot
    stay resident either: following the chain adds its cost (found by search
    over seeds; the all-plans optimum by brute force)."""
    rng = np.random.default_rng(seed)
    g = _random_dag(rng, int(rng.integers(5, 9)))
    p = Problem.single(g, budget)
    assert cut_lower_bound(p, closure=False).value == pytest.approx(knapsack)
    lb = cut_lower_bound(p)
    assert lb.value == pytest.approx(chains) and lb.method == "chains"
    assert brute_force_optimum(p) == pytest.approx(optimum)


def _two_towers():
    """Two independent 5-node training graphs side by side (10 nodes)."""
    fw = nx.path_graph(2, create_using=nx.DiGraph)
    for i in fw:
        fw.nodes[i]["bytes"], fw.nodes[i]["cost"] = 1 + i, 1.0 + i
    one = training_graph(fw)
    k = one.n
    e = one.edges().tolist()
    g = Graph.from_arrays(np.concatenate([one.bytes, one.bytes]), e + [(u + k, v + k) for u, v in e],
                          {"cost": np.concatenate([one.cost(), one.cost()])})
    return g, [list(range(k)), list(range(k, 2 * k))]


def test_partition_bound_adds_up_independent_parts():
    """Each tower needs its own recomputation: the parts' bounds add up (20,
    the optimum) where a single cut sees one tower (19)."""
    g, parts = _two_towers()
    p = Problem.single(g, 8)
    value, extras = partition_lower_bound(p, parts)
    assert extras == [1.0, 1.0] and value == 20.0
    assert cut_lower_bound(p).value == 19.0
    assert brute_force_optimum(p) == 20.0


@pytest.mark.parametrize("seed", [0, 1])
def test_partition_bound_never_exceeds_the_all_plans_optimum(seed):
    rng = np.random.default_rng(seed + 50)
    for p in _problems(seed + 7, 16):
        n = p.graph.n
        cut = int(rng.integers(1, n))
        perm = np.arange(n) if rng.random() < 0.5 else rng.permutation(n)
        value, _ = partition_lower_bound(p, [perm[:cut], perm[cut:]])
        assert p.base_cost - 1e-9 <= value <= brute_force_optimum(p) + 1e-9
    with pytest.raises(ValueError, match="overlap"):
        partition_lower_bound(p, [[0, 1], [1, 2]])
