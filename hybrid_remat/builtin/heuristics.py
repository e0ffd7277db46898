"""Built-in heuristics (and the local-search formulation ``lns`` built on
them), registered through the plugin hooks."""

from ..heuristics import builtin_heuristics
from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    return builtin_heuristics()


@hookimpl
def hybrid_remat_register_formulations():
    from ..heuristics.lns import LNSFormulation

    return [LNSFormulation()]
