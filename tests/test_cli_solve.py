"""End-to-end CLI: solve writes a plan the simulator accepts, never overwrites."""

import json

import pytest

from hybrid_remat.cli import main
from hybrid_remat.loaders import load_graph
from hybrid_remat.plan import read_plan
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_solve_writes_a_valid_plan_and_refuses_overwrite(capsys, datasets_dir, tmp_path):
    graph = datasets_dir / "mlp_chain_b256.json.gz"
    out = tmp_path / "plan.json"
    rc, stdout, err = run(capsys, "solve", graph, "--budget", "60%", "--time-limit", "3", "--out", out, "--quiet")
    assert rc == 0, err
    assert "status" in stdout and "lower bound" in stdout and "plan written" in stdout
    doc = json.loads(out.read_text())
    assert doc["format"] == "remat-plan/1" and doc["devices"][0]["name"] == "gpu"
    s = doc["summary"]
    assert s["lower_bound"] <= s["total_time"] and s["peak_bytes"]["gpu"] <= doc["devices"][0]["memory_bytes"]
    g = load_graph(graph)
    r = simulate(Problem.single(g, "60%"), read_plan(out, g))
    assert r.valid and r.total_time == pytest.approx(s["total_time"])
    # the simulate subcommand agrees
    rc, stdout, err = run(capsys, "simulate", graph, out)
    assert rc == 0 and "valid        yes" in stdout
    # never overwrite without --force
    before = out.read_text()
    rc, stdout, err = run(capsys, "solve", graph, "--budget", "60%", "--time-limit", "1", "--out", out)
    assert rc == 2 and "exists" in err and err.count("\n") == 1
    assert out.read_text() == before


def test_solve_cpu_gpu_devices(capsys, datasets_dir, tmp_path):
    graph = datasets_dir / "vgg16_b16.json.gz"
    out = tmp_path / "p.json"
    rc, stdout, err = run(capsys, "solve", graph, "--device", "gpu=35%", "--device", "cpu=64GiB",
                          "--time-limit", "3", "--out", out, "--quiet")
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert [d["name"] for d in doc["devices"]] == ["gpu", "cpu"]
    assert any(s["device"] == "cpu" for s in doc["steps"] if s["op"] == "compute")
    rc, stdout, err = run(capsys, "simulate", graph, out)
    assert rc == 0 and "valid        yes" in stdout


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--budget", "1KiB"], "smallest feasible budget"),
        (["--budget", "lots"], "budget 'lots' cannot be read"),
        (["--budget", "60%", "--formulation", "nosuch"], "unknown formulation 'nosuch'"),
        (["--budget", "60%", "--cost-model", "nosuch:h200"], "unknown cost model 'nosuch'"),
        (["--device", "tpu=1GiB"], "device 'tpu'"),
        (["--budget", "60%", "--time-limit", "-1"], "--time-limit must be a positive number"),
        (["--budget", "60%", "--time-limit", "0"], "--time-limit must be a positive number"),
    ],
)
def test_solve_bad_input_one_line_exit_2(capsys, datasets_dir, extra, needle):
    extra = extra if "--time-limit" in extra else ["--time-limit", "1", *extra]
    rc, out, err = run(capsys, "solve", datasets_dir / "vgg16_b16.json.gz", *extra)
    assert rc == 2, (out, err)
    assert err.count("\n") == 1 and needle in err
