"""The roofline plugin: found through its entry point only, conforms to the
cost-model contract, computes the roofline, and feeds planning."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest
from hybrid_remat_roofline import DEVICES, PAIRS, RooflineModel, apply_pair, bytes_moved

from hybrid_remat import Problem, plugins, simulate
from hybrid_remat.cost_models import apply_cost_model
from hybrid_remat.errors import GraphError
from hybrid_remat.graph import Graph
from hybrid_remat.plan import keep_all_plan
from hybrid_remat.testing import check_cost_model, standard_graphs


@pytest.fixture(autouse=True)
def autoload(monkeypatch):
    monkeypatch.delenv(plugins.DISABLE_ENV, raising=False)
    monkeypatch.delenv(plugins.BLOCK_ENV, raising=False)
    plugins.reset()
    yield
    plugins.reset()


def test_installed_and_discovered_through_its_entry_point():
    dist = importlib.metadata.distribution("hybrid-remat-roofline")  # fails when not pip-installed
    eps = [ep for ep in dist.entry_points if ep.group == "hybrid_remat"]
    assert [(ep.name, ep.value) for ep in eps] == [("roofline", "hybrid_remat_roofline.plugin")]
    (reg,) = [r for r in plugins.registered() if r.name == "roofline"]
    assert reg.kind == "cost_models"
    assert reg.source == "entrypoint:hybrid-remat-roofline"
    assert reg.plugin == "roofline" and reg.identity == "roofline:roofline@0.1.0"
    # nothing else registers it: no built-in module mentions it
    assert all(not r.plugin.startswith("hybrid_remat.") for r in plugins.registered() if r.name == "roofline")


def test_absent_when_autoload_is_off(monkeypatch):
    monkeypatch.setenv(plugins.DISABLE_ENV, "1")
    plugins.reset()
    assert "roofline" not in plugins.cost_models()


def test_blocked_by_name(monkeypatch):
    monkeypatch.setenv(plugins.BLOCK_ENV, "roofline")
    plugins.reset()
    assert "roofline" not in plugins.cost_models()


def test_registered_object_passes_the_conformance_battery():
    report = check_cost_model(plugins.cost_models()["roofline"])
    assert ("profiled7", "h200") in report["checked"]


def test_device_tables():
    assert {"h200", "a100", "ryzen9_7950x", "xeon16"} <= set(RooflineModel().devices())
    assert DEVICES["h200"].bandwidth == 4.8e12 and DEVICES["a100"].bandwidth == 2.039e12
    assert DEVICES["xeon16"].source == "fitted"
    with pytest.raises(GraphError, match="no device 'tpu'"):
        RooflineModel().estimate(standard_graphs()[0], "tpu")


def test_hardware_where_the_cpu_matters():
    # device tables from public spec figures (units x FLOP/clock x clock; memory bus x data rate)
    assert DEVICES["rtx3060"].matmul_flops == pytest.approx(3584 * 2 * 1.78e9, rel=0.01)
    assert DEVICES["rtx3060"].bandwidth == pytest.approx(192 / 8 * 15e9)
    assert DEVICES["iris_xe"].vector_flops == pytest.approx(96 * 16 * 1.35e9, rel=0.01)
    assert DEVICES["uhd630"].vector_flops == pytest.approx(24 * 16 * 1.2e9, rel=0.01)
    assert DEVICES["i9_9900k"].bandwidth == DEVICES["uhd630"].bandwidth == 41.6e9  # shared DRAM
    assert DEVICES["i7_1185g7"].bandwidth == DEVICES["iris_xe"].bandwidth
    for name in ("rtx3060", "iris_xe", "i7_1185g7", "uhd630", "i9_9900k"):
        assert DEVICES[name].source.startswith("spec")
    # the GPU is not far faster than the CPU: within 5x on a conv net, unlike the H200 (45x measured)
    g = standard_graphs()[0]
    for pair in ("rtx3060_7950x", "irisxe_1185g7", "uhd630_9900k"):
        pg, links = apply_pair(g, pair)
        ratio = pg.cost("cpu").sum() / pg.cost("gpu").sum()
        assert 0.2 < ratio < 5.0, (pair, ratio)
        assert pg.estimated["gpu"].all() and pg.estimated["cpu"].all()
        assert {(ln.src, ln.dst) for ln in links} == {("gpu", "cpu"), ("cpu", "gpu")}
        assert links[0].bandwidth == PAIRS[pair].bandwidth
    assert PAIRS["irisxe_1185g7"].link == "shared" and PAIRS["rtx3060_7950x"].link == "pcie"
    measured, links = apply_pair(g, "h200_xeon")
    assert measured is g and len(links) == 2
    with pytest.raises(GraphError, match="no hardware pair 'tpu'"):
        apply_pair(g, "tpu")


def test_roofline_formula_compute_and_memory_bound():
    # 0 -> 2, 1 -> 2; node 2 a big matmul (compute bound), node 1 an elementwise op on 1 GB (memory bound)
    g = Graph.from_arrays([1000, 10**9, 2000], [(0, 2), (1, 2)], {"gpu": [1.0, 1.0, 1.0]},
                          flops=[None, 1e9, 1e15], meta={"op": ["aten.ones.default", "aten.relu.default", "aten.mm.default"]})
    assert np.array_equal(bytes_moved(g), [1000.0, 1e9, 1000 + 1e9 + 2000])
    s = DEVICES["a100"]
    t = RooflineModel().estimate(g, "a100")
    assert t[0] == pytest.approx(1000 / s.bandwidth + s.overhead)  # unknown FLOPs: bandwidth only
    assert t[1] == pytest.approx(max(1e9 / s.vector_flops, 1e9 / s.bandwidth) + s.overhead)
    assert t[1] == pytest.approx(1e9 / s.bandwidth + s.overhead)
    assert t[2] == pytest.approx(1e15 / s.matmul_flops + s.overhead)
    conv = Graph.from_arrays([1], [], {"gpu": [1.0]}, flops=[1e15], meta={"op": ["aten.convolution.default"]})
    assert RooflineModel().estimate(conv, "h200")[0] == pytest.approx(1e15 / 494.5e12 + 20e-6)


def test_estimate_drives_a_problem_and_the_simulator():
    g = standard_graphs()[0]
    g2 = apply_cost_model(g, plugins.cost_models()["roofline"], "a100")
    assert g2.estimated["a100"].all()
    p = Problem.single(g2, "100%", kind="a100")
    r = simulate(p, keep_all_plan(g2, p.primary.name))
    assert r.valid and r.total_time == pytest.approx(float(RooflineModel().estimate(g, "a100").sum()))


def test_anytime_solve_plans_on_roofline_times():
    anytime = pytest.importorskip("hybrid_remat.anytime")
    import os
    import tempfile

    from hybrid_remat.loaders import load_graph
    from hybrid_remat.testing import write_remat_graph

    g = standard_graphs()[0]
    with tempfile.TemporaryDirectory() as tmp:  # through a file, as the CLI would read it
        path = os.path.join(tmp, "g.json")
        write_remat_graph(g, path)
        g = load_graph(path)
    est = apply_cost_model(g, plugins.cost_models()["roofline"], "h200")
    p = Problem.single(est, "100%", kind="h200")
    res = anytime.anytime_solve(p, 5.0)
    assert res.plan is not None
    r = simulate(p, res.plan)
    assert r.valid and r.total_time == pytest.approx(float(RooflineModel().estimate(g, "h200").sum()))
