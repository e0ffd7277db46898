"""Built-in exact formulations (and the LP-rounding heuristic that shares
their model builder), registered through the plugin hooks."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_formulations():
    from ..exact.checkmate import CheckmateFormulation

    return [CheckmateFormulation()]


@hookimpl
def hybrid_remat_register_heuristics():
    from ..exact.primal import StagedEvict
    from ..heuristics.lp_rounding import LPRounding

    return [StagedEvict(), LPRounding()]
