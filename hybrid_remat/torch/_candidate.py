"""One keep set or region choice that a planner tried: its executed plan,
the simulator's verdict on it, and the runtime's own cost on top.  Shared by
the keep-set search (:mod:`._planner`) and the region search
(:mod:`._region_search`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..plan import Plan
from ..simulate import SimulationResult

__all__ = ["Candidate"]


@dataclass
class Candidate:
    """A tried plan and its simulation (``step_s``: the predicted step time)."""

    family: str
    keep: np.ndarray
    plan: Plan
    result: SimulationResult
    mechanism: str = "ops"
    regions: tuple = ()
    overhead_s: float = 0.0

    @property
    def peak(self) -> int:
        return next(iter(self.result.peak_bytes.values()))

    @property
    def step_s(self) -> float:
        """Predicted step time: simulated time plus the runtime's own cost."""
        return self.result.total_time + self.overhead_s
