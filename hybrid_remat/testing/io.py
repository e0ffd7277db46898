"""The named checks of cost models and loaders (re-exported by
:mod:`hybrid_remat.testing`), and the graph writers they use
(``remat-graph/1``, node-link JSON) that tests and benchmarks use too.

Examples
--------
>>> [g.name for g in standard_graphs()]
['profiled7', 'chain6', 'random_dag_n10_s3']
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import generators
from ..cost_models import apply_cost_model
from ..errors import HybridRematError
from ..graph import Graph
from ..plan import keep_all_plan
from ..problem import Problem
from ..simulate import simulate
from ._base import Runs, SkipCheck, who

__all__ = ["standard_graphs", "check_cost_model_estimates", "check_cost_model_unknown_device",
           "check_loader_round_trips", "check_loader_refuses_broken_files", "write_remat_graph", "write_node_link"]


def standard_graphs() -> list[Graph]:
    """Graphs for cost models and loaders: a small profiled-style graph
    (``gpu``/``cpu`` costs, FLOPs, op names, phases, required outputs) and
    the chain and random DAG of :func:`standard_instances` (one ``cost``
    kind, no FLOPs)."""
    ops = ["aten.convolution.default", "aten.relu.default", "aten.addmm.default", "aten.sum.default",
           "aten.mm.default", "aten.threshold_backward.default", "aten.convolution_backward.default"]
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (1, 5), (4, 5), (5, 6), (0, 6)]
    prof = Graph.from_arrays(
        [4096, 4096, 1024, 4, 1024, 4096, 8192], edges,
        {"gpu": [2e-5, 1e-5, 1.5e-5, 8e-6, 1.2e-5, 1e-5, 4e-5], "cpu": [4e-4, 5e-5, 2e-4, 1e-5, 1.5e-4, 6e-5, 9e-4]},
        name="profiled7", names=[f"{i}:{o}" for i, o in enumerate(ops)],
        phase=["forward"] * 4 + ["backward"] * 3,
        flops=[2.4e8, 1.0e3, 2.1e6, 256.0, 2.1e6, 1.0e3, 4.8e8], required=[6],
        meta={"op": ops, "format": "remat-graph/1"},
    )
    return [prof, generators.chain(6, bytes=[3, 1, 4, 1, 5, 9], cost=[2.0, 7.0, 1.0, 8.0, 2.0, 8.0], name="chain6"),
            generators.random_dag(10, p=0.3, seed=3)]


# ----------------------------------------------------------------- cost models
def check_cost_model_estimates(model, *, graphs: Iterable[Graph] | None = None) -> dict:
    """For every device it lists and every standard graph, ``estimate``
    returns a finite non-negative float array of length ``n`` (or raises a
    ``HybridRematError``: at least one pair must work), twice the same, and
    the estimate works as a cost kind (a problem on it simulates).

    Returns
    -------
    dict
        ``{"checked": [(graph, device)], "refused": [(graph, device, message)]}``.
    """
    devices = list(model.devices())
    assert devices and all(isinstance(d, str) for d in devices), f"{who(model)}: devices() must list device names"
    graphs = list(graphs) if graphs is not None else standard_graphs()
    checked, refused = [], []
    for g in graphs:
        for dev in devices:
            try:
                est = model.estimate(g, dev)
            except HybridRematError as e:
                refused.append((g.name, dev, str(e)))
                continue
            except Exception as e:
                raise AssertionError(f"{who(model)} raised {type(e).__name__} (not a HybridRematError) "
                                     f"estimating {g.name} on {dev!r}: {e}") from e
            arr = np.asarray(est)
            assert arr.shape == (g.n,), f"{who(model)}: estimate({g.name}, {dev!r}) has shape {arr.shape}, not ({g.n},)"
            assert np.issubdtype(arr.dtype, np.floating), f"{who(model)}: estimate must be floats, got {arr.dtype}"
            assert np.isfinite(arr).all(), f"{who(model)}: estimate({g.name}, {dev!r}) has non-finite entries"
            assert (arr >= 0).all(), f"{who(model)}: estimate({g.name}, {dev!r}) has negative entries"
            again = np.asarray(model.estimate(g, dev))
            assert np.array_equal(arr, again), f"{who(model)}: estimate({g.name}, {dev!r}) is not deterministic"
            g2 = apply_cost_model(g, model, dev, kind="estimated")
            p = Problem.single(g2, "100%", kind="estimated")
            r = simulate(p, keep_all_plan(g2, p.primary.name))
            assert r.valid and np.isclose(r.total_time, float(arr.sum()), rtol=1e-9, atol=0), (
                f"{who(model)}: the estimate does not work as a cost kind on {g.name}")
            checked.append((g.name, dev))
    assert checked, f"{who(model)} estimated none of the standard graphs on any of its devices: {refused}"
    return {"checked": checked, "refused": refused}


def check_cost_model_unknown_device(model, *, graphs: Iterable[Graph] | None = None) -> None:
    """An unknown device name raises a ``HybridRematError``."""
    graph = (list(graphs) if graphs is not None else standard_graphs())[0]
    try:
        model.estimate(graph, "no-such-device-xyz")
    except HybridRematError:
        pass
    except Exception as e:
        raise AssertionError(f"{who(model)}: an unknown device raised {type(e).__name__}, "
                             "not a HybridRematError") from e
    else:
        raise AssertionError(f"{who(model)}: an unknown device name was accepted silently")


# --------------------------------------------------------------------- loaders
def write_remat_graph(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``graph`` as ``remat-graph/1`` JSON (gzip when ``path`` ends
    in ``.gz``).  Cost kinds ``gpu``/``cpu`` become ``time_gpu_s`` /
    ``time_cpu_s``; a graph with only ``cost`` writes it as ``time_gpu_s``."""
    gpu = graph.costs.get("gpu", graph.costs.get("cost"))
    ops = list(graph.meta.get("op", [str(v) for v in range(graph.n)]))
    doc: dict[str, Any] = {
        "format": "remat-graph/1", "name": graph.name,
        "nodes": {
            "op": ops, "phase": ["backward" if p else "forward" for p in graph.phase.tolist()],
            "bytes": graph.bytes.tolist(),
            "flops": [None if math.isnan(f) else f for f in graph.flops.tolist()],
            "time_gpu_s": np.asarray(gpu).tolist(),
        },
        "edges": graph.edges().tolist(),
        "outputs": np.flatnonzero(graph.required).tolist(),
    }
    if "cpu" in graph.costs:
        doc["nodes"]["time_cpu_s"] = graph.costs["cpu"].tolist()
    raw = json.dumps(doc).encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(raw, mtime=0) if os.fspath(path).endswith(".gz") else raw)


