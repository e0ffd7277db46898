"""CONTRIBUTING.md cannot drift from the code: its worked examples are
verbatim copies of the built-ins, and the components it teaches you to write
(extracted from the file, not retyped here) register as it says and pass
the conformance battery."""

from __future__ import annotations

import pathlib
import re

import pytest

from hybrid_remat import plugins, testing
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.simulate import simulate

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "CONTRIBUTING.md").read_text()


def blocks(kind: str) -> list[tuple[str, str]]:
    """``(label, code)`` of the fenced Python blocks right after ``<!-- kind: label -->``."""
    return re.findall(rf"<!-- {kind}: (\S+) -->\n```python\n(.*?)```", GUIDE, flags=re.S)


def test_the_guide_has_its_examples():
    assert [label for label, _ in blocks("example")] == ["heuristic", "bound", "formulation", "cost_model"]
    assert len(blocks("quote")) == 5
    for heading in ("## Where things live", "## The contract", "## Adding a heuristic", "## Adding a bound",
                    "## Adding an improver", "## Adding a formulation", "## Adding a cost model", "## Registering",
                    "## Running the battery"):
        assert heading in GUIDE


@pytest.mark.parametrize("path, code", blocks("quote"), ids=[p for p, _ in blocks("quote")])
def test_quoted_builtins_are_verbatim(path, code):
    assert code in (ROOT / path).read_text(), f"CONTRIBUTING.md quotes {path}, which changed: update the guide"


def _register(tmp_path, label: str) -> str:
    """Save the guide's example as a file and register it the way the guide says (``register_path``)."""
    (code,) = [c for lab, c in blocks("example") if lab == label]
    path = tmp_path / f"contrib_{label}.py"
    path.write_text(code)
    return plugins.register_path(path)


@pytest.fixture
def fresh_registry():
    plugins.reset()
    yield
    plugins.reset()


def test_a_heuristic_written_from_the_guide_registers_and_passes_the_battery(tmp_path, fresh_registry):
    (code,) = [c for lab, c in blocks("example") if lab == "heuristic"]
    assert len(code.strip().splitlines()) <= 40  # "a 30-line heuristic" (imports and registration included)
    _register(tmp_path, "heuristic")
    h = plugins.heuristics()["recompute_cheap"]
    assert [r.source for r in plugins.registered() if r.name == "recompute_cheap"][0].startswith("path:")
    report = testing.check_heuristic(h)
    assert set(report["checks"].values()) == {"passed"} and len(report["checks"]) == 6  # the time promise too
    assert report["found"]["blocks13@tight"] is not None  # it recomputes: a plan where keep-all does not fit
    for _, check, skip in testing.checks_for(h):             # and one named check at a time
        assert skip is None
        check(h)
    inst = {i.name: i for i in testing.standard_instances()}["blocks13@tight"]   # keep-all does not fit
    r = anytime_solve(inst.problem, 5, heuristics=["recompute_cheap"], bounds=[], improvers=[], formulations=[],
                      workers=1, node_limit=100, work_limit=10**7)
    assert r.plan is not None and simulate(inst.problem, r.plan).valid      # the portfolio ran it
    assert r.objective == report["found"]["blocks13@tight"] and [x.source for x in r.report if x.source != "structure"] == ["recompute_cheap"]


def test_the_guide_bound_and_formulation_pass_the_battery(tmp_path, fresh_registry):
    _register(tmp_path, "bound")
    _register(tmp_path, "formulation")
    report = testing.check_bound(plugins.bounds()["cheapest_costs"])
    assert set(report["checks"].values()) == {"passed"}
    report = testing.check_formulation(plugins.formulations()["one_cut_knapsack"])
    assert set(report["checks"].values()) == {"passed"}
    assert report["status"]["chain6@100%"] == "optimal"


