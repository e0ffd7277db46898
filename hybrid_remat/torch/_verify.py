"""``plan``: trace, calibrate, search, then run the best plans once to keep
the one that is fastest as measured with a live peak within the budget;
``load``: apply a plan file written by ``TorchPlan.write`` (or ``torch-plan``).
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import BudgetError, HybridRematError
from ._calibrate import calibrate as measure_overheads
from ._overheads import Overheads, fixed_overheads
from ._planner import _problem, executable_plan, interrupted_with, plan_graph
from ._regions import Region
from ._result import TorchPlan, budget_bytes, model_forward_end, ops_digest
from ._runtime import TorchPlanWarning
from ._trace import (
    as_inputs,
    as_kwargs,
    check_devices,
    preserved_state,
    require_loss,
    trace,
)

__all__ = ["plan", "load", "FilePlan"]


def plan(
    model,
    example_inputs,
    loss_fn=None,
    *,
    budget,
    example_kwargs: dict | None = None,
    time_limit: float = 10.0,
    costs: str | None = None,
    repeats: int = 3,
    cost_model=None,
    graph=None,
    name: str | None = None,
    use_solvers: bool | None = None,
    mechanism: str = "auto",
    calibrate: bool = True,
    verify: bool = True,
    verify_steps: int = 5,
    seed: int | None = None,
) -> TorchPlan:
    """Trace one training step of ``model`` and plan it under ``budget``.

    Parameters
    ----------
    model : torch.nn.Module
        On ``cpu`` or ``cuda``, in training mode.
    example_inputs : tensor or tuple of tensors
        Inputs of the step to plan (same shapes as in training).
    loss_fn : callable
        ``loss_fn(output) -> scalar``, the step's loss (required; pass
        :func:`~hybrid_remat.torch.default_loss` for a stand-in).
    budget : float, int or str
        Live activation memory of the step: a fraction of the traced step's
        keep-all peak (``0.6``), a percentage (``"60%"``), a size
        (``"2GiB"``) or bytes (an int).
    example_kwargs : dict, optional
        Keyword arguments of ``model.forward``.
    time_limit : float
        Seconds for the search (``anytime_solve`` included); tracing,
        calibration and verification run a fixed number of steps on top.
    costs, repeats, cost_model
        See :func:`~hybrid_remat.torch.trace` (``costs`` default:
        ``"measure"``, with ``seed`` ``"flops"``).
    graph : Graph, optional
        A graph already traced from this model and inputs (skips tracing).
    use_solvers : bool, optional
        Also map the plan of :func:`hybrid_remat.anytime.anytime_solve`
        (default: yes, without ``seed``; its portfolio runs by the clock).
    mechanism : {"auto", "regions", "ops"}
        The runtime to plan for (see :func:`plan_graph`).
    calibrate : bool or Overheads
        Measure the runtimes' own costs on the model (a few steps) so the
        predicted step time includes them (or reuse ``tplan.overheads`` of an
        earlier plan); ``False``: only the framework time per op, derived
        from the traced step.
    verify : bool
        Run the best plans of each runtime (for checkpoint regions also the
        plan that checkpoints every module of the best plan's pool, as a user
        would by hand) once for its live peak
        (:class:`~hybrid_remat.torch.LiveBytes`: every storage ATen calls
        allocate, the runtime's transient buffers included; kernels' internal
        workspaces are not) and ``verify_steps`` times for time; keep the
        fastest whose live peak is within the budget
        (re-planning with a tighter budget when none is), and record the
        figures in ``measured``.
    seed : int, optional
        Plan deterministically: the same model, inputs and budget give the
        same plan on every run.  Op times come from the FLOP roofline
        (``costs="flops"``, unless ``costs`` is given), the runtimes' own
        costs from fixed figures (:func:`~._overheads.fixed_overheads`, unless an
        :class:`Overheads` is passed as ``calibrate``), the RNG is seeded
        for the traced and measured steps (the caller's RNG state is
        restored), and verification keeps the candidate with the lowest
        predicted step time among those whose measured live peak (a
        deterministic count) is within the budget; step times are still
        measured and recorded in ``measured``.  The search stays bounded
        by ``time_limit``: a search cut short by it may differ.

    Returns
    -------
    TorchPlan
        Its plan passed the simulator under the budget; ``apply(model,
        tplan)`` runs it with ``loss_fn``.

    Raises
    ------
    BudgetError
        The budget is below what any executable plan reaches; the message
        names a budget that plans.
    HybridRematError
        No ``loss_fn``, a meta or unsupported device, inputs on another
        device than the model.
    """
    loss_fn = require_loss(loss_fn, "plan()")
    if seed is None:
        return _plan(model, example_inputs, loss_fn, budget, example_kwargs, time_limit, costs or "measure", repeats,
                     cost_model, graph, name, True if use_solvers is None else bool(use_solvers), mechanism,
                     calibrate, verify, verify_steps, False)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise HybridRematError(f"seed must be an int or None, not {seed!r}")
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count()))):
        torch.manual_seed(seed)
        return _plan(model, example_inputs, loss_fn, budget, example_kwargs, time_limit, costs or "flops", repeats,
                     cost_model, graph, name, bool(use_solvers), mechanism,
                     calibrate if isinstance(calibrate, Overheads) else "fixed", verify, verify_steps, True)


def _plan(model, example_inputs, loss_fn, budget, example_kwargs, time_limit, costs, repeats, cost_model, graph, name,
          use_solvers, mechanism, calibrate, verify, verify_steps, deterministic):
    if isinstance(model, torch.nn.Module) and not model.training:
        warnings.warn("hybrid_remat.torch.plan: the model is in eval mode; the step is traced and planned as it runs "
                      "now (no dropout, batch norms on running statistics). Call model.train() first to plan the "
                      "training step", TorchPlanWarning, stacklevel=3)
    inputs = as_inputs(example_inputs)
    from ._cache_args import training_kwargs

    kwargs = training_kwargs(model, as_kwargs(example_kwargs))
    device = check_devices(model, inputs, kwargs)
    g = graph if graph is not None else trace(
        model, inputs, loss_fn, example_kwargs=kwargs, costs=costs, repeats=repeats, cost_model=cost_model, name=name
    )
    if isinstance(calibrate, Overheads):
        oh = calibrate
    elif calibrate == "fixed":
        oh = fixed_overheads(g, device)
    elif calibrate:
        oh = measure_overheads(model, inputs, loss_fn, kwargs, g, device)
    else:
        oh = _per_node_only(g)
    nbytes = budget_bytes(budget, g)
    try:
        tp = plan_graph(g, nbytes, time_limit=time_limit, use_solvers=use_solvers, mechanism=mechanism, overheads=oh)
    except BudgetError as e:
        low = getattr(e, "lowest_plan", None)
        if not verify or low is None:
            raise
        with preserved_state(model):  # a hint that plans: the lowest plan's peak as the runtime measures it
            m = measure_candidates(model, inputs, kwargs, loss_fn, device, [low], 1)[0]
        hint = max(low.predicted_peak_bytes, m["live_peak_bytes"])
        raise BudgetError(f"{str(e).rsplit('; budget=', 1)[0]}; measured, it holds {m['live_peak_bytes']} B; "
                          f"budget={hint} plans") from None
    if verify and not (tp.mechanism == "regions" and not tp.regions):  # the plain step needs no verification
        try:
            tp = _verified(model, inputs, kwargs, loss_fn, device, tp, nbytes, time_limit, use_solvers, mechanism,
                           oh, verify_steps, deterministic)
        except KeyboardInterrupt as stop:  # PlanInterrupted of a re-plan too: the plan already found stands
            raise interrupted_with(tp, stop) from None
    tp.loss_fn = loss_fn
    return tp


def _per_node_only(g) -> Overheads:
    step_s = g.meta["torch"].get("step_s")
    if not step_s:
        return Overheads()
    return Overheads.fitting(g, float(step_s), source="per-node")


def measure_candidates(model, inputs, kwargs, loss_fn, device, plans, steps: int) -> list[dict]:
    """Per plan: live peak (:class:`~hybrid_remat.torch.LiveBytes`: the
    storages ATen calls allocate, parameter gradients left out -- the
    quantity of the traced graph's peak) and ``steps`` step times, the
    plans and a plain step run in turn: median step time, the median of the
    per-round ratios to the plain step (``ratio``) and their relative
    interquartile range (``spread``); ``model``'s state is restored by the
    caller."""
    from ._measure import measure_step
    from ._runtime import TorchPlanWarning
    from ._step import PlannedStep
    from ._trace import interleaved_times, run_step

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TorchPlanWarning)
        runs = []
        for tp in plans:
            step = PlannedStep(model, tp, loss_fn)
            for p in model.parameters():
                p.grad = None
            r = measure_step(model, inputs, lambda *a, step=step: step(*a, **kwargs))
            out.append({"live_peak_bytes": int(r["live_peak_bytes"])})
            runs.append(lambda step=step: step(*inputs, **kwargs))
        times = interleaved_times(model, device, [lambda: run_step(model, inputs, loss_fn, kwargs), *runs], steps)
    plain = times[0]
    for d, ts in zip(out, times[1:], strict=True):
        ratios = sorted(t / p for t, p in zip(ts, plain, strict=True))  # per round: load spikes hit both
        d["step_s"] = float(np.median(ts))
        d["plain_step_s"] = float(np.median(plain))
        d["step_times_s"] = [float(t) for t in ts]
        d["ratio"] = float(np.median(ratios))
        # relative spread of the per-round ratios (interquartile range over the median)
        d["spread"] = float((np.percentile(ratios, 75) - np.percentile(ratios, 25)) / max(d["ratio"], 1e-12))
    return out


def _verified(model, inputs, kwargs, loss_fn, device, tp, nbytes, time_limit, use_solvers, mechanism, oh, steps,
              deterministic=False):
    target = nbytes
    last = None
    spare: list = []  # measured and within the budget, kept while a tighter search looks for a faster one
    with preserved_state(model):
        for attempt in range(3):
            cands = [tp] + list(tp.alternatives)
            for c, m in zip(cands, measure_candidates(model, inputs, kwargs, loss_fn, device, cands, steps),
                            strict=True):
                c.measured = m
            fitting = [c for c in cands if c.measured["live_peak_bytes"] <= nbytes]
            if fitting and not _has(fitting, cands[0]) and not spare and attempt < 2:
                # the predicted-fastest held more than simulated: before settling for a slower candidate that
                # fits, search once more under a budget tightened by that excess (e.g. per-layer checkpointing
                # beside a finer plan over by a few kB), and choose among every candidate that fitted
                spare = fitting
                fitting = []
            else:
                fitting = fitting + [c for c in spare if not _has(fitting, c)]
                cands = cands + [c for c in spare if not _has(cands, c)]
            if fitting and deterministic:  # the prediction chooses (timings recorded, not deciding)
                best = min(fitting, key=lambda c: (c.predicted_step_s, c.predicted_peak_bytes, c.family))
                best.alternatives = [c for c in cands if c is not best]
                return _at_budget(best, nbytes) if target != nbytes else best
            if fitting:
                best = min(fitting, key=lambda c: c.measured.get("ratio", c.measured["step_s"]))
                floor = 0.01 if device.type == "cuda" else 0.05  # GPU step times are steadier than a shared CPU's
                # within timing noise (the floor or the measured spread of either): the predicted-fastest stays
                noise = 1.0 + max(floor, cands[0].measured.get("spread", 0.0), best.measured.get("spread", 0.0))
                key = "ratio" if "ratio" in best.measured else "step_s"
                if _has(fitting, cands[0]) and cands[0].measured[key] <= noise * best.measured[key]:
                    best = cands[0]
                best.alternatives = [c for c in cands if c is not best]
                return _at_budget(best, nbytes) if target != nbytes else best
            # the runtime held more than simulated: tighten by the worst excess and search again
            last = min(cands, key=lambda c: c.measured["live_peak_bytes"])
            over = [c for c in cands if c.measured["live_peak_bytes"] > nbytes] or cands
            excess = max(c.measured["live_peak_bytes"] - c.predicted_peak_bytes for c in over)
            target = int(target - max(excess, 0.02 * nbytes))
            if target <= 0:
                break
            try:
                tp = plan_graph(tp.graph, target, time_limit=time_limit, use_solvers=use_solvers,
                                mechanism=mechanism, overheads=oh)
            except BudgetError as e:  # last try: the plan with the lowest predicted peak
                low = getattr(e, "lowest_plan", None)
                if low is None or any(c.plan == low.plan for c in cands):
                    break
                tp = low
                tp.alternatives = []
        if spare:  # the tighter searches found nothing that fits: the best of those that did
            best = min(spare, key=(lambda c: (c.predicted_step_s, c.predicted_peak_bytes, c.family)) if deterministic
                       else (lambda c: c.measured.get("ratio", c.measured["step_s"])))
            best.alternatives = [c for c in spare if c is not best]
            return best
    low = last.measured["live_peak_bytes"] if last is not None else nbytes
    raise BudgetError(
        f"no plan for {tp.graph.name!r} ran within {nbytes} B: the lowest live peak measured was {low} B "
        f"({100.0 * low / tp.keep_all_peak_bytes:.1f}% of keep-all); budget={low} plans"
    )


def _has(plans, tp) -> bool:
    """``tp`` is one of ``plans`` (by identity: plans hold arrays)."""
    return any(c is tp for c in plans)


def _at_budget(tp: TorchPlan, nbytes: int) -> TorchPlan:
    """The same plan, reported against the user's budget."""
    from ..simulate import simulate

    tp.problem = _problem(tp.graph, nbytes, tp.overheads)
    tp.predicted = simulate(tp.problem, tp.plan)
    return tp


# ------------------------------------------------------------------ files
@dataclass
class FilePlan:
    """A checkpoint-region plan read from a file (no traced graph needed)."""

    regions: tuple
    budget_bytes: int
    predicted_peak_bytes: int
    loss_fn: object = None
    summary: dict = field(default_factory=dict)
    mechanism: str = "regions"


def load(model, path, loss_fn=None, *, example_inputs=None, example_kwargs=None):
    """A :class:`~hybrid_remat.torch.PlannedStep` running ``model`` under
    the plan in ``path`` (written by ``TorchPlan.write`` or ``hybrid-remat
    torch-plan``).

    Parameters
    ----------
    model : torch.nn.Module
        A model with the module structure the plan was made for.
    path : str or path
    loss_fn : callable, optional
        The step's loss (needed to call the step; the context form
        ``step.forward()`` needs none).
    example_inputs, example_kwargs
        Needed only for an op-replay plan (``mechanism: "ops"``): the step is
        traced again (FLOP costs, no timing) and must run the same forward
        ops as the planned one.

    Examples
    --------
    >>> step = hrt.load(model, "resnet.plan.json", loss_fn)   # doctest: +SKIP
    >>> loss = step(x)                                         # doctest: +SKIP
    """
    from ._step import PlannedStep

    try:
        with open(os.fspath(path)) as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise HybridRematError(f"plan file {os.fspath(path)} does not exist") from None
    except (OSError, json.JSONDecodeError) as e:
        raise HybridRematError(f"cannot read plan file {os.fspath(path)}: {e}") from None
    summary = doc.get("summary") if isinstance(doc, dict) else None
    if not isinstance(summary, dict) or "mechanism" not in summary:
        raise HybridRematError(f"{os.fspath(path)} is not a plan of hybrid_remat.torch (no torch summary)")
    mech = summary["mechanism"]
    if mech == "regions":
        regions = tuple(Region.from_json(r) for r in summary.get("regions", []))
        fp = FilePlan(regions, int(summary["budget_bytes"]), int(summary["predicted_peak_bytes"]), loss_fn, summary)
        return PlannedStep(model, fp, loss_fn)
    if mech != "ops":
        raise HybridRematError(f"{os.fspath(path)}: unknown mechanism {mech!r}")
    if example_inputs is None:
        raise HybridRematError(
            f"{os.fspath(path)} is an op-replay plan: pass example_inputs= (and loss_fn=) to load() so the step "
            "can be traced again and matched to the plan"
        )
    g = trace(model, example_inputs, require_loss(loss_fn, "load() of an op-replay plan"),
              example_kwargs=example_kwargs, costs="flops", warmup=False, timed_steps=0)
    if ops_digest(g) != summary.get("ops_digest"):
        raise HybridRematError(
            f"{os.fspath(path)} was planned for another forward (its ops differ from this model's on these inputs)"
        )
    keep = np.ones(int(g.meta["torch"]["n_forward"]), dtype=bool)
    end = model_forward_end(g)  # the loss may differ from the planned one: its nodes are kept
    dropped = np.asarray(summary.get("dropped_all", summary.get("dropped_nodes", [])), dtype=np.int64)
    keep[dropped[dropped < end]] = False
    from ..simulate import simulate

    problem = _problem(g, int(summary["budget_bytes"]), None)
    p = executable_plan(g, keep, problem.primary.name)
    tp = TorchPlan(g, problem, p, keep, simulate(problem, p, check_budget=False), "file", mechanism="ops",
                   loss_fn=loss_fn)
    return PlannedStep(model, tp, loss_fn)

