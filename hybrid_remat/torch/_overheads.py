"""What the runtimes themselves add to a training step, in seconds: the
figures :func:`~._calibrate.calibrate` measures and the planners add to a
plan's predicted step time.

Examples
--------
>>> oh = Overheads(checkpoint_call_s=1e-3, checkpoint_op_s=1e-5)
>>> round(oh.checkpoint_s(n_calls=2, n_ops=100), 6)
0.003
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Overheads", "fixed_overheads"]


@dataclass
class Overheads:
    """Seconds the runtimes add to a step (all >= 0).

    Attributes
    ----------
    per_node_s : float
        Framework time per graph node in a plain step, added to every node's
        traced cost ...
    cost_scale : float
        ... or the factor on every traced cost when their sum exceeds the
        plain step (ops timed alone under load): either way the keep-all
        plan's simulated time is the measured plain step.
    ops_fixed_s : float
        Op-replay runtime: recording the forward and its saved-tensor hooks
        (a keep-all step under the runtime minus a plain step).
    replay_node_s : float
        Op-replay runtime: Python time per replayed op, beyond the op.
    checkpoint_call_s : float
        Checkpoint runtime: per checkpointed module call ...
    checkpoint_op_s : float
        ... plus per forward op of a checkpointed call (checkpoint's hooks
        on its saved tensors, in the forward and the replay).  Their shape
        comes from tiny checkpointed functions of two sizes, their scale
        from a checkpointed step of the model itself (CPU work that a GPU
        hides behind its kernels does not count).
    sac_op_s : float
        Checkpoint runtime: per op of a selective region (forward and replay).
    plain_step_s : float or None
        The measured plain step.
    source : str
        ``"measured"``, ``"fixed"`` (:func:`fixed_overheads`) or ``"none"`` (zeros: :func:`plan_graph` without a model).
    """

    per_node_s: float = 0.0
    cost_scale: float = 1.0
    ops_fixed_s: float = 0.0
    replay_node_s: float = 0.0
    checkpoint_call_s: float = 0.0
    checkpoint_op_s: float = 0.0
    sac_op_s: float = 0.0
    plain_step_s: float | None = None
    source: str = "none"

    def to_json(self) -> dict:
        return asdict(self)

    def checkpoint_s(self, n_calls: int, n_ops: int) -> float:
        """The checkpoint runtime's own cost for ``n_calls`` checkpointed
        calls running ``n_ops`` forward ops in all."""
        return n_calls * self.checkpoint_call_s + n_ops * self.checkpoint_op_s

    def adjusted_costs(self, graph, kind: str) -> np.ndarray:
        return np.asarray(graph.cost(kind), dtype=np.float64) * self.cost_scale + self.per_node_s

    @classmethod
    def fitting(cls, graph, plain_step_s: float, **kw) -> Overheads:
        """Per-node time or cost scale such that the keep-all plan takes
        ``plain_step_s``."""
        op_sum = float(np.sum(graph.cost(graph.cost_kinds[0])))
        if op_sum <= 0:
            return cls(plain_step_s=plain_step_s, **kw)
        if op_sum > plain_step_s:
            return cls(cost_scale=plain_step_s / op_sum, plain_step_s=plain_step_s, **kw)
        return cls(per_node_s=(plain_step_s - op_sum) / graph.n, plain_step_s=plain_step_s, **kw)


#: Framework seconds per ATen op of an eager step (CPU, one thread), the unit of :func:`fixed_overheads`.
FIXED_PER_NODE_S = 3e-5


def fixed_overheads(graph, device=None) -> Overheads:
    """Runtime costs that do not depend on a measurement (``plan(seed=...)``):
    a fixed framework time per op and the runtimes' own costs in proportion
    to it, the proportions of a calibration of HF GPT-2 on CPU (op-replay
    recording 2.3 ops' time per forward op, 0.5 per replayed op; a
    checkpointed call 2 ops, 0.1 per op in it; 0.3 per op of a selective
    region).  The same figures on every run, so the choice repeats; the
    predicted times are rougher than measured ones."""
    per = FIXED_PER_NODE_S
    n_fwd = int(graph.meta.get("torch", {}).get("n_forward", graph.n))
    return Overheads(per_node_s=per, ops_fixed_s=2.3 * per * n_fwd, replay_node_s=0.5 * per,
                     checkpoint_call_s=2 * per, checkpoint_op_s=0.1 * per, sac_op_s=0.3 * per, source="fixed")
