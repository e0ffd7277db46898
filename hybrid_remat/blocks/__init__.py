"""Repeated structure: blocks (transformer layers, ResNet stages) detected
by hashing, solved exactly one block of each kind with SCIP and combined
across the chain of blocks (Rockmate's idea, with bounds).

* :mod:`.detect` -- :func:`detect_runs`: every run of repeated blocks; :func:`detect_blocks`: the main one.
* :mod:`.structure` -- applicability, coverage, the partition and the chain of runs the components work on.
* :mod:`.schedule` -- keep-or-recompute-once plans (a keep set -> sequence -> plan).
* :mod:`.staircase` -- a block's exact (held, extra) Pareto front (SCIP).
* :mod:`.menu` -- a stage's staircase walk and the choice of its points, shared by the two classes below.
* :mod:`.solver` -- :func:`solve_blocks`: menus, simulator-measured peaks,
  allocation across blocks, a simulator-checked plan.
* :mod:`.stream` -- the class that drops the residual stream (recomputed from a checkpoint every ``m``
  blocks), searched on simulated plans; :func:`solve_blocks` keeps the better class.
* the block bound lives with the other bounds: :func:`hybrid_remat.bounds.blocks.block_lower_bound`,
  a bound over every plan (proof in its docstring), registered as the bound ``block_bound``.
* :mod:`.formulation` -- :class:`BlocksFormulation`, registered as ``blocks``.
"""

from .detect import BlockStructure, Structure, detect_blocks, detect_runs
from .formulation import BlocksFormulation
from .solver import solve_blocks

__all__ = ["BlockStructure", "Structure", "detect_blocks", "detect_runs", "solve_blocks", "BlocksFormulation", "warmup"]


def warmup() -> None:
    """Compile or load the Numba kernels of the block solver and bounds
    (call it outside any time limit)."""
    import numpy as np

    from ..bounds.cut import warmup as bounds_warmup
    from ..generators import chain
    from .schedule import keep_sequence, sequence_plan

    bounds_warmup()
    g = chain(3)
    sequence_plan(g, keep_sequence(g, np.ones(3, dtype=bool)))
