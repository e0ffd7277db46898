"""Plans: a list of ``compute``, ``free`` and ``copy`` steps.

A :class:`Plan` stores its steps as parallel numpy arrays (``op``, ``node``,
``device``, ``target``) that the simulator kernel reads directly, plus the
device names the device indices refer to.  Plans are independent of a
budget; :func:`hybrid_remat.simulate.simulate` checks them against a
:class:`~hybrid_remat.problem.Problem`.

This module also converts plans to and from Checkmate's staged ``R``/``S``
matrices with the semantics of Checkmate's paper artifact, and reads and
writes the ``remat-plan/1`` JSON format.

Examples
--------
>>> from hybrid_remat.plan import Plan
>>> p = Plan.from_steps([("compute", 0, "gpu"), ("compute", 1, "gpu"), ("free", 0, "gpu")])
>>> len(p), p.steps()[2]
(3, Step(op='free', node=0, device='gpu', target=None))
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .errors import PlanError
from .graph import Graph

__all__ = [
    "OP_COMPUTE", "OP_FREE", "OP_COPY", "OP_NAMES", "Step", "Plan",
    "plan_from_rs", "rs_from_plan", "keep_all_plan", "plan_from_order",
    "PLAN_FORMAT", "plan_to_json", "plan_from_json", "write_plan", "read_plan",
]

OP_COMPUTE = 0
OP_FREE = 1
OP_COPY = 2
OP_NAMES = ("compute", "free", "copy")
PLAN_FORMAT = "remat-plan/1"


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
def plan_from_order(graph: Graph, order: Sequence[int], device: str = "gpu", meta: dict | None = None) -> Plan:
    """Execute ``order`` (a sequence of node computations, recomputations
    allowed) freeing each value right after its last use *within the
    sequence*: the minimal-memory plan for that compute sequence
    (:func:`hybrid_remat.core.sequence.minimal_plan`).

    Raises
    ------
    PlanError
        ``order`` names a node outside the graph.
    """
    from .core.sequence import minimal_plan

    return minimal_plan(graph, order, device, meta)[0]


def keep_all_plan(graph: Graph, device: str = "gpu") -> Plan:
    """The reference order, each output freed after its last reader."""
    return plan_from_order(graph, np.arange(graph.n), device, {"solver": "keep_all"})


def plan_from_rs(graph: Graph, R, S, device: str = "gpu", meta: dict | None = None) -> Plan:
    """Decode Checkmate's staged ``R``/``S`` matrices (one node per stage)
    into a plan: :func:`hybrid_remat.core.staged.plan_from_staged`.

    Per stage, drop what the stage does not need, then compute the nodes
    with ``R[t, i] = 1`` in index order, freeing each value right after its
    last use in the stage unless ``S[t+1]`` keeps it.  A recomputation of a
    value that is still resident is skipped.

    Raises
    ------
    PlanError
        The shapes do not match the graph, or a computed node's input is
        neither resident nor computed earlier in the stage.
    """
    from .core.staged import plan_from_staged

    R, S = np.asarray(R), np.asarray(S)
    if R.ndim != 2 or R.shape[1] != graph.n or S.shape != R.shape:
        raise PlanError(f"R/S shape {R.shape}/{S.shape} does not match graph with {graph.n} nodes")
    return plan_from_staged(graph, R, S, device, meta)


def rs_from_plan(graph: Graph, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Staged ``R``/``S`` (``n x n`` bool) of a single-device plan, one node
    per stage: :func:`hybrid_remat.core.staged.staged_rs`.

    Stage ``t`` ends with the first computation of node ``t``; ``R[t, i]``
    says ``i`` is computed in stage ``t``; ``S[t, i]`` says ``i`` is resident
    when stage ``t`` starts.

    Raises
    ------
    PlanError
        If the plan uses several devices or copies, or does not first
        compute the nodes in index order (it then has no staged form).
    """
    from .core.staged import staged_rs

    return staged_rs(graph, plan, np.arange(graph.n + 1, dtype=np.int64))


# --------------------------------------------------------------------- JSON
def _jsonable(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return x


def plan_to_json(plan: Plan, problem, summary: dict | None = None) -> dict:
    """The ``remat-plan/1`` document of ``plan`` for ``problem``.

    ``node`` is written as the graph's external id (the index for
    ``remat-graph/1`` graphs, the node-link id otherwise)."""
    g = problem.graph
    ids = g.ids
    steps = []
    for s in plan.steps():
        node = _jsonable(ids[s.node])
        if s.op == "copy":
            steps.append({"op": "copy", "node": node, "from": s.device, "to": s.target})
        else:
            steps.append({"op": s.op, "node": node, "device": s.device})
    doc = {
        "format": PLAN_FORMAT,
        "graph": g.name,
        "devices": [{"name": d.name, "kind": d.kind, "memory_bytes": int(d.memory_bytes)} for d in problem.devices],
        "steps": steps,
    }
    if summary is not None:
        doc["summary"] = {k: _jsonable(v) for k, v in summary.items()}
    return doc


def plan_from_json(doc: dict, graph: Graph) -> Plan:
    """Read a ``remat-plan/1`` document against ``graph``.

    Raises
    ------
    PlanError
        Wrong format tag, unknown nodes or devices, malformed steps.
    """
    if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
        raise PlanError(f"not a {PLAN_FORMAT} document (format={doc.get('format') if isinstance(doc, dict) else None!r})")
    devices = [d["name"] for d in doc.get("devices", [])]
    index = graph.id_to_index()
    by_str = {str(k): v for k, v in index.items()}

    def node(x):
        if x in index:
            return index[x]
        if str(x) in by_str:
            return by_str[str(x)]
        raise PlanError(f"plan names node {x!r}, which graph {graph.name!r} lacks")

    steps = []
    for i, s in enumerate(doc.get("steps", [])):
        try:
            op = s["op"]
            if op == "copy":
                steps.append(("copy", node(s["node"]), s["from"], s["to"]))
            elif op in ("compute", "free"):
                steps.append((op, node(s["node"]), s["device"]))
            else:
                raise PlanError(f"plan step {i} has unknown op {op!r}")
        except (KeyError, TypeError):
            raise PlanError(f"plan step {i} is malformed: {s!r}") from None
    meta = {"summary": doc.get("summary", {})}
    return Plan.from_steps(steps, devices or None, meta)


def write_plan(path: str | os.PathLike, plan: Plan, problem, summary: dict | None = None, *, overwrite: bool = False) -> None:
    """Write ``plan`` as ``remat-plan/1`` JSON; refuses to overwrite unless asked."""
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{os.fspath(path)} exists; pass overwrite=True (CLI: --force) to replace it")
    doc = plan_to_json(plan, problem, summary)
    steps = doc.pop("steps")
    head = json.dumps(doc, indent=1)
    # one step a line, through json's C encoder (with ``indent`` json falls back to its pure-Python encoder:
    # 1.2 s for the 60k steps of a 28k-node plan on a busy machine)
    one = json.JSONEncoder(separators=(", ", ": ")).encode
    body = ",\n  ".join(map(one, steps))
    with open(path, "w") as f:
        f.write(head[:-2] + (",\n" if doc else "") + ' "steps": [\n  ' + body + "\n ]\n}\n")


def read_plan(path: str | os.PathLike, graph: Graph) -> Plan:
    """Read a ``remat-plan/1`` JSON file."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise PlanError(f"{os.fspath(path)} is not JSON: {e}") from None
    return plan_from_json(doc, graph)
