"""Scaling before every SCIP model: objectives by their largest
coefficient (:class:`ObjectiveScale`), bytes by a memory unit
(:class:`MemoryScale`), and every bound checked against the best plan
(:func:`check_bound`), so that a cost of 1e-9 s is as safe as one of 1e6 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import reduce

import numpy as np

from .status import BOUND_RTOL

__all__ = ["ObjectiveScale", "MemoryScale", "check_bound"]

@dataclass(frozen=True)
class ObjectiveScale:
    """``real = offset + scale * model`` for an objective whose model
    coefficients are the real ones divided by ``scale`` (the largest), so
    that SCIP's absolute tolerances become relative to the data.

    Examples
    --------
    >>> s = ObjectiveScale.of([1e-9, 3e-9], offset=4e-9)
    >>> s.coef(3e-9), s.real(2.0)
    (1.0, 1e-08)
    >>> s.bound(2.0) < s.real(2.0)
    True
    """

    scale: float = 1.0
    offset: float = 0.0

    @classmethod
    def of(cls, costs, offset: float = 0.0) -> ObjectiveScale:
        """Scale by the largest finite ``|cost|`` (1 when there is none)."""
        c = np.abs(np.asarray(costs, dtype=np.float64).ravel())
        c = c[np.isfinite(c) & (c > 0)]
        return cls(float(c.max()) if c.size else 1.0, float(offset))

    def coef(self, cost: float) -> float:
        """A real cost as a model coefficient."""
        return float(cost) / self.scale

    def real(self, model_value: float) -> float:
        """A model objective value in real units."""
        return self.offset + self.scale * float(model_value)

    def model(self, real_value: float) -> float:
        """A real objective value in model units."""
        return (float(real_value) - self.offset) / self.scale

    def slack(self, model_value: float) -> float:
        """SCIP's tolerance around a model value, in model units."""
        return BOUND_RTOL * max(1.0, abs(float(model_value)))

    def bound(self, model_dual: float) -> float:
        """A trusted dual bound in real units, lowered by the tolerance."""
        return self.real(float(model_dual) - self.slack(model_dual))

    def tolerance(self, real_value: float) -> float:
        """The real-unit tolerance within which a bound meets a plan's value."""
        return self.scale * 2.0 * self.slack(self.model(real_value)) + 1e-12 * abs(float(real_value))


@dataclass(frozen=True)
class MemoryScale:
    """How bytes become model units: sizes rounded up, the budget down.

    Attributes
    ----------
    unit : int
        Bytes per unit.
    budget : int
        ``floor(B / unit)``.
    sizes : ndarray of int64
        ``ceil(bytes / unit)`` per node.
    exact : bool
        ``unit`` divides every size, so model memory is exact (the budget is
        floored without loss: memory is a multiple of ``unit``).
    relaxed : bool
        Sizes were rounded *down* (``relax=True`` with an inexact unit): the
        model then admits every plan that fits in bytes (and a few that do
        not), so its dual bound bounds the modelled class; its solutions
        must be checked by the simulator (they always are).
    """

    unit: int
    budget: int
    sizes: np.ndarray = field(repr=False)
    exact: bool
    relaxed: bool = False

    @property
    def bound_valid(self) -> bool:
        """Whether the model's optimum is at most the best byte-feasible plan's."""
        return self.exact or self.relaxed

    def units(self, budget_bytes) -> int:
        """Another budget in this unit (floored; conservative unless exact)."""
        return int(int(budget_bytes) // self.unit)

    @classmethod
    def choose(cls, bytes_, budget: int, *, max_units: int = 1 << 24, target_units: int = 1 << 18,
               relax: bool = False) -> MemoryScale:
        """The gcd of all sizes when that leaves at most ``max_units`` budget
        units (exact: memory is always a multiple of it, so flooring the
        budget loses nothing), else a multiple of it giving about
        ``target_units``: sizes rounded up (conservative: every model plan
        fits in bytes) or, with ``relax=True``, down (a relaxation: every
        plan that fits in bytes is a model plan, since
        ``sum floor(b/u) <= floor(sum b / u) <= floor(B/u)``).

        Examples
        --------
        >>> MemoryScale.choose([3, 5], 10, max_units=2, target_units=2).sizes.tolist()
        [1, 1]
        >>> MemoryScale.choose([3, 5], 10, max_units=2, target_units=2, relax=True).sizes.tolist()
        [0, 1]
        """
        vals = [int(b) for b in np.asarray(bytes_).tolist() if b > 0]
        g = reduce(math.gcd, vals) if vals else 1
        unit = g
        budget = int(budget)
        if budget // g > max_units:
            unit = g * max(1, math.ceil(budget / g / target_units))
        exact = unit == g
        b = np.asarray(bytes_, dtype=np.int64)
        relaxed = bool(relax and not exact)
        sizes = b // unit if relaxed else -(-b // unit)
        return cls(int(unit), int(budget // unit), sizes.astype(np.int64), bool(exact), relaxed)


def check_bound(bound: float, best_value: float, tolerance: float) -> tuple[float, str]:
    """A bound checked against the best simulated plan's value.

    Returns ``(bound, note)``: the bound (clamped to ``best_value`` when it
    exceeds it by at most ``tolerance``), or ``-inf`` with a note when it
    exceeds it by more (a numerical failure: never report it).

    Examples
    --------
    >>> check_bound(8.0 + 1e-12, 8.0, 1e-9)
    (8.0, '')
    >>> check_bound(9.0, 8.0, 1e-9)[0]
    -inf
    """
    if not math.isfinite(bound) or not math.isfinite(best_value) or bound <= best_value:
        return float(bound), ""
    if bound - best_value <= tolerance:
        return float(best_value), ""
    return float("-inf"), (f"bound {bound:.12g} exceeds a simulated plan's value {best_value:.12g} "
                           f"(tolerance {tolerance:.3g}): dropped as a numerical failure")
