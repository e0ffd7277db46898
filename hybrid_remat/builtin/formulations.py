"""Built-in exact formulations (the staged Checkmate model, its
decomposition, the repeated-block solver, the segment-chain solver), the heuristic that shares the
Checkmate model builder (LP rounding) and the bounds over every plan
(the cut bound, the block bound, the chain-of-cuts bound, the state-search bound, the placed chain-of-cuts bound), registered through the plugin hooks."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_formulations():
    from ..blocks import BlocksFormulation
    from ..exact.checkmate import CheckmateFormulation
    from ..exact.decompose import DecomposedFormulation
    from ..segments.formulation import SegmentsFormulation

    return [CheckmateFormulation(), DecomposedFormulation(), BlocksFormulation(), SegmentsFormulation()]


@hookimpl
def hybrid_remat_register_heuristics():
    from ..exact.lp_rounding import LPRounding
    from ..heuristics.reorder import MemoryOrder, SinksLast

    return [LPRounding(), SinksLast(), MemoryOrder()]


@hookimpl
def hybrid_remat_register_bounds():
    from ..blocks import BlockBoundSource
    from ..bounds.placed_cuts import PlacedCutsBound
    from ..bounds.state_search import StateSearchBound
    from ..exact.bounds import CutBoundSource
    from ..exact.bounds_multicut import MultiCutBoundSource

    return [CutBoundSource(), BlockBoundSource(), MultiCutBoundSource(), StateSearchBound(), PlacedCutsBound()]
