"""What a component may spend: a deadline, a deterministic work budget and a
stop flag, in one object that every heuristic, bound, improver and
formulation receives.

A time limit is a promise.  Every component of the portfolio takes a
:class:`Limits` and returns within it: Numba kernels take a *work budget*
(a count of inner-loop steps) derived from the time left with
:meth:`Limits.work_for`, Python loops call :meth:`Limits.expired`, exact
models pass :meth:`Limits.left` to their solver and poll ``stop``.  A
component that stops early returns the best it has (a plan, a bound, or
``None``).

``work`` is the deterministic budget: with a fixed ``work`` (and ``seed``)
a component gives the same result on every machine, which is what tests
use instead of wall-clock limits.

Examples
--------
>>> lim = Limits.seconds(10.0, work=1000)
>>> 9.0 < lim.left() <= 10.0, lim.expired()
(True, False)
>>> lim.work_for(rate=50.0) <= 1000
True
>>> Limits().left()
inf
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace

__all__ = ["Limits", "NO_LIMITS", "now", "UNLIMITED_WORK"]

#: the work budget that means "no budget" in Numba kernels (they take an int64)
UNLIMITED_WORK = (1 << 62)


def now() -> float:
    """The clock every deadline is measured on (``time.perf_counter``; the
    same monotonic clock in forked worker processes)."""
    return time.perf_counter()


@dataclass(frozen=True)
class Limits:
    """A deadline, an optional deterministic work budget and a stop flag.

    Parameters
    ----------
    deadline : float
        Absolute :func:`now` value after which the component must return;
        ``inf`` for none.
    work : int, optional
        Deterministic work units (kernel steps, moves, branch-and-bound
        nodes: each component documents its unit).  ``None``: unlimited.
    stop : threading.Event, optional
        Set by the caller (or a signal handler) to ask for an early return.
    nodes : int, optional
        Branch-and-bound node limit for exact models (tests use it instead of
        time limits).
    workers : int
        Processes a component may fan independent parts out to (the
        portfolio's worker count: ``anytime_solve(..., workers=k)``; the
        segment chain's menus, :mod:`hybrid_remat.segments.menu_exec`); 1:
        this process only.
    """

    deadline: float = math.inf
    work: int | None = None
    stop: threading.Event | None = None
    nodes: int | None = None
    workers: int = 1

    @classmethod
    def seconds(cls, seconds: float | None, **kw) -> Limits:
        """Limits ending ``seconds`` from now (``None`` or ``inf``: no deadline)."""
        if seconds is None or not math.isfinite(seconds):
            return cls(math.inf, **kw)
        return cls(now() + max(0.0, float(seconds)), **kw)

    def left(self) -> float:
        """Seconds left before the deadline (``inf`` without one, 0 when stopped)."""
        if self.stop is not None and self.stop.is_set():
            return 0.0
        return max(0.0, self.deadline - now()) if math.isfinite(self.deadline) else math.inf

    def expired(self) -> bool:
        """The deadline has passed or ``stop`` is set."""
        return (self.stop is not None and self.stop.is_set()) or now() >= self.deadline

    def share(self, seconds: float | None = None, *, work: int | None = None) -> Limits:
        """A sub-budget: the earlier of this deadline and ``seconds`` from now,
        and the smaller work budget; same ``stop``, ``nodes`` and ``workers``."""
        d = self.deadline if seconds is None else min(self.deadline, now() + max(0.0, float(seconds)))
        w = self.work if work is None else (work if self.work is None else min(self.work, work))
        return replace(self, deadline=d, work=w)

    def work_for(self, rate: float, *, cap: int | None = None) -> int:
        """Work units that fit in the time left at ``rate`` units per second,
        capped by ``work`` and ``cap``; :data:`UNLIMITED_WORK` when nothing
        limits it.  Use it to turn a deadline into a kernel's work budget."""
        out = UNLIMITED_WORK
        t = self.left()
        if math.isfinite(t):
            out = min(out, int(t * float(rate)))
        if self.work is not None:
            out = min(out, int(self.work))
        if cap is not None:
            out = min(out, int(cap))
        return max(0, out)

    @property
    def deterministic(self) -> bool:
        """Only work or node budgets limit it (no deadline): results repeat."""
        return not math.isfinite(self.deadline)


NO_LIMITS = Limits()
