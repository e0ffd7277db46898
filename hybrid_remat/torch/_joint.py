"""The joint forward+backward FX graph of ``torch.compile`` as a remat graph.

AOTAutograd hands a custom knapsack solver the joint graph (functional ATen
ops, ``FakeTensor`` values in ``node.meta["val"]``) and ``NodeInfo`` (which
nodes the forward needs, which the backward needs).  :func:`joint_to_graph`
turns it into a :class:`~hybrid_remat.graph.Graph` with the conventions of
:func:`hybrid_remat.torch.trace`: one node per op that creates storage (views
and ``getitem`` are folded into the op that owns the storage), placeholders
(parameters, inputs, tangents) are not nodes, forward nodes first (the
forward's order), then the backward's and the nodes the partitioner may put
on either side, in graph order.  Costs come from the node's FLOPs and bytes
(the roofline of :class:`~hybrid_remat.torch.cost_model.FlopsRooflineCostModel`).
The gradients the graph returns count zero bytes (handed to the optimizer).
"""

from __future__ import annotations

import numpy as np
import torch

from ..graph import Graph
from .cost_model import FlopsRooflineCostModel

__all__ = ["JointGraph", "joint_to_graph"]


class JointGraph:
    """A joint FX graph mapped to a remat graph.

    Attributes
    ----------
    graph : Graph
    fx_nodes : list of fx.Node
        The FX node of each remat node.
    owner : dict
        FX node -> remat node index owning its storage (views included),
        absent for placeholders and non-tensor nodes.
    n_forward : int
    """

    def __init__(self, graph: Graph, fx_nodes: list, owner: dict, n_forward: int):
        self.graph = graph
        self.fx_nodes = fx_nodes
        self.owner = owner
        self.n_forward = n_forward

    def keep_of(self, saved_values) -> np.ndarray:
        """Keep set (over forward nodes) of a partition saving ``saved_values``."""
        keep = np.zeros(self.n_forward, dtype=bool)
        for s in saved_values:
            o = self.owner.get(s)
            if o is not None and o < self.n_forward:
                keep[o] = True
        return keep


def _tensors(val) -> list:
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [t for v in val for t in _tensors(v)]
    if isinstance(val, dict):
        return [t for v in val.values() for t in _tensors(v)]
    return []


def _storage(t):
    from torch._inductor.fx_utils import get_storage

    try:
        if not torch._C._has_storage(t):
            return None
        return get_storage(t)
    except Exception:  # noqa: BLE001 - tensors without storage (subclasses)
        return None


def _nbytes(t) -> int:
    try:
        return int(t.numel()) * t.element_size()
    except Exception:  # noqa: BLE001 - symbolic sizes: the partitioner's fallback
        return 4096 * t.element_size()


def _flops(node) -> float:
    from torch.utils.flop_counter import flop_registry

    target = node.target
    fn = flop_registry.get(getattr(target, "overloadpacket", None))
    if fn is None:
        return 0.0

    def val(a):
        if isinstance(a, torch.fx.Node):
            return a.meta.get("val")
        if isinstance(a, (list, tuple)):
            return type(a)(val(x) for x in a)
        return a

    try:
        args = [val(a) for a in node.args]
        kwargs = {k: val(v) for k, v in node.kwargs.items()}
        return float(fn(*args, **kwargs, out_val=node.meta.get("val")))
    except Exception:  # noqa: BLE001 - best effort (symbolic shapes, odd ops)
        return 0.0


def joint_to_graph(joint_graph, node_info, *, name: str = "joint") -> JointGraph:
    """Map ``joint_graph`` (a ``torch.fx.Graph``) with its ``NodeInfo``."""
    from torch._functorch.partitioners import _size_of

    fw, rest = [], []
    storage_owner: dict = {}
    for n in joint_graph.nodes:
        if n.op == "placeholder":
            for t in _tensors(n.meta.get("val")):
                s = _storage(t)
                if s is not None:
                    storage_owner.setdefault(s, None)
        elif n.op == "call_function":
            (fw if node_info.is_required_fw(n) else rest).append(n)
    fw.sort(key=lambda n: node_info.get_fw_order(n))
    owner: dict = {}
    fx_nodes: list = []
    for n in fw + rest:
        ts = _tensors(n.meta.get("val"))
        new = False
        first_owner = None
        for t in ts:
            s = _storage(t)
            if s is None:
                continue
            if s not in storage_owner:
                storage_owner[s] = len(fx_nodes)
                new = True
            elif first_owner is None:
                first_owner = storage_owner[s]
        if new:
            owner[n] = len(fx_nodes)
            fx_nodes.append(n)
        elif first_owner is not None:
            owner[n] = first_owner
    n_fwd = sum(1 for n in fx_nodes if node_info.is_required_fw(n))
    index = owner
    edges = set()
    for v, n in enumerate(fx_nodes):
        for a in n.all_input_nodes:
            u = index.get(a)
            if u is not None and u != v and u < v:
                edges.add((u, v))
    # gradients the joint graph returns are handed to the optimizer: outside the activation budget (as in trace)
    out = next((n for n in joint_graph.nodes if n.op == "output"), None)
    grad_storages = set()
    if out is not None:
        for a in out.all_input_nodes:
            u = index.get(a)
            if u is not None and u >= n_fwd:
                grad_storages.update(s for s in (_storage(t) for t in _tensors(a.meta.get("val"))) if s is not None)
    nbytes = np.array([max(0, _size_of(n) - sum(_nbytes(t) for t in _tensors(n.meta.get("val"))
                                                 if _storage(t) in grad_storages)) for n in fx_nodes], dtype=np.int64)
    flops = np.array([_flops(n) for n in fx_nodes], dtype=np.float64)
    device = "cpu"
    for n in fx_nodes:
        ts = _tensors(n.meta.get("val"))
        if ts and ts[0].device.type == "cuda":
            device = "gpu"
            break
    required = set()
    if out is not None:
        for a in out.all_input_nodes:
            u = index.get(a)
            if u is not None and u >= n_fwd:
                required.add(u)
    ops = [str(n.target) for n in fx_nodes]
    phase = np.array([0] * n_fwd + [1] * (len(fx_nodes) - n_fwd), dtype=np.int8)
    meta = {
        "source": "hybrid_remat.torch.compile",
        "torch": {
            "op": ops, "n_forward": n_fwd, "overwritten": [False] * len(fx_nodes),
            "takes_from": [[] for _ in fx_nodes], "moves": [[] for _ in fx_nodes], "device": device,
            "costs": "flops",
        },
    }
    placeholder = np.zeros(len(fx_nodes))
    g = Graph.from_arrays(nbytes, sorted(edges), {device: placeholder}, name=name,
                          names=[f"{'bwd ' if phase[v] else ''}{fx_nodes[v].name}:{ops[v]}" for v in range(len(fx_nodes))],
                          phase=phase, flops=flops, required=sorted(required), meta=meta)
    cost = FlopsRooflineCostModel().estimate(g, device)
    return JointGraph(g.with_costs({device: cost}), fx_nodes, owner, n_fwd)
