"""What the runtimes themselves cost, measured, so that a plan's predicted
step time includes them.

The traced op times (each op re-run alone) leave out what a real step adds
around every op: Python, module calls, autograd bookkeeping.  On top of that
each runtime has its own cost: the op-replay runtime intercepts every ATen
call of the forward and replays dropped ops from Python; the checkpoint
runtime pays ``torch.utils.checkpoint``'s frame and hooks per checkpointed
call, and a dispatch mode per op in selective regions.  :class:`~._overheads.Overheads`
holds these figures; :func:`calibrate` measures them on the model itself
(a few training steps) and on tiny checkpointed functions.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ._common import now, sync
from ._overheads import Overheads

__all__ = ["calibrate", "micro_overheads"]


def _best_of(fn, repeats: int, device_type: str) -> float:
    times = []
    for _ in range(repeats):
        sync(device_type)
        t0 = now()
        fn()
        sync(device_type)
        times.append(now() - t0)
    return min(times)


def micro_overheads(device: torch.device, iters: int = 10) -> tuple[float, float, float]:
    """``(checkpoint_call_s, checkpoint_op_s, sac_op_s)`` measured on tiny
    functions of 8 and 64 ops (the ops themselves and the replayed forward
    subtracted)."""
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    x = torch.randn(4, 4, device=device, requires_grad=True)

    def chain(n_ops):
        def f(t):
            for _ in range(n_ops // 2):
                t = torch.sin(t) * 1.0001
            return t

        return f

    def extra(n_ops) -> float:
        """Seconds a checkpointed call of ``n_ops`` ops adds beyond its replayed forward."""
        f = chain(n_ops)

        def plain():
            for _ in range(iters):
                f(x).sum().backward()

        def forward():
            for _ in range(iters):
                f(x).sum()

        def ck():
            for _ in range(iters):
                checkpoint(f, x, use_reentrant=False).sum().backward()

        plain()
        ck()
        t_plain, t_fwd, t_ck = (_best_of(fn, 3, device.type) for fn in (plain, forward, ck))
        return max(0.0, (t_ck - t_plain - t_fwd) / iters)

    small, large = 8, 64
    e_small, e_large = extra(small), extra(large)
    op = max(0.0, (e_large - e_small) / (large - small))
    call = max(0.0, e_small - small * op)
    f = chain(16)
    ctx = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])

    def ck16():
        for _ in range(iters):
            checkpoint(f, x, use_reentrant=False).sum().backward()

    def sac16():
        for _ in range(iters):
            checkpoint(f, x, use_reentrant=False, context_fn=ctx).sum().backward()

    sac16()
    t_ck, t_sac = _best_of(ck16, 3, device.type), _best_of(sac16, 3, device.type)
    x.grad = None
    sac_op = max(0.0, (t_sac - t_ck) / iters / (2 * 16))
    return call, op, sac_op


def _region_scale(model, inputs, loss_fn, kwargs, graph, problem, fit: Overheads, call_s: float, op_s: float,
                  device: torch.device, steps: int) -> float:
    """Measured over modelled cost of the checkpoint runtime on ``model``:
    every module at the depth whose modules cover the most forward ops
    (per-block checkpointing) run against a plain step; 1 when the model
    offers no such modules."""
    from ..errors import HybridRematError
    from ._region_search import RegionEvaluator, checkpoint_pools
    from ._regions import Region, RegionModel, RegionRunner
    from ._trace import interleaved_times, run_step

    try:
        rm = RegionModel(graph)
    except HybridRematError:
        return 1.0
    pools = {name: ps for name, ps in checkpoint_pools(rm).items() if name != "depth0"}  # blocks, not the model
    if not pools:
        return 1.0
    ev = RegionEvaluator(problem, rm, Overheads(checkpoint_call_s=call_s, checkpoint_op_s=op_s))
    paths = max(pools.values(), key=lambda ps: sum(ev.n_nodes[p] for p in ps))
    regions = [Region(p) for p in paths]
    modelled = ev.overhead(regions)
    if modelled <= 0:
        return 1.0
    sim = ev(regions, "calibration").result
    kind = graph.cost_kinds[0]
    replayed = float(sim.total_time - np.sum(graph.cost(kind))) * fit.cost_scale + sim.n_recompute * fit.per_node_s
    runner = RegionRunner(model, regions)

    def checkpointed():
        with runner.installed():
            loss = loss_fn(model(*inputs, **kwargs))
        loss.backward()

    t_plain, t_ck = (min(ts) for ts in interleaved_times(
        model, device, [lambda: run_step(model, inputs, loss_fn, kwargs), checkpointed], steps))
    return min(4.0, max(0.0, (t_ck - t_plain - replayed) / modelled))


def calibrate(model, inputs, loss_fn, kwargs, graph, device: torch.device, *, steps: int = 3) -> Overheads:
    """Measure :class:`Overheads` for ``model`` (its gradients, buffers and
    RNG state are restored): a plain step, the op-replay runtime keeping
    everything and dropping everything, run in turn ``steps`` times
    (fastest of each), :func:`micro_overheads`, and a checkpointed step
    that scales the latter to the model."""
    from ..problem import Problem
    from ..simulate import simulate
    from ._planner import executable_plan
    from ._result import TorchPlan
    from ._step import PlannedStep
    from ._trace import interleaved_times, preserved_state, run_step

    tm = graph.meta["torch"]
    kind = graph.cost_kinds[0]
    n_fwd = int(tm["n_forward"])
    problem = Problem(graph, [_device(kind)], check=False)

    def ops_step(keep):
        plan = executable_plan(graph, keep, kind)
        tp = TorchPlan(graph, problem, plan, keep, simulate(problem, plan, check_budget=False), "calibration",
                       mechanism="ops")
        step = PlannedStep(model, tp, loss_fn)
        return (lambda: step(*inputs, **kwargs)), tp

    keep_fn, _ = ops_step(np.ones(n_fwd, dtype=bool))
    drop_fn, drop_tp = ops_step(np.zeros(n_fwd, dtype=bool))
    call_s, op_s, sac_op = micro_overheads(device)
    with preserved_state(model):
        t_plain, t_keep, t_drop = (min(ts) for ts in interleaved_times(
            model, device, [lambda: run_step(model, inputs, loss_fn, kwargs), keep_fn, drop_fn], steps))
        fit = Overheads.fitting(graph, float(t_plain))
        scale = _region_scale(model, inputs, loss_fn, kwargs, graph, problem, fit, call_s, op_s, device, steps)
    n_rec = max(1, drop_tp.predicted.n_recompute)
    replayed = float(drop_tp.predicted.total_time - np.sum(graph.cost(kind))) * fit.cost_scale
    replay_node = max(0.0, (t_drop - t_keep - replayed) / n_rec - fit.per_node_s)
    return Overheads(per_node_s=fit.per_node_s, cost_scale=fit.cost_scale, ops_fixed_s=max(0.0, t_keep - t_plain),
                     replay_node_s=replay_node, checkpoint_call_s=call_s * scale, checkpoint_op_s=op_s * scale,
                     sac_op_s=sac_op, plain_step_s=float(t_plain), source="measured")


def _device(kind: str):
    from ..problem import Device

    return Device(kind, kind, 1 << 62)

