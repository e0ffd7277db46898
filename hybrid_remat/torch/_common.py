"""Helpers shared by the tracer, the runtime and the meter: how one ATen call
is classified (node or view), which storages it allocates or mutates, RNG
capture for random ops, and a clock.

A *node* is one ATen call that allocates a new storage or writes into an
existing one (the convention of ``datasets/README.md``); an op whose tensor
outputs all alias its inputs and that writes nothing is a *view* and is
folded into the producer of the storage it aliases.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.multiprocessing.reductions import StorageWeakRef

__all__ = [
    "storage_key", "storage_nbytes", "OpCall", "classify_call", "is_random", "capture_rng", "restore_rng",
    "sync", "now", "legacy_mutates_externals", "weak", "flatten", "unflatten", "tree_leaves", "is_pure_view",
]


def storage_key(t: torch.Tensor) -> tuple:
    """Identity of ``t``'s storage while it is alive: ``(device, data_ptr)``;
    tensors without a storage (sparse, some subclasses) get a per-object key."""
    try:
        s = t.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return ("no-storage", id(t))
    return (t.device.type, t.device.index, s.data_ptr())


def storage_nbytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError, TypeError):
        return 0


def flatten(obj, leaves: list):
    """Flatten the tuples, lists and dicts of an ATen call's arguments or
    outputs into ``leaves``; returns the spec for :func:`unflatten` (much
    cheaper than ``torch.utils._pytree`` for these plain containers)."""
    t = type(obj)
    if t is tuple or t is list:
        return (t, [flatten(x, leaves) for x in obj])
    if t is dict:
        return (dict, [(k, flatten(v, leaves)) for k, v in obj.items()])
    leaves.append(obj)
    return None


def _build(spec, it):
    if spec is None:
        return next(it)
    t, items = spec
    if t is dict:
        return {k: _build(v, it) for k, v in items}
    return t([_build(v, it) for v in items])


def unflatten(spec, leaves: list):
    """Rebuild what :func:`flatten` took apart, from ``leaves``.  (No
    closures: a self-referencing closure would keep the tensors alive in a
    reference cycle until the garbage collector runs.)"""
    return _build(spec, iter(leaves))


def tree_leaves(obj) -> list:
    out: list = []
    flatten(obj, out)
    return out


def is_random(func) -> bool:
    """True for ops that draw from a generator (dropout masks, ``rand``...)."""
    return torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())


def legacy_mutates_externals(func) -> bool:
    """Ops that update tensors their schema does not mark as written
    (batch norm's running statistics)."""
    name = str(func)
    return "batch_norm" in name and "backward" not in name


def _written_ids(func, args, kwargs) -> set:
    schema = getattr(func, "_schema", None)
    if schema is None:
        return set()
    out = set()
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        if a.kwarg_only or i >= len(args):
            v = kwargs.get(a.name)
        else:
            v = args[i]
        for leaf in tree_leaves(v):
            if isinstance(leaf, torch.Tensor):
                out.add(id(leaf))
    return out


@dataclass
class OpCall:
    """What one ATen call did.

    Attributes
    ----------
    leaves : list
        Flattened ``(args, kwargs)``.
    spec : pytree spec of ``(args, kwargs)``.
    in_pos : list of int
        Leaf positions holding tensors.
    written_pos : list of int
        Leaf positions of tensors the op writes into (schema ``a!``).
    out_leaves : list
        Flattened outputs.
    new_out_pos : list of int
        Output positions whose storage is new (not an input's), deduplicated.
    """

    leaves: list
    spec: object
    in_pos: list
    written_pos: list
    out_leaves: list
    new_out_pos: list

    @property
    def is_node(self) -> bool:
        return bool(self.new_out_pos or self.written_pos)


_PURE_VIEW: dict = {}


def is_pure_view(func) -> bool:
    """True for ops whose outputs only alias their inputs and that write
    nothing (``view``, ``t``, ``expand``, ``detach``...): never a node."""
    r = _PURE_VIEW.get(func)
    if r is None:
        schema = getattr(func, "_schema", None)
        writes = schema is not None and any(
            a.alias_info is not None and a.alias_info.is_write for a in schema.arguments
        )
        r = bool(getattr(func, "is_view", False)) and not writes
        _PURE_VIEW[func] = r
    return r


def classify_call(func, args, kwargs, out) -> OpCall:
    """Classify a finished call: which outputs are new storages, which
    inputs were written."""
    leaves: list = []
    spec = flatten((tuple(args), dict(kwargs)), leaves)
    in_pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    wid = _written_ids(func, args, kwargs)
    written_pos = [i for i in in_pos if id(leaves[i]) in wid]
    in_keys = {storage_key(leaves[i]) for i in in_pos}
    out_leaves = tree_leaves(out)
    new_out_pos, seen = [], set()
    for j, o in enumerate(out_leaves):
        if isinstance(o, torch.Tensor):
            k = storage_key(o)
            if k not in in_keys and k not in seen:
                seen.add(k)
                new_out_pos.append(j)
    return OpCall(leaves, spec, in_pos, written_pos, out_leaves, new_out_pos)


def capture_rng() -> tuple:
    """The CPU generator state and, when CUDA is initialised, the current
    CUDA device's."""
    cpu = torch.get_rng_state()
    cuda = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        dev = torch.cuda.current_device()
        cuda = (dev, torch.cuda.get_rng_state(dev))
    return cpu, cuda


def restore_rng(state: tuple) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda[1], cuda[0])


def sync(device_type: str) -> None:
    if device_type == "cuda":
        torch.cuda.synchronize()


def now() -> float:
    return time.perf_counter()


class _Expired:
    def expired(self) -> bool:
        return True


def weak(t: torch.Tensor):
    """A storage weak reference (one that reads as expired when ``t`` has no
    storage, so such tensors are never taken for a tracked buffer)."""
    try:
        return StorageWeakRef(t.untyped_storage())
    except (RuntimeError, NotImplementedError, TypeError):
        return _Expired()