def test_the_guide_heuristic_named_alone_earns_the_first_turn_on_a_cold_run(tmp_path, fresh_registry):
    """Not in the calibration table, it gets a short first slot before the calibrated bounds and the block
    solver (which used the whole 10 s before it on resnet50 at 60 %), and gives the first plan."""
    import threading

    from hybrid_remat.loaders import load_graph
    from hybrid_remat.problem import Problem

    _register(tmp_path, "heuristic")
    p = Problem.single(load_graph(ROOT / "datasets" / "resnet50_b32.json.gz"), "60%")
    stop = threading.Event()

    def stop_at_its_plan(imp):  # its plan is what this test is about: the rest of the 10 s is not needed
        if imp.plan is not None and imp.source == "recompute_cheap":
            stop.set()

    r = anytime_solve(p, 10, heuristics=["recompute_cheap"], workers=1, stop=stop, on_improve=stop_at_its_plan)
    assert r.plan is not None and simulate(p, r.plan).valid and r.solver == "recompute_cheap"
    ran = [x for x in r.report if x.status != "skipped" and x.source != "structure"]  # structure: the detection row
    assert ran[0].source == "recompute_cheap" and ran[0].status == "valid"


def test_the_guide_cost_model_passes_the_battery_and_reaches_anytime_solve(tmp_path, fresh_registry):
    from hybrid_remat.cost_models import apply_cost_model
    from hybrid_remat.generators import random_layered
    from hybrid_remat.problem import Problem

    _register(tmp_path, "cost_model")
    model = plugins.cost_models()["relative_speed"]
    assert set(testing.check_cost_model(model)["checks"].values()) == {"passed"}
    g0 = random_layered(30, seed=2)
    g = apply_cost_model(g0, model, "h200")
    p = Problem.single(g, "100%")                       # no kind=: the model's column is the default
    assert p.primary.kind == "h200"
    r = anytime_solve(p, 10, heuristics=["keep_all"], bounds=[], improvers=[], formulations=[], workers=1,
                      work_limit=10**6)
    assert r.status == "optimal" and r.objective == pytest.approx(g0.cost().sum() / 2.0)  # at the h200 speed


def _plain_blocks() -> list[str]:
    """The guide's Python blocks that are neither a quote nor an example (the code that uses them)."""
    return [m.group(2) for m in re.finditer(r"(<!-- [^>]*-->\n)?```python\n(.*?)```", GUIDE, flags=re.S)
            if m.group(1) is None]


def test_the_guide_has_two_plain_blocks():
    codes = _plain_blocks()
    assert len(codes) == 2 and "anytime_solve" in codes[0] and "parametrize_with_checks" in codes[1]


def test_the_guide_cost_model_usage_runs_as_written(tmp_path, fresh_registry, monkeypatch):
    """The block after the cost-model example, run as printed (from the repository root), with the
    solve cut to 2 s on one worker: a plan the simulator accepts, planned with the h200 estimate."""
    import hybrid_remat

    _register(tmp_path, "cost_model")
    real = hybrid_remat.anytime_solve
    monkeypatch.setattr(hybrid_remat, "anytime_solve", lambda p, t, **kw: real(p, min(t, 2), workers=1, **kw))
    monkeypatch.chdir(ROOT)
    env: dict = {}
    exec(compile(_plain_blocks()[0], "CONTRIBUTING.md", "exec"), env)
    from hybrid_remat.problem import Problem

    result, g = env["result"], env["g"]
    p = Problem.single(g, "60%")
    assert result.plan is not None and p.primary.kind == "h200" and simulate(p, result.plan).valid


def test_the_guide_battery_usage_runs_as_written(tmp_path, fresh_registry, monkeypatch):
    """``parametrize_with_checks`` as the guide shows it, on the guide's heuristic saved as
    ``recompute_cheap.py``: every check it generates passes."""
    (code,) = [c for lab, c in blocks("example") if lab == "heuristic"]
    (tmp_path / "recompute_cheap.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    env: dict = {}
    exec(compile(_plain_blocks()[1], "CONTRIBUTING.md", "exec"), env)
    (mark,) = [m for m in env["test_battery"].pytestmark if m.name == "parametrize"]
    cases = list(mark.args[1])
    assert len(cases) == 6 and not any(c.marks for c in cases)   # the heuristic's six checks, none skipped
    for case in cases:
        env["test_battery"](*case.values)
