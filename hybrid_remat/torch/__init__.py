"""PyTorch frontend: trace a real training step, plan it under a memory
budget, and run the step following the plan (extra ``[torch]``).

>>> import torch, hybrid_remat.torch as hrt                      # doctest: +SKIP
>>> tp = hrt.plan(model, x, loss_fn, budget=0.6)                 # doctest: +SKIP
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

from ._measure import LiveBytes, allocator_peak, measure_step  # noqa: E402
from ._planner import executable_order, executable_plan, plan_graph  # noqa: E402
from ._regions import Region  # noqa: E402
from ._result import TorchPlan, budget_bytes  # noqa: E402
from ._runtime import TorchPlanWarning  # noqa: E402
from ._step import PlannedStep, apply  # noqa: E402
from ._trace import default_loss, trace  # noqa: E402
from ._verify import load, plan  # noqa: E402

__all__ = [
    "trace", "plan", "plan_graph", "apply", "load", "PlannedStep", "TorchPlan", "TorchPlanWarning", "Region",
    "measure_step", "LiveBytes", "default_loss", "executable_order", "executable_plan", "budget_bytes",
    "CompileSolver", "CompilePartitioner", "allocator_peak",
]


def __getattr__(name):
    if name == "CompileSolver":  # imports torch._inductor only when asked for
        from .compile import CompileSolver

        return CompileSolver
    if name == "CompilePartitioner":
        from .partition import CompilePartitioner

        return CompilePartitioner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
