"""Built-in single-device heuristics and the improvers built on them
(dropping recomputations, local search, ruin-and-recreate LNS), registered
through the plugin hooks."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    from ..heuristics import builtin_heuristics

    # local_search stays here too: from scratch it builds plans by budget continuation when nothing else fits
    return builtin_heuristics()


@hookimpl
def hybrid_remat_register_improvers():
    from ..exact.local_search import drop_recomputations
    from ..heuristics.lns import LNSFormulation
    from ..heuristics.local_search import LocalSearch
    from ..portfolio.calls import ImproverFromFormulation, ImproverFromFunction

    drop = ImproverFromFunction("drop_recomputations", drop_recomputations, rank=1.0,
                                capabilities={"dag", "chain", "single_device", "needs_budget", "honours_limits",
                                              "deterministic"})
    return [drop, LocalSearch(), ImproverFromFormulation(LNSFormulation())]
