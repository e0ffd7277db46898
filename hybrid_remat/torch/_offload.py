"""Activation offloading for :class:`~hybrid_remat.torch.partition.CompilePartitioner`.

Planning: a partition's saved values may be *offloaded*, held in host memory
between the forward and the backward.  The partition's simulated plan
(:func:`~hybrid_remat.torch._planner.executable_plan`) gets, for each
offloaded value ``v``, a ``copy(v, device, host)`` and a ``free(v, device)``
after its last forward reader, and a ``copy(v, host, device)`` with a
``free(v, host)`` before its first backward reader: the problem's second
device is storage only (``host``), linked both ways at torch's
``activation_offload_cpu_gpu_bw`` (or the given bandwidth).  The simulator
gives the device peak and the serial time, copies included; nothing else
counts memory.  :func:`plan_offload` offloads, while the simulated peak is
over the budget, the largest offloadable values live across the peak step.

Which values: those torch's own pass would offload
(:func:`offloadable`, torch's ``can_offload``: a saved intermediate, not a
model output, not a view or ``getitem``, contiguous), on an accelerator
(on the CPU the host is the device), every saved value of the remat node
accepted (a view saved beside its base keeps the storage on the device).

Graph side: :func:`apply_offload` marks the chosen forward outputs
``should_offload`` after torch's partition and calls torch's
``enable_activation_offloading`` pass (synchronous ``prims.device_put``
by default; ``ao::offload``/``ao::reload``/``ao::wait_tensor`` on a separate
stream with ``torch._functorch.config.activation_offload_separate_stream``),
then checks that it offloaded exactly the chosen values.
"""

from __future__ import annotations

import numpy as np

from ..errors import HybridRematError
from ..plan import OP_COMPUTE, OP_COPY, OP_FREE, Plan
from ..problem import Device, Link, Problem
from ..simulate import simulate

__all__ = ["HOST", "host_bandwidth", "offload_problem", "offloadable", "plan_offload", "offload_choice",
           "apply_offload", "offloaded_names"]

#: The storage-only device offloaded values live on.
HOST = "host"
#: Latency of one host<->device copy (seconds), as :func:`~hybrid_remat.problem.default_links`.
LATENCY_S = 1e-5


def host_bandwidth(bandwidth: float | None = None) -> float:
    """Bytes per second of one host<->device copy: ``bandwidth`` or torch's
    ``activation_offload_cpu_gpu_bw`` (GiB/s as its pass computes it)."""
    if bandwidth is not None:
        return float(bandwidth)
    from torch._functorch import config

    return float(config.activation_offload_cpu_gpu_bw) * 1024 ** 3


def offload_problem(problem: Problem, bandwidth: float) -> Problem:
    """``problem`` with a storage-only ``host`` device linked both ways."""
    dev = problem.primary
    host = Device(HOST, "storage", 2 ** 62, can_compute=False)
    links = [Link(dev.name, HOST, bandwidth, LATENCY_S), Link(HOST, dev.name, bandwidth, LATENCY_S)]
    return Problem(problem.graph, [dev, host], links, check=False)


def offloadable(joint_graph, jg, saved, num_fwd_outputs: int, static_nodes, *, cpu_too: bool = False):
    """``(accepted, refused)``: remat forward node -> its saved FX values, for
    the nodes torch's ``can_offload`` accepts every saved value of (and that
    live on an accelerator unless ``cpu_too``); the names of the saved values
    it refuses."""
    import torch
    from torch._functorch._activation_offloading.activation_offloading import can_offload
    from torch.utils._ordered_set import OrderedSet

    out = joint_graph.find_nodes(op="output")[0]
    import torch.utils._pytree as pytree

    leaves = [x for x in pytree.arg_tree_leaves(*out.args)]
    model_outputs = OrderedSet(x for x in leaves[:num_fwd_outputs] if isinstance(x, torch.fx.Node))
    fwd_outputs = OrderedSet([*model_outputs, *saved])
    static = OrderedSet(static_nodes or ())
    by: dict[int, list] = {}
    bad: set = set()
    refused: list[str] = []
    for s in saved:
        o = jg.owner.get(s)
        if o is None or o >= jg.n_forward or s.op != "call_function":
            continue
        val = s.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        if not can_offload(s, fwd_outputs, model_outputs, static):
            bad.add(o)
            refused.append(s.name)
        elif val.device.type == "cpu" and not cpu_too:
            bad.add(o)
        else:
            by.setdefault(o, []).append(s)
    return {o: v for o, v in by.items() if o not in bad}, refused


