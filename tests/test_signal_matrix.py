"""The signal matrix (issue 23): SIGINT (to the process group, as a
terminal's Ctrl-C) or SIGTERM (to the command) during the warm-up, the
heuristics, SCIP and LNS, for ``solve``, ``sweep``, ``info`` and
``torch-plan``, with one and two workers: the command ends (exit 130 /
143), the best plan or the rows done are written and marked interrupted,
and no process of its session is left.

The phases are marked by the probe components of tests/plugins/signal_probe.py
(each prints ``PHASE <name>`` when it starts and then takes long), registered
by a small driver in front of ``hybrid_remat.cli.main``.  Timeouts are
guards against a hang, never measurements.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from hybrid_remat.plugins import DISABLE_ENV

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = f"""
import sys
sys.path.insert(0, {os.path.join(ROOT, "tests", "plugins")!r})
import signal_probe
from hybrid_remat import plugins
plugins.register(signal_probe, "signal_probe")
from hybrid_remat.cli import main
sys.exit(main(sys.argv[1:]))
"""
GRAPH = os.path.join(ROOT, "datasets", "resnet18_b64.json.gz")
GUARD_S = 180  # a command that has not ended this long after its signal hangs
SIGNALS = {"SIGINT": (signal.SIGINT, 130), "SIGTERM": (signal.SIGTERM, 143)}


class Command:
    """A CLI run in its own session, its output collected line by line."""

    def __init__(self, tmp_path, argv):
        driver = tmp_path / "driver.py"
        driver.write_text(DRIVER)
        env = {**os.environ, "PYTHONPATH": ROOT, DISABLE_ENV: "1", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, str(driver), *map(str, argv)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)
        self.out, self.err = [], []
        self.readers = [threading.Thread(target=self._read, args=(f, lines), daemon=True)
                        for f, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.readers:
            t.start()

    @staticmethod
    def _read(f, lines):
        for line in f:
            lines.append(line)

    def text(self) -> str:
        return "".join(self.out) + "".join(self.err)

    def wait_for(self, ready, limit=GUARD_S) -> None:
        until = time.monotonic() + limit
        while not ready(self):
            assert self.proc.poll() is None, f"ended before the signal:\n{self.text()[-3000:]}"
            assert time.monotonic() < until, f"never got ready:\n{self.text()[-3000:]}"
            time.sleep(0.05)

    def signal(self, name: str) -> int:
        sig, code = SIGNALS[name]
        if sig == signal.SIGINT:
            os.killpg(self.proc.pid, sig)  # Ctrl-C reaches the whole foreground group
        else:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=GUARD_S)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for t in self.readers:
            t.join(10)
        return code

    def left_behind(self) -> list[int]:
        """Processes still in the command's session (its workers and theirs), after a grace."""
        until = time.monotonic() + 15
        while True:
            left = []
            for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
                try:
                    if os.getsid(pid) == self.proc.pid:
                        left.append(pid)
                except OSError:
                    pass
            if not left or time.monotonic() > until:
                break
            time.sleep(0.2)
        for pid in left:  # never leave them to the next test
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return left


def _phase(name):
    return lambda c: any(line.startswith(f"PHASE {name}") for line in c.out)


def _incumbent(c) -> bool:
    return any("incumbent" in line for line in c.err)


SOLVE_PHASES = {
    "warmup": (["--heuristic", "probe_warmup"], _phase("warmup")),
    "heuristics": (["--heuristic", "dtr", "--heuristic", "probe_heuristic", "--bound", "cut_bound"],
                   lambda c: _phase("heuristic")(c) and _incumbent(c)),
    "scip": (["--heuristic", "dtr", "--bound", "cut_bound", "--improver", "drop_recomputations",
              "--formulation", "probe_scip"], _phase("scip")),
    # lns is the only improver and the first plan is in: lns polishes it (or the formulation after it runs)
    "lns": (["--heuristic", "dtr", "--bound", "cut_bound", "--improver", "lns", "--formulation", "probe_scip"],
            lambda c: _incumbent(c)),
}
SOLVE_CELLS = [(phase, workers, "SIGINT" if (i + workers) % 2 == 0 else "SIGTERM")
               for i, phase in enumerate(SOLVE_PHASES) for workers in (1, 2)]


