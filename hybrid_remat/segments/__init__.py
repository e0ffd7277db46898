"""Every training graph as a chain of segments: repeated blocks (stages of
one kind, sharing a menu) and segments of their own cut where few bytes
cross, each with a trade-off menu (exact with SCIP where small), combined
across the chain by a dynamic program, with a bound over every plan.

* :mod:`.chain` -- :func:`segment_chain`: the stages.
* :mod:`.menus` -- independent menu tasks (:func:`menu_tasks`, :func:`compute_menu`).
* :mod:`.menu_exec` -- where they run: the portfolio's forked workers, Ray tasks (a greedy menu for any not back in time).
* :mod:`.stream` -- the runs' stream options (blocks that drop the residual stream, a checkpoint every ``m``).
* :mod:`.solver` -- :func:`solve_segments`: figures, the chain DP, a simulator-checked plan.
* :func:`hybrid_remat.bounds.segments.segment_lower_bound`: the block bound over the chain's partition (with the other bounds).
* :mod:`.formulation` -- :class:`SegmentsFormulation`, registered as ``segments``.
"""

from .chain import SegmentChain, segment_chain
from .menus import MenuTask, compute_menu, compute_menus, menu_tasks
from .solver import solve_segments

__all__ = ["SegmentChain", "segment_chain", "MenuTask", "menu_tasks", "compute_menu", "compute_menus",
           "solve_segments"]