def _intervals(graph, plan: Plan, n_fwd: int, nodes) -> dict[int, tuple[int, int]]:
    """Per node: (last forward step reading it or computing it, first backward step reading it) in ``plan``."""
    op, node = plan.op.tolist(), plan.node.tolist()
    computed = np.zeros(graph.n, dtype=bool)
    fb = len(op)
    for k, (o, v) in enumerate(zip(op, node, strict=True)):
        if o == OP_COMPUTE:
            if v >= n_fwd or computed[v]:
                fb = k
                break
            computed[v] = True
    want = set(nodes)
    last: dict[int, int] = {}
    first: dict[int, int] = {}
    freed: set = set()
    for k, (o, v) in enumerate(zip(op, node, strict=True)):
        if o == OP_FREE and v in want and k < fb:
            freed.add(v)
        if o != OP_COMPUTE:
            continue
        if v in want and k < fb:
            last[v] = max(last.get(v, k), k)
        for a in graph.preds(v).tolist():
            if a in want:
                if k < fb:
                    last[a] = k
                elif a not in first:
                    first[a] = k
    return {v: (last[v], first[v]) for v in want if v in last and v in first and v not in freed}


def _with_copies(plan: Plan, spans: dict[int, tuple[int, int]], chosen) -> tuple[Plan, np.ndarray]:
    """The plan with ``chosen`` offloaded, and each step's index in ``plan``."""
    after: dict[int, list] = {}
    before: dict[int, list] = {}
    for v in sorted(chosen):
        a, b = spans[v]
        after.setdefault(a, []).append(v)
        before.setdefault(b, []).append(v)
    ops, nodes, devs, tgts, base = [], [], [], [], []
    for k in range(len(plan)):
        for v in before.get(k, ()):
            ops += [OP_COPY, OP_FREE]
            nodes += [v, v]
            devs += [1, 1]
            tgts += [0, -1]
            base += [k, k]
        ops.append(int(plan.op[k]))
        nodes.append(int(plan.node[k]))
        devs.append(int(plan.device[k]))
        tgts.append(int(plan.target[k]))
        base.append(k)
        for v in after.get(k, ()):
            ops += [OP_COPY, OP_FREE]
            nodes += [v, v]
            devs += [0, 0]
            tgts += [1, -1]
            base += [k, k]
    return Plan(ops, nodes, devs, tgts, [plan.devices[0], HOST], dict(plan.meta)), np.asarray(base)


def plan_offload(oproblem: Problem, plan: Plan, n_fwd: int, candidates, budget: int, t_end: float, forced=()):
    """Offload values of ``candidates`` (remat nodes) until the simulated device peak fits ``budget``.

    Returns ``(plan, offloaded, sim)``: the plan with its copies, the offloaded
    nodes (sorted), and the simulation of that plan on ``oproblem``.  Each round
    simulates the plan, takes its peak step and offloads the largest values live
    across it (offloaded after their last forward reader, reloaded before their
    first backward reader) until their bytes cover the excess; it stops when the
    peak fits, nothing offloadable is live at the peak, or at ``t_end``.
    """
    import time

    g = oproblem.graph
    spans = _intervals(g, plan, n_fwd, candidates)
    chosen = {v for v in forced if v in spans}
    dev = oproblem.primary.name
    while True:
        full, base = _with_copies(plan, spans, chosen)
        sim = simulate(oproblem, full, check_budget=False)
        if not sim.valid:
            raise RuntimeError(f"internal: an offload plan does not simulate: {sim.error}")
        peak = int(sim.peak_bytes[dev])
        if peak <= budget or time.perf_counter() >= t_end:
            return full, sorted(chosen), sim
        b = int(base[int(np.argmax(sim.timeline[:, 0]))])
        live = sorted((v for v, (lo, hi) in spans.items() if v not in chosen and lo < b < hi),
                      key=lambda v: (-int(g.bytes[v]), v))
        if not live:
            return full, sorted(chosen), sim
        excess = peak - budget
        for v in live:
            chosen.add(v)
            excess -= int(g.bytes[v])
            if excess <= 0:
                break


