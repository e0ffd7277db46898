"""The SCIP layer (scip/): status map, run loop, stop flag, pushed
plans, bound checks; and the numerics of every SCIP formulation at cost
scales 1e-9, 1 and 1e6 against brute force (issue 12.3)."""

import threading

import numpy as np
import pytest
from test_exact_checkmate import tiny_problems  # noqa: E402  (tests/ is on sys.path)
from test_hetero_makespan import tiny  # noqa: E402

from hybrid_remat.exact.checkmate import CheckmateFormulation, CheckmateModel
from hybrid_remat.exact.lp_rounding import LPRounding
from hybrid_remat.graph import Graph
from hybrid_remat.hetero.xengine import XEngineMILP
from hybrid_remat.limits import Limits
from hybrid_remat.oracle import brute_force
from hybrid_remat.problem import Problem
from hybrid_remat.scip import (
    MemoryScale,
    ObjectiveScale,
    PushHeuristic,
    check_bound,
    run,
    scip_model,
    status_of,
    trusted_dual,
)
from hybrid_remat.simulate import simulate

NODES = 20_000
SCALES = (1e-9, 1.0, 1e6)


def _knapsack(m, n=40, seed=0):
    rng = np.random.default_rng(seed)
    w, v = rng.integers(5, 40, n), rng.integers(5, 40, n)
    x = [m.addVar(vtype="B", obj=-float(v[i])) for i in range(n)]
    m.addCons(sum(float(w[i]) * x[i] for i in range(n)) <= float(w.sum() // 3))
    return x


def test_status_map():
    assert status_of("optimal", True) == "optimal"
    assert status_of("infeasible", False) == "infeasible"
    assert status_of("timelimit", True) == "feasible"
    assert status_of("userinterrupt", False) == "no_solution"
    assert status_of("inforunbd", False) == "error"
    assert status_of("something new", True) == "error"


def test_run_reports_solutions_and_trusted_bounds():
    seen, duals = [], []
    with scip_model("knap") as m:
        _knapsack(m)
        res = run(m, limits=Limits(nodes=NODES), on_solution=lambda mm, sol: seen.append(mm.getSolObjVal(sol)),
                  on_dual=duals.append)
        assert res.status == "optimal" and res.has_solution and not res.interrupted
        assert seen and seen == sorted(seen, reverse=True)  # every new incumbent is better
        assert duals == sorted(duals) and res.dual == pytest.approx(m.getObjVal())
        assert trusted_dual(m, "optimal") == pytest.approx(m.getObjVal())


def test_a_set_stop_flag_interrupts_and_the_model_can_run_again():
    stop = threading.Event()
    stop.set()
    with scip_model("knap") as m:
        _knapsack(m, n=60, seed=3)
        res = run(m, limits=Limits(stop=stop))
        # no time is left once the flag is set; either way it is not a Ctrl-C
        assert res.scip_status in ("timelimit", "userinterrupt") and not res.interrupted
        assert res.status in ("feasible", "no_solution")
        m.freeTransform()
        res = run(m, limits=Limits(nodes=NODES))  # one event handler per model, however often it runs
        assert res.status == "optimal"


def test_pushed_plans_are_tried_inside_the_solve():
    stats = {}
    with scip_model("push", params={"presolve": "OFF", "heuristics": "OFF"}) as m:
        x = _knapsack(m, n=30, seed=1)
        h = PushHeuristic.include(m, "test", stats=stats)
        h.push({v.name: 1.0 if i == 0 else 0.0 for i, v in enumerate(x)})  # a feasible (poor) packing
        res = run(m, limits=Limits(nodes=NODES))
        assert res.status == "optimal"
    assert stats["pushed"] == 1 and stats.get("push_accepted", 0) == 1


def test_check_bound_clamps_noise_and_drops_failures():
    assert check_bound(10.0 + 1e-10, 10.0, 1e-9) == (10.0, "")
    value, note = check_bound(11.0, 10.0, 1e-9)
    assert value == -np.inf and "numerical" in note
    assert check_bound(9.0, 10.0, 1e-9) == (9.0, "")


def test_objective_scale_makes_tolerances_relative():
    for s in SCALES:
        sc = ObjectiveScale.of(np.array([1.0, 3.0]) * s, offset=4.0 * s)
        assert sc.coef(3.0 * s) == pytest.approx(1.0)
        assert sc.real(2.0) == pytest.approx(10.0 * s)
        assert sc.bound(2.0) < sc.real(2.0) and sc.real(2.0) - sc.bound(2.0) <= 1e-5 * s
        assert 0 < sc.tolerance(10.0 * s) <= 1e-4 * s


def test_memory_scale_of_huge_byte_counts_is_conservative_or_relaxed():
    sizes = np.array([3001, 5003, 7001]) * 2**30 + 1  # gcd 1: no exact unit
    B = 9 * 2**40
    up, down = MemoryScale.choose(sizes, B), MemoryScale.choose(sizes, B, relax=True)
    assert up.budget <= 1 << 24 and (up.sizes * up.unit >= sizes).all() and up.budget * up.unit <= B
    assert not up.exact and down.relaxed and (down.sizes * down.unit <= sizes).all()


def _issue_example(scale: float) -> Problem:
    """Issue 12.3's instance: the best plan takes 8 node costs, the best
    staged plan of the reference order 10."""
    g = Graph.from_arrays([3, 6, 5, 7, 10, 5, 10], [(0, 1), (0, 2), (1, 3), (1, 6), (2, 4), (2, 5), (3, 5), (5, 6)],
                          {"cost": np.full(7, scale)})
    return Problem.single(g, 21)


def test_the_issue_example_cut_bound_at_1e9_seconds():
    from hybrid_remat.bounds.cut import cut_lower_bound

    p = _issue_example(1e-9)
    assert cut_lower_bound(p).value <= brute_force(p)[0] * (1 + 1e-9)


def _scaled(p: Problem, s: float) -> Problem:
    g = p.graph
    g2 = Graph.from_arrays(g.bytes, g.edges().tolist(), {k: np.asarray(g.cost(k)) * s for k in g.cost_kinds})
    return Problem(g2, p.devices, p.links)


@pytest.mark.parametrize("scale", SCALES)
def test_checkmate_and_lp_bounds_hold_at_every_cost_scale(scale):
    """The staged optimum, its bound and the LP bound against the staged
    brute force, with costs of 1e-9 s, 1 s and 1e6 s."""
    for p0 in tiny_problems(8, seed=21):
        p = _scaled(p0, scale)
        staged = brute_force(p, "staged")[0]
        r = CheckmateFormulation(stage_size=1, follow_incumbent=False).solve(p, limits=Limits(nodes=NODES))
        if not np.isfinite(staged):
            assert r.plan is None
            continue
        assert r.status == "optimal" and simulate(p, r.plan).valid
        assert r.objective == pytest.approx(staged, rel=1e-9)
        assert staged * (1 - 1e-5) <= r.lower_bound <= staged * (1 + 1e-12)
        assert r.lower_bound >= p.base_cost * (1 - 1e-12)
        lp = LPRounding().run_detailed(p)
        if lp["lower_bound"] is not None:
            assert lp["lower_bound"] <= staged * (1 + 1e-12)


def test_the_issue_example_at_1e9_seconds():
    """Issue 12.3's instance at 1 ns per node: 8 ns (brute force) over every
    plan, 10 ns over the staged plans of the reference order."""
    p = _issue_example(1e-9)
    assert brute_force(p)[0] == pytest.approx(8e-9)
    r = CheckmateFormulation(stage_size=1, follow_incumbent=False).solve(p, limits=Limits(nodes=NODES))
    assert r.objective == pytest.approx(brute_force(p, "staged")[0]) == pytest.approx(10e-9)
    assert r.lower_bound <= r.objective and CheckmateFormulation.bound_scope == "staged"
    with CheckmateModel(p) as cm:
        assert cm.objscale.scale == pytest.approx(1e-9)  # model coefficients are 1, not 1e-9


@pytest.mark.parametrize("scale", SCALES)
def test_xengine_bounds_hold_at_every_cost_scale(scale):
    rng = np.random.default_rng(7)
    for _ in range(8):
        p = tiny(rng, scale, n_hi=6, objective="serial")
        bt, _ = brute_force(p, "frontier")
        res = XEngineMILP().solve(p, limits=Limits(nodes=NODES))
        assert res.status == "optimal" and simulate(p, res.plan).valid
        assert res.objective == pytest.approx(bt, rel=1e-9)
        assert bt * (1 - 1e-5) <= res.stats["staged_lower_bound"] <= bt * (1 + 1e-12)
        assert res.lower_bound <= bt * (1 + 1e-12)


_SIGINT_SCRIPT = r"""
import os, signal, sys, threading, time
from hybrid_remat.generators import random_layered
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.problem import Problem
from hybrid_remat.exact.checkmate import CheckmateFormulation
g = random_layered(60, seed=1)
p = Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)
found = []
threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t0 = time.perf_counter()
try:
    CheckmateFormulation(stage_size=1).solve(p, on_incumbent=lambda plan, src: found.append(plan))
except KeyboardInterrupt:
    print("interrupted after %.1f s, %d plans" % (time.perf_counter() - t0, len(found)))
    sys.exit(0)
print("not interrupted")
sys.exit(1)
"""


def test_ctrl_c_during_a_solve_is_passed_on_after_the_plans():
    """A SIGINT during a SCIP solve without any limit (SCIP catches it:
    ``misc/catchctrlc``) ends the solve and reaches the caller as
    KeyboardInterrupt (run in a subprocess; without the interrupt the solve
    would not end)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", _SIGINT_SCRIPT], capture_output=True, text=True, timeout=120,
                         cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0 and "interrupted" in out.stdout, out.stdout + out.stderr


def test_scip_is_interrupted_only_in_stages_that_allow_it():
    from hybrid_remat.scip.solve import _interrupt

    class _Model:
        calls = 0

        def __init__(self, stage):
            self.stage = stage

        def getStage(self):
            return self.stage

        def interruptSolve(self):
            if self.stage == 8:  # INITSOLVE: SCIP answers with an error (and prints it)
                raise RuntimeError("cannot call method <SCIPinterruptSolve> in init solve stage")
            _Model.calls += 1

    _interrupt(_Model(8))  # a warm start found while the solve starts: left to the next event
    _interrupt(_Model(9))  # solving
    _interrupt(_Model(5))  # presolving
    assert _Model.calls == 2
