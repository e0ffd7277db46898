import json
import subprocess
import sys

import pytest

from hybrid_remat.cli import main
from hybrid_remat.generators import chain
from hybrid_remat.plan import keep_all_plan, write_plan
from hybrid_remat.problem import Problem


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_info_reports_peak_and_smallest_budget(capsys, datasets_dir):
    rc, out, err = run(capsys, "info", str(datasets_dir / "vgg16_b16.json.gz"))
    assert rc == 0, err
    assert "nodes        91" in out
    assert "keep-all peak        1575387136 B" in out
    # issue 12.2: the figure is a lower bound, named so; 91 nodes is beyond the exact search
    assert "budget lower bound   616858112 B" in out
    assert "smallest feasible    between 616858112 B and 1575387136 B" in out
    assert "cpu: " in out and "(4 estimated)" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["info", "no/such/file.json"], "no such file"),
        (["solve"], "required"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("hybrid-remat: error:")
    assert needle in err


def test_unknown_graph_format_is_named(capsys, tmp_path):
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"format": "onnx-ish", "x": 1}))
    rc, out, err = run(capsys, "info", str(p))
    assert rc == 2 and "unknown graph format 'onnx-ish'" in err


def test_bad_json_is_named(capsys, tmp_path):
    p = tmp_path / "g.json"
    p.write_text("{not json")
    rc, out, err = run(capsys, "info", str(p))
    assert rc == 2 and "not valid JSON" in err and err.count("\n") == 1


def _node_link_chain(tmp_path, n=4):
    g = chain(n, bytes=10, cost=1.0)
    doc = {
        "directed": True, "multigraph": False, "graph": {"name": "c4"},
        "nodes": [{"id": i, "name": f"n{i}", "cost_cpu": 1.0, "cost_ram": 10, "backward": False} for i in range(n)],
        "links": [{"source": i, "target": i + 1} for i in range(n - 1)],
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    return g, path


def test_simulate_plan_file(capsys, tmp_path):
    g, gpath = _node_link_chain(tmp_path)
    prob = Problem.single(g, 20, device="cost")
    ppath = tmp_path / "plan.json"
    write_plan(ppath, keep_all_plan(g, "cost"), prob)
    rc, out, err = run(capsys, "simulate", str(gpath), str(ppath))
    assert rc == 0, err
    assert "valid        yes" in out and "peak cost    20 B" in out
    # a tighter budget on the command line makes it invalid (exit 1, reason shown)
    rc, out, err = run(capsys, "simulate", str(gpath), str(ppath), "--budget", "19")
    assert rc == 2 and "node bound 20 B (20 B), a lower bound on the smallest feasible budget" in err


def test_simulate_reports_invalid_plan(capsys, tmp_path):
    g, gpath = _node_link_chain(tmp_path)
    doc = {"format": "remat-plan/1", "graph": "c4", "devices": [{"name": "cost", "kind": "cost", "memory_bytes": 100}],
           "steps": [{"op": "compute", "node": 1, "device": "cost"}]}
    ppath = tmp_path / "bad.json"
    ppath.write_text(json.dumps(doc))
    rc, out, err = run(capsys, "simulate", str(gpath), str(ppath))
    assert rc == 1
    assert "NO: step 0 computes node 1 on cost but its input 0 is not resident" in out


def test_console_script_entry_point():
    r = subprocess.run([sys.executable, "-m", "hybrid_remat.cli", "info", "missing.json"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().startswith("hybrid-remat: error:")
