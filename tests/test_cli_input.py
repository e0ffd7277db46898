"""Issue 12 points 2, 4, 7, 8, 10 and 11 at the command line: arguments
checked before the solve, bad input as one line with exit 2 and nothing
written, --help that names what a user needs, README commands that work."""

import gzip
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from hybrid_remat import plugins
from hybrid_remat.budgets import parse_budget
from hybrid_remat.cli import build_parser, main
from hybrid_remat.loaders import load_graph

ROOT = pathlib.Path(__file__).resolve().parents[1]
ISSUE_GRAPH = {"format": "remat-graph/1", "name": "issue12",
               "nodes": {"bytes": [10, 1, 10, 1, 1], "time_gpu_s": [1e-3] * 5},
               "edges": [[0, 1], [2, 3], [1, 4], [3, 4]]}


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def no_solve(monkeypatch):
    """Fails the test if a solve starts: every check must come before it."""
    import hybrid_remat.anytime as anytime

    def refuse(*a, **k):
        raise AssertionError("the solve started before the arguments were checked")

    monkeypatch.setattr(anytime, "anytime_solve", refuse)


def write_graph(tmp_path, doc, name="g.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# ---------------------------------------------------------------- 12.2 info
def test_info_names_the_bound_and_the_exact_smallest_budget(capsys, tmp_path):
    rc, out, err = run(capsys, "info", write_graph(tmp_path, ISSUE_GRAPH))
    assert rc == 0, err
    assert "budget lower bound   12 B" in out and "(largest node with its inputs: 11 B)" in out
    assert "smallest feasible    12 B" in out and "exact search" in out


# ---------------------------------------------------------- 12.7 pre-checks
@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--time-limit", "1e12"], "more than 604800 s (7 days)"),
        (["--time-limit", "nan"], "finite number of seconds, not nan"),
        (["--time-limit", "inf"], "finite number of seconds, not inf"),
        (["--time-limit", "-3"], "positive number of seconds"),
        (["--seed", "-1"], "--seed must be an integer in 0..2147483647"),
        (["--seed", str(2**40)], "--seed must be an integer"),
        (["--out", "no/such/dir/plan.json"], "the directory no/such/dir does not exist"),
        (["--out", "."], "is a directory"),
        (["--device", "gpu=1GiB", "--device", "cpu=64GiB"], "--budget applies only to a --device given without a size"),
        (["--heuristic", "nosuch"], "unknown heuristic 'nosuch'; registered: "),
        (["--formulation", "nosuch"], "unknown formulation 'nosuch'; registered: "),
    ],
)
def test_solve_arguments_are_checked_before_the_solve(capsys, datasets_dir, no_solve, extra, needle):
    rc, out, err = run(capsys, "solve", datasets_dir / "vgg16_b16.json.gz", "--budget", "60%", *extra)
    assert rc == 2 and err.count("\n") == 1 and needle in err, err


def test_budget_with_a_sizeless_device_is_applied(capsys, datasets_dir, monkeypatch):
    import hybrid_remat.anytime as anytime

    seen = {}

    def capture(problem, *a, **k):
        seen["budgets"] = {d.name: d.memory_bytes for d in problem.devices}
        raise KeyboardInterrupt  # stop here: the CLI answers "interrupted", exit 130

    monkeypatch.setattr(anytime, "anytime_solve", capture)
    graph = datasets_dir / "vgg16_b16.json.gz"
    rc, out, err = run(capsys, "solve", graph, "--device", "gpu", "--device", "cpu=64GiB", "--budget", "60%")
    assert rc == 130
    assert seen["budgets"] == {"gpu": parse_budget("60%", load_graph(graph)), "cpu": 64 * 2**30}


def test_simulate_refuses_an_ignored_budget_too(capsys, tmp_path):
    g = write_graph(tmp_path, ISSUE_GRAPH)
    rc, out, err = run(capsys, "simulate", g, tmp_path / "plan.json", "--device", "gpu=20", "--budget", "30")
    assert rc == 2 and "--budget applies only" in err


