"""Deprecated location of ``drop_recomputations`` and ``remove_unread``:
both live in :mod:`hybrid_remat.core.sequence` (and the improver
``drop_recomputations`` in :mod:`hybrid_remat.heuristics.local_search`).

These thin wrappers keep the older keyword arguments (``deadline``, an
absolute :func:`time.perf_counter` value) for callers that have not moved
yet; remove them once none is left.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> remove_unread(chain(3, bytes=1), [0, 1, 2, 1])
[0, 1, 2]
"""

from __future__ import annotations

import math

from ..core import sequence as _sequence
from ..limits import Limits

__all__ = ["drop_recomputations", "remove_unread"]

remove_unread = _sequence.remove_unread


def drop_recomputations(problem, plan, *, deadline: float | None = None, max_moves: int | None = None,
                        limits: Limits | None = None):
    """:func:`hybrid_remat.core.sequence.drop_recomputations` with a
    ``deadline`` (``max_moves`` is ignored: the passes are near-linear)."""
    lim = limits if limits is not None else Limits()
    if deadline is not None and math.isfinite(deadline):
        lim = Limits(min(lim.deadline, float(deadline)), lim.work, lim.stop, lim.nodes)
    return _sequence.drop_recomputations(problem, plan, limits=lim)
