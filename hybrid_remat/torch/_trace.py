"""Record one training step of an ``nn.Module`` at ATen level into a
:class:`~hybrid_remat.graph.Graph`.

The step ``loss = loss_fn(model(*inputs)); loss.backward()`` runs under a
``TorchDispatchMode`` that sees every ATen call, forward then backward, with
the conventions of the profiled graphs in ``datasets/``:

* a node is one call that allocates a new storage or writes into one; views
  are folded (a reader of a view depends on the storage's producer);
* edge ``u -> v``: ``v`` reads (or writes) a storage ``u`` owns;
* an in-place op takes ownership of the buffer it mutates: the bytes move from
  the old producer (which is then *overwritten*) to the in-place node;
* a multi-output op is one node holding the sum of its new storages;
* parameters, buffers and inputs are not nodes (their memory is outside the
  activation budget); the nodes that produce parameter gradients are
  ``required``.

Each node's cost is its wall time on the model's device (median of
``repeats`` re-runs of that op alone, synchronised on CUDA), or an estimate
from FLOPs (``costs="flops"``).  The trace restores the model's gradients and
buffers, so tracing has no side effect on training.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import GraphError, HybridRematError
from ..graph import Graph
from ._common import (
    capture_rng,
    classify_call,
    is_pure_view,
    is_random,
    now,
    restore_rng,
    storage_key,
    storage_nbytes,
    sync,
    unflatten,
    weak,
)

__all__ = [
    "trace", "default_loss", "run_step", "as_inputs", "as_kwargs", "require_loss", "check_devices", "OwnerMap",
    "module_path_hooks", "cost_kind_for", "preserved_state", "time_steps", "interleaved_times",
]

SUPPORTED_DEVICES = ("cpu", "cuda")


def default_loss(output) -> torch.Tensor:
    """``output.float().pow(2).mean()`` (the first tensor of a tuple/dict output).

    A stand-in loss for planning when the real one does not matter; it is
    never used unless passed explicitly (``loss_fn=hrt.default_loss``)."""
    if isinstance(output, dict):
        output = next(iter(output.values()))
    if isinstance(output, (tuple, list)):
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise HybridRematError("the model returned no tensor; pass loss_fn=")
    return output.float().pow(2).mean()


def as_inputs(example_inputs) -> tuple:
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    raise HybridRematError("example_inputs must be a tensor or a tuple of tensors")


def as_kwargs(example_kwargs) -> dict:
    if example_kwargs is None:
        return {}
    if not isinstance(example_kwargs, dict) or not all(isinstance(k, str) for k in example_kwargs):
        raise HybridRematError("example_kwargs must be a dict of keyword arguments for model.forward")
    return dict(example_kwargs)


def require_loss(loss_fn, where: str) -> Callable:
    """``loss_fn`` itself; a clear error when it is missing (no silent stand-in)."""
    if loss_fn is None:
        raise HybridRematError(
            f"{where} needs loss_fn= (loss_fn(output) -> scalar tensor, the loss of your training step); "
            "to use the mean of the squared outputs as a stand-in, pass loss_fn=hybrid_remat.torch.default_loss"
        )
    if not callable(loss_fn):
        raise HybridRematError(f"loss_fn must be callable, not {type(loss_fn).__name__}")
    return loss_fn


def _tensor_devices(objs) -> set:
    return {x.device for x in objs if isinstance(x, torch.Tensor)}


def check_devices(model, inputs: Sequence, kwargs: dict | None = None) -> torch.device:
    """The one device the step runs on; a clear error for meta tensors,
    unsupported device types and models/inputs split across devices."""
    params = _tensor_devices(list(model.parameters()) + list(model.buffers()))
    data = _tensor_devices(list(inputs) + list((kwargs or {}).values()))
    every = params | data
    for d in sorted(every, key=str):
        if d.type == "meta":
            raise HybridRematError(
                "the model or its inputs are on the meta device: hybrid_remat.torch traces and runs a real step; "
                "materialise the model first (model.to_empty(device='cpu') and initialise it, or build it on cpu/cuda)"
            )
        if d.type not in SUPPORTED_DEVICES:
            raise HybridRematError(
                f"device {d} is not supported by hybrid_remat.torch (supported: {', '.join(SUPPORTED_DEVICES)})"
            )
    if len(params) > 1:
        raise HybridRematError(f"the model's parameters are on several devices ({', '.join(map(str, sorted(params, key=str)))}); "
                               "plan one device at a time")
    if params and data and not data <= params:
        raise HybridRematError(
            f"the inputs are on {', '.join(map(str, sorted(data, key=str)))} but the model is on {next(iter(params))}"
        )
    return next(iter(params or data or {torch.device("cpu")}))


def run_step(model, inputs: Sequence, loss_fn: Callable, kwargs: dict | None = None) -> torch.Tensor:
    """Forward, loss and backward; returns the loss."""
    loss = loss_fn(model(*inputs, **(kwargs or {})))
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise HybridRematError("loss_fn must return a scalar tensor")
    loss.backward()
    return loss


def cost_kind_for(device: torch.device) -> str:
    """Cost column name: ``"gpu"`` for CUDA (as in the profiled graphs), else the device type."""
    return "gpu" if device.type == "cuda" else device.type


def model_device(model, inputs) -> torch.device:
    for p in model.parameters():
        return p.device
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return x.device
    return torch.device("cpu")


class OwnerMap:
    """Which node currently owns each live storage.

    Entries are validated with a storage weak reference, so an address reused
    after a free is never mistaken for the old buffer."""

    def __init__(self):
        self._map: dict = {}

    def set(self, t: torch.Tensor, node: int, buf: int) -> None:
        self._map[storage_key(t)] = (node, buf, weak(t))

    def get(self, t: torch.Tensor):
        e = self._map.get(storage_key(t))
        if e is None or e[2].expired():
            return None
        return e[0], e[1]


@contextlib.contextmanager
def module_path_hooks(model, counter: Callable | None = None, calls: list | None = None):
    """Keep ``stack[-1]`` = dotted path of the module running now.

    With ``counter`` (a callable giving the number of nodes recorded so
    far) and ``calls``, append ``[path, first node, end node, parent call]``
    for every module call, in call order (its forward's nodes are
    ``first..end-1``; ``parent`` is the index of the enclosing call, -1 for
    none); ``stack.call`` is the index of the innermost running call."""
    stack = _PathStack([""])
    ids: list[int] = []
    handles = []

    def push(name):
        def hook(module, args):
            stack.append(name)
            if counter is not None and calls is not None:
                calls.append([name, counter(), None, ids[-1] if ids else -1])
                ids.append(len(calls) - 1)
                stack.call = ids[-1]

        return hook

    def pop(module, args, output):
        if len(stack) > 1:
            stack.pop()
            if ids:
                calls[ids.pop()][2] = counter()
                stack.call = ids[-1] if ids else -1

    for name, mod in model.named_modules():
        handles.append(mod.register_forward_pre_hook(push(name)))
        handles.append(mod.register_forward_hook(pop))
    try:
        yield stack
    finally:
        for h in handles:
            h.remove()


class _PathStack(list):
    call = -1


@contextlib.contextmanager
def preserved_state(model):
    """Restore parameter gradients and buffers on exit."""
    grads = {p: p.grad for p in model.parameters()}
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    rng = capture_rng()
    try:
        for p in grads:
            p.grad = None
        yield
    finally:
        for p, g in grads.items():
            p.grad = g
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
        restore_rng(rng)


class _TraceMode(TorchDispatchMode):
    def __init__(self, device_type: str, repeats: int, module_stack: list):
        super().__init__()
        self.device_type = device_type
        self.repeats = repeats
        self.stack = module_stack
        self.phase = 0
        self.owners = OwnerMap()
        self.ops: list[str] = []
        self.modules: list[str] = []
        self.phases: list[int] = []
        self.inplace: list[bool] = []
        self.random: list[bool] = []
        self.times: list[float] = []
        self.flops: list[float] = []
        self.shapes: list[list] = []
        self.edges: set = set()
        self.buffers: list[list] = []  # [nbytes, owner]
        self.node_bufs: list[list[int]] = []
        self.overwritten: list[bool] = []
        self.takes_from: list[list[int]] = []
        self.moves: list[list[list[int]]] = []
        self.saved: list[list[int]] = []  # [module call saving it or -1, owner node or -1]
        self.n_calls = 0  # every ATen call, views included (forward)

    def pack(self, t):
        """Saved-tensor hook: which forward node saved which node's buffer."""
        if self.phase == 0 and isinstance(t, torch.Tensor):
            o = self.owners.get(t)
            self.saved.append([getattr(self.stack, "call", -1), -1 if o is None else o[0]])
        return t

    def _flops(self, func, args, kwargs, out) -> float:
        try:
            from torch.utils.flop_counter import flop_registry

            fn = flop_registry.get(func.overloadpacket)
            return float(fn(*args, **kwargs, out_val=out)) if fn is not None else 0.0
        except Exception:  # noqa: BLE001 - FLOPs are best effort
            return float("nan")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.phase == 0:
            self.n_calls += 1
        if is_pure_view(func):
            return func(*args, **kwargs)
        rnd = is_random(func)
        rng_before = capture_rng() if (rnd and self.repeats) else None
        sync(self.device_type)
        t0 = now()
        out = func(*args, **kwargs)
        sync(self.device_type)
        elapsed = now() - t0
        call = classify_call(func, args, kwargs, out)
        if not call.is_node:
            return out
        v = len(self.ops)
        if self.repeats:
            rng_after = capture_rng() if rnd else None
            samples = []
            for _ in range(self.repeats):
                leaves = list(call.leaves)
                for i in call.written_pos:
                    leaves[i] = leaves[i].clone()
                a2, k2 = unflatten(call.spec, leaves)
                if rnd:
                    restore_rng(rng_before)
                sync(self.device_type)
                t0 = now()
                func(*a2, **k2)
                sync(self.device_type)
                samples.append(now() - t0)
                del a2, k2, leaves
            if rnd:
                restore_rng(rng_after)
            elapsed = statistics.median(samples)
        # edges from the owners of every tensor read or written
        for i in call.in_pos:
            o = self.owners.get(call.leaves[i])
            if o is not None and o[0] != v:
                self.edges.add((o[0], v))
        bufs, took, moves = [], [], []
        for j in call.new_out_pos:
            t = call.out_leaves[j]
            self.buffers.append([storage_nbytes(t), v])
            bufs.append(len(self.buffers) - 1)
            self.owners.set(t, v, len(bufs) - 1)
        for i in call.written_pos:
            t = call.leaves[i]
            o = self.owners.get(t)
            if o is None:
                continue  # a parameter/buffer/input: outside the activation budget
            u, ub = o
            if u == v:
                continue
            b = self.node_bufs[u][ub]
            self.buffers[b][1] = v
            self.overwritten[u] = True
            took.append(u)
            moves.append([u, ub, len(bufs)])
            bufs.append(b)
            self.owners.set(t, v, len(bufs) - 1)
        first = next((o for o in call.out_leaves if isinstance(o, torch.Tensor)), None)
        self.ops.append(str(func))
        self.modules.append(self.stack[-1] if self.phase == 0 else "")
        self.phases.append(self.phase)
        self.inplace.append(bool(call.written_pos))
        self.random.append(rnd)
        self.times.append(float(elapsed))
        self.flops.append(self._flops(func, args, kwargs, out))
        self.shapes.append(list(first.shape) if first is not None else [])
        self.node_bufs.append(bufs)
        self.overwritten.append(False)
        self.takes_from.append(sorted(set(took)))
        self.moves.append(moves)
        return out