# ------------------------------------------------- 12.4 and 12.8 bad input
def bad_files(tmp_path):
    docs = {
        "nodes5.json": {"format": "remat-graph/1", "nodes": 5},
        "string-cost.json": {**ISSUE_GRAPH, "nodes": {"bytes": [1] * 5, "time_gpu_s": [1e-3, "abc", 1e-3, 1e-3, 1e-3]}},
        "inf-cost.json": {**ISSUE_GRAPH, "nodes": {"bytes": [1] * 5, "time_gpu_s": [1e-3, float("inf"), 1e-3, 1, 1]}},
        "huge-node.json": {**ISSUE_GRAPH, "nodes": {"bytes": [1e30, 1, 1, 1, 1], "time_gpu_s": [1e-3] * 5}},
        "six-5e18.json": {**ISSUE_GRAPH, "nodes": {"bytes": [5 * 10**18] * 5 + [5 * 10**18], "time_gpu_s": [1e-3] * 6}},
    }
    paths = {name: write_graph(tmp_path, doc, name) for name, doc in docs.items()}
    raw = gzip.compress(json.dumps(ISSUE_GRAPH).encode())
    trunc = tmp_path / "truncated.json.gz"
    trunc.write_bytes(raw[: len(raw) // 2])
    paths["truncated.json.gz"] = trunc
    return paths


@pytest.mark.parametrize(
    "name, needle",
    [
        ("nodes5.json", "'nodes' must be an object of per-node lists"),
        ("string-cost.json", "node 1 has a non-numeric time_gpu_s 'abc'"),
        ("inf-cost.json", "node 1 has an infinite 'gpu' cost"),
        ("huge-node.json", "node 0 has 1e+30 bytes"),
        ("six-5e18.json", "node sizes sum to 3e+19 bytes"),
        ("truncated.json.gz", "truncated.json.gz: cannot read"),
    ],
)
def test_bad_graph_files_one_line_exit_2_nothing_written(capsys, tmp_path, name, needle):
    path = bad_files(tmp_path)[name]
    out = tmp_path / "plan.json"
    for argv in (["info", path], ["solve", path, "--budget", "12", "--time-limit", "1", "--out", out, "--quiet"]):
        rc, stdout, err = run(capsys, *argv)
        assert rc == 2 and err.count("\n") == 1 and needle in err, err
        assert "Traceback" not in err and not out.exists()


def test_budget_beyond_int64_one_line_exit_2(capsys, tmp_path, no_solve):
    out = tmp_path / "plan.json"
    rc, stdout, err = run(capsys, "solve", write_graph(tmp_path, ISSUE_GRAPH), "--budget", "1e400", "--out", out)
    assert rc == 2 and err.count("\n") == 1 and "too large" in err and not out.exists()


def test_overflowing_sizes_fail_in_a_subprocess_without_traceback(tmp_path):
    path = bad_files(tmp_path)["six-5e18.json"]
    r = subprocess.run([sys.executable, "-m", "hybrid_remat.cli", "solve", str(path), "--budget", "100%",
                        "--time-limit", "1", "--out", str(tmp_path / "p.json")], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "sum to 3e+19 bytes" in r.stderr
    assert not (tmp_path / "p.json").exists()


# --------------------------------------------------------------- 12.10 help
def test_solve_help_names_formats_defaults_seed_and_registered_names():
    sub = build_parser()._subparsers._group_actions[0].choices["solve"]
    text = " ".join(sub.format_help().split())
    assert "remat-graph/1" in text and "node-link" in text and ".json.gz" in text
    assert "default: 20.0" in text and "--seed" in text and "default: 0" in text
    for name in [*plugins.heuristics(), *plugins.formulations()]:
        assert re.search(rf"\b{re.escape(name)}\b", text), name
    top = " ".join(build_parser().format_help().split())
    assert "remat-graph/1" in top and "node-link" in top


def readme_block(lang):
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_readme_python_example_runs_twice_and_writes_outside_the_repository(tmp_path):
    (code,) = readme_block("python")[:1]
    assert "time_limit=20" in code
    code = code.replace("time_limit=20", "time_limit=2")  # the same example, shorter
    before = set(os.listdir(ROOT))
    env = {**os.environ, "TMPDIR": str(tmp_path), plugins.DISABLE_ENV: "1"}
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    assert set(os.listdir(ROOT)) == before
    plan = json.loads((tmp_path / "resnet50.plan.json").read_text())
    assert plan["format"] == "remat-plan/1"


# -------------------------------------------------------- 12.11 README commands
def readme_commands():
    return [line.strip() for block in readme_block("bash") for line in block.splitlines() if line.strip()]


def pip_installs(command):
    """The argument lists of each ``pip install`` in a shell command line."""
    out = []
    for part in re.split(r"&&|;", command):
        words = shlex.split(part)
        if "pip" in words and "install" in words:
            out.append(words[words.index("install") + 1:])
    return out


def test_readme_commands_install_the_plugins_after_the_library():
    """pip 23.2 cannot resolve the plugins' 'hybrid_remat>=0.1' from a local
    path given in the same command: the library is installed first."""
    install, test = readme_commands()[:2]
    assert "pip install -e ." in install and "&& hybrid-remat solve" in install
    steps = pip_installs(test)
    lib = [i for i, args in enumerate(steps) if any(a == "." or a.startswith(".[") for a in args)]
    plug = [i for i, args in enumerate(steps) if any("plugins/" in a for a in args)]
    assert lib and plug and max(lib) < min(plug), "the plugins must be installed after the library"
    assert test.rstrip().endswith("python3 -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert test in ci.splitlines(), ".ci/run must run the README's test command verbatim"


def test_simulate_rejects_plan_devices_beyond_int64(capsys, tmp_path):
    plan = {"format": "remat-plan/1", "devices": [{"name": "gpu", "kind": "gpu", "memory_bytes": 10**30}],
            "steps": [{"op": "compute", "node": 0, "device": "gpu"}]}
    ppath = tmp_path / "plan.json"
    ppath.write_text(json.dumps(plan))
    rc, out, err = run(capsys, "simulate", write_graph(tmp_path, ISSUE_GRAPH), ppath)
    assert rc == 2 and err.count("\n") == 1 and "memory_bytes from 1 B to 4 EiB" in err