@pytest.mark.parametrize("phase, workers, sig", SOLVE_CELLS)
def test_solve(tmp_path, phase, workers, sig):
    from hybrid_remat.loaders import load_graph
    from hybrid_remat.plan import read_plan
    from hybrid_remat.problem import Problem
    from hybrid_remat.simulate import simulate

    out = tmp_path / "plan.json"
    extra, ready = SOLVE_PHASES[phase]
    cmd = Command(tmp_path, ["solve", GRAPH, "--budget", "50%", "--time-limit", "300", "--workers", workers,
                             "--out", out, *extra])
    cmd.wait_for(ready)
    if phase == "lns":
        time.sleep(1.0)
    code = cmd.signal(sig)
    text = cmd.text()
    assert cmd.proc.returncode == code, text[-3000:]
    assert "interrupted" in text and "Traceback" not in text, text[-3000:]
    assert not cmd.left_behind()
    if phase == "warmup":  # nothing ran: no plan, and the command says so
        assert not out.exists() and f"no plan found before {sig}" in text, text[-3000:]
        return
    doc = json.loads(out.read_text())
    assert doc["summary"]["interrupted"] is True and doc["summary"]["status"] == "feasible"
    g = load_graph(GRAPH)
    r = simulate(Problem.single(g, "50%"), read_plan(out, g))
    assert r.valid and r.total_time == pytest.approx(doc["summary"]["total_time"])


@pytest.mark.parametrize("jobs, sig", [(1, "SIGTERM"), (2, "SIGINT"), (2, "SIGTERM")])
def test_sweep(tmp_path, jobs, sig):
    """The dtr rows finish at once; the probe's solves run until the signal."""
    import networkx as nx

    from hybrid_remat.generators import training_graph
    from hybrid_remat.sweep import read_csv
    from hybrid_remat.testing import write_remat_graph

    # a small graph: its dtr rows (and their default bounds) finish in a moment, where resnet18's bounds
    # searched for 20-40 s before the first row; the signal still arrives while the probe's solves run
    graph = tmp_path / "mlp16.json"
    write_remat_graph(training_graph(nx.path_graph(16, create_using=nx.DiGraph), name="mlp16"), graph)
    out = tmp_path / "s.csv"
    cmd = Command(tmp_path, ["sweep", graph, "--budgets", "90%,80%,70%", "--solver", "dtr,heuristics",
                             "--heuristic", "probe_heuristic", "--time-limit", "300", "--jobs", jobs,
                             "--out", out, "--quiet"])
    cmd.wait_for(lambda c: _phase("heuristic")(c) and out.exists() and len(read_csv(str(out))) >= 1)
    code = cmd.signal(sig)
    text = cmd.text()
    assert cmd.proc.returncode == code, text[-3000:]
    assert f"interrupted ({sig}); the rows done are in" in text and "Traceback" not in text, text[-3000:]
    assert "leaked" not in text and "BrokenPipe" not in text, text[-3000:]
    assert not cmd.left_behind()
    rows = read_csv(str(out))
    assert 1 <= len(rows) < 6 and all(r["status"] in ("feasible", "optimal") for r in rows)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_info(tmp_path, sig):
    """During the exact search of the smallest feasible budget (a dense random DAG, 600 s to search)."""
    from hybrid_remat.generators import random_dag
    from hybrid_remat.testing import write_remat_graph

    path = tmp_path / "dag.json"
    write_remat_graph(random_dag(59, p=0.61, seed=1), path)
    cmd = Command(tmp_path, ["info", path, "--search-time", "600"])
    cmd.wait_for(lambda c: any(line.startswith("keep-all peak") for line in c.out))
    time.sleep(1.0)
    code = cmd.signal(sig)
    assert cmd.proc.returncode == code, cmd.text()[-3000:]
    assert f"interrupted ({sig})" in cmd.text() and "Traceback" not in cmd.text()
    assert not cmd.left_behind()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the torch extra")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_torch_plan(tmp_path, sig):
    """While torch-plan traces and plans a small model (whatever it does at the signal)."""
    (tmp_path / "probe_model.py").write_text(
        "import torch\n\ndef mlp():\n    return torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])\n")
    out = tmp_path / "plan.json"
    cmd = Command(tmp_path, ["torch-plan", f"{tmp_path}/probe_model.py:mlp", "--input-shape", "16,64",
                             "--budget", "0.7", "--time-limit", "300", "-o", out])
    until = time.monotonic() + 8.0
    cmd.wait_for(lambda c: time.monotonic() > until)
    code = cmd.signal(sig)
    assert cmd.proc.returncode == code, cmd.text()[-3000:]
    assert "interrupted" in cmd.text() and "Traceback" not in cmd.text(), cmd.text()[-3000:]
    assert not cmd.left_behind()
    if out.exists():  # the best plan so far, simulated and marked interrupted
        _assert_marked_plan(out, sig)
        assert "plan written (interrupted)" in cmd.text(), cmd.text()[-3000:]
    else:  # stopped before a plan existed (tracing, timing): said in one line
        assert f"interrupted ({sig}) before any plan was found; nothing written" in "".join(cmd.err), cmd.text()[-3000:]


