"""Built-in single-device heuristics and the improvers built on them
(dropping recomputations, local search, ruin-and-recreate LNS), registered
through the plugin hooks."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    from ..heuristics import builtin_heuristics

    # local_search is a heuristic too: from scratch it builds plans by budget continuation when nothing else fits
    return builtin_heuristics()


@hookimpl
def hybrid_remat_register_improvers():
    from ..heuristics import builtin_improvers

    return builtin_improvers()
