"""The plan classes below heuristics, exact models and hetero planners.

* :mod:`~hybrid_remat.core.plans`: the :class:`~hybrid_remat.core.plans.Plan`
  class (public as :class:`hybrid_remat.plan.Plan`).
* :mod:`~hybrid_remat.core.sequence`: the minimal-memory plan of a compute
  sequence (one kernel for its frees, profile and peak), the kernels that
  prune recomputations and unread computations (the improver that uses
  them, which needs the simulator, is
  :func:`hybrid_remat.pruning.drop_recomputations`).
* :mod:`~hybrid_remat.core.reductions`: relabelled and sub-problems
  (apply -> solve -> invert).
* :mod:`~hybrid_remat.core.staged`: the staged R/S/X encoding of Checkmate
  and XEngine (encode, decode, staged_rs).

:mod:`hybrid_remat.plan`, the simulator, :mod:`hybrid_remat.heuristics`,
:mod:`hybrid_remat.exact` and :mod:`hybrid_remat.hetero` import from here;
nothing here imports them (``tests/test_imports.py``).
"""

__all__: list[str] = []
