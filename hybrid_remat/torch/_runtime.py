"""Run a training step following a :class:`~hybrid_remat.torch.TorchPlan`.

Mechanism (eager, no compile): during the forward a ``TorchDispatchMode``
numbers the ATen nodes exactly as the tracer did and records, for each, the
op and its arguments (tensors as references to the producing node's buffer
plus the view geometry; parameters and inputs by reference), and the RNG
state before random ops.  ``saved_tensors_hooks`` intercept every tensor
autograd saves:

* its producer is kept by the plan -> autograd keeps it (as usual);
* its producer is dropped -> autograd keeps only a small handle; the tensor is
  recomputed when backward unpacks it, by replaying the recorded ATen ops from
  kept tensors (held by the runtime from their production until the last
  recompute that needs them), dropped ancestors on the way.  A recomputed
  value that backward will unpack again is cached until its last unpack.

Replays run under ``no_grad`` on clones of anything they would mutate outside
the recomputation (batch-norm running statistics, kept buffers), restore the
recorded RNG state for random ops (dropout masks are reproduced exactly) and
check the layout of every output against the forward.

What it cannot express, and what it does then:

* recomputation *during the forward* (a plan that frees and recomputes
  forward values to lower the forward peak): the forward always runs each op
  once, so plans are searched among keep sets only (see ``_planner``);
* a forward that differs from the traced one (data-dependent control flow):
  from the first differing op on, everything is kept (conservative: more
  memory, never wrong values) and a :class:`TorchPlanWarning` says so; the
  step's ``stats["fallback"]`` names the op;
* double backward (``create_graph=True``): recomputed tensors carry no
  autograd history.

Memory accounting (``stats``): ``saved_peak_bytes`` is the peak over the step
of the unique storage bytes held for backward: tensors autograd saved and
kept, tensors the runtime holds for recomputation and cached recomputed
values (parameters and inputs are not activations and are not counted).
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import HybridRematError
from ._common import (
    capture_rng,
    classify_call,
    is_pure_view,
    is_random,
    legacy_mutates_externals,
    now,
    restore_rng,
    storage_key,
    storage_nbytes,
    tree_leaves,
    unflatten,
)
from ._trace import OwnerMap

__all__ = ["TorchPlanWarning"]


class TorchPlanWarning(UserWarning):
    """The runtime could not follow the plan and kept more than planned."""


class _Ref:
    """A tensor argument as (producing node, buffer index, view geometry)."""

    __slots__ = ("node", "buf", "size", "stride", "offset", "dtype", "device")

    def __init__(self, node: int, buf: int, t: torch.Tensor):
        self.node = node
        self.buf = buf
        self.size = tuple(t.shape)
        self.stride = tuple(t.stride())
        self.offset = int(t.storage_offset())
        self.dtype = t.dtype
        self.device = t.device

    def view(self, base: torch.Tensor) -> torch.Tensor:
        if (
            base.dtype == self.dtype and tuple(base.shape) == self.size and tuple(base.stride()) == self.stride
            and base.storage_offset() == self.offset
        ):
            return base
        return torch.empty(0, dtype=self.dtype, device=self.device).set_(
            base.untyped_storage(), self.offset, self.size, self.stride
        )


class _Kept:
    __slots__ = ("t", "__weakref__")

    def __init__(self, t):
        self.t = t


class _Drop:
    __slots__ = ("ref", "flag", "__weakref__")

    def __init__(self, ref: _Ref):
        self.ref = ref
        self.flag = [False]


@dataclass(slots=True, eq=False)
class _Record:
    """What replaying one recorded ATen call needs."""

    func: object
    leaves: object
    spec: object
    written: object
    buf_src: object
    buf_bytes: object
    rng: object
    legacy: object


class _Bytes:
    """Unique-storage byte counter with a peak."""

    def __init__(self):
        self.count: dict = {}
        self.current = 0
        self.peak = 0

    def add(self, t: torch.Tensor):
        key = storage_key(t)
        e = self.count.get(key)
        if e is None:
            nb = storage_nbytes(t)
            self.count[key] = [nb, 1]
            self.current += nb
            if self.current > self.peak:
                self.peak = self.current
        else:
            e[1] += 1
        return key

    def remove(self, key) -> None:
        e = self.count.get(key)
        if e is None:
            return
        e[1] -= 1
        if e[1] == 0:
            del self.count[key]
            self.current -= e[0]


class _StepState:
    """Everything one step needs; dropped when the step ends."""

    def __init__(self, owner):  # a PlannedStep
        self.o = owner
        self.owners = OwnerMap()
        self.records: dict[int, _Record] = {}
        self.hold: dict[int, list] = {}
        self.hold_keys: dict[int, list] = {}
        self.cache: dict[int, list] = {}
        self.cache_keys: dict[int, list] = {}
        self.pending: dict[int, int] = {}
        self.hold_users: dict[int, int] = {}
        self.acct = _Bytes()
        self.next_node = 0
        self.fallback: str | None = None
        self.forward_done = False
        self.n_kept = 0
        self.n_dropped = 0
        self.n_replayed = 0
        self.replay_time = 0.0
        self.bytes_at_backward = 0
        self.groups_left = {a: set(us) for a, us in owner.readers_of_held.items()}
        self.deferred: set = set()

    # ------------------------------------------------------------ forward
    def on_call(self, func, args, kwargs, out, rng):
        call = classify_call(func, args, kwargs, out)
        if not call.is_node:
            return
        k = self.next_node
        self.next_node += 1
        o = self.o
        if self.fallback is None and o.ops is not None and (k >= o.n_fwd or o.ops[k] != str(func)):
            expect = o.ops[k] if k < o.n_fwd else "end of forward"
            self.fallback = f"forward node {k} is {func}, the trace had {expect}"
            warnings.warn(
                f"hybrid_remat.torch: the step differs from the traced one ({self.fallback}); keeping every "
                "saved tensor from here on (memory may exceed the plan's budget). Re-plan for this input.",
                TorchPlanWarning, stacklevel=4,
            )
        leaves = list(call.leaves)
        written = set(call.written_pos)
        for i in call.in_pos:
            t = leaves[i]
            own = self.owners.get(t)
            leaves[i] = t if own is None else _Ref(own[0], own[1], t)
        buf_src, buf_bytes = [], []
        for j in call.new_out_pos:
            t = call.out_leaves[j]
            self.owners.set(t, k, len(buf_src))
            buf_src.append(("out", j))
            buf_bytes.append(storage_nbytes(t))
        taken = set()
        for i in call.written_pos:
            if isinstance(leaves[i], _Ref):
                t = call.leaves[i]
                key = storage_key(t)
                if key in taken:
                    continue
                taken.add(key)
                self.owners.set(t, k, len(buf_src))
                buf_src.append(("arg", i))
                buf_bytes.append(storage_nbytes(t))
        if o.needs_record is None or k in o.needs_record:
            self.records[k] = _Record(
                func, leaves, call.spec, written, buf_src, buf_bytes, rng, legacy_mutates_externals(func)
            )
        if self.fallback is None and k in o.held:
            ts = [call.out_leaves[j] if src == "out" else call.leaves[j] for src, j in buf_src]
            self.hold[k] = ts
            self.hold_keys[k] = [self.acct.add(t) for t in ts]

    def pack(self, t: torch.Tensor):
        own = self.owners.get(t)
        o = self.o
        if own is None:  # a parameter, buffer or input: not an activation
            return _Kept(t)
        # a buffer that a later in-place op takes over holds that op's value when backward reads it
        own = o.final_owner.get(own, own)
        if self.fallback is not None or own[0] >= o.n_fwd or o.keep[own[0]] or own[0] not in o.closure:
            w = _Kept(t)
            weakref.finalize(w, self.acct.remove, self.acct.add(t))
            self.n_kept += 1
            return w
        d = _Drop(_Ref(own[0], own[1], t))
        self.pending[own[0]] = self.pending.get(own[0], 0) + 1
        weakref.finalize(d, self.consume, own[0], d.flag)
        self.n_dropped += 1
        return d

    def end_forward(self):
        self.forward_done = True
        for w, cnt in self.pending.items():
            for a in self.o.closure.get(w, ()):
                self.hold_users[a] = self.hold_users.get(a, 0) + cnt
        for a in list(self.hold):
            if self.hold_users.get(a, 0) <= 0:
                self._release_hold(a)
        self.bytes_at_backward = self.acct.current

    # ----------------------------------------------------------- backward
    def _release_hold(self, a):
        self.hold.pop(a, None)
        for key in self.hold_keys.pop(a, ()):
            self.acct.remove(key)

    def _drop_cache(self, w):
        self.cache.pop(w, None)
        for key in self.cache_keys.pop(w, ()):
            self.acct.remove(key)

    def _drop_unneeded(self):
        """Drop cached values no pending handle will unpack and no pending
        recomputation reads (autograd may unpack a value before the other
        saved tensors of the same backward node that are recomputed from it)."""
        if not self.deferred:
            return
        waiting = [u for u, c in self.pending.items() if c > 0 and u not in self.cache]
        for w in list(self.deferred):
            if not any(w in self.o.replays_of.get(u, ()) for u in waiting):
                self.deferred.discard(w)
                self._drop_cache(w)

    def consume(self, w, flag):
        if flag[0]:
            return
        flag[0] = True
        left = self.pending.get(w, 0) - 1
        self.pending[w] = left
        if not self.forward_done:
            return
        if left <= 0:
            self.deferred.add(w)
            self._drop_unneeded()
        for a in self.o.closure.get(w, ()):
            u = self.hold_users.get(a, 0) - 1
            self.hold_users[a] = u
            if u <= 0:
                self._release_hold(a)

    def unpack(self, obj):
        if isinstance(obj, _Kept):
            return obj.t
        ref = obj.ref
        t0 = now()
        replays = self._available(ref.node, {}, ref.buf)[0] is None
        with torch.no_grad():
            outs, _ = self._outputs(ref.node, {}, ref.buf)
            value = ref.view(outs[ref.buf])
        self.replay_time += now() - t0
        if replays:
            for a in self.o.group_reads.get(ref.node, ()):
                left = self.groups_left.get(a)
                if left is not None:
                    left.discard(ref.node)
                    if not left:
                        self._release_hold(a)
        self.consume(ref.node, obj.flag)
        self._drop_unneeded()
        return value

    def _available(self, x, memo, buf):
        """``(buffers of x, fresh)`` when buffer ``buf`` of ``x`` is at hand.

        The cache keeps only the buffers ``x`` still owns when backward runs;
        a buffer a later in-place op took over is found only in ``memo``
        (this recomputation's fresh values, which may be mutated in place)."""
        c = self.cache.get(x)
        if c is not None and c[buf] is not None:
            return c, False
        if x in self.hold:
            return self.hold[x], False
        if x in memo:
            return memo[x], True
        return None, False

    def _outputs(self, w, memo, buf):
        got, fresh = self._available(w, memo, buf)
        if got is not None:
            return got, fresh
        # post-order over the ancestors that must be replayed
        stack, visited, order = [(w, False)], set(), []
        while stack:
            x, done = stack.pop()
            if done:
                order.append(x)
                continue
            if x in visited:
                continue
            visited.add(x)
            rec = self.records.get(x)
            if rec is None:
                raise HybridRematError(f"internal: no record to recompute forward node {x}")
            stack.append((x, True))
            for item in rec.leaves:
                if (
                    isinstance(item, _Ref) and item.node not in visited
                    and self._available(item.node, memo, item.buf)[0] is None
                ):
                    stack.append((item.node, False))
        # replay in forward order (readers of a buffer's old value before the in-place op that
        # overwrites it) and free each intermediate right after its last reader in this recomputation
        order.sort()
        in_order = set(order)
        uses: dict[int, int] = {}
        for x in order:
            for a in {it.node for it in self.records[x].leaves if isinstance(it, _Ref)} & in_order:
                uses[a] = uses.get(a, 0) + 1
        moved = self.o.final_owner
        for x in order:
            if x not in memo:
                memo[x] = self._replay(x, memo)
                if self.pending.get(x, 0) > 0 and x not in self.cache:
                    kept = [None if (x, i) in moved else t for i, t in enumerate(memo[x])]
                    self.cache[x] = kept
                    self.cache_keys[x] = [self.acct.add(t) for t in kept if t is not None]
            for a in {it.node for it in self.records[x].leaves if isinstance(it, _Ref)} & in_order:
                uses[a] -= 1
                if uses[a] == 0 and a != w:
                    memo.pop(a, None)
        if w in memo:
            return memo[w], True
        return self._available(w, memo, buf)

    def _replay(self, x, memo):
        rec = self.records[x]
        leaves = list(rec.leaves)
        consumed = []
        for i, item in enumerate(leaves):
            if isinstance(item, _Ref):
                outs, fresh = self._available(item.node, memo, item.buf)
                if outs is None:
                    outs, fresh = self._outputs(item.node, memo, item.buf)
                base = outs[item.buf]
                if i in rec.written:
                    if fresh:
                        consumed.append(item.node)
                    else:  # never mutate a kept or cached buffer: copy the whole storage (a visible ATen clone)
                        nbytes = storage_nbytes(base)
                        whole = torch.empty(0, dtype=torch.uint8, device=base.device).set_(
                            base.untyped_storage(), 0, (nbytes,), (1,)
                        ).clone()
                        base = torch.empty(0, dtype=base.dtype, device=base.device).set_(
                            whole.untyped_storage(), base.storage_offset(), base.shape, base.stride()
                        )
                leaves[i] = item.view(base)
            elif isinstance(item, torch.Tensor) and (
                i in rec.written or (rec.legacy and not item.requires_grad)
            ):
                leaves[i] = item.clone()
        args, kwargs = unflatten(rec.spec, leaves)
        if rec.rng is not None:
            saved = capture_rng()
            restore_rng(rec.rng)
        try:
            out = rec.func(*args, **kwargs)
        finally:
            if rec.rng is not None:
                restore_rng(saved)
        self.n_replayed += 1
        out_leaves = tree_leaves(out)
        res = []
        for (src, j), nb in zip(rec.buf_src, rec.buf_bytes, strict=True):
            t = out_leaves[j] if src == "out" else leaves[j]
            if storage_nbytes(t) != nb:
                raise HybridRematError(
                    f"recomputing forward node {x} ({rec.func}) gave a {storage_nbytes(t)}-byte buffer, "
                    f"the forward made {nb} bytes"
                )
            res.append(t)
        for u in consumed:
            memo.pop(u, None)
        return res


class _Recorder(TorchDispatchMode):
    def __init__(self, state: _StepState):
        super().__init__()
        self.state = state

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if is_pure_view(func):
            return func(*args, **kwargs)
        rng = capture_rng() if is_random(func) else None
        out = func(*args, **kwargs)
        self.state.on_call(func, args, kwargs, out, rng)
        return out


def _final_owners(moves) -> dict:
    """``(node, buffer) -> (last in-place owner, its buffer index)`` for the
    buffers later in-place ops take over."""
    nxt = {}
    for v, mv in enumerate(moves or ()):
        for u, ub, vb in mv:
            nxt[(u, ub)] = (v, vb)
    final = {}
    for key in nxt:
        f = nxt[key]
        while f in nxt:
            f = nxt[f]
        final[key] = f
    return final
