"""The built-in bound ``feasibility`` (:mod:`hybrid_remat.bounds.feasibility`):
``+inf`` when no plan fits the budget."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_bounds():
    from ..bounds.feasibility import FeasibilityBound

    return [FeasibilityBound()]
