"""The entry point module (``[project.entry-points.hybrid_remat] ortools``)."""

from hybrid_remat import hookimpl

from .formulation import CpSatRemat


@hookimpl
def hybrid_remat_register_formulations():
    return [CpSatRemat()]
