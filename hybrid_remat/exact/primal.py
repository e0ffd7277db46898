"""Deprecated location of the staged greedy ``staged_evict``: it is a
heuristic and lives in :mod:`hybrid_remat.heuristics.staged_evict`.

This shim keeps ``from hybrid_remat.exact.primal import StagedEvict``
working for callers that have not moved yet (it imports lazily, so importing
:mod:`hybrid_remat.exact` does not import the heuristics); remove it once
none is left.
"""

_MOVED = ("StagedEvict", "staged_evict_order")
__all__: list[str] = []  # nothing new is defined here


def __getattr__(name):
    if name in _MOVED:
        from ..heuristics import staged_evict

        return getattr(staged_evict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