def _value_device(jg) -> str:
    """The device type of the graph's forward values (``"cpu"`` when none is elsewhere)."""
    import torch

    for n in jg.fx_nodes[: jg.n_forward]:
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type != "cpu":
            return val.device.type
    return "cpu"


def offload_choice(part, problem, joint_graph, node_info, jg, scored, nbytes: int, state, t_end: float) -> list:
    """Entries ``(over, time, peak, family, saved, keep, offload report)`` for
    the ``scored`` candidates over ``nbytes``, each with the values
    :func:`plan_offload` offloads (those it offloads none of are left out).

    The report: ``mode`` (``"on"``/``"test"``), ``device``,
    ``saves_device_memory``, ``values`` (FX names), ``n_values``, ``bytes``,
    ``transfer_s`` (both ways), ``bandwidth_bytes_per_s``, ``refused`` (saved
    values torch's ``can_offload`` refuses: never offloaded), ``device_peak_bytes``
    (what the device holds: on the CPU the plan's peak without offload) and
    ``host_peak_bytes``.
    """
    from ._planner import executable_plan

    device = _value_device(jg)
    if device == "cpu" and part.offload is True:
        raise HybridRematError(
            "CompilePartitioner(offload=True): this compiled graph's activations are on the CPU, where host memory "
            "is the device's memory: offloading frees nothing; use offload=False, or offload='test' to exercise the "
            "offload planning and torch's offload pass on the CPU (no memory saved)")
    test = part.offload == "test"
    g = problem.graph
    kind = problem.primary.name
    bw = host_bandwidth(part.offload_bandwidth)
    oprob = offload_problem(problem, bw)
    out = []
    for over, _, peak0, fam, saved, keep, _ in list(scored):
        if not over:
            continue
        acc, refused = offloadable(joint_graph, jg, saved, state.get("num_fwd_outputs", 0),
                                   node_info.static_lifetime_input_nodes, cpu_too=test)
        if not acc:
            continue
        _, chosen, sim = plan_offload(oprob, executable_plan(g, keep, kind), jg.n_forward, acc, nbytes, t_end)
        if not chosen:
            continue
        peak = int(sim.peak_bytes[kind])
        nb = [int(g.bytes[v]) for v in chosen]
        on_device = device != "cpu"
        rep = {"mode": "test" if test else "on", "device": device, "saves_device_memory": on_device,
               "values": sorted(s.name for v in chosen for s in acc[v]), "n_values": len(chosen), "bytes": sum(nb),
               "transfer_s": 2.0 * sum(LATENCY_S + b / bw for b in nb), "bandwidth_bytes_per_s": bw,
               "refused": refused, "device_peak_bytes": peak if on_device else int(peak0),
               "host_peak_bytes": int(sim.peak_bytes[HOST])}
        out.append((peak > nbytes, sim.total_time, peak, f"{fam}+offload", saved, keep, rep))
    return out


def apply_offload(fw, bw, names, num_fwd_outputs: int, static_nodes) -> list[str]:
    """Mark the forward outputs named ``names`` ``should_offload`` and run torch's
    ``enable_activation_offloading`` on the partitioned graphs; the names it offloaded."""
    from torch._functorch._activation_offloading.activation_offloading import enable_activation_offloading
    from torch.utils._ordered_set import OrderedSet

    want = set(names)
    for n in fw.graph.nodes:
        if n.name in want:
            n.meta["should_offload"] = True
    enable_activation_offloading(fw, bw, num_fwd_outputs, OrderedSet(static_nodes or ()))
    fw.recompile()
    bw.recompile()
    return offloaded_names(fw)


def offloaded_names(fw) -> list[str]:
    """The forward values torch's pass offloaded in ``fw`` (``saved_for_offloading``)."""
    return sorted(n.name for n in fw.graph.nodes if n.meta.get("saved_for_offloading"))
