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
from collections.abc import Sequence
from typing import Any

import numpy as np

from .core.plans import OP_COMPUTE, OP_COPY, OP_FREE, OP_NAMES, Plan, Step
from .core.sequence import minimal_plan
from .core.staged import plan_from_staged, staged_rs
from .errors import PlanError
from .graph import Graph

__all__ = [
    "OP_COMPUTE", "OP_FREE", "OP_COPY", "OP_NAMES", "Step", "Plan",
    "plan_from_rs", "rs_from_plan", "keep_all_plan", "plan_from_order",
    "PLAN_FORMAT", "plan_to_json", "plan_from_json", "write_plan", "read_plan",
]

PLAN_FORMAT = "remat-plan/1"


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
