"""Built-in exact formulations (the staged Checkmate model and its
decomposition), the heuristics that share their model builder (LP rounding,
staged eviction) and the cut bound, registered through the plugin hooks."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_formulations():
    from ..exact.checkmate import CheckmateFormulation
    from ..exact.decompose import DecomposedFormulation

    return [CheckmateFormulation(), DecomposedFormulation()]


@hookimpl
def hybrid_remat_register_heuristics():
    from ..exact.bounds import CutBoundSource
    from ..exact.lp_rounding import LPRounding
    from ..exact.primal import StagedEvict

    return [StagedEvict(), LPRounding(), CutBoundSource()]
