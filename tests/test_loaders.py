"""Issue 12.8: malformed graph files give one named HybridRematError, never
a traceback; fuzzed with hypothesis (only HybridRematError may escape)."""

import copy
import gzip
import json
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid_remat.errors import GraphError, HybridRematError
from hybrid_remat.graph import Graph
from hybrid_remat.loaders import graph_from_node_link, graph_from_remat_json, load_graph

REMAT = {
    "format": "remat-graph/1", "name": "tiny",
    "transfer": {"h2d_bytes_per_s": 5e10, "d2h_bytes_per_s": 5e10, "latency_s": 1e-5},
    "nodes": {"op": ["a", "b", "c"], "phase": ["forward", "forward", "backward"], "bytes": [4, 8, 4],
              "flops": [1.0, 2.0, None], "time_gpu_s": [0.1, 0.2, 0.3], "time_cpu_s": [1.0, None, 3.0]},
    "edges": [[0, 1], [1, 2], [0, 2]],
    "outputs": [2],
}
NODE_LINK = {
    "directed": True, "multigraph": False, "graph": {"name": "nl"},
    "nodes": [{"id": i, "name": f"n{i}", "cost_cpu": 1.0, "cost_ram": 10, "backward": i > 1} for i in range(4)],
    "links": [{"source": i, "target": i + 1} for i in range(3)],
}


def write(doc, path, *, gz=False):
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    if gz:
        raw = gzip.compress(raw)
    with open(path, "wb") as f:
        f.write(raw)
    return path


def test_the_valid_documents_load():
    g = graph_from_remat_json(copy.deepcopy(REMAT))
    assert g.n == 3 and g.m == 3 and g.cost_kinds == ("gpu", "cpu") and bool(g.estimated["cpu"][1])
    assert graph_from_node_link(copy.deepcopy(NODE_LINK)).n == 4


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d.update(nodes=5), "'nodes' must be an object of per-node lists (bytes, time_gpu_s, ...), not a number"),
        (lambda d: d.pop("nodes"), "lacks 'nodes'"),
        (lambda d: d.pop("edges"), "lacks 'edges'"),
        (lambda d: d.update(edges={"0": 1}), "'edges' must be a list of [u, v] pairs, not an object"),
        (lambda d: d["nodes"].pop("bytes"), "'nodes' lacks the list 'bytes'"),
        (lambda d: d["nodes"].update(bytes=7), "'nodes.bytes' must be a list, not a number"),
        (lambda d: d["nodes"].update(time_gpu_s=[0.1, 0.2]), "'nodes.time_gpu_s' has 2 entries for 3 nodes"),
        (lambda d: d["nodes"].update(time_gpu_s=[0.1, "fast", 0.3]), "node 1 has a non-numeric time_gpu_s 'fast'"),
        (lambda d: d["nodes"].update(time_gpu_s=[0.1, float("inf"), 0.3]), "node 1 has an infinite 'gpu' cost"),
        (lambda d: d["nodes"].update(bytes=[4, 1e30, 4]), "node 1 has 1e+30 bytes"),
        (lambda d: d["nodes"].update(bytes=[5 * 10**18] * 3), "node sizes sum to 1.5e+19 bytes"),
        (lambda d: d["nodes"].update(bytes=[4, "8", 4]), "node 1 has a non-numeric bytes '8'"),
        (lambda d: d.update(edges=[[0, 1, 2]]), "edges must be a list of [u, v] pairs"),
        (lambda d: d.update(edges=[[0, 7]]), "an edge names a node outside 0..2"),
        (lambda d: d.update(outputs="all"), "'outputs' must be a list of node indices"),
        (lambda d: d.update(transfer={"h2d_bytes_per_s": "fast"}), "'transfer.h2d_bytes_per_s' must be a positive number"),
        (lambda d: d.update(transfer=[1]), "'transfer' must be an object"),
    ],
)
def test_malformed_remat_graph_documents_are_named(tmp_path, mutate, needle):
    assert_named(tmp_path, REMAT, mutate, needle)


