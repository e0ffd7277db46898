"""Built-in cost models, registered through the plugin hook."""

from ..cost_models import ProfiledCostModel
from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_cost_models():
    return [ProfiledCostModel()]
