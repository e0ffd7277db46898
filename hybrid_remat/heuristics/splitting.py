"""Deprecated location of the lifetime-splitting planner: use
:mod:`hybrid_remat.heuristics.lifetime_split` (kernel and planner in one
module).  Kept for code outside this package that still imports it."""

from .lifetime_split import LifetimeSplit, ruin_and_recreate, split_continuation, split_sequence

__all__ = ["LifetimeSplit", "split_sequence", "split_continuation", "ruin_and_recreate"]
