"""Exact models and their helpers (every SCIP model is made, run and freed
through the public SCIP layer :mod:`hybrid_remat.scip`).

* :mod:`.checkmate` -- the staged Checkmate MILP on SCIP (block stages,
  triangularity by construction, exact or conservative memory units,
  Checkmate's tightening cuts, recomputation cap), its decoder, its MIP-start
  encoder and :class:`CheckmateFormulation` (registered as ``checkmate``).
* :mod:`.lp_rounding` -- Checkmate's LP relaxation + rounding.
* :mod:`.decompose` -- windows of the incumbent solved exactly.
* The bounds (the cut bound, the multicut bound, feasibility) live in
  :mod:`hybrid_remat.bounds`.

Nothing here imports :mod:`hybrid_remat.heuristics` (a formulation that
wants a heuristic's plan finds it through the registry); both build on
:mod:`hybrid_remat.core` (staged encoding, relabelling, the sequence
kernel).  The oracle of the tests is :func:`hybrid_remat.oracle.brute_force`.

Exactness trade-offs (measured in ``benchmarks/results/exact_tradeoffs.md``):
stages of ``g > 1`` nodes and the cap ``C`` restrict the plan class (the
optimum can only get worse; their bounds are not bounds of the staged class
and are never reported as such) but shrink the model and help SCIP's
heuristics.  The ``"auto"`` policy of :class:`CheckmateFormulation` uses the
restricted model first and the full one (``g = 1``, ``C = inf``) for the
proof when it can be built in time.
"""

from .checkmate import (
    CheckmateFormulation,
    CheckmateModel,
    MemoryScale,
    build_checkmate_model,
    estimate_size,
    solve_r_opt,
    stage_starts,
)

__all__ = [
    "CheckmateFormulation", "CheckmateModel", "MemoryScale", "build_checkmate_model",
    "estimate_size", "solve_r_opt", "stage_starts",
]
