"""Built-in multi-device (CPU+GPU) heuristics and formulations."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_heuristics():
    from ..hetero.heft import HeftScheduler
    from ..hetero.lift import LiftedSingleDevice
    from ..hetero.paging import HeftOffload

    # makespan variants: anytime_solve(..., objective="makespan") picks their plans
    mk_heft = HeftScheduler(objective="makespan", name="hetero_heft_mk")
    mk_lift = LiftedSingleDevice(objective="makespan")
    mk_lift.name = "hetero_lift_mk"
    return [HeftScheduler(), HeftOffload(), LiftedSingleDevice(), mk_heft, mk_lift]


@hookimpl
def hybrid_remat_register_formulations():
    from ..hetero.makespan import XEngineMakespan
    from ..hetero.paging import PagingMILP
    from ..hetero.xengine import XEngineMILP

    return [XEngineMILP(), PagingMILP(), XEngineMakespan()]
