"""The plan class: a list of ``compute``, ``free`` and ``copy`` steps as
parallel numpy arrays (what the simulator kernel reads), over named devices.

It lives in :mod:`hybrid_remat.core` so that the modules below the solvers
(sequences, staged encodings, reductions) build plans without importing
anything above them; :mod:`hybrid_remat.plan` is its public home (building
plans from orders and R/S matrices, JSON).

Examples
--------
>>> p = Plan.from_steps([("compute", 0, "gpu"), ("compute", 1, "gpu"), ("free", 0, "gpu")])
>>> len(p), p.steps()[2]
(3, Step(op='free', node=0, device='gpu', target=None))
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from ..errors import PlanError

__all__ = ["OP_COMPUTE", "OP_FREE", "OP_COPY", "OP_NAMES", "Step", "Plan", "plan_key"]

OP_COMPUTE = 0
OP_FREE = 1
OP_COPY = 2
OP_NAMES = ("compute", "free", "copy")


class Step(NamedTuple):
    op: str
    node: int
    device: str
    target: str | None = None


class Plan:
    """An ordered list of steps over named devices.

    Parameters
    ----------
    op, node, device, target : array-like of int
        Parallel step arrays; ``device``/``target`` index into ``devices``
        (``target`` is the destination of a copy, -1 otherwise).
    devices : sequence of str
        Device names.
    meta : dict, optional
        Free-form provenance (e.g. ``{"solver": "chen_greedy"}``).
    """

    __slots__ = ("op", "node", "device", "target", "devices", "meta")

    def __init__(self, op, node, device, target, devices: Sequence[str], meta: dict | None = None):
        self.op = np.ascontiguousarray(op, dtype=np.int8)
        self.node = np.ascontiguousarray(node, dtype=np.int64)
        self.device = np.ascontiguousarray(device, dtype=np.int64)
        self.target = np.ascontiguousarray(target, dtype=np.int64)
        self.devices = tuple(devices)
        self.meta = dict(meta or {})
        k = self.op.shape[0]
        if not (self.node.shape == self.device.shape == self.target.shape == (k,)):
            raise PlanError("plan step arrays differ in length")

    @classmethod
    def from_steps(cls, steps: Iterable, devices: Sequence[str] | None = None, meta: dict | None = None) -> Plan:
        """Build from ``("compute", v, dev)``, ``("free", v, dev)`` and
        ``("copy", v, src, dst)`` tuples (or :class:`Step`)."""
        devs = list(devices or [])
        index = {d: i for i, d in enumerate(devs)}

        def dev(name):
            if name not in index:
                if devices is not None:
                    raise PlanError(f"plan step names unknown device {name!r}")
                index[name] = len(devs)
                devs.append(name)
            return index[name]

        op, node, d1, d2 = [], [], [], []
        for s in steps:
            kind = s[0]
            if kind == "compute" or kind == "free":
                op.append(OP_COMPUTE if kind == "compute" else OP_FREE)
                node.append(int(s[1]))
                d1.append(dev(s[2]))
                d2.append(-1)
            elif kind == "copy":
                op.append(OP_COPY)
                node.append(int(s[1]))
                d1.append(dev(s[2]))
                d2.append(dev(s[3]))
            else:
                raise PlanError(f"unknown plan step {kind!r}")
        return cls(op, node, d1, d2, devs, meta)

    @classmethod
    def single_device(cls, op, node, device: str = "gpu", meta: dict | None = None) -> Plan:
        """A one-device plan from ``op``/``node`` arrays (kernel output)."""
        k = len(op)
        return cls(op, node, np.zeros(k, np.int64), np.full(k, -1, np.int64), [device], meta)

    def steps(self) -> list[Step]:
        out = []
        for o, v, a, b in zip(self.op.tolist(), self.node.tolist(), self.device.tolist(), self.target.tolist()):
            out.append(Step(OP_NAMES[o], v, self.devices[a], self.devices[b] if b >= 0 else None))
        return out

    def __len__(self) -> int:
        return int(self.op.shape[0])

    def n_computes(self) -> int:
        return int((self.op == OP_COMPUTE).sum())

    def renamed(self, devices: Sequence[str]) -> Plan:
        """The same steps with device names replaced position-wise."""
        if len(devices) != len(self.devices):
            raise PlanError("renamed() needs one name per device")
        return Plan(self.op, self.node, self.device, self.target, devices, self.meta)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Plan)
            and self.steps() == other.steps()
        )

    def __repr__(self) -> str:
        return f"Plan({len(self)} steps, {self.n_computes()} computes, devices={list(self.devices)})"


# ---------------------------------------------------------------- builders


def plan_key(plan) -> bytes:
    """A digest of a plan's steps and device names (equal plans, equal keys;
    linear time, unlike comparing the steps)."""
    h = hashlib.blake2b(digest_size=16)
    for a in (plan.op, plan.node, plan.device, plan.target):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update("\0".join(plan.devices).encode())
    return h.digest()
