"""Checkpoint regions: plans an eager step follows at the cost of
``torch.utils.checkpoint`` alone.

A *region plan* names module paths of the model; every call of such a module
runs under non-reentrant ``torch.utils.checkpoint``: the tensors autograd
saves inside the call are dropped after the forward and the whole call is
replayed as one batch when backward first needs one of them (up to the last
saved tensor: checkpoint's early stop).  A region may also keep the outputs
of some ATen ops (``save_ops``, e.g. convolutions and matmuls) through a
selective-checkpoint context (``create_selective_checkpoint_contexts``), so
that its replay skips them.  Replays leave the model's state as the forward
left it: batch norms replay with momentum 0 (running statistics updated
once, as in plain training, at no copy), the region's other buffers are
restored, and the RNG state is replayed (dropout masks are reproduced).

:class:`RegionModel` reads the module calls and the saved tensors recorded by
:func:`~hybrid_remat.torch.trace` and turns a region plan into the keep set
and the compute order the runtime performs (:meth:`RegionModel.plan`), so
that :func:`~hybrid_remat.simulate.simulate` predicts its memory and time:

* a forward value is dropped when every tensor of it that autograd saved was
  saved inside a checkpointed call containing it (and not by a ``save_ops``
  op); it is recomputed by the batch of that call;
* a checkpointed call holds its inputs (its frame keeps the arguments) until
  backward has read the last of its dropped values;
* the batch replays the call's nodes from its first to its last dropped node,
  in forward order, each value freed after its last reader.

Modules that cannot be checkpointed faithfully are never offered: a call that
writes in place into a tensor it did not create, or reads a tensor that a
later op overwrites in place.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import HybridRematError
from ..graph import Graph
from ..plan import Plan
from ._cache_args import cache_positions, without_cache

__all__ = ["Region", "RegionModel", "RegionRunner", "op_overload"]

#: ATen ops whose outputs a selective-checkpoint region may keep (compute-bound).
HEAVY_OPS = frozenset({
    "aten.convolution.default", "aten.mm.default", "aten.addmm.default", "aten.bmm.default",
    "aten.baddbmm.default", "aten._scaled_dot_product_flash_attention.default",
    "aten._scaled_dot_product_efficient_attention.default", "aten._scaled_dot_product_cudnn_attention.default",
    "aten._scaled_dot_product_flash_attention_for_cpu.default", "aten.linear.default", "aten.matmul.default",
})


@dataclass(frozen=True)
class Region:
    """One checkpointed module (every call of it).

    Attributes
    ----------
    path : str
        Dotted module path (``""``: the model itself).
    save_ops : tuple of str
        ATen ops (``"aten.convolution.default"``) whose outputs the region
        keeps instead of recomputing them (selective checkpointing).
    """

    path: str
    save_ops: tuple = ()

    def to_json(self) -> dict:
        return {"path": self.path, "save_ops": list(self.save_ops)}

    @classmethod
    def from_json(cls, d) -> Region:
        if isinstance(d, str):
            return cls(d)
        return cls(str(d["path"]), tuple(d.get("save_ops", ())))


def op_overload(name: str):
    """``"aten.convolution.default"`` -> ``torch.ops.aten.convolution.default``."""
    obj = torch.ops
    try:
        for part in name.split("."):
            obj = getattr(obj, part)
    except (AttributeError, RuntimeError):
        raise HybridRematError(f"unknown ATen op {name!r} in a region's save_ops") from None
    return obj


class RegionModel:
    """What checkpointing module calls does to a traced step.

    Parameters
    ----------
    graph : Graph
        From :func:`~hybrid_remat.torch.trace` (its ``calls`` and ``saved``).
    """

    def __init__(self, graph: Graph):
        tm = graph.meta.get("torch") or {}
        if "calls" not in tm or "saved" not in tm:
            raise HybridRematError(f"graph {graph.name!r} has no module calls: trace it with hybrid_remat.torch.trace")
        self.g = graph
        self.n = graph.n
        self.n_fwd = int(tm["n_forward"])
        self.ops = list(tm["op"])
        self.calls = [tuple(c) for c in tm["calls"]]  # (path, first, end, parent)
        self.preds = [graph.preds(v).tolist() for v in range(self.n)]
        self.overwritten = np.asarray(tm["overwritten"], dtype=bool)
        self.takes_from = [list(x) for x in tm.get("takes_from", [[] for _ in range(self.n)])]
        self.overwriter = {}
        for v, tf in enumerate(self.takes_from):
            for u in tf:
                self.overwriter.setdefault(u, v)
        self.saves_by_call: dict[int, list[int]] = {}
        self.savers_of: dict[int, list[int]] = {}
        for call, u in tm["saved"]:
            if u is None or u < 0 or u >= self.n_fwd:
                continue
            self.savers_of.setdefault(int(u), []).append(int(call))
        self.bwd_readers: list[list[int]] = [[] for _ in range(self.n_fwd)]
        for b in range(self.n_fwd, self.n):
            for u in set(self.preds[b]):
                if u < self.n_fwd:
                    self.bwd_readers[u].append(b)
        self.calls_of: dict[str, list[int]] = {}
        for i, c in enumerate(self.calls):
            self.calls_of.setdefault(c[0], []).append(i)
        self.reasons = {p: self._why_not(p) for p in self.calls_of}

    # ------------------------------------------------------------ validity
    def _why_not(self, path: str) -> str | None:
        mismatch = (self.g.meta["torch"].get("replay_mismatch") or {}).get(path)
        if mismatch:
            return mismatch
        for i in self.calls_of[path]:
            _, first, end, _ = self.calls[i]
            if end <= first:
                return "runs no ATen op"
            for v in range(first, end):
                if any(u < first for u in self.takes_from[v]):
                    return f"node {v} ({self.ops[v]}) writes in place into a tensor made before the call"
                for u in self.preds[v]:
                    if u < first and u in self.overwriter:
                        return f"its input (node {u}) is overwritten in place later"
        return None

    def valid_paths(self) -> list[str]:
        """Module paths that can be checkpointed, in order of first call."""
        return [p for p, why in self.reasons.items() if why is None]

    def ancestors(self, call: int) -> list[int]:
        out = []
        while call >= 0:
            out.append(call)
            call = self.calls[call][3]
        return out

    def saveable_ops(self, path: str) -> tuple:
        """Heavy ops of ``path``'s calls whose outputs no in-place op overwrites."""
        seen: dict[str, bool] = {}
        for i in self.calls_of[path]:
            _, first, end, _ = self.calls[i]
            for v in range(first, end):
                op = self.ops[v]
                if op in HEAVY_OPS:
                    seen[op] = seen.get(op, True) and not self.overwritten[v]
        return tuple(sorted(op for op, ok in seen.items() if ok))

    # ------------------------------------------------------------ the plan
    def check(self, regions) -> dict[str, Region]:
        chosen = {}
        for r in regions:
            if r.path not in self.calls_of:
                raise HybridRematError(f"no module {r.path!r} ran in the traced step")
            why = self.reasons[r.path]
            if why is not None:
                raise HybridRematError(f"module {r.path!r} cannot be checkpointed: {why}")
            chosen[r.path] = r
        for p in chosen:
            for i in self.calls_of[p]:
                for a in self.ancestors(self.calls[i][3]):
                    if self.calls[a][0] in chosen:
                        raise HybridRematError(f"regions {p!r} and {self.calls[a][0]!r} are nested")
        return chosen

    def analyse(self, regions) -> tuple:
        """``(keep, batches)`` of a region plan.

        ``keep`` (bool per forward node): kept for backward; ``batches``:
        per checkpointed call with dropped values ``(call, dropped nodes,
        nodes replayed, external inputs)``."""
        chosen = self.check(regions)
        owner_call = {}  # call index -> region call containing it
        for i in range(len(self.calls)):
            for a in self.ancestors(i):
                if self.calls[a][0] in chosen:
                    owner_call[i] = a
                    break
        keep = np.ones(self.n_fwd, dtype=bool)
        dropped_by: dict[int, list[int]] = {}
        for r, (path, first, end, _) in enumerate(self.calls):
            if path not in chosen:
                continue
            save_ops = chosen[path].save_ops
            for u in range(first, min(end, self.n_fwd)):
                savers = self.savers_of.get(u)
                if not savers:
                    keep[u] = bool(self.bwd_readers[u]) or self.ops[u] in save_ops
                    continue
                if {owner_call.get(s) for s in savers} != {r}:
                    continue  # saved outside this call too: autograd (or another frame) keeps it
                if self.ops[u] in save_ops:
                    continue  # kept by the selective-checkpoint context
                keep[u] = False
                dropped_by.setdefault(r, []).append(u)
        batches = []
        for r, dropped in sorted(dropped_by.items()):
            _, first, end, _ = self.calls[r]
            last = max(dropped)
            nodes = [v for v in range(first, last + 1)]
            ext = sorted({u for v in range(first, end) for u in self.preds[v] if u < first})
            batches.append((r, sorted(dropped), nodes, ext))
        return keep, batches

    def order(self, regions) -> tuple:
        """``(order, holds, keep, batches)``: the compute sequence of the
        step and, per position, the values a checkpoint frame keeps alive
        there (``holds``: ``{position: [nodes]}``)."""
        keep, batches = self.analyse(regions)
        n_fwd = self.n_fwd
        batch_of = {}
        for bi, (_, dropped, _, _) in enumerate(batches):
            for u in dropped:
                batch_of[u] = bi
        seq = list(range(n_fwd))
        done = [False] * len(batches)
        resident_after_fwd = keep & ~self.overwritten[:n_fwd]
        last_read: dict[int, int] = {}
        for bi, (_, dropped, _, _) in enumerate(batches):
            last_read[bi] = max((b for u in dropped for b in self.bwd_readers[u]), default=n_fwd)
        holds: dict[int, list[int]] = {}
        hold_pos: dict[int, int] = {}
        for b in range(n_fwd, self.n):
            for u in self.preds[b]:
                bi = batch_of.get(u)
                if bi is None or done[bi]:
                    continue
                done[bi] = True
                for v in batches[bi][2]:
                    if not resident_after_fwd[v]:
                        seq.append(v)
            seq.append(b)
            for bi, lr in last_read.items():
                if lr == b:
                    hold_pos[bi] = len(seq) - 1
        for bi, pos in hold_pos.items():
            holds.setdefault(pos, []).extend(batches[bi][3])
        return seq, holds, keep, batches

    def plan(self, regions, device: str) -> Plan:
        """The region plan as a :class:`~hybrid_remat.plan.Plan` (each value
        freed after its last use, frames' inputs after their last read)."""
        seq, holds, _, _ = self.order(regions)
        return plan_with_holds(self.g, seq, holds, device, {"solver": "torch_regions",
                                                            "regions": [r.to_json() for r in regions]})


