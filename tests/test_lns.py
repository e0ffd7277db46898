"""The ``lns`` improver (ruin and recreate on the incumbent) and how
anytime_solve orders and selects formulations."""

import threading

import numpy as np

from hybrid_remat import plugins
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.budgets import keep_all_peak, min_feasible_budget
from hybrid_remat.generators import random_layered
from hybrid_remat.heuristics.dtr import DTR
from hybrid_remat.heuristics.local_search import LNS, LocalSearch
from hybrid_remat.interfaces import Formulation, FormulationResult
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _problem(seed=1, n=60):
    g = random_layered(n, seed=seed)
    return Problem.single(g, (min_feasible_budget(g) + keep_all_peak(g)) // 2)


def test_lns_improves_a_poor_start_and_is_deterministic_with_a_move_limit():
    p = _problem()
    start = DTR("lru", name="dtr_lru").run(p)
    base = simulate(p, start).total_time
    seen = []
    r1 = LNS(max_iters=40).improve(p, start, limits=Limits.seconds(60.0), on_incumbent=lambda pl, s: seen.append(pl))
    r2 = LNS(max_iters=40).improve(p, start, limits=Limits.seconds(60.0))
    sim = simulate(p, r1)
    assert sim.valid and sim.total_time < base
    assert r1 == r2
    costs = [simulate(p, pl).total_time for pl in seen]  # progress reports, each valid and better
    assert costs and costs[-1] == sim.total_time and all(x > y for x, y in zip(costs, costs[1:]))
    assert all(simulate(p, pl).valid for pl in seen)


def test_lns_honours_a_set_stop_event_and_works_without_incumbent():
    p = _problem(seed=2)
    stop = threading.Event()
    stop.set()
    plan = LNS(max_iters=1000).improve(p, None, limits=Limits.seconds(60.0, stop=stop))
    # a set stop event: the first deterministic start only, no move (the plan of a zero time and move budget)
    no_moves = LocalSearch().improve(p, None, limits=Limits.seconds(0.0), max_iters=0)
    assert plan == no_moves and simulate(p, plan).valid
    plan = LNS(max_iters=5).improve(p, None, limits=Limits.seconds(60.0))
    assert plan is not None and simulate(p, plan).valid


class _Recorder(Formulation):
    capabilities = frozenset({"dag", "chain", "single_device", "honours_limits"})  # in-process: calls recorded

    def __init__(self, name, rank, calls):
        self.name, self.rank, self.calls = name, rank, calls

    def solve(self, problem, *, incumbent=None, **kw):
        self.calls.append(self.name)
        return FormulationResult("no_solution")


def test_formulations_run_by_rank_and_decomposed_only_when_named():
    forms = plugins.formulations()
    # lns is an improver now: it runs after every formulation (the long phase lists formulations first)
    assert "lns" in plugins.improvers() and "lns" not in forms
    assert forms["decomposed"].rank > forms["checkmate"].rank
    p = _problem(seed=3, n=30)
    calls = []
    anytime_solve(p, 5, heuristics=["split"], local_search=False, workers=1,
                  formulations=[_Recorder("late", 20.0, calls), _Recorder("early", 5.0, calls),
                                _Recorder("tie_a", 10.0, calls), _Recorder("tie_b", 10.0, calls)])
    assert calls == ["early", "tie_a", "tie_b", "late"]
    r = anytime_solve(p, 20, node_limit=200)
    assert "decomposed" not in [x.source for x in r.report]  # not in the default set
    r = anytime_solve(p, 5, formulations=["decomposed"], node_limit=100)
    assert [x.source for x in r.report if x.kind == "formulation"] == ["decomposed"]
    assert np.isfinite(r.objective)


def test_a_search_from_a_plan_runs_in_the_plans_order(monkeypatch):
    from hybrid_remat.heuristics import local_search as ls
    from hybrid_remat.heuristics.reorder import MemoryOrder

    p = _problem(seed=2, n=80)
    start = MemoryOrder().run(p, limits=Limits(work=5_000_000))
    assert start is not None and simulate(p, start).valid
    order = ls.plan_order(p, start)
    assert order is not None and sorted(order.tolist()) == list(range(p.graph.n))
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    e = p.graph.edges()
    assert (pos[e[:, 0]] < pos[e[:, 1]]).all()                      # topological
    seen_problems = []
    search = LocalSearch._search

    def spy(self, problem, plan=None, **kw):
        seen_problems.append((problem, plan))
        return search(self, problem, plan, **kw)

    monkeypatch.setattr(LocalSearch, "_search", spy)
    reports = []
    for imp in (LocalSearch(None, max_iters=20), LNS(max_iters=20)):
        out = imp.improve(p, start, limits=Limits(work=5_000_000), on_incumbent=lambda pl, s: reports.append(pl))
        q, q_start = seen_problems[-1]
        assert q is not p and ls.plan_order(q, q_start) is None       # the plan's order is the searched one's own
        sim = simulate(p, out)                                        # the result in the original numbering
        assert sim.valid and sim.total_time <= simulate(p, start).total_time
    assert all(simulate(p, pl).valid for pl in reports)
