"""Built-in improvers: those built on the single-device heuristics (dropping
recomputations, local search, ruin-and-recreate LNS) and the multi-device
insertion improver, registered through the plugin hook."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_improvers():
    from ..hetero.insertion import InsertionImprover
    from ..heuristics import builtin_improvers

    return builtin_improvers() + [InsertionImprover()]
