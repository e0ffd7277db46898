"""Which module calls replay as they ran: a checkpointed call is recomputed
in backward, and the recomputation must perform the ops the forward did.

A module's forward may read Python state that the forward itself changed:
a key/value cache object passed as an argument and appended to (Hugging
Face ``DynamicCache``: the replay concatenates onto the keys the forward
already stored, then slices them back), a counter on the module, a list it
fills.  ``torch.utils.checkpoint`` then replays other ops than the forward
ran: with a selective-checkpoint context it fails in backward (``aten.slice
.Tensor encountered during backward but not found in storage``), without
one it silently recomputes from the changed state.

:func:`replay_mismatches` runs the step once per depth of the module tree
with every (disjoint) module of that depth checkpointed, records the ATen
ops (name and output shapes) of each call's forward and of its replay, and
names the modules whose replay is not a prefix of their forward (the replay
stops early, at the last saved tensor).  The region search never offers
them.  The op-replay runtime replays recorded ATen ops from tensors, so it
is not affected.
"""

from __future__ import annotations

import functools
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ._cache_args import cache_positions, without_cache
from ._regions import _batch_norms, _state_buffers
from ._regions import _contexts as runtime_contexts

__all__ = ["replay_mismatches"]


def _ignored() -> frozenset:
    from torch.utils.checkpoint import SAC_IGNORED_OPS

    return frozenset(SAC_IGNORED_OPS)


_IGNORED = _ignored()


class _OpLog(TorchDispatchMode):
    def __init__(self, log: list, buffer_ptrs: set):
        super().__init__()
        self.log = log
        self.buffer_ptrs = buffer_ptrs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _IGNORED:  # detach and metadata ops: the replay adds some of its own
            return out
        ts = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if any(t.data_ptr() in self.buffer_ptrs for t in ts):  # a buffer update (batch counter): not replayed
            return out
        self.log.append((str(func), tuple(tuple(t.shape) for t in ts), tuple(_checksum(func, t) for t in ts)))
        return out


def _checksum(func, t: torch.Tensor):
    """The sum of ``t`` (a 0-dim tensor on its device: no sync per op; read after the step)."""
    if t.is_complex() or t.is_meta or t.numel() == 0 or "empty" in func.__name__:  # empty*: no values yet
        return 0.0
    with torch.no_grad():
        return t.detach().double().sum()


def _floats(log: list) -> list:
    return [(name, shapes, tuple(float(x) for x in sums)) for name, shapes, sums in log]


def _same(a, b) -> bool:
    if a[:2] != b[:2]:
        return False
    return all(x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-4 * max(abs(x), abs(y)) + 1e-6
               for x, y in zip(a[2], b[2], strict=True))


class _Both:
    def __init__(self, *ctxs):
        self.ctxs = ctxs

    def __enter__(self):
        for c in self.ctxs:
            c.__enter__()
        return self

    def __exit__(self, *exc):
        for c in reversed(self.ctxs):
            c.__exit__(*exc)
        return False


def _contexts(records: list, path: str, runtime_contexts, buffer_ptrs: set):
    fwd, rec = [], []
    records.append((path, fwd, rec))
    f, r = runtime_contexts()
    return _Both(f, _OpLog(fwd, buffer_ptrs)), _Both(r, _OpLog(rec, buffer_ptrs))


def _first_difference(fwd: list, rec: list):
    """Where the replay's calls of an op stop matching the forward's calls of
    that op, in order (how a selective-checkpoint context pairs them), or None."""
    by_op: dict = {}
    for e in fwd:
        by_op.setdefault(e[0], []).append(e)
    seen: dict = {}
    for i, b in enumerate(rec):
        k = seen.get(b[0], 0)
        seen[b[0]] = k + 1
        calls = by_op.get(b[0], [])
        if k >= len(calls):
            return i, None, b
        if not _same(calls[k], b):
            return i, calls[k], b
    return None


def replay_mismatches(model, inputs, loss_fn, kwargs, pools) -> dict:
    """``{path: reason}`` for the modules whose checkpoint replay differs
    from their forward.

    Parameters
    ----------
    pools : iterable of list of str
        Module paths to probe, none nested in another within a list (one
        step per list).  Run under :func:`~._trace.preserved_state`.
    """
    from torch.utils.checkpoint import checkpoint

    bad: dict = {}
    for paths in pools:
        paths = [p for p in paths if p not in bad]
        if not paths:
            continue
        try:
            records = _probe_step(model, inputs, loss_fn, kwargs, paths, checkpoint)
        except Exception:  # noqa: BLE001 - a replay that fails outright: find which module's, one at a time
            records = []
            for p in paths:
                try:
                    records += _probe_step(model, inputs, loss_fn, kwargs, [p], checkpoint)
                except Exception as e:  # noqa: BLE001
                    bad[p] = f"its checkpointed replay fails ({type(e).__name__}: {str(e)[:120]})"
        for path, fwd, rec in records:
            d = _first_difference(fwd, rec)
            if d is not None and path not in bad:
                i, a, b = d
                what = f"other values of {b[0]}" if a is not None and a[:2] == b[:2] else (
                    f"{b[0]} {b[1]}, not in the forward" if a is None else f"{b[0]} {b[1]}, forward: {a[1]}")
                bad[path] = (f"its replay differs from its forward at replayed op {i} ({what}): the forward depends on "
                             "state it changes")
    return bad


def _probe_step(model, inputs, loss_fn, kwargs, paths, checkpoint) -> list:
    records: list = []
    patched = []
    ptrs = {b.data_ptr() for b in model.buffers()}
    for p in paths:
        mod = model.get_submodule(p) if p else model
        inner = mod.forward
        norms = _batch_norms(mod)
        rt = functools.partial(runtime_contexts, frozenset(), norms, _state_buffers(mod, norms))
        ctx = functools.partial(_contexts, records, p, rt, ptrs)
        pos = cache_positions(inner)

        def forward(*args, _inner=inner, _ctx=ctx, _pos=pos, **kw):
            if not torch.is_grad_enabled():
                return _inner(*args, **kw)
            args, kw = without_cache(args, kw, _pos)
            return checkpoint(_inner, *args, use_reentrant=False, context_fn=_ctx, **kw)

        patched.append((mod, "forward" in mod.__dict__, mod.__dict__.get("forward")))
        mod.forward = forward
    try:
        loss = loss_fn(model(*inputs, **kwargs))
        loss.backward()
    finally:
        for mod, had, old in reversed(patched):
            if had:
                mod.forward = old
            else:
                del mod.forward
        for prm in model.parameters():
            prm.grad = None
    return [(path, _floats(fwd), _floats(rec)) for path, fwd, rec in records]
