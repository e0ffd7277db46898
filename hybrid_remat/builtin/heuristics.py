"""Built-in heuristics: the single-device planners (:mod:`hybrid_remat.heuristics`),
the LP rounding of the Checkmate model, the order heuristics and the
multi-device (CPU+GPU) schedulers (each reads ``problem.objective``: one object
per method), registered through the plugin hook."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    from ..exact.lp_rounding import LPRounding
    from ..hetero.heft import HeftScheduler
    from ..hetero.lifted import LiftedSingleDevice
    from ..hetero.paging import HeftOffload
    from ..heuristics import builtin_heuristics
    from ..heuristics.cone_recompute import ConeRecompute
    from ..heuristics.order_search import NoRecomputeOrder, SearchedOrder
    from ..heuristics.reorder import MemoryOrder, SinksLast

    # local_search is a heuristic too: from scratch it builds plans by budget continuation when nothing else fits
    return builtin_heuristics() + [LPRounding(), SinksLast(), MemoryOrder(), NoRecomputeOrder(),
                                   SearchedOrder(), HeftScheduler(), HeftOffload(), LiftedSingleDevice(),
                                   ConeRecompute()]
