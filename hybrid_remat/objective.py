"""What "best" means: the objective of a problem, its value on a simulated
plan, the bound that holds for every plan, and TDI%.

``serial``: the simulator's ``total_time`` (sum of compute and copy times;
the quantity Checkmate, Moccasin and XEngine minimise).  ``makespan``: the
simulator's ``makespan`` (each device and each copy direction its own
stream).  TDI% is ``(value - base) / base * 100`` with ``base`` the sum of
the primary device's costs, for both.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(4, bytes=1, cost=2.0), "100%")
>>> SERIAL.trivial_bound(p), SERIAL.tdi_pct(p, 10.0)
(8.0, 25.0)
"""

from __future__ import annotations

import numpy as np

from .errors import HybridRematError

__all__ = ["Objective", "SERIAL", "MAKESPAN", "OBJECTIVES", "get_objective"]


class Objective:
    """One objective: ``value(sim)``, ``trivial_bound(problem)``, ``tdi_pct``."""

    name = "objective"

    def value(self, sim) -> float:
        raise NotImplementedError

    def trivial_bound(self, problem) -> float:
        raise NotImplementedError

    def tdi_pct(self, problem, value: float) -> float:
        """``(value - base) / base * 100``; ``nan`` for a non-finite value."""
        base = problem.base_cost
        if not np.isfinite(value):
            return float("nan")
        return (float(value) - base) / base * 100.0 if base > 0 else 0.0

    def __repr__(self) -> str:
        return f"<objective {self.name}>"


def _cheapest_costs(problem) -> np.ndarray:
    cm = np.asarray(problem.cost_matrix, dtype=np.float64)
    can = np.asarray(problem.can_compute, dtype=bool)
    return cm[can].min(axis=0)


class SerialTime(Objective):
    """Sum of compute and copy times; bounded by every node once on its
    cheapest device."""

    name = "serial"

    def value(self, sim) -> float:
        return float(sim.total_time)

    def trivial_bound(self, problem) -> float:
        return float(_cheapest_costs(problem).sum())


class Makespan(Objective):
    """Time with devices and copy directions overlapping; bounded by the
    longest path at the cheapest costs and by the cheapest work spread over
    the compute devices."""

    name = "makespan"

    def value(self, sim) -> float:
        return float(sim.makespan)

    def trivial_bound(self, problem) -> float:
        c = _cheapest_costs(problem)
        g = problem.graph
        finish = np.zeros(g.n, dtype=np.float64)
        pp, pi = g.pred_ptr, g.pred_idx
        for v in range(g.n):  # nodes are numbered in a topological order
            lo, hi = pp[v], pp[v + 1]
            finish[v] = c[v] + (finish[pi[lo:hi]].max() if hi > lo else 0.0)
        k = max(1, int(np.asarray(problem.can_compute).sum()))
        return float(max(finish.max(initial=0.0), c.sum() / k))


SERIAL = SerialTime()
MAKESPAN = Makespan()
OBJECTIVES = {"serial": SERIAL, "makespan": MAKESPAN}


def get_objective(objective) -> Objective:
    """``"serial"``, ``"makespan"`` or an :class:`Objective` -> the object.

    Raises
    ------
    HybridRematError
        An unknown name.
    """
    if isinstance(objective, Objective):
        return objective
    try:
        return OBJECTIVES[objective]
    except (KeyError, TypeError):
        raise HybridRematError(f"unknown objective {objective!r}: use 'serial' or 'makespan'") from None
