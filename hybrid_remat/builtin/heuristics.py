"""Built-in heuristics and improvers (and the improver ``lns`` offered as a
formulation too), registered through the plugin hooks."""

from ..heuristics import builtin_heuristics, builtin_improvers
from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    return builtin_heuristics()


@hookimpl
def hybrid_remat_register_improvers():
    return builtin_improvers()


@hookimpl
def hybrid_remat_register_formulations():
    from ..heuristics.lns import LNSFormulation

    return [LNSFormulation()]
