"""The one protocol of every reduction: apply -> solve -> invert, forward
for warm starts, carry for what a result proves.

A *reduction* turns a problem into another one that some solver handles
(fewer nodes, another numbering, one device, storage-only devices, merged
devices) and relates the two:

* ``apply(problem)`` -- the reduced problem (``None``: the reduction does
  not apply, e.g. the graph does not fit on the device).  The reduction
  remembers ``problem`` (its *original*); the three maps below refer to the
  last problem it was applied to.
* ``invert(plan)`` -- a plan of the reduced problem as a plan of the
  original (``None`` for ``None``, or when the reduction maps no plans back:
  ``maps_plans`` is false).  :meth:`Reduction.inverts` gives every variant
  worth offering (tagged; the one-device reduction also lifts the plan with
  host offload).
* ``forward(plan)`` -- a plan of the original as a plan of the reduced
  problem, to warm-start a solver of the reduced problem (``None``: the plan
  lies outside the reduced problem's class).
* ``carry(bound, status)`` -- a :class:`Carried`: what a bound and a status
  proved on the reduced problem say about the original.  ``scope`` names the
  plans of the original they hold for: :data:`ALL_PLANS` only when every plan
  of the original is covered (a relabelling; the merged devices, whose
  optimum no multi-device plan beats), else the reduction's restricted class
  (``"paging"``, ``"gpu only"``...), so that a bound over a restricted class
  is always named as such.  ``Carried.status`` is what the result proves
  about the original over every plan (``"optimal"`` only with scope
  :data:`ALL_PLANS` and an exact reduction), ``Carried.scope_status`` what it
  proves within ``scope`` (a formulation declaring ``"scoped_bound"``
  reports that one, as the hookspec says).

The implementations: :class:`~hybrid_remat.core.reductions.NodeMap`
(relabelling and induced sub-problems), and in
:mod:`hybrid_remat.core.devices` the one-device, merged-device and paging
reductions of a multi-device problem.  The portfolio
(:mod:`hybrid_remat.portfolio.reduce`), the paging formulation and the lift
heuristic drive them through this protocol only.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.core.reductions import NodeMap
>>> p = Problem.single(chain(3, bytes=1), 2)
>>> r = NodeMap([0, 1, 2])
>>> r.apply(p) is p, r.carry(5.0, "optimal")
(True, Carried(bound=5.0, status='optimal', scope='all plans', scope_status='optimal'))
>>> s = NodeMap([1, 2]); _ = s.apply(p)
>>> s.carry(5.0, "optimal")
Carried(bound=5.0, status='feasible', scope='induced on 2 of 3 nodes', scope_status='optimal')
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import NamedTuple

from ..errors import PlanError

__all__ = ["ALL_PLANS", "Carried", "Reduction", "carried_status"]

#: the scope of a bound that holds for every plan of the problem (the same string as
#: :data:`hybrid_remat.interfaces.ALL_PLANS`)
ALL_PLANS = "all plans"

#: statuses that keep their meaning outside the scope they were proved in
_OUTSIDE = {"optimal": "feasible", "infeasible": "no_solution"}


class Carried(NamedTuple):
    """What a result on the reduced problem proves about the original.

    ``bound``: a lower bound on the original's objective over the plans of
    ``scope`` (``-inf``: none); ``status``: the status it proves for the
    original over every plan; ``scope``: the plans the bound and
    ``scope_status`` hold for (:data:`ALL_PLANS` or a restricted class);
    ``scope_status``: the status within ``scope``.
    """

    bound: float
    status: str
    scope: str
    scope_status: str


def carried_status(status: str, scope: str, exact: bool = True) -> str:
    """``status`` proved within ``scope`` as a status over every plan:
    unchanged for :data:`ALL_PLANS` of an exact reduction; outside it
    ``optimal`` is only ``feasible`` (a plan was found) and ``infeasible``
    only ``no_solution`` (nothing in the class, which says nothing of the
    rest)."""
    if scope == ALL_PLANS and exact:
        return status
    return _OUTSIDE.get(status, status)


class Reduction(ABC):
    """A problem reduction (module docstring: the protocol).

    Subclasses set ``name``, implement :meth:`apply`, :meth:`invert`,
    :meth:`forward` and :meth:`scope_of`, and may override :meth:`carry`
    (default: the bound holds for ``scope_of()`` unchanged),
    :meth:`inverts` and :meth:`lower_bound`.

    Attributes
    ----------
    name : str
        Shown in reports (``"gpu only"``, ``"paging"``).
    prefix : str
        Prefixed to the sources of what a sub-run of the reduced problem
        finds (``"gpu/"``).
    maps_plans : bool
        Whether :meth:`invert` maps plans back (``False``: the reduced
        problem only gives bounds).
    exact : bool
        Whether the reduced problem's optimum over :meth:`scope_of` is the
        original's optimum over it (so ``optimal`` carries over).
    original : Problem or None
        The problem it was last applied to.
    optimum : float
        The reduced problem's optimum once a solver proved it (``inf``
        until then).
    """

    name: str = "reduction"
    prefix: str = ""
    maps_plans: bool = True
    exact: bool = True

    def __init__(self):
        self.original = None
        self.optimum = math.inf

    @abstractmethod
    def apply(self, problem):
        """The reduced problem (``None``: it does not apply); remembers ``problem``."""

    @abstractmethod
    def invert(self, plan):
        """A plan of the reduced problem as a plan of the original."""

    @abstractmethod
    def forward(self, plan):
        """A plan of the original as a plan of the reduced problem (``None``: outside its class)."""

    @abstractmethod
    def scope_of(self) -> str:
        """The plans of the original that the reduced problem's bounds speak for."""

    def carry(self, bound: float, status: str = "feasible") -> Carried:
        """What ``bound`` and ``status`` of the reduced problem prove about the original."""
        scope = self.scope_of()
        value = -math.inf if bound is None else float(bound)
        return Carried(value, carried_status(status, scope, self.exact), scope, status)

    def inverts(self, plan) -> list:
        """``[(tag, plan)]``: every plan of the original worth offering for
        ``plan`` (default: :meth:`invert`'s, tag ``""``)."""
        out = self.invert(plan)
        return [] if out is None else [("", out)]

    def lower_bound(self, problem) -> float:
        """What every plan of ``problem`` that this reduction produces costs at
        least (``-inf``: nothing known); the portfolio skips a reduction
        whose bound reaches the incumbent."""
        return -math.inf

    def _original(self):
        if self.original is None:
            raise PlanError(f"reduction {self.name!r}: apply it to a problem before mapping plans")
        return self.original
