"""Sweeps: tidy rows whose figures are those of the re-simulated plans; the
CSV, the plans beside it, no overwriting, Ctrl-C keeps the rows done, and
the same rows from this process, a process pool and a real local Ray runtime."""

import importlib
import json
import math

import networkx as nx
import pytest

from hybrid_remat.cli import main
from hybrid_remat.errors import BudgetError, HybridRematError
from hybrid_remat.generators import random_layered, training_graph
from hybrid_remat.loaders import load_graph
from hybrid_remat.plan import read_plan
from hybrid_remat.plot import problem_for_plan
from hybrid_remat.simulate import simulate
from hybrid_remat.sweep import COLUMNS, Solver, parse_budgets, read_csv, sweep

sweep_module = importlib.import_module("hybrid_remat.sweep")  # `hybrid_remat.sweep` is the function
sweep_run = importlib.import_module("hybrid_remat._sweep_run")
sweep_task = importlib.import_module("hybrid_remat._sweep_task")

# deterministic: heuristics without time limits, no time-bounded polish
DETERMINISTIC = [Solver("heur", ("dtr", "staged_evict", "chen_sqrtn_ap"), (), local_search=False),
                 Solver("dtr", ("dtr",), (), local_search=False)]
TIMING = {"t_first_s", "t_best_s", "wall_s", "plan"}  # and where the plan was written
# one bound, run to its end: the rows' lower bounds do not depend on which of several racing bounds reported
# first (under load the default set gave multicut_bound here and placed_cuts_bound there), and each solve
# ends when the bound does instead of when the default set has searched for 20-40 s
ONE_BOUND = {"bounds": ["cut_bound"]}


def _graphs():
    return [training_graph(nx.path_graph(12, create_using=nx.DiGraph), name="mlp12"), random_layered(40, seed=3)]


def _records(rows):
    return rows.to_dict("records") if hasattr(rows, "to_dict") else rows


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_parse_budgets_continues_an_ellipsis():
    assert parse_budgets("90%,80%,...,30%") == ["90%", "80%", "70%", "60%", "50%", "40%", "30%"]
    assert parse_budgets("50%, 55%, ..., 70%, 2GiB") == ["50%", "55%", "60%", "65%", "70%", "2GiB"]
    with pytest.raises(BudgetError, match="two percentages"):
        parse_budgets("90%,...,30%")
    with pytest.raises(BudgetError, match="cannot go"):
        parse_budgets("80%,90%,...,30%")


def test_csv_figures_equal_the_resimulated_plans(tmp_path, datasets_dir):
    """Every figure in the CSV is that of the written plan, simulated again."""
    paths = [str(datasets_dir / "resnet18_b64.json.gz"), str(datasets_dir / "mlp_chain_b256.json.gz")]
    out = tmp_path / "res.csv"
    rows = _records(sweep(paths, "90%,60%,20%", time_limit=5, solvers=DETERMINISTIC, jobs=1, out=str(out),
                          solve_options=ONE_BOUND))
    back = read_csv(str(out))
    assert len(back) == len(rows) == 2 * 3 * 2
    assert list(back[0]) == list(COLUMNS)
    graphs = {p.split("/")[-1].split(".")[0]: load_graph(p) for p in paths}
    checked = 0
    for row in back:
        if row["status"] == "below_min":  # 20% is under resnet18's smallest feasible budget
            assert row["graph"] == "resnet18_b64" and row["plan"] == "" and math.isnan(row["objective"])
            assert row["budget_pct"] == pytest.approx(20, abs=1e-6)  # placed on the figure's budget axis
            continue
        assert row["status"] in ("feasible", "optimal")
        g = graphs[row["graph"]]
        with open(tmp_path / row["plan"]) as f:
            doc = json.load(f)
        problem = problem_for_plan(g, doc)
        assert int(problem.budgets[0]) == row["budget_bytes"]
        sim = simulate(problem, read_plan(tmp_path / row["plan"], g))
        assert sim.valid
        assert row["objective"] == sim.total_time == row["serial_time"]
        assert row["tdi_pct"] == sim.tdi_pct
        assert row["makespan"] == sim.makespan
        assert row["peak_bytes"] == sim.peak_bytes[problem.primary.name] <= row["budget_bytes"]
        assert row["n_recompute"] == sim.n_recompute
        assert row["lower_bound"] <= row["objective"] * (1 + 1e-12)
        assert row["gap"] == pytest.approx(max(0.0, (sim.total_time - row["lower_bound"]) / sim.total_time))
        assert 0 <= row["t_first_s"] <= row["t_best_s"] <= row["wall_s"]
        assert doc["summary"]["total_time"] == sim.total_time
        checked += 1
    assert checked >= 8


