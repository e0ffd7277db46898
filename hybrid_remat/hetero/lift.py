"""Single-device plans lifted to CPU+GPU (host offload instead of
recomputation): the lift lives with the one-device reduction it inverts, in
:mod:`hybrid_remat.core.lift`; this module re-exports it."""

from __future__ import annotations

from ..core.lift import (
    dead_steps_kernel,
    gpu_only_problem,
    host_device,
    lift_plan,
    recompute_candidates_kernel,
    remove_dead_computes,
    remove_dead_steps,
)

__all__ = ["lift_plan", "remove_dead_computes", "remove_dead_steps", "dead_steps_kernel",
           "recompute_candidates_kernel", "gpu_only_problem", "host_device"]
