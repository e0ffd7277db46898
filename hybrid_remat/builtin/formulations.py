"""Built-in exact formulations (the staged Checkmate model, its
decomposition, the repeated-block solver, the segment-chain solver), the heuristic that shares the
Checkmate model builder (LP rounding) and the bounds over every plan
(the cut bound, the block bound, the chain-of-cuts bound), registered through the plugin hooks."""

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
    from ..bounds.order_search import NoRecomputeOrder, SearchedOrder
    from ..heuristics.reorder import MemoryOrder, SinksLast

    return [LPRounding(), SinksLast(), MemoryOrder(), NoRecomputeOrder(), SearchedOrder()]


@hookimpl
def hybrid_remat_register_bounds():
    from ..blocks import BlockBoundSource
    from ..exact.bounds import CutBoundSource
    from ..bounds.order_search import RecomputeBound
    from ..exact.bounds_multicut import MultiCutBoundSource
    from ..exact.checkmate.order_bound import FixedOrderBoundSource

    return [CutBoundSource(), BlockBoundSource(), MultiCutBoundSource(), RecomputeBound(), FixedOrderBoundSource()]
