"""Measuring training steps for the PyTorch benchmarks (shared by
``torch_cpu.py`` and ``torch_gpu.py``).

Every method is a *step*: ``fwd()`` returns the loss, the harness runs
``loss.backward()``.  Per method:

* **live peak**: the allocator's peak during the step above what was
  allocated before it (CUDA: ``torch.cuda.max_memory_allocated``; CPU: the
  allocations and frees recorded by ``torch.profiler`` with
  ``profile_memory=True``, which sees compiled code too); parameter
  gradients are allocated before the step, so they are not counted (the
  incoming gradient buffers are);
* **held at backward**: what the step holds when backward starts (the saved
  activations, the output and the loss);
* **step time**: fastest of ``rounds`` steps, the method and a plain step run
  in turn (the ratio is taken within the pair, so load spikes hit both).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import time

import torch

import hybrid_remat.torch as hrt

__all__ = ["Method", "measure_memory", "aten_live_peak", "time_ratio", "block_checkpoint", "plain_method", "checkpoint_method",
           "eager_method", "compiled_method"]


class Method:
    def __init__(self, name, model, fwd, after=None, info=None):
        self.name = name
        self.model = model
        self.fwd = fwd
        self.after = after or (lambda: None)
        self.info = dict(info or {})


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _step(m: Method, marker=None):
    m.model.zero_grad(set_to_none=False)
    loss = m.fwd()
    if marker is not None:
        marker()
    loss.backward()
    m.after()
    return loss


def measure_memory(m: Method, device) -> dict:
    """``live_peak_bytes`` and ``held_at_backward_bytes`` of one step (after
    a warm-up step that also allocates the gradients)."""
    _step(m)
    _sync(device)
    if device.type == "cuda":
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        held = {}

        def marker():
            _sync(device)
            held["b"] = torch.cuda.memory_allocated(device) - base

        _step(m, marker)
        _sync(device)
        return {"live_peak_bytes": int(torch.cuda.max_memory_allocated(device) - base),
                "held_at_backward_bytes": int(held["b"])}
    from torch.profiler import ProfilerActivity, profile, record_function

    def marker():
        with record_function("hr::backward_starts"):
            pass

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _step(m, marker)
    events = prof.profiler.kineto_results.events()
    mem = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    t_marker = min((e.start_ns() for e in events if e.name() == "hr::backward_starts"), default=None)
    cur = peak = held = 0
    for t, nb in mem:
        if t_marker is not None and t > t_marker and held == 0:
            held = cur
        cur += nb
        peak = max(peak, cur)
    return {"live_peak_bytes": int(peak), "held_at_backward_bytes": int(held or cur)}


def aten_live_peak(m: Method) -> int:
    """Live peak as :class:`hrt.LiveBytes` counts it (storages ATen calls
    allocate; what the traced graph and the budget count), eager steps only."""
    for p in m.model.parameters():
        p.grad = None
    meter = hrt.LiveBytes()
    with meter:
        m.fwd().backward()
        m.after()
    keys = [hrt._common.storage_key(p.grad) for p in m.model.parameters() if p.grad is not None]
    return int(meter.peak(keys))


def time_ratio(m: Method, plain: Method, device, rounds: int) -> dict:
    """Fastest step of ``m`` and of ``plain``, run in turn."""
    tm, tp = [], []
    for _ in range(rounds):
        for meth, out in ((plain, tp), (m, tm)):
            _sync(device)
            t0 = time.perf_counter()
            _step(meth)
            _sync(device)
            out.append(time.perf_counter() - t0)
    return {"step_s": min(tm), "plain_step_s": min(tp), "time_ratio": min(tm) / min(tp)}


@contextlib.contextmanager
def block_checkpoint(model, paths):
    """``torch.utils.checkpoint`` on every module in ``paths``, the way a
    user writes it (non-reentrant, nothing else)."""
    from torch.utils.checkpoint import checkpoint

    mods = [model.get_submodule(p) for p in paths]
    try:
        for mod in mods:
            inner = mod.forward
            mod.forward = functools.partial(checkpoint, inner, use_reentrant=False)
        yield
    finally:
        for mod in mods:
            del mod.forward


def plain_method(case) -> Method:
    return Method("plain", case.model, lambda: case.loss_fn(case.model(*case.inputs, **case.kwargs)))


def checkpoint_method(case) -> Method:
    def fwd():
        with block_checkpoint(case.model, case.blocks):
            return case.loss_fn(case.model(*case.inputs, **case.kwargs))

    return Method("per-block checkpoint", case.model, fwd, info={"n_blocks": len(case.blocks)})


def eager_method(case, tp, label: str) -> Method:
    step = hrt.apply(case.model, tp, case.loss_fn)

    def fwd():
        with step.forward():
            return case.loss_fn(case.model(*case.inputs, **case.kwargs))

    info = {"mechanism": tp.mechanism, "family": tp.family, "budget_bytes": tp.budget_bytes,
            "predicted_peak_bytes": tp.predicted_peak_bytes, "predicted_ratio": 1 + tp.overhead_pct / 100.0,
            "n_regions": len(tp.regions), "plan_measured": dict(tp.measured)}
    return Method(label, case.model, fwd, after=step.finish, info=info)


def compiled_method(case, label: str, *, backend: str, budget=None, solver=None) -> Method:
    """``torch.compile`` of a copy of the model, partitioned with the
    activation-memory ``budget`` (PT2's normalised one) and ``solver``
    (``"dp"``, ``"greedy"``, ``"ilp"`` or a :class:`hrt.CompileSolver`);
    compiled at the first call, inside the config patch."""
    from torch._functorch import config

    from hybrid_remat.torch.compile import PartitionRecorder

    rec = PartitionRecorder()
    model = copy.deepcopy(case.model)
    torch._dynamo.reset()
    patch = {}
    if solver is not None:
        patch["activation_memory_budget_solver"] = solver
        patch["activation_memory_budget"] = budget if budget is not None else 1e-4
    # no compile caches: every variant partitions (and is recorded) and its compile time is its own
    patch.update(enable_autograd_cache=False)
    if backend == "inductor":
        from torch._inductor import config as iconfig

        ctx = iconfig.patch(custom_partitioner_fn=rec, fx_graph_cache=False)
        compiled = torch.compile(model)
    else:
        ctx = contextlib.nullcontext()
        compiled = torch.compile(model, backend=rec.backend())
    t0 = time.perf_counter()
    with config.patch(patch), ctx:
        case.loss_fn(compiled(*case.inputs, **case.kwargs)).backward()
    compile_s = time.perf_counter() - t0
    model.zero_grad(set_to_none=True)
    info = {"compile_s": compile_s, "partitions": rec.records, "backend": backend}
    if isinstance(solver, hrt.CompileSolver):
        info["solver_reports"] = solver.reports
    return Method(label, model, lambda: case.loss_fn(compiled(*case.inputs, **case.kwargs)), info=info)
