"""What a plan of :mod:`hybrid_remat.torch` is: :class:`TorchPlan` (the
plan, its simulation, the runtime it is for, what was measured) and the
budget's units."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..budgets import format_bytes, keep_all_peak, parse_budget
from ..graph import Graph
from ..plan import Plan, plan_to_json, write_plan
from ..problem import Problem
from ..simulate import SimulationResult

__all__ = ["TorchPlan", "MECHANISMS", "budget_bytes", "ops_digest", "model_forward_end"]


MECHANISMS = ("regions", "ops")


@dataclass
class TorchPlan:
    """A budgeted plan for one traced training step.

    Attributes
    ----------
    graph : Graph
        The traced step.
    problem : Problem
        One device (``"cpu"`` or ``"gpu"``) with the budget in bytes; its
        graph's costs include the framework time per op
        (:attr:`Overheads.per_node_s <hybrid_remat.torch._overheads.Overheads>`).
    plan : Plan
        The executable plan (the order the runtime follows); it passed
        :func:`~hybrid_remat.simulate.simulate` under the budget.
    keep : ndarray of bool, shape (n_forward,)
        Forward outputs kept for backward; the others are recomputed.
    predicted : SimulationResult
        The simulator's figures for ``plan``.
    family : str
        Which search family produced the plan.
    tried : list of dict
        Every candidate evaluated (family, mechanism, peak, time, fits).
    mechanism : {"regions", "ops"}
        ``"regions"``: ``torch.utils.checkpoint`` on the modules in
        ``regions`` (selective where a region has ``save_ops``); ``"ops"``:
        the op-replay runtime (any keep set, per-op interception).
    regions : tuple of Region
    overhead_s : float
        The runtime's own predicted cost per step (beyond the simulated op
        times).
    overheads : Overheads or None
        The calibration the prediction used.
    measured : dict
        Figures of the planned step measured while planning (``hrt.plan``
        with ``verify=True``): ``live_peak_bytes``, ``step_s``, ``plain_step_s``.
    loss_fn : callable or None
        The loss the step was traced with (:func:`apply` uses it when given
        none).
    """

    graph: Graph
    problem: Problem
    plan: Plan
    keep: np.ndarray
    predicted: SimulationResult
    family: str
    tried: list = field(default_factory=list)
    mechanism: str = "ops"
    regions: tuple = ()
    overhead_s: float = 0.0
    overheads: object = None
    measured: dict = field(default_factory=dict)
    loss_fn: object = None
    alternatives: list = field(default_factory=list, repr=False)
    interrupted: str | None = None  # the signal that stopped the search (the best plan so far), else None

    @property
    def budget_bytes(self) -> int:
        return int(self.problem.budgets[0])

    @property
    def predicted_peak_bytes(self) -> int:
        return int(next(iter(self.predicted.peak_bytes.values())))

    @property
    def keep_all_peak_bytes(self) -> int:
        return keep_all_peak(self.graph)

    @property
    def n_forward(self) -> int:
        return int(self.graph.meta["torch"]["n_forward"])

    @property
    def dropped(self) -> np.ndarray:
        """Indices of forward nodes whose outputs are dropped."""
        return np.flatnonzero(~self.keep)

    @property
    def keep_all_time_s(self) -> float:
        return float(self.problem.base_cost)

    @property
    def predicted_step_s(self) -> float:
        """Simulated time of the plan plus the runtime's own cost."""
        return float(self.predicted.total_time + self.overhead_s)

    @property
    def overhead_pct(self) -> float:
        """Predicted step time over the keep-all (plain) step, in percent."""
        return 100.0 * (self.predicted_step_s / self.keep_all_time_s - 1.0) if self.keep_all_time_s > 0 else 0.0

    @property
    def dropped_saved(self) -> list[int]:
        """Dropped forward nodes that hold bytes (what ``repr`` counts and
        ``summary()["dropped"]`` names)."""
        return [int(v) for v in self.dropped if self.graph.bytes[v] > 0]

    def summary(self) -> dict:
        tm = self.graph.meta["torch"]
        dropped_saved = self.dropped_saved
        return {
            "budget_bytes": self.budget_bytes,
            "predicted_peak_bytes": self.predicted_peak_bytes,
            "keep_all_peak_bytes": self.keep_all_peak_bytes,
            "predicted_time_s": self.predicted_step_s,
            "keep_all_time_s": self.keep_all_time_s,
            "overhead_pct": self.overhead_pct,
            "runtime_overhead_s": self.overhead_s,
            "n_recompute": self.predicted.n_recompute,
            "n_forward": self.n_forward,
            "n_nodes": self.graph.n,
            "family": self.family,
            "mechanism": self.mechanism,
            "regions": [r.to_json() for r in self.regions],
            "ops_digest": ops_digest(self.graph),
            "device": tm.get("device"),
            "costs": tm.get("costs"),
            "measured": dict(self.measured),
            "dropped": [self.graph.names[v] for v in dropped_saved],
            "dropped_nodes": dropped_saved,
            "dropped_all": [int(v) for v in self.dropped],
            "interrupted": self.interrupted is not None,
            "signal": self.interrupted,
        }

    def to_json(self) -> dict:
        """The ``remat-plan/1`` document with a ``summary`` (the torch
        fields included)."""
        return plan_to_json(self.plan, self.problem, self.summary())

    def write(self, path, *, overwrite: bool = False) -> None:
        """Write the plan JSON (refuses to overwrite unless asked);
        :func:`hybrid_remat.torch.load` applies it to a model."""
        write_plan(path, self.plan, self.problem, self.summary(), overwrite=overwrite)

    def __repr__(self) -> str:
        n = len(self.dropped_saved)
        how = f"{n} forward outputs dropped" if n or self.mechanism != "regions" else "the plain step"
        if self.mechanism == "regions" and self.regions:
            how = f"checkpoint {len(self.regions)} module(s), {how}"
        return (
            f"TorchPlan({self.graph.name!r}, budget={format_bytes(self.budget_bytes)}, "
            f"predicted peak={format_bytes(self.predicted_peak_bytes)} "
            f"(keep-all {format_bytes(self.keep_all_peak_bytes)}), "
            f"+{self.overhead_pct:.1f}% time, {how})"
        )


def model_forward_end(graph: Graph) -> int:
    """Number of forward nodes the model's forward ran (the loss's follow)."""
    tm = graph.meta["torch"]
    roots = [c for c in tm.get("calls", ()) if c[3] == -1]
    return int(roots[0][2]) if roots else int(tm["n_forward"])


def ops_digest(graph: Graph) -> str:
    """A short hash of the ops of the model's forward (the loss left out),
    to match a plan file to a model."""
    import hashlib

    text = "\n".join(graph.meta["torch"]["op"][: model_forward_end(graph)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def budget_bytes(budget, graph: Graph) -> int:
    """Bytes of ``budget`` in the library's one budget grammar
    (:data:`hybrid_remat.budgets.BUDGET_GRAMMAR`): a fraction of the keep-all
    peak (``0.5``, ``"0.5"``), a percentage (``"50%"``), a size (``"2GiB"``)
    or bytes (an int)."""
    return parse_budget(budget, graph)


