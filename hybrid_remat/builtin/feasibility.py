"""The built-in bound ``feasibility`` (:mod:`hybrid_remat.feasibility`):
``+inf`` when no plan fits the budget."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_bounds():
    from ..feasibility import FeasibilityBound

    return [FeasibilityBound()]
