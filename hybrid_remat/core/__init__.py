"""The plan classes below heuristics, exact models and hetero planners.

* :mod:`~hybrid_remat.core.plans`: the :class:`~hybrid_remat.core.plans.Plan`
  class (public as :class:`hybrid_remat.plan.Plan`).
* :mod:`~hybrid_remat.core.sequence`: the minimal-memory plan of a compute
  sequence (one kernel for its frees, profile and peak), the kernels that
  prune recomputations and unread computations (the improver that uses
  them, which needs the simulator, is
  :func:`hybrid_remat.pruning.drop_recomputations`).
* :mod:`~hybrid_remat.core.reduction`: the one protocol of every reduction
  (:class:`~hybrid_remat.core.reduction.Reduction`: ``apply`` -> solve ->
  ``invert``, ``forward`` for warm starts, ``carry`` for what a reduced
  result proves, with the scope it holds for).
* :mod:`~hybrid_remat.core.reductions`: relabelled and sub-problems
  (:class:`~hybrid_remat.core.reductions.NodeMap`).
* :mod:`~hybrid_remat.core.devices`: the reductions of a multi-device
  problem (one device alone, merged devices, paging) and
  :mod:`~hybrid_remat.core.lift`, the one-device plans lifted with host
  offload (the one-device reduction's ``inverts``).
* :mod:`~hybrid_remat.core.keepset`: the keep-set plan class
  (:class:`~hybrid_remat.core.keepset.KeepSetPlanner`) of the block solver,
  the segment chain and the eager PyTorch planner.
* :mod:`~hybrid_remat.core.staged`: the staged R/S/X encoding of Checkmate
  and XEngine (encode, decode, staged_rs).

:mod:`hybrid_remat.plan`, the simulator, :mod:`hybrid_remat.heuristics`,
:mod:`hybrid_remat.exact` and :mod:`hybrid_remat.hetero` import from here;
nothing here imports them (``tests/test_imports.py``).
"""

__all__: list[str] = []
