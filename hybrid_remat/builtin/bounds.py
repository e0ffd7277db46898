"""Built-in bounds over every plan: the cut bound, the block bound, the
multicut bound, the state-search bound, the placed chain-of-cuts bound, the
first heavy moment bound, the frontier cut bound, the
recomputation bound of the order search (:mod:`hybrid_remat.bounds`,
:mod:`hybrid_remat.bounds.blocks`), the fixed-order class bound
(:mod:`hybrid_remat.exact.checkmate.order_bound`, scope ``staged``)
and ``feasibility`` (``+inf`` when no plan fits the budget), registered
through the plugin hook."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_bounds():
    from ..bounds.blocks import BlockBoundSource
    from ..bounds.cut import CutBoundSource
    from ..bounds.feasibility import FeasibilityBound
    from ..bounds.first_moment import FirstMomentBound
    from ..bounds.frontier_chain import FrontierChainBound
    from ..bounds.frontier_cuts import FrontierCutsBound
    from ..bounds.multicut import MultiCutBoundSource
    from ..bounds.order_search import RecomputeBound
    from ..bounds.placed_cuts import PlacedCutsBound
    from ..bounds.state_search import StateSearchBound
    from ..exact.checkmate.order_bound import FixedOrderBoundSource

    return [CutBoundSource(), BlockBoundSource(), MultiCutBoundSource(), FeasibilityBound(),
            StateSearchBound(), PlacedCutsBound(), FrontierCutsBound(), RecomputeBound(),
            FixedOrderBoundSource(), FirstMomentBound(), FrontierChainBound()]
