"""Built-in bounds over every plan: the cut bound, the block bound, the
multicut bound (:mod:`hybrid_remat.bounds`, :mod:`hybrid_remat.blocks.bound`)
and ``feasibility`` (``+inf`` when no plan fits the budget), registered
through the plugin hook."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_bounds():
    from ..blocks import BlockBoundSource
    from ..bounds.cut import CutBoundSource
    from ..bounds.feasibility import FeasibilityBound
    from ..bounds.multicut import MultiCutBoundSource

    return [CutBoundSource(), BlockBoundSource(), MultiCutBoundSource(), FeasibilityBound()]
