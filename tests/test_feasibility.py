"""Issue 12.2: the old 'smallest feasible budget' is a lower bound; the
order bound and the exact search of hybrid_remat.bounds.feasibility against brute
force; the bound 'feasibility' proves infeasibility (+inf)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_remat import plugins
from hybrid_remat.bounds.feasibility import (
    FeasibilityBound,
    _order_bound_kernel,
    check_budget,
    order_bound,
    smallest_feasible_budget,
)
from hybrid_remat.budgets import budget_lower_bound, keep_all_peak, min_feasible_budget
from hybrid_remat.generators import random_dag
from hybrid_remat.graph import Graph
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Device, Problem
from hybrid_remat.simulate import simulate

ISSUE = Graph.from_arrays([10, 1, 10, 1, 1], [(0, 1), (2, 3), (1, 4), (3, 4)], [1.0] * 5, name="issue12")


def on_one_device(graph, budget):
    return Problem(graph, [Device("cost", "cost", int(budget))], check=False)


def brute_smallest_budget(graph):
    """The least budget at which brute force finds any plan."""
    for budget in range(max(1, budget_lower_bound(graph)), keep_all_peak(graph) + 1):
        if math.isfinite(brute_force(on_one_device(graph, budget))[0]):
            return budget
    raise AssertionError("the keep-all plan always fits its own peak")


def test_the_issue_example_old_figure_is_only_a_bound():
    assert min_feasible_budget(ISSUE) == budget_lower_bound(ISSUE) == 11  # the old name still answers
    assert brute_smallest_budget(ISSUE) == 12  # ... but no plan fits 11 B
    assert order_bound(ISSUE) == 12
    assert check_budget(ISSUE, 11).status == "infeasible"
    ok = check_budget(ISSUE, 12)
    assert ok.status == "feasible" and simulate(on_one_device(ISSUE, 12), ok.plan).valid
    r = smallest_feasible_budget(ISSUE)
    assert r.exact == 12 and simulate(on_one_device(ISSUE, 12), r.plan).valid


def random_tiny(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    p = float(rng.uniform(0.15, 0.7))
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < p]
    sizes = rng.integers(0, 16, size=n) ** 2 // 5 + 1  # skewed sizes: where the bounds differ
    return Graph.from_arrays(sizes, edges, rng.uniform(0.1, 1.0, size=n), name=f"tiny{seed}")


@pytest.mark.parametrize("seed", range(60))
def test_exact_search_matches_brute_force_on_tiny_graphs(seed):
    g = random_tiny(seed)
    true = brute_smallest_budget(g)
    assert budget_lower_bound(g) <= order_bound(g) <= true
    r = smallest_feasible_budget(g)
    assert r.exact == true
    assert simulate(on_one_device(g, true), r.plan).valid
    for budget in range(max(1, true - 3), true + 2):
        res = check_budget(g, budget)
        assert res.status == ("feasible" if budget >= true else "infeasible"), (budget, true, res)
        if res.plan is not None:
            assert simulate(on_one_device(g, budget), res.plan).valid


def test_random_graphs_where_the_old_figure_was_wrong_are_caught():
    """Among the tiny graphs, some have no plan at the old figure; the exact
    search says so for each (the point of the issue)."""
    wrong = 0
    for seed in range(200, 320):
        g = random_tiny(seed)
        lb = budget_lower_bound(g)
        if brute_smallest_budget(g) > lb:
            wrong += 1
            assert check_budget(g, lb).status == "infeasible"
    assert wrong >= 1


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 30), st.floats(0.05, 0.8), st.integers(0, 10_000))
def test_order_bound_kernel_matches_its_python_version(n, p, seed):
    g = random_dag(n, p=p, seed=seed, max_bytes=50)
    for kmax, work in ((14, 1 << 40), (2, 1 << 40), (14, 3)):
        fast = _order_bound_kernel(g.bytes, g.pred_ptr, g.pred_idx, kmax, work)
        slow = _order_bound_kernel.py_func(g.bytes, g.pred_ptr, g.pred_idx, kmax, work)
        assert tuple(map(int, fast)) == tuple(map(int, slow))
    # a smaller work budget never gives a larger (less safe) bound
    assert _order_bound_kernel(g.bytes, g.pred_ptr, g.pred_idx, 14, 0)[0] <= order_bound(g)
    assert order_bound(g) >= budget_lower_bound(g)


def test_limits_give_unknown_deterministically():
    g = random_dag(24, p=0.3, seed=5, max_bytes=40)
    lb = order_bound(g)
    a = check_budget(g, lb, limits=Limits(work=50))
    b = check_budget(g, lb, limits=Limits(work=50))
    assert a.status == b.status == "unknown" and a.work == b.work
    stop = Limits.seconds(0.0)
    assert check_budget(g, lb, limits=stop).status == "unknown"
    big = random_dag(80, p=0.1, seed=1)
    assert check_budget(big, order_bound(big)).status in ("unknown", "feasible")  # no search above 64 nodes
    r = smallest_feasible_budget(g, limits=Limits(work=50))
    assert r.lower <= r.upper and r.exact is None
    assert simulate(on_one_device(g, r.upper), r.plan).valid


def test_the_feasibility_bound_is_registered_and_proves_infeasibility():
    bound = plugins.bounds()["feasibility"]
    assert isinstance(bound, FeasibilityBound)
    assert {"single_device", "honours_limits", "deterministic"} <= set(bound.capabilities)
    res = bound.bound(on_one_device(ISSUE, 11), limits=Limits(work=10_000))
    assert res.value == math.inf and res.scope == "all plans" and res.stats["status"] == "infeasible"
    res = bound.bound(on_one_device(ISSUE, 12), limits=Limits(work=10_000))
    assert res.value == -math.inf and res.stats["status"] == "feasible"
    # proved by the search, not the order bound: sizes and edges where the order bound (73) is below the optimum
    g = Graph.from_arrays([40, 25, 2, 29, 4, 13], [(0, 1), (1, 2), (0, 3), (0, 4), (1, 4), (2, 4), (2, 5), (3, 5), (4, 5)],
                          [1.0] * 6, name="gap")
    assert order_bound(g) == 73 and brute_smallest_budget(g) == 75
    res = bound.bound(on_one_device(g, 74), limits=Limits(work=1_000_000))
    assert res.value == math.inf and "exact search" in res.stats["reason"]
    assert bound.bound(on_one_device(g, 75)).value == -math.inf
    two = Problem(ISSUE, [Device("cost", "cost", 11), Device("host", "storage", 100, can_compute=False)], check=False)
    res = bound.bound(two)
    assert res.value == -math.inf and res.stats["status"] == "unknown"  # one device only


@pytest.mark.parametrize("seed", range(12))
def test_sink_kernel_matches_its_python_version(monkeypatch, seed):
    import hybrid_remat.bounds.feasibility as feas

    g = random_tiny(seed)
    true = brute_smallest_budget(g)
    fast = [check_budget(g, b).status for b in (true - 1, true)]
    with np.errstate(over="ignore"):
        monkeypatch.setattr(feas, "_sink_kernel", feas._sink_kernel.py_func)
        monkeypatch.setattr(feas, "order_bound", lambda graph, limits=None: budget_lower_bound(graph))
        slow = [check_budget(g, b) for b in (true - 1, true)]
    assert [r.status for r in slow] == fast == ["infeasible", "feasible"]
    assert simulate(on_one_device(g, true), slow[1].plan).valid


def test_warm_up_runs():
    from hybrid_remat.bounds.feasibility import warm_up

    warm_up()


def test_the_portfolio_skips_the_feasibility_bound_once_a_plan_fits_and_says_when_it_proves_nothing():
    from hybrid_remat.anytime import anytime_solve
    from hybrid_remat.generators import random_layered

    g = random_layered(40, seed=3)
    p = Problem.single(g, "90%")
    # a small work budget: the exact search stops unsettled, so the bound proves nothing
    first = anytime_solve(p, 60, workers=1, heuristics=[], bounds=["feasibility"], improvers=[],
                          formulations=[], warm=False, work_limit=10_000)
    row = next(x for x in first.report if x.source == "feasibility")
    assert row.status == "no_bound" and row.note == "the exact search hit its limits"  # not "rejected: ..."
    after = anytime_solve(p, 60, workers=1, heuristics=["dtr"], bounds=["feasibility"], improvers=[],
                          formulations=[], warm=False)
    row = next(x for x in after.report if x.source == "feasibility")
    assert after.plan is not None and row.status == "skipped" and "a valid plan fits" in row.note


@pytest.mark.parametrize("seed", range(6))
def test_the_search_resumes_inside_an_expansion(monkeypatch, seed):
    """Issue 23.3: one expansion enumerates up to 2**58 subsets; the search now stops (and resumes) inside
    it.  Slices of a few work units give the answers and plans of an unsliced search."""
    import hybrid_remat.bounds.feasibility as feas

    g = random_tiny(seed)
    true = brute_smallest_budget(g)
    whole = [check_budget(g, b).status for b in (true - 1, true)]
    monkeypatch.setattr(feas, "_KERNEL_RATE", 60.0)  # 3 work units per slice
    sliced = [check_budget(g, b) for b in (true - 1, true)]
    assert [r.status for r in sliced] == whole == ["infeasible", "feasible"]
    assert simulate(on_one_device(g, true), sliced[1].plan).valid
    assert feas.smallest_feasible_budget(g).exact == true


def test_info_honours_its_search_time_on_a_dense_random_dag(tmp_path):
    """Issue 23.3: ``info --search-time 2`` ran past 300 s on a 59-node, 1047-edge random DAG (one expansion
    of the exact search never reached a limit check).  A guard against the hang, not a speed test."""
    import os
    import subprocess
    import sys

    from hybrid_remat.generators import random_dag
    from hybrid_remat.plugins import DISABLE_ENV
    from hybrid_remat.testing import write_remat_graph

    g = random_dag(59, p=0.61, seed=1)
    assert 1000 <= g.m <= 1100
    path = tmp_path / "dag.json"
    write_remat_graph(g, path)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-m", "hybrid_remat.cli", "info", str(path), "--search-time", "2"],
                         capture_output=True, text=True, timeout=240, cwd=root,
                         env={**os.environ, "PYTHONPATH": root, DISABLE_ENV: "1"})
    assert out.returncode == 0, out.stderr
    assert "smallest feasible" in out.stdout


def test_every_text_names_the_exact_search_limit_the_code_uses():
    """The CLI's ``--search-time`` help and the README give the node count
    up to which the exact search runs: :data:`EXACT_MAX_NODES` (one said
    64 while the code stopped at 63)."""
    import pathlib
    import re

    from hybrid_remat.bounds.feasibility import EXACT_MAX_NODES
    from hybrid_remat.cli import build_parser

    info = build_parser()._subparsers._group_actions[0].choices["info"]
    helps = " ".join(a.help or "" for a in info._actions)
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    for text in (helps, readme):
        said = {int(x) for x in re.findall(r"up to (\d+) nodes\)", text)}
        assert said == {EXACT_MAX_NODES}, said
