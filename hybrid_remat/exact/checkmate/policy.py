"""Which staged models to build, how large, in what order: stage size,
recomputation cap and phases of :class:`~.formulation.CheckmateFormulation`.

The full staged model (one node per stage, no cap) has ``O(n^2)``
variables; pyscipopt builds about :data:`BUILD_RATE` variables + rows per
second.  Coarser stages (``g`` nodes each) and Moccasin's cap ``C`` shrink
it but restrict the plan class (their bounds bound nothing we report).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> pol = CheckmatePolicy()
>>> pol.phases(Problem.single(random_layered(10, seed=0), "100%"), 60.0)
[(1, None, 1.0)]
"""

from __future__ import annotations

import math

from ...core.staged import stage_starts
from .model import estimate_size

__all__ = ["CheckmatePolicy", "BUILD_RATE"]

#: measured pyscipopt construction throughput (vars + rows per second) on the team machine
BUILD_RATE = 40_000.0

#: the time limit the policy assumes when it is given none
DEFAULT_SECONDS = 60.0


class CheckmatePolicy:
    """Stage sizes, caps and phases (a base class of
    :class:`~.formulation.CheckmateFormulation`, whose docstring describes
    the parameters)."""

    def __init__(self, stage_size="auto", recompute_cap: int | None = None, build_fraction: float = 0.4,
                 small_items: float = 40_000, fast_items: float = 20_000, max_stage_size: int = 8,
                 tiny_items: float = 5_000):
        self.stage_size = stage_size
        self.recompute_cap = recompute_cap
        self.build_fraction = build_fraction
        self.small_items = small_items
        self.fast_items = fast_items
        self.max_stage_size = max_stage_size
        self.tiny_items = tiny_items

    @staticmethod
    def items(problem, size: int = 1, cap=None) -> int:
        """Variables + rows of the model with stages of ``size`` nodes."""
        est = estimate_size(problem.graph, stage_starts(problem.graph.n, size), cap)
        return est["vars"] + est["rows"]

    @staticmethod
    def build_seconds(items: float) -> float:
        """Predicted seconds to build a model of ``items`` variables + rows."""
        return float(items) / BUILD_RATE

    def choose_starts(self, problem, time_limit: float | None, cap=None, max_items: float | None = None):
        """Stage blocks for ``problem`` and the size estimate behind them."""
        n = problem.graph.n
        if self.stage_size != "auto":
            st = stage_starts(n, int(self.stage_size))
            return st, estimate_size(problem.graph, st, cap)
        if max_items is None:
            max_items = BUILD_RATE * self.build_fraction * (time_limit if time_limit else DEFAULT_SECONDS)
        g = 1
        while True:
            st = stage_starts(n, g)
            est = estimate_size(problem.graph, st, cap)
            if est["vars"] + est["rows"] <= max_items or g >= n:
                return st, est
            g = max(g + 1, int(g * 1.25))

    def phases(self, problem, time_limit: float | None) -> list:
        """The models to solve, in order: ``[(stage_size, recompute_cap, share)]``.

        Fixed ``stage_size``: one phase with this policy's cap.  ``"auto"``:
        the full staged model (one node per stage, no cap: its bound covers
        the staged class) alone when it is tiny; the same model with the cap
        first (70 % of the time; SCIP's RENS finds better plans there) when
        it is small; otherwise first a smaller model
        (Moccasin's cap ``C = recompute_cap`` (default 2), stages of ``g``
        nodes with the smallest ``g <= max_stage_size`` that fits
        ``fast_items``) for incumbents, then the full model with the rest of
        the time when it can be built in a third of it.  An empty list: no
        model fits the time.
        """
        if self.stage_size != "auto":
            return [(int(self.stage_size), self.recompute_cap, 1.0)]
        limit = time_limit if time_limit and math.isfinite(time_limit) else DEFAULT_SECONDS
        scale = 1.0 if limit >= 20.0 else limit / 60.0
        full_items = self.items(problem)
        cap = self.recompute_cap if self.recompute_cap is not None else 2
        if full_items <= self.tiny_items:
            return [(1, None, 1.0)]
        if full_items <= self.small_items * scale:
            return [(1, cap, 0.7), (1, None, 1.0)]
        out = []
        size = 2
        while size <= self.max_stage_size:
            if self.items(problem, size, cap) <= self.fast_items * scale:
                out.append((size, cap, 0.7))
                break
            size *= 2
        if self.build_seconds(full_items) <= limit / 3:
            out.append((1, None, 1.0))
        return out

    def predict_seconds(self, problem) -> float:
        """Seconds before the first model can be solved (its construction):
        the scheduler skips the formulation when that exceeds the time left."""
        phases = self.phases(problem, None)
        if not phases:
            return math.inf
        size, cap, _ = phases[0]
        return self.build_seconds(self.items(problem, size, cap))
