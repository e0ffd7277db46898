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

from ._trace import default_loss, trace  # noqa: E402

__all__ = ["trace", "default_loss"]
