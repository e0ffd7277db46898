"""Built-in multi-device (CPU+GPU) heuristics and formulations."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    return []


@hookimpl
def hybrid_remat_register_formulations():
    return []
