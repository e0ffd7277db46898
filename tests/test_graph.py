import networkx as nx
import numpy as np
import pytest

from hybrid_remat.errors import GraphError, HybridRematError
from hybrid_remat.generators import chain, random_dag, random_layered, training_graph
from hybrid_remat.graph import Graph


def test_csr_matches_edges():
    g = random_dag(30, p=0.2, seed=3)
    edges = {tuple(e) for e in g.edges().tolist()}
    via_preds = {(int(u), v) for v in range(g.n) for u in g.preds(v)}
    via_succs = {(u, int(v)) for u in range(g.n) for v in g.succs(u)}
    assert edges == via_preds == via_succs
    assert all(u < v for u, v in edges)
    assert g.pred_idx.dtype == np.int64 and g.succ_ptr.dtype == np.int64


def test_graph_is_immutable():
    g = chain(3)
    with pytest.raises(ValueError):
        g.bytes[0] = 5
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        g.name = "x"


def test_from_networkx_relabels_in_topological_order():
    G = nx.DiGraph()
    G.add_edge("c", "a")
    G.add_edge("a", "b")
    for v in G:
        G.nodes[v].update(bytes=1, cost=2.0)
    g = Graph.from_networkx(G)
    assert g.ids == ("c", "a", "b")
    assert list(g.preds(2)) == [1]


def test_cycle_is_named():
    G = nx.DiGraph([("x", "y"), ("y", "z"), ("z", "x")])
    for v in G:
        G.nodes[v].update(bytes=1, cost=1.0)
    with pytest.raises(GraphError, match="cycle") as e:
        Graph.from_networkx(G)
    assert "x" in str(e.value) and "y" in str(e.value)


def test_cycle_in_arrays_is_named():
    with pytest.raises(GraphError, match="cycle through nodes"):
        Graph.from_arrays([1, 1, 1], [(0, 1), (1, 2), (2, 1)], [1, 1, 1], names=["a", "b", "c"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(bytes=[], edges=[], costs=[]), "empty"),
        (dict(bytes=[1, -2], edges=[(0, 1)], costs=[1, 1]), "negative bytes"),
        (dict(bytes=[1, 2], edges=[(0, 1)], costs=[1, -1]), "negative"),
        (dict(bytes=[1, 2], edges=[(0, 1)], costs=[1, None]), "no 'cost' cost"),
        (dict(bytes=[1, 2], edges=[(0, 1)], costs=[1]), "1 entries for 2 nodes"),
        (dict(bytes=[1, 2], edges=[(0, 5)], costs=[1, 1]), "outside"),
        (dict(bytes=[1, 2], edges=[(1, 0)], costs=[1, 1]), "against the node numbering"),
    ],
)
def test_bad_graphs_raise_named_errors(kwargs, match):
    with pytest.raises(GraphError, match=match):
        Graph.from_arrays(**kwargs)


def test_graph_error_is_library_error():
    assert issubclass(GraphError, HybridRematError)


def test_chain_generator():
    g = chain(5, bytes=[1, 2, 3, 4, 5], cost=2.0)
    assert g.n == 5 and g.m == 4
    assert list(g.bytes) == [1, 2, 3, 4, 5]
    assert float(g.cost().sum()) == 10.0


def test_training_graph_follows_checkmate_conventions():
    fwd = nx.path_graph(4, create_using=nx.DiGraph)
    for v in fwd:
        fwd.nodes[v].update(bytes=10 + v, cost=1.0 + v)
    g = training_graph(fwd)
    L = 4
    assert g.n == 2 * L + 1
    bwd = lambda i: 2 * L - i  # noqa: E731
    e = {tuple(x) for x in g.edges().tolist()}
    for i in range(L):
        assert (i, bwd(i)) in e
        assert g.bytes[bwd(i)] == g.bytes[i]
        assert g.cost()[bwd(i)] == 2 * g.cost()[i]
        assert g.phase[bwd(i)] == 1 and g.phase[i] == 0
    for u in range(L - 1):
        assert (u + 1, bwd(u)) in e and (bwd(u + 1), bwd(u)) in e
    assert (L - 1, L) in e and (L, bwd(L - 1)) in e
    assert g.required.sum() == L


def test_random_layered_is_deterministic_dag():
    a = random_layered(120, seed=7)
    b = random_layered(120, seed=7)
    c = random_layered(120, seed=8)
    assert a.n == 120
    assert np.array_equal(a.succ_idx, b.succ_idx) and np.array_equal(a.bytes, b.bytes)
    assert not (np.array_equal(a.bytes, c.bytes) and np.array_equal(a.succ_idx, c.succ_idx))
    # one source, one sink, every node reaches the sink
    G = a.to_networkx()
    assert [v for v in G if G.in_degree(v) == 0] == [0]
    assert [v for v in G if G.out_degree(v) == 0] == [a.n - 1]


# ---------------------------------------------------------------- issue 12.4/12.8
@pytest.mark.parametrize(
    "sizes, match",
    [
        ([1e30, 2], "node 0 has 1e\\+30 bytes, more than"),
        ([10**30, 2], "node 0 has 1e\\+30 bytes, more than"),
        ([5 * 10**18] * 6, "node sizes sum to 3e\\+19 bytes"),
        ([2**62, 1], "node sizes sum to"),
        ([float("inf"), 1], "bytes, more than"),
        (["12", 1], "non-numeric bytes '12'"),
        ([[1], 1], "non-numeric bytes \\[1\\]"),
        ([True, 1], "non-numeric bytes True"),
    ],
)
def test_sizes_that_cannot_be_counted_in_int64_are_rejected(sizes, match):
    with pytest.raises(GraphError, match=match):
        Graph.from_arrays(sizes, [(0, 1)], [1.0] * len(sizes))


def test_the_largest_countable_sizes_are_exact():
    g = Graph.from_arrays([2**61, 2**61 - 1, 1], [(0, 1), (1, 2)], [1.0] * 3)
    assert int(g.bytes.sum()) == 2**62 and g.bytes.dtype == np.int64


@pytest.mark.parametrize(
    "costs, match",
    [
        ([1.0, float("inf")], "node 1 has an infinite 'cost' cost"),
        ([1.0, "abc"], "node 1 has a non-numeric 'cost' cost 'abc'"),
        ([1.0, {"t": 1}], "non-numeric 'cost' cost"),
        ([1.7e308, 1.7e308], "sum to infinity"),
    ],
)
def test_costs_must_be_finite_numbers(costs, match):
    with pytest.raises(GraphError, match=match):
        Graph.from_arrays([1, 1], [(0, 1)], costs)


def test_duplicate_edges_are_merged_as_documented():
    g = Graph.from_arrays([1, 1, 1], [(0, 1), (0, 1), (1, 2), (0, 1)], [1.0] * 3)
    assert g.m == 2 and g.preds(1).tolist() == [0]
    assert "Duplicate edges are" in Graph.from_arrays.__doc__ and "merged" in Graph.from_arrays.__doc__


@pytest.mark.parametrize(
    "edges, match",
    [([(0, 1, 2)], "pairs"), ([("a", "b")], "pairs"), ([(0, 0.5)], "integers"), (5, "pairs")],
)
def test_malformed_edges_are_named(edges, match):
    with pytest.raises(GraphError, match=match):
        Graph.from_arrays([1, 1], edges, [1.0, 1.0])


def test_with_costs_rejects_infinite_costs():
    with pytest.raises(GraphError, match="finite"):
        chain(3).with_costs({"cost": [1.0, np.inf, 1.0]})
