"""Built-in heuristics, registered through the plugin hook."""

from ..heuristics import builtin_heuristics
from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    return builtin_heuristics()
