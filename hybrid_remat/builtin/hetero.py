"""Built-in multi-device (CPU+GPU) heuristics, improvers and formulations.  Each reads
``problem.objective`` (serial time or makespan): one object per method."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    from ..hetero.heft import HeftScheduler
    from ..hetero.lifted import LiftedSingleDevice
    from ..hetero.paging import HeftOffload

    return [HeftScheduler(), HeftOffload(), LiftedSingleDevice()]


@hookimpl
def hybrid_remat_register_improvers():
    from ..hetero.insertion import InsertionImprover

    return [InsertionImprover()]


@hookimpl
def hybrid_remat_register_formulations():
    from ..hetero.makespan import XEngineMakespan
    from ..hetero.paging import PagingMILP
    from ..hetero.xengine import XEngineMILP

    return [XEngineMILP(), PagingMILP(), XEngineMakespan()]
