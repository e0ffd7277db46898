"""Built-in exact formulations, registered through the plugin hook."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_formulations():
    return []