def test_existing_files_are_refused_then_replaced_with_force(tmp_path):
    out = tmp_path / "s.csv"
    g = _graphs()[:1]
    sweep(g, "90%", solvers=DETERMINISTIC[1:], jobs=1, out=str(out))
    with pytest.raises(FileExistsError, match="s.csv exists"):
        sweep(g, "90%", solvers=DETERMINISTIC[1:], jobs=1, out=str(out))
    (tmp_path / "s.csv").unlink()
    with pytest.raises(FileExistsError, match="mlp12__90pct__dtr.json exists"):  # the plan is not overwritten
        sweep(g, "90%", solvers=DETERMINISTIC[1:], jobs=1, out=str(out))
    rows = _records(sweep(g, "90%", solvers=DETERMINISTIC[1:], jobs=1, out=str(out), force=True))
    assert rows[0]["plan"] == "s_plans/mlp12__90pct__dtr.json"


def test_solver_names_and_unknown_solver():
    s = sweep_module.parse_solver("dtr")
    assert (s.heuristics, s.formulations, s.local_search) == (("dtr",), (), False)
    assert sweep_module.parse_solver("checkmate").formulations == ("checkmate",)
    assert sweep_module.parse_solver("heuristics").formulations == ()
    assert sweep_module.parse_solver("portfolio", formulations=["lns"]).label == "portfolio[lns]"
    with pytest.raises(HybridRematError, match="unknown solver 'nope'"):
        sweep_module.parse_solver("nope")


def test_ctrl_c_keeps_the_rows_done(tmp_path, monkeypatch):
    real = sweep_run.solve_task
    calls = []

    def interrupted_on_third(task, graph=None, **kwargs):
        calls.append(task.index)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(task, graph, **kwargs)

    monkeypatch.setattr(sweep_run, "solve_task", interrupted_on_third)  # what run_local calls
    out = tmp_path / "part.csv"
    with pytest.raises(KeyboardInterrupt):
        sweep(_graphs()[:1], "90%,70%,50%,40%", solvers=DETERMINISTIC[1:], jobs=1, out=str(out))
    rows = read_csv(str(out))
    assert [r["budget"] for r in rows] == ["90%", "70%"]
    assert all(r["status"] in ("feasible", "optimal") for r in rows)