def write_node_link(graph: Graph, path: str | os.PathLike) -> None:
    """Write ``graph`` as Checkmate-style node-link JSON (``cost_cpu`` is
    the first cost kind, ``cost_ram`` the bytes)."""
    c = graph.costs[graph.cost_kinds[0]]
    doc = {
        "directed": True, "multigraph": False, "graph": {"name": graph.name},
        "nodes": [{"id": v, "name": graph.names[v], "backward": bool(graph.phase[v]), "cost_cpu": float(c[v]),
                   "cost_ram": int(graph.bytes[v])} for v in range(graph.n)],
        "links": [{"source": int(u), "target": int(v)} for u, v in graph.edges().tolist()],
    }
    with open(path, "w") as f:
        json.dump(doc, f)


def _same_graph(a: Graph, b: Graph, kinds: dict[str, str]) -> str | None:
    if a.n != b.n:
        return f"{b.n} nodes, expected {a.n}"
    if not np.array_equal(a.edges(), b.edges()):
        return "different edges"
    if not np.array_equal(a.bytes, b.bytes):
        return "different bytes"
    for src, dst in kinds.items():
        if dst not in b.costs:
            return f"no cost kind {dst!r}"
        if not np.allclose(a.costs[src], b.costs[dst], rtol=1e-12, atol=0):
            return f"different {dst!r} costs"
    return None


