"""The plan classes below heuristics, exact models and hetero planners.

* :mod:`~hybrid_remat.core.sequence`: the minimal-memory plan of a compute
  sequence (one kernel for its frees, profile and peak), pruning of
  recomputations and of unread computations.
* :mod:`~hybrid_remat.core.reductions`: relabelled and sub-problems
  (apply -> solve -> invert).
* :mod:`~hybrid_remat.core.staged`: the staged R/S/X encoding of Checkmate
  and XEngine (encode, decode, staged_rs).

:mod:`hybrid_remat.heuristics`, :mod:`hybrid_remat.exact` and
:mod:`hybrid_remat.hetero` import from here; nothing here imports them.
"""

__all__: list[str] = []