def test_list_of_dicts_without_pandas(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("no pandas here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    rows = sweep(_graphs()[:1], "80%", solvers=DETERMINISTIC[1:], jobs=1)
    assert isinstance(rows, list) and rows[0]["graph"] == "mlp12" and rows[0]["status"] in ("feasible", "optimal")


def _key_rows(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in _records(rows)]


def _assert_same_rows(a, b):
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        diff = {k: (ra[k], rb[k]) for k in ra if not _same(ra[k], rb[k])}
        assert not diff, diff


SWEEP = {"budgets": "90%,60%,40%", "solvers": DETERMINISTIC, "seed": 3, "time_limit": 300, "solve_options": ONE_BOUND}


@pytest.fixture(scope="module")
def pool_sweep(tmp_path_factory):
    """The deterministic sweep on a local process pool of 2 workers (shared by the tests below)."""
    out = tmp_path_factory.mktemp("pool") / "pool.csv"
    return out, sweep(_graphs(), **SWEEP, jobs=2, out=str(out))


def test_process_pool_gives_the_rows_of_this_process(pool_sweep):
    inline = sweep(_graphs(), **SWEEP, jobs=1)
    _assert_same_rows(_key_rows(inline), _key_rows(pool_sweep[1]))
    sources = {r["bound_source"] for r in _records(pool_sweep[1]) if r["status"] != "below_min"}
    assert "cut_bound" in sources <= {"cut_bound", "trivial"}  # the solve options reached the pool's workers


def test_ray_gives_the_rows_of_the_local_pool(tmp_path, pool_sweep):
    """A real local Ray runtime (2 CPUs), one Ray task per solve."""
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    on_ray = sweep(_graphs(), **SWEEP, jobs=2, ray=True, out=str(tmp_path / "ray.csv"))
    assert not ray.is_initialized()  # the runtime it started is shut down
    a, b = _key_rows(pool_sweep[1]), _key_rows(on_ray)
    _assert_same_rows(a, b)
    assert sum(r["status"] in ("feasible", "optimal") for r in a) >= 8
    # the plans are the same files too
    pool_plans = pool_sweep[0].parent / "pool_plans"
    names = sorted(p.name for p in pool_plans.iterdir())
    assert len(names) >= 8 and names == sorted(p.name for p in (tmp_path / "ray_plans").iterdir())
    for name in names:
        assert (pool_plans / name).read_text() == (tmp_path / "ray_plans" / name).read_text()


def test_cli_sweep_writes_csv_plans_and_figure(tmp_path, capsys, datasets_dir):
    pytest.importorskip("matplotlib")
    out, fig = tmp_path / "r.csv", tmp_path / "p.png"
    argv = ["sweep", str(datasets_dir / "mlp_chain_b256.json.gz"), "--budgets", "90%,70%,...,50%",
            "--time-limit", "1", "--solver", "dtr,heuristics", "--heuristic", "dtr", "--heuristic", "staged_evict",
            "--jobs", "1", "--out", str(out), "--plot", str(fig), "--quiet"]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert "6 rows written" in stdout and "figure written" in stdout
    rows = read_csv(str(out))
    assert [(r["budget"], r["solver"]) for r in rows][:2] == [("90%", "dtr"), ("90%", "heuristics[dtr,staged_evict]")]
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(argv) == 2  # the CSV exists
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "r.csv exists" in err and "--force" in err


def test_cli_sweep_unknown_solver_is_one_line(tmp_path, capsys, datasets_dir):
    rc = main(["sweep", str(datasets_dir / "mlp_chain_b256.json.gz"), "--solver", "frobnicate",
               "--out", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "unknown solver 'frobnicate'" in err


def test_rich_progress_bar_counts_the_rows():
    pytest.importorskip("rich")
    from hybrid_remat._sweep_run import _Rich

    row = {"graph": "g", "budget": "50%", "solver": "dtr", "status": "feasible", "tdi_pct": 1.5, "gap": 0.1,
           "wall_s": 0.2}
    bar = _Rich(3)
    with bar:
        bar.advance(row)
        bar.advance(dict(row, status="below_min", tdi_pct=float("nan"), gap=float("nan"), wall_s=None))
    assert bar.count == 2 and bar.progress.tasks[0].completed == 2 and bar.progress.tasks[0].total == 3


@pytest.mark.slow
def test_ctrl_c_on_the_process_pool_keeps_the_rows_done(tmp_path, datasets_dir):
    """SIGINT to the CLI while a pool of 2 works: exit 130, the finished rows stay in the CSV."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "c.csv"
    argv = [sys.executable, "-m", "hybrid_remat.cli", "sweep", str(datasets_dir / "mlp_chain_b256.json.gz"),
            "--budgets", "95%,90%,...,30%", "--solver", "heuristics,dtr", "--time-limit", "2", "--jobs", "2",
            "--out", str(out), "--quiet"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(sweep_module.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH", "")])))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(read_csv(str(out))) >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted (SIGINT); the rows done are in" in err
    rows = read_csv(str(out))
    assert 2 <= len(rows) < 28
    assert all(r["status"] in ("feasible", "optimal") for r in rows)


def test_each_sweep_solve_runs_in_one_worker_unless_asked():
    """The sweep's parallelism is its pool of solves; a solve does not fork workers of its own."""
    task = sweep_module._tasks([_graphs()[0]], ["90%"], DETERMINISTIC[1:], time_limit=5, seed=0, node_limit=None,
                               objective="serial", devices=(), detail=False, options={})[0]
    assert sweep_task._solve_kwargs(task, None)["workers"] == 1
    task = sweep_module._tasks([_graphs()[0]], ["90%"], DETERMINISTIC[1:], time_limit=5, seed=0, node_limit=None,
                               objective="serial", devices=(), detail=False, options={"workers": 2})[0]
    assert sweep_task._solve_kwargs(task, None)["workers"] == 2
