"""Every command keeps the promises of ``solve`` (issue 23): arguments are
checked by one layer before any work, bad input is one line and exit 2,
``--help`` describes every command and shows its defaults."""

import json

import pytest

from hybrid_remat.cli import build_parser, main

GRAPH = {"format": "remat-graph/1", "name": "g5",
         "nodes": {"bytes": [10, 1, 10, 1, 1], "time_gpu_s": [1e-3] * 5},
         "edges": [[0, 1], [2, 3], [1, 4], [3, 4]]}


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    return path


@pytest.fixture
def plan(tmp_path, graph, capsys):
    out = tmp_path / "plan.json"
    rc, _, err = run(capsys, "solve", graph, "--budget", "100%", "--time-limit", "2", "--workers", "1",
                     "--heuristic", "keep_all", "--out", out, "--quiet")
    assert rc == 0, err
    return out


def _one_line(rc, err, needle):
    assert rc == 2 and err.count("\n") == 1 and needle in err, err


def test_plot_refuses_a_plan_whose_device_is_1e30_bytes_in_one_line(tmp_path, graph, plan, capsys):
    doc = json.loads(plan.read_text())
    doc["devices"][0]["memory_bytes"] = 1e30
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for cmd in (["plot", graph, bad, "-o", tmp_path / "f.png"], ["simulate", graph, bad]):
        rc, _, err = run(capsys, *cmd)
        _one_line(rc, err, "memory_bytes from 1 B to 4 EiB")


@pytest.mark.parametrize("cmd", ["solve", "sweep", "plot"])
def test_an_out_path_through_a_missing_folder_is_refused_up_front(tmp_path, graph, plan, capsys, cmd):
    """``d/missing/../p.json`` normalises to ``d/p.json`` but cannot be opened: refused before any work."""
    target = str(tmp_path / "missing" / ".." / ("p.png" if cmd == "plot" else "p.json"))
    argv = {"solve": ["solve", graph, "--budget", "100%", "--out", target],
            "sweep": ["sweep", graph, "--budgets", "100%", "--out", target],
            "plot": ["plot", graph, plan, "-o", target]}[cmd]
    rc, out, err = run(capsys, *argv)
    _one_line(rc, err, "does not exist")
    assert out == ""  # nothing ran


@pytest.mark.parametrize("extra, needle", [
    (["--budgets", "90%,lots"], "'lots' cannot be read"),
    (["--budgets", "1.5"], "ambiguous"),
    (["--time-limit", "inf"], "finite"),
    (["--time-limit", "1e12"], "7 days"),
    (["--device", "cpu"], "give its size"),
    (["--device", "tpu=1GiB"], "device 'tpu'"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--plot", "x.txt"], "figure format"),
    (["--solver", "frobnicate"], "unknown solver"),
])
def test_sweep_checks_everything_before_the_first_solve(tmp_path, graph, capsys, extra, needle):
    out = tmp_path / "s.csv"
    rc, stdout, err = run(capsys, "sweep", graph, "--out", out, "--quiet", *extra)
    _one_line(rc, err, needle)
    assert not out.exists() and stdout == ""


def test_sweep_refuses_a_missing_graph_up_front(tmp_path, graph, capsys):
    out = tmp_path / "s.csv"
    rc, _, err = run(capsys, "sweep", graph, tmp_path / "nosuch.json", "--out", out, "--quiet")
    _one_line(rc, err, "nosuch.json: no such file")
    assert not out.exists()


def test_sweep_refuses_an_unreadable_graph_before_solving_the_others(tmp_path, graph, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    out = tmp_path / "s.csv"
    rc, _, err = run(capsys, "sweep", graph, broken, "--out", out, "--quiet", "--budgets", "100%")
    _one_line(rc, err, "broken.json")
    assert not out.exists()


def test_plot_takes_graph_then_plan_like_simulate_and_still_reads_the_old_order(tmp_path, graph, plan, capsys):
    pytest.importorskip("matplotlib")
    rc, out, err = run(capsys, "plot", graph, plan, "-o", tmp_path / "a.svg")
    assert rc == 0 and "figure written" in out and err == "", err
    rc, out, err = run(capsys, "plot", plan, graph, "-o", tmp_path / "b.svg")  # old order: the files tell
    assert rc == 0 and "figure written" in out and "GRAPH PLAN" in err
    rc, _, err = run(capsys, "plot", graph, graph, "-o", tmp_path / "c.svg")  # no plan at all
    _one_line(rc, err, "is not a remat-plan/1 plan; the order is: GRAPH PLAN")


def test_every_command_has_a_description_and_shows_its_defaults():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        if name == "torch-plan":
            continue
        assert p.description, f"{name} has no description"
        text = p.format_help()
        for action in p._actions:
            if action.default not in (None, False, "==SUPPRESS==") and action.option_strings and action.help:
                assert "default" in action.help, f"{name} {action.option_strings[0]} hides its default"
        if any(a.dest == "budget" for a in p._actions):
            assert "EiB" in text and "(0, 1]" in text, f"{name} --help does not give the budget grammar"
    assert [a.dest for a in sub.choices["plot"]._get_positional_actions()] == \
        [a.dest for a in sub.choices["simulate"]._get_positional_actions()] == ["graph", "plan"]


def test_a_formulation_named_by_the_user_is_not_skipped_by_its_prediction():
    """``--formulation checkmate`` on 100 and 1000 nodes: the scheduler neither skips it ("predicted inf s")
    nor starts it as a constructor with a construct share; it runs in the long phase, alone (the improvers
    ran in the polish phase before it)."""
    from hybrid_remat.exact.checkmate import CheckmateFormulation
    from hybrid_remat.generators import random_layered
    from hybrid_remat.portfolio.scheduler import Scheduler
    from hybrid_remat.problem import Problem

    for n in (100, 1000):
        g = random_layered(n, seed=1)
        p = Problem.single(g, "60%")
        form = CheckmateFormulation()
        plain = Scheduler(p, formulations=[form])
        named = Scheduler(p, formulations=[form], named={"checkmate"})
        task = next(t for t in named.long if t.name == "checkmate")
        assert Scheduler.too_slow(task, 1.0) is None and not any(t.name == "checkmate" for t in named.construct)
        assert [t.name for t in named.long] == ["checkmate"]  # the time the polish left is its own
        before = next(t for t in plain.long + plain.construct if t.name == "checkmate")
        if n == 1000:  # the prediction that skipped it
            assert Scheduler.too_slow(before, 60.0) is not None


def test_a_solve_without_a_plan_says_why_it_stopped_early(tmp_path, capsys):
    import networkx as nx

    from hybrid_remat.generators import training_graph
    from hybrid_remat.testing import write_remat_graph

    graph = tmp_path / "mlp.json"
    write_remat_graph(training_graph(nx.path_graph(8, create_using=nx.DiGraph), name="mlp8"), graph)
    rc, out, err = run(capsys, "solve", graph, "--budget", "60%", "--heuristic", "keep_all", "--formulation",
                     "decomposed", "--time-limit", "600", "--workers", "1", "--quiet")
    assert rc == 1 and "within the" not in out, out + err
    assert "every component ended after" in out and "of the 600 s limit" in out