def plan_with_holds(graph: Graph, order, holds: dict, device: str, meta: dict | None = None) -> Plan:
    """Like :func:`~hybrid_remat.plan.plan_from_order`, with extra reads:
    ``holds[pos]`` lists values that must stay resident up to position
    ``pos`` (:func:`hybrid_remat.core.sequence.minimal_plan` with
    ``holds``).  A recomputation of a value never overlaps its previous
    instance: that instance is freed after its last read before it."""
    from ..core.sequence import minimal_plan

    return minimal_plan(graph, order, device, meta, holds=holds)[0]


# ------------------------------------------------------------------ runtime
def _batch_norms(mod: torch.nn.Module) -> list:
    """Batch-norm modules under ``mod`` that update running statistics with
    PyTorch's own ``forward`` (BatchNorm1d/2d/3d: it reads ``momentum`` and
    skips a ``None`` batch counter; others, e.g. ``SyncBatchNorm``, have
    their buffers copied like any other)."""
    from torch.nn.modules.batchnorm import _BatchNorm

    return [m for m in mod.modules()
            if isinstance(m, _BatchNorm) and m.track_running_stats and type(m).forward is _BatchNorm.forward
            and "momentum" in m.__dict__ and "num_batches_tracked" in m._buffers]


def _state_buffers(mod: torch.nn.Module, norms) -> list:
    """Buffers under ``mod`` other than those of ``norms`` (handled without
    copies, see :class:`_Replay`).  All are copied around a replay: a
    forward may update a buffer without moving its version counter (ATen
    ops that write into ``Tensor?`` arguments, as batch norm does)."""
    skip = {id(b) for m in norms for b in m.buffers(recurse=False)}
    return [b for b in mod.buffers() if id(b) not in skip
            and (b.dtype.is_floating_point or b.dtype in (torch.int64, torch.int32))]