def _assert_marked_plan(path, sig):
    doc = json.loads(path.read_text())
    assert doc["format"] == "remat-plan/1"
    assert doc["summary"]["interrupted"] is True and doc["summary"]["signal"] == sig
    assert doc["summary"]["predicted_peak_bytes"] <= doc["summary"]["budget_bytes"]


def _small_traced_graph():
    import torch

    from hybrid_remat.torch import default_loss, trace

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).train()
    return trace(model, (torch.randn(16, 64),), default_loss, costs="flops")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the torch extra")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_torch_plan_interrupted_keeps_best_plan(tmp_path, monkeypatch, sig):
    """A signal during torch planning's solver stage (after the keep-set families were evaluated): the best
    plan so far comes out of ``plan_graph``, simulated, within the budget, marked with the signal."""
    from hybrid_remat._cli_signals import Terminated
    from hybrid_remat.simulate import simulate
    from hybrid_remat.torch import _planner

    g = _small_traced_graph()

    def signal_arrives(problem, time_limit):
        raise Terminated("SIGTERM") if sig == "SIGTERM" else KeyboardInterrupt()
        yield  # a generator, as the real one

    monkeypatch.setattr(_planner, "_solver_plans", signal_arrives)
    with pytest.raises(_planner.PlanInterrupted) as caught:
        _planner.plan_graph(g, 0.7, time_limit=600, mechanism="ops")
    tp = caught.value.plan
    assert caught.value.signal == sig and tp is not None and tp.interrupted == sig
    checked = simulate(tp.problem, tp.plan)
    assert checked.valid and max(checked.peak_bytes.values()) <= tp.budget_bytes
    assert tp.predicted_peak_bytes < tp.keep_all_peak_bytes  # a plan that drops, not the keep-all step
    out = tmp_path / "plan.json"
    tp.write(out)
    _assert_marked_plan(out, sig)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the torch extra")
def test_torch_plan_interrupted_before_any_plan(monkeypatch):
    """A signal at the first evaluation: no plan, and ``plan_graph`` says so (``plan`` is None)."""
    from hybrid_remat.torch import _planner, _region_search

    g = _small_traced_graph()

    def signal_arrives(self, *args, **kwargs):
        raise KeyboardInterrupt()

    monkeypatch.setattr(_planner._Evaluator, "__call__", signal_arrives)
    monkeypatch.setattr(_region_search.RegionEvaluator, "__call__", signal_arrives)
    with pytest.raises(_planner.PlanInterrupted) as caught:
        _planner.plan_graph(g, 0.5, time_limit=600)
    assert caught.value.plan is None and caught.value.signal == "SIGINT"
