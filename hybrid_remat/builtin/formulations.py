"""Built-in exact formulations: the staged Checkmate model, its
decomposition, the repeated-block solver, the segment-chain solver and the
multi-device MILPs (XEngine, paging, makespan), registered through the plugin hook."""

from ..hookspecs import hookimpl


@hookimpl
def hybrid_remat_register_formulations():
    from ..blocks import BlocksFormulation
    from ..exact.checkmate import CheckmateFormulation
    from ..exact.decompose import DecomposedFormulation
    from ..hetero.makespan import XEngineMakespan
    from ..hetero.paging import PagingMILP
    from ..hetero.xengine import XEngineMILP
    from ..segments.formulation import SegmentsFormulation

    return [CheckmateFormulation(), DecomposedFormulation(), BlocksFormulation(), SegmentsFormulation(),
            XEngineMILP(), PagingMILP(), XEngineMakespan()]
