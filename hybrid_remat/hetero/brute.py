"""Deprecated name of the oracle for several devices:
:func:`hybrid_remat.oracle.brute_force` (``scope="all"`` or
``"frontier"``) is the one brute force.  This wrapper keeps the older
``frontier=`` keyword for callers that have not moved yet.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> float(brute_force(Problem.single(chain(3, bytes=1), 2))[0])
3.0
"""

from __future__ import annotations

from .. import oracle

__all__ = ["brute_force"]


def brute_force(problem, *, frontier: bool = False, max_states: int = 2_000_000):
    """``(time, plan)``: the least serial time over all valid plans (with
    ``frontier``, first computations in index order); ``(inf, None)`` when
    there is none."""
    return oracle.brute_force(problem, "frontier" if frontier else "all", max_states=max_states)
