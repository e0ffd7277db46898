"""The entry point module (``[project.entry-points.hybrid_remat] roofline``)."""

from hybrid_remat import hookimpl

from .model import RooflineModel


@hookimpl
def hybrid_remat_register_cost_models():
    return [RooflineModel()]
