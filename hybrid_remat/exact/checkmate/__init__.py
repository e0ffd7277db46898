"""The staged Checkmate MILP on SCIP (pyscipopt).

* :mod:`.model` -- building the model (:class:`CheckmateModel`; block
  stages, triangularity by construction, exact or conservative memory units,
  Checkmate's tightening cuts, recomputation cap, window models);
* :mod:`.encoding` -- plans into MIP starts and solutions into plans;
* :mod:`.policy` -- stage size, cap and phases for a time limit;
* :mod:`.formulation` -- :class:`CheckmateFormulation` (registered as
  ``checkmate``; bounds of scope ``"staged"``).

The plan <-> ``R``/``S`` encoding shared with XEngine is
:mod:`hybrid_remat.core.staged`; SCIP set-up and the run loop are
:mod:`hybrid_remat.scip`.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.limits import Limits
>>> r = CheckmateFormulation(stage_size=1).solve(Problem.single(chain(4, bytes=2), 4), limits=Limits(nodes=1000))
>>> r.status, r.objective, CheckmateFormulation.bound_scope
('optimal', 4.0, 'staged')
"""

from ...core.staged import solve_r_opt, stage_starts, staged_rs
from ...scip import DEFAULT_PARAMS, MemoryScale, apply_params
from .encoding import StagedEncoding
from .formulation import STAGED_SCOPE, CheckmateFormulation, order_scope
from .model import BuildTimeout, CheckmateModel, build_checkmate_model, estimate_size
from .policy import BUILD_RATE, CheckmatePolicy

__all__ = [
    "stage_starts", "staged_rs", "MemoryScale", "solve_r_opt", "estimate_size", "CheckmateModel",
    "build_checkmate_model", "CheckmateFormulation", "BuildTimeout", "CheckmatePolicy", "StagedEncoding",
    "STAGED_SCOPE", "order_scope", "BUILD_RATE", "DEFAULT_PARAMS", "apply_params",
]
