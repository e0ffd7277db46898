"""Lower bounds: every built-in bound implementation lives here (the
hook is ``hybrid_remat_register_bounds``; the built-ins register in
:mod:`hybrid_remat.builtin.bounds`).

* :mod:`.cut` -- the cut bound over every plan (:func:`cut_lower_bound`,
  registered as ``cut_bound``; :func:`partition_lower_bound` for the parts
  of a decomposition) and its graph kernels (:func:`cut_items`, :func:`reach`).
* :mod:`.cut_models` -- the small per-cut models behind it (cover and
  closure, LP and SCIP).
* :mod:`.multicut` -- the memory constraints at a chain of cuts at once
  (:func:`multicut_lower_bound`, registered as ``multicut_bound``).
* :mod:`.feasibility` -- ``+inf`` when no plan fits the budget (the order
  bound and the exact search for the smallest feasible budget), registered
  as ``feasibility``.
* :mod:`.state_search` -- A* over (resident set, computed set): exact where it
  finishes, a frontier bound when stopped (``state_search_bound``).
* :mod:`.placed_cuts` -- the chain of cuts with the weight gradients placed in
  its intervals (``placed_cuts_bound``).
* :mod:`.first_moment` -- the memory at the first computation of any heavy
  node, nothing heavy computed before it (``first_moment_bound``).
* :mod:`.frontier_cuts` -- the cut bound with every node off the cut's
  ancestry placed before or after it (``frontier_cuts_bound``).
* :mod:`.order_search` -- a search over orders with no recomputation
  (``recompute_bound``: where no order avoids recomputing outside a cheap
  set, every plan pays for one of the rest); its plans are the heuristics of
  :mod:`hybrid_remat.heuristics.order_search`.

* :mod:`.blocks` -- the block bound over the repeated blocks (or the runs of
  the segment chain) that :mod:`hybrid_remat.blocks` detects, from their
  per-block staircases (``block_bound``).
* :mod:`.segments` -- the same bound over the segment chain's partition
  (:func:`~hybrid_remat.bounds.segments.segment_lower_bound`, the
  ``segments`` formulation's bound).

:mod:`hybrid_remat.blocks` does not re-export the block bound: the bound reads
the detector and the staircases, and a package ``__init__`` that imported it
back would be half-initialised while the bound loads.

Nothing here imports :mod:`hybrid_remat.heuristics` (the same layering as
:mod:`hybrid_remat.exact`); SCIP models go through :mod:`hybrid_remat.scip`.
This ``__init__`` imports no submodule, so ``from hybrid_remat.bounds.cut
import ...`` loads only what it names.
"""
