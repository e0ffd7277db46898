"""Built-in graph loaders: remat-graph/1 and networkx node-link JSON."""

from ..hookspecs import hookimpl
from ..loaders import NodeLinkLoader, RematGraphLoader


@hookimpl
def hybrid_remat_register_loaders():
    return [RematGraphLoader(), NodeLinkLoader()]
