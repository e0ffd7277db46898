"""Plots: built headless (no pyplot, no display), the figures say what the
simulator says, long plans are bucketed, the CLI writes PNG/SVG/PDF and
never overwrites."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import hybrid_remat as hr  # noqa: E402
from hybrid_remat.cli import main  # noqa: E402
from hybrid_remat.errors import HybridRematError, PlanError  # noqa: E402
from hybrid_remat.generators import chain  # noqa: E402
from hybrid_remat.plan import OP_COMPUTE, OP_COPY, Plan, keep_all_plan, plan_from_order, write_plan  # noqa: E402
from hybrid_remat.plot import pareto, step_times, timeline  # noqa: E402
from hybrid_remat.problem import Device, Problem, default_links  # noqa: E402


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [fig._suptitle.get_text()]


def _recompute_problem():
    g = chain(8, bytes=10, cost=1.0)
    p = Problem.single(g, 30)
    # recompute 0..2 before computing node 4: two recomputations
    plan = plan_from_order(g, [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7], "cost")
    return g, p, plan


def test_timeline_marks_budget_peak_and_recomputations():
    g, p, plan = _recompute_problem()
    sim = hr.simulate(p, plan)
    assert sim.valid and sim.n_recompute == 4
    fig = timeline(p, plan)
    ax = fig.axes[0]
    labels = [h.get_label() for h in ax.get_legend().legend_handles]
    assert "budget 30 B" in labels and "recomputation (4)" in labels
    peak = sim.peak_bytes["cost"]
    assert any(f"peak {peak} B" in t for t in _texts(fig))
    assert any(f"TDI {sim.tdi_pct:.2f}%" in t and "valid" in t for t in _texts(fig))
    curve = ax.lines[0]  # memory after each step, exactly (short plan: no bucketing)
    assert np.array_equal(curve.get_ydata(), sim.timeline[:, 0])


def test_timeline_of_an_over_budget_plan_says_so():
    g = chain(6, bytes=10)
    p = Problem.single(g, 20)
    hoarding = Plan.from_steps([("compute", v, "cost") for v in range(6)])  # never frees: 60 B
    fig = timeline(p, hoarding)
    assert any("NOT VALID" in t and "over its budget of 20 bytes" in t for t in _texts(fig))
    assert any("peak 60 B (300.0% of budget)" in t for t in _texts(fig))
    with pytest.raises(PlanError, match="cannot be executed"):
        timeline(p, Plan.from_steps([("compute", 1, "cost")]))


def test_long_plans_are_bucketed_but_keep_the_peak():
    g = chain(30000, bytes=np.arange(30000) % 97 + 1)
    p = Problem.single(g, "100%")
    plan = keep_all_plan(g, "cost")
    sim = hr.simulate(p, plan)
    fig = timeline(p, plan, max_points=500)
    curve = fig.axes[0].lines[0]
    assert len(curve.get_ydata()) <= 501
    assert curve.get_ydata().max() == sim.peak_bytes["cost"] / fig_scale(fig)


def fig_scale(fig):
    unit = fig.axes[0].get_ylabel().split("(")[1].rstrip(")")
    return {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]


def _two_device_problem():
    g = hr.load_graph(os.path.join(os.path.dirname(__file__), "..", "datasets", "resnet18_b64.json.gz"))
    devs = [Device("gpu", "gpu", int(0.5 * hr.keep_all_peak(g))), Device("cpu", "cpu", 64 * 2**30)]
    return Problem(g, devs, default_links(g, ["gpu", "cpu"]), objective="makespan")


def _offload_plan(p):
    """GPU computes everything; node 0 goes to the CPU and back (two copies)."""
    g = p.graph
    steps = []
    for v in range(g.n):
        steps.append(("compute", v, "gpu"))
        if v == 0:
            steps.append(("copy", 0, "gpu", "cpu"))
    return Plan.from_steps(steps + [("copy", 5, "gpu", "cpu")], ["gpu", "cpu"])


def test_gantt_for_makespan_plans_agrees_with_the_simulator():
    p = _two_device_problem()
    plan = _offload_plan(p)
    sim = hr.simulate(p, plan, check_budget=False)
    start, end = step_times(p, plan)
    assert np.nanmax(end) == pytest.approx(sim.makespan, rel=1e-12)
    comp = plan.op == OP_COMPUTE
    cost = p.cost_matrix[0, plan.node[comp]]
    assert np.allclose(end[comp] - start[comp], cost)
    assert np.all(np.diff(start[comp]) >= 0)  # one stream per device, plan order
    copies = np.flatnonzero(plan.op == OP_COPY)
    for k in copies:  # a copy starts when its value is ready on the source device
        assert start[k] >= end[np.flatnonzero(comp & (plan.node == plan.node[k]))[0]] - 1e-15
    fig = timeline(p, plan)
    gantt = fig.axes[0]
    assert [t.get_text() for t in gantt.get_yticklabels()] == ["gpu compute", "cpu compute", "copy gpu\u2192cpu"]
    assert gantt.get_xlabel().startswith("time (")
    assert len(fig.axes) == 3  # Gantt + gpu + cpu memory
    assert "copy out (2)" in [h.get_label() for h in fig.axes[1].get_legend().legend_handles]
    serial = timeline(p.with_objective("serial"), plan)
    assert len(serial.axes) == 2  # memory panels only unless asked
    assert len(timeline(p.with_objective("serial"), plan, kind="gantt").axes) == 3


def test_plotting_runs_headless_without_pyplot(tmp_path):
    """A fresh interpreter with no display draws and saves; pyplot is never imported."""
    code = (
        "import sys, hybrid_remat as hr\n"
        "g = hr.generators.chain(50, bytes=3)\n"
        "p = hr.Problem.single(g, '100%')\n"
        f"hr.plot.timeline(p, hr.keep_all_plan(g, 'cost'), path={str(tmp_path / 'a.svg')!r})\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    root = os.path.dirname(os.path.dirname(os.path.abspath(hr.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert (tmp_path / "a.svg").read_text().lstrip().startswith("<?xml")


def test_pareto_one_panel_per_graph_with_bound_band():
    rows = [
        {"graph": "a", "n": 10, "budget": "90%", "budget_pct": 90.0, "solver": "portfolio", "status": "optimal",
         "tdi_pct": 1.0, "lower_bound_tdi_pct": 1.0},
        {"graph": "a", "n": 10, "budget": "50%", "budget_pct": 50.0, "solver": "portfolio", "status": "feasible",
         "tdi_pct": 5.0, "lower_bound_tdi_pct": 3.0},
        {"graph": "a", "n": 10, "budget": "20%", "budget_pct": 20.0, "solver": "portfolio", "status": "below_min",
         "tdi_pct": float("nan"), "lower_bound_tdi_pct": float("nan")},
        {"graph": "b", "n": 7, "budget": "90%", "budget_pct": 90.0, "solver": "portfolio", "status": "feasible",
         "tdi_pct": 2.0, "lower_bound_tdi_pct": float("nan")},
    ]
    fig = pareto(rows)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["a (10 nodes)", "b (7 nodes)"]
    band = visible[0].collections[0]  # fill between the bound and the plan
    verts = band.get_paths()[0].vertices
    assert verts[:, 1].min() == 1.0 and verts[:, 1].max() == 5.0
    assert visible[0].xaxis_inverted()
    with pytest.raises(HybridRematError, match="no rows"):
        pareto([])


def _write(tmp_path, p, plan, name="plan.json"):
    path = tmp_path / name
    write_plan(path, plan, p, {"objective": p.objective.name})
    return path


@pytest.mark.parametrize("ext, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_cli_plot_writes_by_extension(tmp_path, capsys, datasets_dir, ext, magic):
    p = _two_device_problem()
    plan_path = _write(tmp_path, p, _offload_plan(p))
    out = tmp_path / f"t{ext}"
    rc = main(["plot", str(datasets_dir / "resnet18_b64.json.gz"), str(plan_path), "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert out.read_bytes().lstrip()[: len(magic)] == magic
    assert main(["plot", str(datasets_dir / "resnet18_b64.json.gz"), str(plan_path), "-o", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err


def test_cli_plot_errors_are_one_line(tmp_path, capsys, datasets_dir):
    graph = str(datasets_dir / "resnet18_b64.json.gz")
    g, p, plan = _recompute_problem()
    plan_path = _write(tmp_path, p, plan)
    for argv, needle in [
        (["plot", graph, str(plan_path), "-o", str(tmp_path / "x.png")], "which graph 'resnet18_b64' lacks"),
        (["plot", graph, str(plan_path), "-o", str(tmp_path / "x.bmp")], "use one of .png, .svg, .pdf"),
        (["plot", graph, graph, "-o", str(tmp_path / "x.png")], "the order is: GRAPH PLAN"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err
    assert json.loads(plan_path.read_text())["devices"][0]["memory_bytes"] == 30