class _Replay:
    """Recompute context of one region: the selective-checkpoint context
    (when any), and the model's state left as the forward left it.

    Batch norms replay with momentum 0 and no batch counter: the same
    batch-statistics normalisation (and the same saved tensors), running
    statistics left exactly as they are (``(1 - 0) * r + 0 * m == r``), at
    no copy and no kernel; the region's other buffers are copied before the
    replay and restored after it."""

    def __init__(self, inner, norms, buffers):
        self.inner = inner
        self.norms = norms
        self.buffers = buffers
        self.saved = None
        self.norm_state = None

    def __enter__(self):
        if self.buffers:
            with torch.no_grad():
                self.saved = [b.clone() for b in self.buffers]
        # straight into the modules' dicts: nn.Module.__setattr__ costs microseconds per call
        self.norm_state = [(m.__dict__["momentum"], m._buffers["num_batches_tracked"]) for m in self.norms]
        for m in self.norms:
            m.__dict__["momentum"] = 0.0
            m._buffers["num_batches_tracked"] = None
        if self.inner is not None:
            self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            if self.inner is not None:
                self.inner.__exit__(*exc)
        finally:
            for m, (momentum, count) in zip(self.norms, self.norm_state, strict=True):
                m.__dict__["momentum"] = momentum
                m._buffers["num_batches_tracked"] = count
            self.norm_state = None
            if self.saved is not None:
                with torch.no_grad():
                    for b, saved in zip(self.buffers, self.saved, strict=True):
                        b.copy_(saved)
                self.saved = None
        return False


