"""Deprecated names of the oracle: :func:`hybrid_remat.oracle.brute_force`
is the one brute force (scopes ``"all"``, ``"frontier"``, ``"staged"``; one
device or several; one error type,
:class:`~hybrid_remat.oracle.BruteForceError`).  These wrappers keep the
older names and return values (the optimum only) for callers that have not
moved yet.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> brute_force_optimum(Problem.single(chain(4, bytes=1), 2))
4.0
"""

from __future__ import annotations

from ..oracle import brute_force

__all__ = ["brute_force_optimum", "brute_force_staged_optimum"]


def brute_force_optimum(problem) -> float:
    """The least total compute time over every valid plan (``inf`` if none)."""
    return brute_force(problem, "all")[0]


def brute_force_staged_optimum(problem, starts=None) -> float:
    """The least total compute time over the staged plans of the Checkmate
    model with stage blocks ``starts`` (default one node per stage)."""
    return brute_force(problem, "staged", starts=starts)[0]
