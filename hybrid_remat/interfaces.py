"""Base classes of what plugins register: heuristics, bounds, improvers,
formulations, cost models and loaders.

They are conveniences (duck typing is enough): each declares ``name``,
``version`` and ``capabilities`` as class attributes, in the manner of
cvxpy's solver interfaces, and the one method the library calls.

Every component that searches takes a :class:`~hybrid_remat.limits.Limits`
(``limits=``): a deadline, an optional deterministic work budget and a stop
flag, and returns within it with the best it has.

Capabilities
------------
:data:`CAPABILITIES` is the one vocabulary; :func:`accepts` reads all of it.

``"chain"``            accepts chains
``"dag"``              accepts arbitrary DAGs (otherwise chains only)
``"single_device"``    accepts one-device problems
``"multi_device"``     accepts problems with several devices
``"serial"``           optimises serial time (the default when neither objective is named)
``"makespan"``         optimises makespan (devices and copies overlap)
``"needs_budget"``     only useful when the budget is below the keep-all peak
``"exact"``            proves bounds (formulations; without it a formulation's bounds are
                       reported as bounds of its own class, never over every plan)
``"scoped_bound"``     its bounds hold for a restricted plan class named by ``bound_scope``
``"needs_incumbent"``  runs only when the portfolio has a plan to start from
``"honours_limits"``   returns within the ``Limits`` it is given (otherwise it runs
                       only where the portfolio can stop it: a worker process)
``"deterministic"``    same seed and work budget: same result
``"shares_incumbent"`` takes ``shared=`` and reads the portfolio's incumbent while it runs
``"bound_only"``       (legacy) a heuristic that only reports a bound; register a Bound instead
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Heuristic", "Bound", "BoundResult", "Improver", "Formulation", "FormulationResult", "CostModel", "Loader",
    "accepts", "is_chain", "CAPABILITIES", "ALL_PLANS", "SERIAL_BOUND_CAPABILITIES", "objectives_of",
]

#: the capability vocabulary (name -> meaning); :func:`accepts` reads every entry
CAPABILITIES = {
    "chain": "accepts chains",
    "dag": "accepts arbitrary DAGs",
    "single_device": "accepts one-device problems",
    "multi_device": "accepts problems with several devices",
    "serial": "optimises serial time",
    "makespan": "optimises makespan",
    "needs_budget": "only useful when the budget is below the keep-all peak",
    "exact": "proves bounds",
    "needs_incumbent": "runs only when the portfolio has a plan to start from",
    "scoped_bound": "its bounds hold for a restricted plan class (bound_scope)",
    "honours_limits": "returns within the Limits it is given",
    "deterministic": "same seed and work budget: same result",
    "shares_incumbent": "reads the portfolio's incumbent while it runs (shared=)",
    "bound_only": "legacy: a heuristic that only reports a bound",
}

#: the scope of a bound that holds for every plan of the problem
ALL_PLANS = "all plans"

#: what the built-in bounds of serial time on one device declare (the cut bound and its relatives)
SERIAL_BOUND_CAPABILITIES = frozenset({"dag", "chain", "single_device", "needs_budget", "serial", "honours_limits",
                                       "deterministic"})


def objectives_of(obj) -> frozenset:
    """The objectives an object optimises: those of ``serial``/``makespan``
    it declares, or ``{"serial"}`` when it names neither."""
    caps = set(getattr(obj, "capabilities", ()))
    named = caps & {"serial", "makespan"}
    return frozenset(named or {"serial"})


def is_chain(graph) -> bool:
    """True when every node has at most one predecessor and one successor
    and the edges are ``i -> i+1``."""
    n = graph.n
    if graph.m != n - 1:
        return False
    return bool(np.all(graph.succ_idx == np.arange(1, n)) and np.all(np.diff(graph.succ_ptr)[:-1] == 1)) if n > 1 else True


def accepts(obj, problem) -> tuple[bool, str]:
    """Whether ``obj``'s declared capabilities admit ``problem``; with a reason.

    Reads the devices (``single_device``/``multi_device``), the graph shape
    (``dag``/``chain``) and the object's own ``applicable(problem)``.  The
    rest of the vocabulary says *how* the portfolio runs an object, not
    whether it may: the objectives (:func:`objectives_of`) decide whether its
    bounds count, ``needs_budget`` skips it on one device when keep-all fits,
    ``needs_incumbent`` until there is a plan, ``honours_limits`` whether it
    may run in-process, ``exact``/``scoped_bound`` how its bounds are
    reported, ``deterministic`` that it is not run again from the same
    incumbent, ``shares_incumbent`` whether it gets ``shared=``,
    ``bound_only`` makes a legacy heuristic a bound
    (:mod:`hybrid_remat.portfolio`).
    """
    caps = set(getattr(obj, "capabilities", ()))
    if problem.n_devices > 1 and "multi_device" not in caps:
        return False, "single-device only"
    if problem.n_devices == 1 and "single_device" not in caps:
        return False, "multi-device only"
    if "dag" not in caps and not is_chain(problem.graph):
        if "chain" not in caps:
            return False, "declares neither 'chain' nor 'dag'"
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
        Expected cost: without calibration figures, ``anytime_solve`` gives
        each component a short first slot in its phase, cheaper first
        (:mod:`~hybrid_remat.portfolio.scheduler`).
    """

    name: str = "heuristic"
    version: str = "0"
    capabilities: frozenset = frozenset({"dag", "chain", "single_device", "needs_budget"})
    rank: float = 10.0

    def run(self, problem, *, seed: int = 0, limits=None):
        """Return a :class:`~hybrid_remat.plan.Plan` for ``problem`` or
        ``None`` when no feasible plan was found.  The caller simulates the
        plan; a plan over budget is discarded.  ``limits``
        (:class:`~hybrid_remat.limits.Limits`) bounds the time and work; a
        heuristic that declares ``"honours_limits"`` returns within it."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<heuristic {self.name}@{self.version}>"


@dataclass
class BoundResult:
    """What a bound's ``bound`` returns: a lower bound on the objective,
    the plans it covers (``scope``: :data:`ALL_PLANS` or the name of a
    restricted class) and free-form figures."""

    value: float
    scope: str = ALL_PLANS
    stats: dict = field(default_factory=dict)


class Bound:
    """A source of lower bounds.  Subclass and implement :meth:`bound`.

    ``bound(problem, *, limits=None) -> BoundResult``: a value no plan in
    ``scope`` can beat.  A bound over :data:`ALL_PLANS` that a plan reaches
    proves it optimal, and ``anytime_solve`` stops there.

    ``infeasibility_only = True`` declares a bound that is either ``+inf``
    (no plan fits) or says nothing: the portfolio skips it once it holds a
    valid plan.
    """

    name: str = "bound"
    version: str = "0"
    capabilities: frozenset = frozenset({"dag", "chain", "single_device", "honours_limits", "deterministic"})
    rank: float = 10.0
    infeasibility_only: bool = False

    def bound(self, problem, *, limits=None) -> BoundResult:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<bound {self.name}@{self.version}>"


class Improver:
    """Makes a valid plan better.  Subclass and implement :meth:`improve`.

    ``improve(problem, plan, *, seed=0, limits=None, on_incumbent=None,
    shared=None) -> Plan | None``: the best plan it found from ``plan`` (may be
    ``plan`` itself; ``None``: nothing better).  It calls
    ``on_incumbent(plan, source)`` with each improvement as it goes (so a
    stopped improver loses nothing) and returns within ``limits``.
    """

    name: str = "improver"
    version: str = "0"
    capabilities: frozenset = frozenset({"dag", "chain", "single_device", "honours_limits"})
    rank: float = 10.0

    def improve(self, problem, plan, *, seed: int = 0, limits=None, on_incumbent: Callable | None = None,
                shared=None):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<improver {self.name}@{self.version}>"


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
    bound_scope: str = ALL_PLANS

    def solve(self, problem, *, incumbent=None, limits=None, seed: int = 0, on_incumbent: Callable | None = None,
              on_bound: Callable | None = None) -> FormulationResult:
        """Solve within ``limits``, starting from ``incumbent`` when given;
        ``on_incumbent(plan, source)`` each plan as it is found,
        ``on_bound(value)`` each bound of scope ``bound_scope``
        (:data:`ALL_PLANS` unless the formulation declares
        ``"scoped_bound"`` and names its class)."""
        raise NotImplementedError

    def constructs_on(self, problem) -> bool:
        """Whether the portfolio runs it with the heuristics (its first
        pass, a *constructor*) on ``problem`` while the calibration table
        has no row for it (:mod:`hybrid_remat.portfolio.scheduler`): true
        where it can deliver a first plan on its own, faster than the
        heuristics reach one as good (the segment chain on graphs whose
        layers all differ).  Default ``False``: it runs after the
        improvers' first pass."""
        return False

    @staticmethod
    def limits_of(limits=None):
        """``limits``, or no limits when ``None`` (a direct caller's
        ``solve(problem)``); a formulation on SCIP uses
        :func:`hybrid_remat.scip.solve_limits`, which adds a default time
        limit and a stop flag."""
        from .limits import Limits

        return limits if limits is not None else Limits()

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
