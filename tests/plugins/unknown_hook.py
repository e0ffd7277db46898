"""A typo in a hook name (heuristic instead of heuristics)."""

from hybrid_remat import hookimpl


@hookimpl
def hybrid_remat_register_heuristic():
    return []