def _policy(save_ops, ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy.MUST_SAVE if op in save_ops else CheckpointPolicy.PREFER_RECOMPUTE


def _contexts(save_ops, norms, buffers):
    if save_ops:
        from torch.utils.checkpoint import create_selective_checkpoint_contexts

        fwd, rec = create_selective_checkpoint_contexts(functools.partial(_policy, save_ops))
    else:
        fwd, rec = contextlib.nullcontext(), None
    return fwd, _Replay(rec, norms, buffers)


class RegionRunner:
    """Installs checkpointing on the modules of a region plan.

    ``with runner.installed(): loss = loss_fn(model(x)); loss.backward()``
    runs the step under the plan; outside the block the model is untouched.
    """

    def __init__(self, model: torch.nn.Module, regions):
        self.targets = []
        for r in regions:
            try:
                mod = model.get_submodule(r.path) if r.path else model
            except AttributeError:
                raise HybridRematError(f"the model has no module {r.path!r} (the plan was made for another model)") from None
            save = frozenset(op_overload(name) for name in r.save_ops)
            norms = _batch_norms(mod)
            self.targets.append((mod, save, norms, _state_buffers(mod, norms)))

    @staticmethod
    def _wrap(mod, save, norms, buffers):
        from torch.utils.checkpoint import checkpoint

        inner = mod.forward
        context_fn = functools.partial(_contexts, save, norms, buffers)
        cache_at = cache_positions(inner)

        def forward(*args, **kwargs):
            if not torch.is_grad_enabled():
                return inner(*args, **kwargs)
            args, kwargs = without_cache(args, kwargs, cache_at)
            return checkpoint(inner, *args, use_reentrant=False, context_fn=context_fn, **kwargs)

        return forward

    @contextlib.contextmanager
    def installed(self):
        patched = []
        try:
            for mod, save, norms, buffers in self.targets:
                had = "forward" in mod.__dict__
                patched.append((mod, had, mod.__dict__.get("forward")))
                mod.forward = self._wrap(mod, save, norms, buffers)
            yield self
        finally:
            for mod, had, old in reversed(patched):
                if had:
                    mod.forward = old
                else:
                    del mod.forward
