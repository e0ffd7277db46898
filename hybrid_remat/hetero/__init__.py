"""CPU+GPU planning: operator placement, transfers and host offload.

* :mod:`~hybrid_remat.hetero.heft`    memory-aware HEFT list scheduling with DTR eviction
* :mod:`~hybrid_remat.hetero.heft_kernel` its Numba kernel (work budget, near-linear)
* :mod:`~hybrid_remat.hetero.heft_state` the kernel's records (graph, devices, variant, state)
* :mod:`~hybrid_remat.hetero.insertion` HEFT's insertion as the improver ``insertion`` (makespan)
* :mod:`~hybrid_remat.hetero.lift`    single-device plans lifted with host offload (re-exports :mod:`hybrid_remat.core.lift`)
* :mod:`~hybrid_remat.hetero.xengine` XEngine's staged MILP with transfer variables (SCIP), at every size
* :mod:`~hybrid_remat.hetero.xengine_model` building that model, whole or as a window of a plan
* :mod:`~hybrid_remat.hetero.makespan` the same model with the simulator's timing: exact makespan (SCIP)
* :mod:`~hybrid_remat.hetero.staging` stage grids: model sizes, memory units, copy costs, coarse grids
* :mod:`~hybrid_remat.hetero.paging`  POET-style paging (storage-only host)

The exhaustive search of the tests (one device or several) is
:func:`hybrid_remat.oracle.brute_force`.
"""

from .heft import HeftScheduler, heft_plan
from .lift import lift_plan
from .lifted import LiftedSingleDevice
from .paging import HeftOffload, PagingMILP, paging_problem
from .xengine import XEngineMILP, model_size

__all__ = [
    "HeftScheduler", "heft_plan", "LiftedSingleDevice", "lift_plan", "HeftOffload", "PagingMILP",
    "paging_problem", "XEngineMILP", "model_size",
]