def check_loader_round_trips(loader, *, samples: Iterable[tuple[str, Graph]] | None = None,
                             runs: Runs | None = None) -> dict:
    """Files of its format read back to the graph they hold.

    ``samples``: ``(path, Graph)`` pairs of the loader's format; default:
    files the battery writes in the built-in formats (``remat-graph/1``,
    gzip and plain, node-link JSON).  A loader with ``save(graph, path)``
    round-trips the standard graphs through it as well.  ``sniff`` never
    raises; ``load`` of a sniffed file returns a
    :class:`~hybrid_remat.graph.Graph` equal in nodes, edges, bytes and
    costs; at least one file is accepted.

    Returns
    -------
    dict
        ``{"loaded": [file names], "declined": [file names]}``.
    """
    def compute():
        loaded, declined = [], []
        with tempfile.TemporaryDirectory(prefix="hr-check-loader-") as tmp:
            for path, g, kinds in _loader_cases(loader, samples, tmp):
                head = _head(path)
                try:
                    ok = loader.sniff(path, head)
                except Exception as e:
                    raise AssertionError(f"{who(loader)}: sniff raised {type(e).__name__} on {path}: {e}") from e
                if not ok:
                    declined.append(path)
                    continue
                try:
                    got = loader.load(path)
                except Exception as e:
                    raise AssertionError(f"{who(loader)} sniffed {os.path.basename(path)} but load raised "
                                         f"{type(e).__name__}: {e}") from e
                assert isinstance(got, Graph), f"{who(loader)}: load returned {type(got).__name__}, not a Graph"
                if kinds is None:
                    kinds = {k: k for k in g.costs if k in got.costs}
                    assert kinds, f"{who(loader)}: {os.path.basename(path)} read back without any of {g.cost_kinds}"
                diff = _same_graph(g, got, kinds)
                assert diff is None, f"{who(loader)}: {os.path.basename(path)} read back with {diff}"
                loaded.append(path)
        assert loaded, f"{who(loader)} accepted none of the sample files; pass samples=[(path, graph), ...]"
        return {"loaded": [os.path.basename(p) for p in loaded], "declined": [os.path.basename(p) for p in declined]}

    return (runs or Runs()).get(("loader", None if samples is None else id(samples)), compute)


def _loader_cases(loader, samples, tmp: str) -> list[tuple[str, Graph, dict | None]]:
    """``(path, graph, {cost kind written: cost kind read})`` of the files to read back."""
    cases: list[tuple[str, Graph, dict | None]] = []
    if samples is not None:
        cases += [(os.fspath(p), g, {k: k for k in g.costs}) for p, g in samples]
    else:
        for g in standard_graphs():
            kinds = {"gpu": "gpu", "cpu": "cpu"} if "gpu" in g.costs else {"cost": "gpu"}
            for ext in (".json", ".json.gz"):
                p = os.path.join(tmp, f"{g.name}.remat{ext}")
                write_remat_graph(g, p)
                cases.append((p, g, kinds))
            p = os.path.join(tmp, f"{g.name}.nodelink.json")
            write_node_link(g, p)
            cases.append((p, g, {g.cost_kinds[0]: "cost"}))
    if callable(getattr(loader, "save", None)):
        for g in standard_graphs():
            p = os.path.join(tmp, f"{g.name}.own")
            loader.save(g, p)
            cases.append((p, g, None))  # compare the cost kinds it writes
    return cases


def check_loader_refuses_broken_files(loader, *, samples: Iterable[tuple[str, Graph]] | None = None,
                                      runs: Runs | None = None) -> None:
    """Broken files (with the extension of a file it reads): ``sniff`` does
    not raise, ``load`` raises a ``HybridRematError``."""
    try:
        loaded = check_loader_round_trips(loader, samples=samples, runs=runs)["loaded"]
    except AssertionError as e:
        raise SkipCheck(f"no file of its format was read back ({e})") from None
    ext = os.path.splitext(loaded[0])[1]
    with tempfile.TemporaryDirectory(prefix="hr-check-loader-") as tmp:
        for i, blob in enumerate((b"\x00\x01garbage\xff", b'{"format": "remat-graph/1", "nodes": {', b"[1, 2, 3]")):
            bad = os.path.join(tmp, f"broken{i}{ext}")
            with open(bad, "wb") as f:
                f.write(blob)
            try:
                loader.sniff(bad, blob[:1024])
            except Exception as e:
                raise AssertionError(f"{who(loader)}: sniff raised {type(e).__name__} on a broken file: {e}") from e
            try:
                loader.load(bad)
            except HybridRematError:
                pass
            except Exception as e:
                raise AssertionError(f"{who(loader)}: loading a broken file raised {type(e).__name__}, "
                                     f"not a HybridRematError: {e}") from e
            else:
                raise AssertionError(f"{who(loader)}: loading a broken file ({blob[:20]!r}) returned a graph")


def _head(path: str, size: int = 1024) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw[:size]