def time_steps(model, inputs: Sequence, loss_fn: Callable, kwargs: dict | None, device: torch.device,
               steps: int = 3, step=None) -> float:
    """Fastest wall time of ``steps`` training steps (``step()`` or a plain
    one; the minimum is the figure least disturbed by other load),
    gradients reset to ``None`` before each; call it inside
    :func:`preserved_state`."""
    return min(interleaved_times(model, device, [step or (lambda: run_step(model, inputs, loss_fn, kwargs))], steps)[0])


def interleaved_times(model, device: torch.device, steps_fns: Sequence[Callable], rounds: int) -> list[list[float]]:
    """Wall times of each callable in ``steps_fns``, run in turn for
    ``rounds`` rounds (so that a load spike hits them alike)."""
    out: list[list[float]] = [[] for _ in steps_fns]
    for _ in range(max(1, rounds)):
        for i, fn in enumerate(steps_fns):
            for p in model.parameters():
                p.grad = None
            sync(device.type)
            t0 = now()
            fn()
            sync(device.type)
            out[i].append(now() - t0)
    for p in model.parameters():
        p.grad = None
    return out


def trace(
    model: torch.nn.Module,
    example_inputs,
    loss_fn: Callable | None = None,
    *,
    example_kwargs: dict | None = None,
    costs: str = "measure",
    repeats: int = 3,
    warmup: bool = True,
    timed_steps: int = 3,
    count_param_grads: bool = False,
    name: str | None = None,
    cost_model: Any = None,
    probe_regions: bool = True,
) -> Graph:
    """Record one training step of ``model`` as a remat graph.

    Parameters
    ----------
    model : torch.nn.Module
        In the mode it will be trained in (``model.train()``), on ``cpu`` or
        ``cuda``.
    example_inputs : tensor or tuple of tensors
        Passed as ``model(*example_inputs, **example_kwargs)``.
    loss_fn : callable
        ``loss_fn(output) -> scalar tensor``, the loss of the training step
        (required; :func:`default_loss` is the mean of the squared outputs).
    example_kwargs : dict, optional
        Keyword arguments of ``model.forward``.
    costs : {"measure", "flops"}
        ``"measure"``: wall time of each op re-run alone ``repeats`` times on
        the model's device (median).  ``"flops"``: an estimate from FLOPs and
        bytes (:class:`~hybrid_remat.torch.cost_model.FlopsRooflineCostModel`
        or the registered cost model named by ``cost_model``).
    repeats : int
        Timed re-runs per op (``costs="measure"``).
    warmup : bool
        Run one untraced step first (caches, cuDNN autotuning).
    timed_steps : int
        Plain steps timed after the trace (``meta["torch"]["step_s"]``,
        their median): the wall time the planner calibrates its per-op
        overhead against; ``0`` skips them.
    count_param_grads : bool
        Count the buffers that become parameters' ``.grad`` in their
        producers' bytes.  By default they are left out, like parameters and
        inputs: they are handed to the optimizer (and outlive the step), so
        the graph's peak is the activation memory a plan can change -- the
        quantity :class:`~hybrid_remat.torch.LiveBytes` measures.  Their
        total is ``meta["torch"]["param_grad_bytes"]``.
    probe_regions : bool
        Run a few checkpointed steps (one per depth of the module tree) to
        find the modules whose replay differs from their forward (a forward
        that reads state it changes, such as a key/value cache):
        ``meta["torch"]["replay_mismatch"]`` (``{path: reason}``); the
        region search never checkpoints them.

    Returns
    -------
    Graph
        Cost kind ``"gpu"`` on CUDA, ``"cpu"`` on CPU.  ``graph.meta["torch"]``
        holds per-node ``op``, ``module`` (dotted path; backward nodes take
        the module of their first forward input), ``inplace``, ``random``,
        ``overwritten`` (a later in-place op took one of its buffers),
        ``takes_from`` (the nodes whose buffers an in-place node took),
        ``moves`` (per node, ``[old owner, its buffer index, new buffer index]``),
        ``shape`` and ``n_forward``; per step ``calls`` (``[module path,
        first node, end node, parent call]`` of every module call, in call
        order), ``saved`` (``[innermost module call running when autograd
        saved it (-1: none), owner node or -1]`` for every tensor saved in
        the forward), ``n_calls`` (ATen calls of the forward, views included)
        and ``step_s``.

    Raises
    ------
    HybridRematError
        No ``loss_fn``; a model on the meta device or an unsupported one;
        inputs on another device than the model.

    Examples
    --------
    >>> import torch
    >>> from hybrid_remat.torch import default_loss, trace
    >>> m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    >>> g = trace(m, torch.randn(2, 4), default_loss, repeats=0, timed_steps=0)
    >>> g.meta["torch"]["op"][0]
    'aten.addmm.default'
    >>> g.meta["torch"]["calls"][:2]  # the model's call (nodes 0-2), then its first layer's (node 0)
    [['', 0, 3, -1], ['0', 0, 1, 0]]
    """
    if costs not in ("measure", "flops"):
        raise HybridRematError(f"costs must be 'measure' or 'flops', not {costs!r}")
    loss_fn = require_loss(loss_fn, "trace()")
    inputs = as_inputs(example_inputs)
    from ._cache_args import training_kwargs

    kwargs = training_kwargs(model, as_kwargs(example_kwargs))
    device = check_devices(model, inputs, kwargs)
    kind = cost_kind_for(device)
    calls: list = []
    with preserved_state(model):
        if warmup:
            run_step(model, inputs, loss_fn, kwargs)
            for p in model.parameters():
                p.grad = None
        mode = _TraceMode(device.type, repeats if costs == "measure" else 0, [""])
        with module_path_hooks(model, lambda: len(mode.ops), calls) as stack:
            mode.stack = stack
            with torch.autograd.graph.saved_tensors_hooks(mode.pack, lambda t: t):
                with mode:
                    out = model(*inputs, **kwargs)
                    loss = loss_fn(out)
                    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                        raise HybridRematError("loss_fn must return a scalar tensor")
                    del out
                    mode.phase = 1
                    loss.backward()
        required = []
        grad_bufs = set()  # buffers that end the step as a parameter's .grad
        for p in model.parameters():
            if p.grad is not None:
                o = mode.owners.get(p.grad)
                if o is not None:
                    required.append(o[0])
                    grad_bufs.add(mode.node_bufs[o[0]][o[1]])
        loss_value = float(loss.detach())
        del loss
        step_s = time_steps(model, inputs, loss_fn, kwargs, device, timed_steps) if timed_steps else None
    n = len(mode.ops)
    if n == 0:
        raise GraphError("the traced step ran no ATen operator")
    nbytes = np.zeros(n, dtype=np.int64)
    out_bytes: list[list[int]] = [[] for _ in range(n)]
    grad_bytes = 0
    for b, (size, owner) in enumerate(mode.buffers):
        if b in grad_bufs and not count_param_grads:  # handed to the optimizer, outside the activation budget
            grad_bytes += size
            size = 0
        nbytes[owner] += size
        out_bytes[owner].append(int(size))
    phase = np.asarray(mode.phases, dtype=np.int8)
    n_fwd = int((phase == 0).sum())
    if n_fwd == 0 or not np.all(phase[:n_fwd] == 0):
        raise GraphError("the traced step has no forward ops before its backward ops")
    # backward nodes: the module of their first forward input
    modules = list(mode.modules)
    preds: dict[int, list[int]] = {}
    for u, v in mode.edges:
        preds.setdefault(v, []).append(u)
    for v in range(n_fwd, n):
        fw = sorted(u for u in preds.get(v, []) if u < n_fwd)
        modules[v] = modules[fw[0]] if fw else ""
    names = [f"{'bwd ' if phase[v] else ''}{modules[v] or '<top>'}:{mode.ops[v]}" for v in range(n)]
    flops = np.asarray(mode.flops, dtype=np.float64)
    meta = {
        "source": "hybrid_remat.torch.trace",
        "torch": {
            "op": list(mode.ops),
            "module": modules,
            "inplace": list(mode.inplace),
            "random": list(mode.random),
            "overwritten": list(mode.overwritten),
            "takes_from": mode.takes_from,
            "moves": mode.moves,
            "shape": mode.shapes,
            "out_bytes": out_bytes,
            "n_forward": n_fwd,
            "device": str(device),
            "costs": costs,
            "repeats": repeats if costs == "measure" else 0,
            "loss": loss_value,
            "torch_version": torch.__version__,
            "calls": [c if c[2] is not None else [c[0], c[1], c[1], c[3]] for c in calls],
            "saved": mode.saved,
            "n_calls": mode.n_calls,
            "step_s": step_s,
            "param_grad_bytes": int(grad_bytes),
            "count_param_grads": bool(count_param_grads),
        },
    }
    g = Graph.from_arrays(
        nbytes, sorted(mode.edges), {kind: mode.times}, name=name or type(model).__name__, names=names,
        phase=phase, flops=np.where(np.isnan(flops), np.nan, flops), required=sorted(set(required)), meta=meta,
    )
    if probe_regions:  # modules whose checkpoint replay differs from their forward are never offered
        from ._probe import replay_mismatches
        from ._region_search import checkpoint_pools
        from ._regions import RegionModel

        with preserved_state(model):
            g.meta["torch"]["replay_mismatch"] = replay_mismatches(
                model, inputs, loss_fn, kwargs, checkpoint_pools(RegionModel(g)).values())
    if costs == "flops":
        from ..cost_models import apply_cost_model
        from .cost_model import resolve_cost_model

        g = apply_cost_model(g, resolve_cost_model(cost_model), kind)
    return g
