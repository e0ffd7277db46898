"""Measure what a real step holds, on any device (CPU included).

:class:`LiveBytes` is a ``TorchDispatchMode`` that registers every storage an
ATen call allocates during the step and notices (through storage weak
references, checked at each call) when it is freed: the live activation bytes
over the step and their peak, sampled after each call's allocations -- the
quantity the simulator's peak models.  Storages that end the step as a
parameter's ``.grad`` can be excluded (the graph treats parameter gradients as
outputs handed to the optimizer, freed at once).
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

from ._common import classify_call, is_pure_view, storage_key, storage_nbytes, weak

__all__ = ["LiveBytes", "measure_step", "allocator_peak"]


class LiveBytes(TorchDispatchMode):
    """Track the bytes of storages allocated by ATen calls while active."""

    def __init__(self):
        super().__init__()
        self.records: list = []  # [nbytes, t_alloc, t_free, weakref, key]
        self.live: list[int] = []
        self.tick = 0

    def _sweep(self):
        keep = []
        for r in self.live:
            rec = self.records[r]
            if rec[3].expired():
                rec[2] = self.tick
            else:
                keep.append(r)
        self.live = keep

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.tick += 1
        self._sweep()
        if is_pure_view(func):
            return out
        call = classify_call(func, args, kwargs, out)
        for j in call.new_out_pos:
            t = call.out_leaves[j]
            self.records.append([storage_nbytes(t), self.tick, None, weak(t), storage_key(t)])
            self.live.append(len(self.records) - 1)
        return out

    def peak(self, exclude_keys=()) -> int:
        """Peak live bytes, leaving out storages alive at the end whose key
        is in ``exclude_keys``."""
        self.tick += 1
        self._sweep()
        excl = set(exclude_keys)
        events: dict[int, int] = {}
        for nb, ta, tf, ref, key in self.records:
            if tf is None and key in excl and not ref.expired():
                continue
            events[ta] = events.get(ta, 0) + nb
            if tf is not None:
                # freed before call tf's allocations were counted
                events[tf] = events.get(tf, 0) - nb
        cur = peak = 0
        for t in sorted(events):
            cur += events[t]
            peak = max(peak, cur)
        return peak


def measure_step(model, inputs, step=None, loss_fn=None) -> dict:
    """Run one step (``step(*inputs)``, default a plain step) under
    :class:`LiveBytes`; parameter gradients must be ``None`` before.

    Returns
    -------
    dict
        ``live_peak_bytes`` (parameter gradients excluded),
        ``live_peak_with_grads_bytes``, ``loss``, and the step's ``stats``
        when it has them.
    """
    from ._step import PlannedStep
    from ._trace import as_inputs

    inputs = as_inputs(inputs)
    step = step or PlannedStep(model, None, loss_fn)
    meter = LiveBytes()
    with meter:
        loss = step(*inputs)
    grad_keys = [storage_key(p.grad) for p in model.parameters() if p.grad is not None]
    out = {
        "loss": float(loss),
        "live_peak_bytes": meter.peak(grad_keys),
        "live_peak_with_grads_bytes": meter.peak(),
    }
    out.update(getattr(step, "stats", {}) or {})
    return out


def allocator_peak(step, device) -> dict:
    """The allocator's view of one call of ``step()``: ``live_peak_bytes``,
    the peak above what was allocated before the call (every allocation:
    activations, temporaries, library buffers, compiled code's), and
    ``end_bytes``, what the call left allocated.

    CUDA: ``torch.cuda.max_memory_allocated``; CPU: the allocation and free
    events of ``torch.profiler`` (``profile_memory=True``).  Allocate the
    parameter gradients before (a warm-up step, ``zero_grad(set_to_none=
    False)``) to leave them out, as the traced graph does."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return {"live_peak_bytes": int(torch.cuda.max_memory_allocated(device) - base),
                "end_bytes": int(torch.cuda.memory_allocated(device) - base)}
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    mem = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    cur = peak = 0
    for _, nb in mem:
        cur += nb
        peak = max(peak, cur)
    return {"live_peak_bytes": int(peak), "end_bytes": int(cur)}
