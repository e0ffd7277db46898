"""The chain solvers' repair loop (``blocks.schedule.capacity_rounds``):
a choice that repeats a keep set already simulated over the budget is not
simulated again; the capacity shrinks further until the choice changes."""

import math

import networkx as nx
import numpy as np

from hybrid_remat.blocks.schedule import KeepSetPlanner, capacity_rounds
from hybrid_remat.generators import training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate


def _setup():
    fw = nx.DiGraph()
    for i in range(10):
        fw.add_node(i, bytes=4 if i % 3 == 1 else 1, cost=1.0 + (i % 3))
        if i:
            fw.add_edge(i - 1, i)
    g = training_graph(fw)
    probe = KeepSetPlanner(Problem.single(g, "100%"), "test")
    big = np.ones(g.n, dtype=bool)                  # keep everything
    small = np.ones(g.n, dtype=bool)
    small[np.flatnonzero(g.phase == 0)[1::2]] = False   # every other forward value recomputed
    peak_big, peak_small = probe.plan(big)[1], probe.plan(small)[1]
    assert peak_small < peak_big
    return g, big, small, int(peak_small), int(peak_big)


class _Counting(KeepSetPlanner):
    def __init__(self, problem):
        super().__init__(problem, "test")
        self.simulated = []

    def plan(self, keep):
        self.simulated.append(np.packbits(keep).tobytes())
        return super().plan(keep)


def test_a_repeated_over_budget_choice_is_not_simulated_again():
    g, big, small, peak_small, peak_big = _setup()
    budget = peak_big - 1                           # keep-all overshoots by 1 B; the small keep set fits
    p = Problem.single(g, budget)
    planner = _Counting(p)
    start = float(budget)                          # base 0: the first capacity is the budget
    overshoot = peak_big - budget

    def choose(capacity):                          # like a bucketed DP: the choice changes only 5 overshoots lower
        return (big, "big") if capacity > start - 5 * overshoot else (small, "small")

    plan, value, info, rounds = capacity_rounds(p, planner, 0, choose, lambda: (small, "small"),
                                                limits=Limits(), max_rounds=3)
    assert plan is not None and simulate(p, plan).valid and info == "small"
    assert math.isclose(value, simulate(p, plan).total_time)
    assert len(planner.simulated) <= 3 and len(rounds) == len(planner.simulated)
    over = [k for k, r in zip(planner.simulated, rounds) if not r["valid"]]
    assert len(over) == len(set(over)) == 1        # keep-all simulated once, over the budget


def test_every_round_simulates_a_different_keep_set_until_one_fits():
    g, big, small, peak_small, peak_big = _setup()
    p = Problem.single(g, peak_small)              # only the small keep set (of these two) fits
    planner = _Counting(p)

    def choose(capacity):                          # the choice never changes above 0 B
        return (big, "big") if capacity > 0 else None

    plan, value, info, rounds = capacity_rounds(p, planner, 0, choose, lambda: (small, "small"),
                                                limits=Limits(), max_rounds=8)
    # keep-all once, over the budget; then the capacity reaches 0, nothing fits: no plan, one simulation
    assert plan is None and math.isinf(value)
    assert len(planner.simulated) == 1 and not rounds[0]["valid"]
