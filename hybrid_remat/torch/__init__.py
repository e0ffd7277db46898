"""PyTorch frontend: trace a real training step, plan it under a memory
budget, and run the step following the plan (extra ``[torch]``).

>>> import torch, hybrid_remat.torch as hrt                      # doctest: +SKIP
>>> tp = hrt.plan(model, x, loss_fn, budget="60%")               # doctest: +SKIP
>>> step = hrt.apply(model, tp)                                  # doctest: +SKIP
>>> loss = step(x)        # forward + backward, grads in .grad   # doctest: +SKIP
"""

from ..errors import HybridRematError

try:
    import torch  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise HybridRematError(
        "hybrid_remat.torch needs PyTorch: pip install 'hybrid_remat[torch]'"
    ) from e

from ._measure import LiveBytes, measure_step  # noqa: E402
from ._planner import TorchPlan, executable_order, executable_plan, plan_graph  # noqa: E402
from ._runtime import PlannedStep, TorchPlanWarning, apply  # noqa: E402
from ._trace import default_loss, trace  # noqa: E402

__all__ = [
    "trace", "plan", "plan_graph", "apply", "PlannedStep", "TorchPlan", "TorchPlanWarning", "measure_step",
    "LiveBytes", "default_loss", "executable_order", "executable_plan",
]


def plan(
    model,
    example_inputs,
    loss_fn=None,
    *,
    budget,
    time_limit: float = 10.0,
    costs: str = "measure",
    repeats: int = 3,
    cost_model=None,
    graph=None,
    name: str | None = None,
    use_solvers: bool = True,
) -> TorchPlan:
    """Trace one training step of ``model`` and plan it under ``budget``.

    Parameters
    ----------
    model : torch.nn.Module
    example_inputs : tensor or tuple of tensors
        Inputs of the step to plan (same shapes as in training).
    loss_fn : callable, optional
        ``loss_fn(output) -> scalar``; default ``output.float().pow(2).mean()``.
    budget : int or str
        Activation-memory budget: bytes, a size (``"2GiB"``) or a
        percentage of the traced step's keep-all peak (``"60%"``).
    time_limit : float
        Seconds for the search (and for ``anytime_solve`` when installed).
    costs, repeats, cost_model
        See :func:`trace`.
    graph : Graph, optional
        A graph already traced from this model and inputs (skips tracing).
    use_solvers : bool
        Also map plans of ``hybrid_remat.anytime.anytime_solve`` (when
        installed) or of the registered heuristics to keep sets.

    Returns
    -------
    TorchPlan
        Its plan passed the simulator under the budget; ``apply(model,
        tplan)`` runs it.

    Raises
    ------
    BudgetError
        The budget is below what any keep/recompute plan reaches.
    """
    g = graph if graph is not None else trace(
        model, example_inputs, loss_fn, costs=costs, repeats=repeats, cost_model=cost_model, name=name
    )
    return plan_graph(g, budget, time_limit=time_limit, use_solvers=use_solvers)