def assert_named(tmp_path, base, mutate, needle):
    """``base`` changed by ``mutate`` fails to load with one line holding ``needle``."""
    doc = copy.deepcopy(base)
    mutate(doc)
    with pytest.raises(GraphError) as e:
        load_graph(write(doc, tmp_path / "g.json"))
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d.update(links=[1, 2]), "'links' must be a list of objects"),
        (lambda d: d["links"].append({"source": 0, "target": 99}), "names node 99, which is not in 'nodes'"),
        (lambda d: d["links"].append({"source": 0}), "has no 'target'"),
        (lambda d: d["nodes"].append({"id": 1, "cost_cpu": 1.0, "cost_ram": 1}), "node id 1 appears more than once"),
        (lambda d: d["nodes"][2].pop("id"), "node-link node 2 has no 'id'"),
        (lambda d: d["nodes"][2].update(id=[2]), "ids must be strings or integers"),
        (lambda d: d["nodes"][2].update(cost_cpu="slow"), "non-numeric 'cost' cost 'slow'"),
        (lambda d: d["nodes"][2].update(cost_ram=-3), "negative bytes"),
        (lambda d: d["graph"].update(order=5), "'order' must be a list of node ids"),
        (lambda d: d["graph"].update(order=[0, 1, 2]), "does not list every node exactly once"),
        (lambda d: d["links"].append({"source": 3, "target": 0}), "cycle"),
        (lambda d: d.update(directed=False), "undirected"),
    ],
)
def test_malformed_node_link_documents_are_named(tmp_path, mutate, needle):
    assert_named(tmp_path, NODE_LINK, mutate, needle)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated_gzip_is_named(tmp_path, keep):
    raw = gzip.compress(json.dumps(REMAT).encode() * 3)
    path = tmp_path / "g.json.gz"
    path.write_bytes(raw[: int(len(raw) * keep)])
    with pytest.raises(GraphError, match="truncated|cannot read|broken"):
        load_graph(path)


def test_deeply_nested_json_is_named(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"format": "remat-graph/1", "nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(GraphError):
        load_graph(path)


def test_duplicate_edges_in_files_are_merged(tmp_path):
    doc = copy.deepcopy(REMAT)
    doc["edges"] = [[0, 1], [1, 2], [0, 1], [0, 1]]
    g = load_graph(write(doc, tmp_path / "g.json"))
    assert g.m == 2 and isinstance(g, Graph)


# ------------------------------------------------------------------- fuzzing
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


def mutated(data, base):
    doc = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(list(paths(doc))))
        if not where:
            doc = data.draw(JSON)
            continue
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[where[-1]]
        else:
            parent[where[-1]] = data.draw(JSON)
    return doc


def load_or_error(raw: bytes, suffix: str):
    fd, path = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        try:
            return load_graph(path)
        except HybridRematError as e:
            assert str(e) and "\n" not in str(e)
            return e
    finally:
        os.unlink(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["remat", "node-link"]), st.booleans())
def test_fuzzed_documents_load_or_raise_a_library_error(data, which, gz):
    doc = mutated(data, REMAT if which == "remat" else NODE_LINK)
    raw = json.dumps(doc).encode()
    if gz:
        raw = gzip.compress(raw)
    out = load_or_error(raw, ".json.gz" if gz else ".json")
    if isinstance(out, Graph):  # whatever loaded is a consistent graph
        assert out.n >= 1 and len(out.bytes) == out.n and all(len(c) == out.n for c in out.costs.values())


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 400))
def test_fuzzed_bytes_and_truncations_raise_a_library_error(junk, cut):
    load_or_error(junk, ".json")
    raw = gzip.compress(json.dumps(REMAT).encode())
    load_or_error(raw[:cut], ".json.gz")


def test_graph_to_networkx_node_link_round_trip(tmp_path):
    """``networkx.node_link_data(graph.to_networkx())`` loads back as the same
    graph: every cost column under its own kind (``cost_cpu`` was taken for
    Checkmate's one cost, so a GPU+CPU graph came back with its CPU times as
    the only cost), bytes, phases, names, edges and FLOPs; Checkmate's files
    still read as one ``cost`` column."""
    import networkx as nx
    import numpy as np

    from hybrid_remat.families import FAMILIES

    g = FAMILIES["decoder_checkmate"](300, 0)
    assert g.cost_kinds == ("gpu", "cpu") and g.flops is not None
    path = write(nx.node_link_data(g.to_networkx(), edges="links"), str(tmp_path / "g.json"))
    h = load_graph(path)
    assert h.cost_kinds == g.cost_kinds and h.n == g.n
    for k in g.cost_kinds:
        assert np.array_equal(h.cost(k), g.cost(k))
    assert np.array_equal(h.bytes, g.bytes) and np.array_equal(h.phase, g.phase)
    assert list(h.names) == list(g.names) and np.allclose(h.flops, g.flops)
    assert sorted(map(tuple, h.edges().tolist())) == sorted(map(tuple, g.edges().tolist()))
    assert graph_from_node_link(copy.deepcopy(NODE_LINK)).cost_kinds == ("cost",)
