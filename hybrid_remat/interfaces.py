"""Base classes of what plugins register: heuristics, formulations, cost
models and loaders.

They are conveniences (duck typing is enough): each declares ``name``,
``version`` and ``capabilities`` as class attributes, in the manner of
cvxpy's solver interfaces, and the one method the library calls.

Capabilities
------------
``"dag"``            accepts arbitrary DAGs (otherwise chains only)
``"chain"``          accepts chains
``"single_device"``  accepts one-device problems
``"multi_device"``   accepts problems with several devices
``"needs_budget"``   only meaningful under a memory budget
``"exact"``          (formulations) proves bounds / optimality
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Heuristic", "Formulation", "FormulationResult", "CostModel", "Loader",
    "accepts", "is_chain",
]


def is_chain(graph) -> bool:
    """True when every node has at most one predecessor and one successor
    and the edges are ``i -> i+1``."""
    n = graph.n
    if graph.m != n - 1:
        return False
    return bool(np.all(graph.succ_idx == np.arange(1, n)) and np.all(np.diff(graph.succ_ptr)[:-1] == 1)) if n > 1 else True


def accepts(obj, problem) -> tuple[bool, str]:
    """Whether ``obj``'s declared capabilities admit ``problem``; with a reason."""
    caps = set(getattr(obj, "capabilities", ()))
    if problem.n_devices > 1 and "multi_device" not in caps:
        return False, "single-device only"
    if problem.n_devices == 1 and "single_device" not in caps:
        return False, "multi-device only"
    if "dag" not in caps and not is_chain(problem.graph):
        return False, "chains only"
    applicable = getattr(obj, "applicable", None)
    if callable(applicable):  # an object's own finer test (e.g. a size range), with its reason
        ok, why = applicable(problem)
        if not ok:
            return False, str(why)
    return True, ""


class Heuristic:
    """A fast planner.  Subclass and implement :meth:`run`.

    Attributes
    ----------
    name : str
    version : str
    capabilities : frozenset of str
    rank : float
        Expected cost; ``anytime_solve`` runs cheaper heuristics first.
    """

    name: str = "heuristic"
    version: str = "0"
    capabilities: frozenset = frozenset({"dag", "chain", "single_device", "needs_budget"})
    rank: float = 10.0

    def run(self, problem, *, seed: int = 0):
        """Return a :class:`~hybrid_remat.plan.Plan` for ``problem`` or
        ``None`` when no feasible plan was found.  The caller simulates the
        plan; a plan over budget is discarded."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<heuristic {self.name}@{self.version}>"


@dataclass
class FormulationResult:
    """What a formulation's ``solve`` returns.

    ``status`` is one of ``optimal``, ``feasible``, ``infeasible``,
    ``no_solution`` (limit hit with nothing found) or ``error``.
    ``plan`` is the best plan it found (not necessarily better than the
    incumbent it was given), ``lower_bound`` a proven bound on the total
    compute time (``-inf`` when none), ``stats`` free-form figures.
    """

    status: str
    plan: object = None
    objective: float = float("inf")
    lower_bound: float = float("-inf")
    stats: dict = field(default_factory=dict)


class Formulation:
    """An exact (or bounding) model.  Subclass and implement :meth:`solve`.

    ``rank`` orders formulations in ``anytime_solve`` (lower first; ties keep
    registration order): exact models 10, search without bounds later.
    """

    name: str = "formulation"
    version: str = "0"
    capabilities: frozenset = frozenset({"dag", "chain", "single_device", "exact"})
    rank: float = 10.0

    def solve(
        self,
        problem,
        *,
        incumbent=None,
        time_limit: float = 60.0,
        node_limit: int | None = None,
        seed: int = 0,
        threads: int = 1,
        on_incumbent: Callable | None = None,
        on_bound: Callable | None = None,
        stop: threading.Event | None = None,
    ) -> FormulationResult:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<formulation {self.name}@{self.version}>"


class CostModel:
    """Estimates operator times.  Subclass and implement :meth:`estimate`."""

    name: str = "cost_model"
    version: str = "0"
    capabilities: frozenset = frozenset()

    def devices(self) -> list[str]:
        return []

    def estimate(self, graph, device: str) -> np.ndarray:
        raise NotImplementedError


class Loader:
    """Reads a graph file.  Subclass and implement :meth:`sniff` and :meth:`load`."""

    name: str = "loader"
    version: str = "0"
    capabilities: frozenset = frozenset()

    def sniff(self, path: str, head: bytes) -> bool:
        raise NotImplementedError

    def load(self, path: str):
        raise NotImplementedError
