"""OR-Tools CP-SAT formulation of single-device rematerialization.

Written from the description of Moccasin (Bartan et al., ICML 2023):
retention intervals, at most ``C`` computations per node, one cumulative
memory constraint, precedence through "serves" literals; on Checkmate's
staged event grid.  See :mod:`hybrid_remat_ortools.formulation`.
"""

from .formulation import CpSatRemat, event_index, plan_to_intervals

__version__ = "0.1.0"

__all__ = ["CpSatRemat", "event_index", "plan_to_intervals", "__version__"]
