"""A planning problem: a graph, devices with memory budgets, and links.

A :class:`Device` has a name, the *cost kind* whose column of the graph gives
its operator times, and a memory budget in bytes.  A :class:`Link` gives the
bandwidth and latency of copies in one direction between two devices.  One
device is the common case; the data model has several from the start.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(4, bytes=10), "100%")
>>> p.devices[0].memory_bytes, p.primary.name
(20, 'cost')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .budgets import format_bytes, keep_all_peak, min_feasible_budget, node_need_bytes, parse_budget
from .errors import BudgetError
from .graph import Graph
from .objective import get_objective

__all__ = ["Device", "Link", "Problem"]


@dataclass(frozen=True)
class Device:
    """A memory domain that can run operators.

    Parameters
    ----------
    name : str
        Unique name used in plans (``"gpu"``, ``"cpu"``, ``"gpu1"``).
    kind : str
        The graph cost column giving this device's operator times.
    memory_bytes : int
        Activation-memory budget.
    can_compute : bool
        ``False`` for storage-only devices (host memory used for paging).
    """

    name: str
    kind: str
    memory_bytes: int
    can_compute: bool = True


@dataclass(frozen=True)
class Link:
    """A copy direction ``src -> dst``: ``latency + bytes / bandwidth`` seconds."""

    src: str
    dst: str
    bandwidth: float
    latency: float = 0.0

    def time(self, nbytes: int) -> float:
        return self.latency + nbytes / self.bandwidth


class Problem:
    """Graph + devices + links; immutable once built.

    Parameters
    ----------
    graph : Graph
    devices : sequence of Device
        The first device is the *primary* one: TDI% is measured against the
        sum of its cost column.
    links : iterable of Link, optional
        Missing directions mean no copy is possible between those devices.
    check : bool
        Reject budgets below the node bound (default): a node's bytes plus
        its inputs' (:func:`~hybrid_remat.budgets.budget_lower_bound`), under
        which no plan fits.  A budget at or above it may still have no plan.
    objective : {"serial", "makespan"} or Objective
        What "best" means (:mod:`hybrid_remat.objective`); default serial time.

    Raises
    ------
    BudgetError
        A device's kind is not a cost column of the graph, names repeat, or
        no device can hold some node with its inputs.
    """

    def __init__(self, graph: Graph, devices: Sequence[Device], links: Iterable[Link] = (), *, check: bool = True,
                 objective="serial"):
        if not devices:
            raise BudgetError("a problem needs at least one device")
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise BudgetError(f"device names repeat: {names}")
        for d in devices:
            if d.can_compute and d.kind not in graph.costs:
                raise BudgetError(
                    f"device {d.name!r} uses cost kind {d.kind!r}, which graph {graph.name!r} lacks "
                    f"(it has {', '.join(graph.cost_kinds)})"
                )
            if d.memory_bytes <= 0:
                raise BudgetError(f"device {d.name!r} has a non-positive budget {d.memory_bytes}")
        if not any(d.can_compute for d in devices):
            raise BudgetError("no device can compute")
        self.graph = graph
        self.devices = tuple(devices)
        self.links = tuple(links)
        self.objective = get_objective(objective)
        for ln in self.links:
            if ln.src not in names or ln.dst not in names:
                raise BudgetError(f"link {ln.src}->{ln.dst} names an unknown device")
            if ln.bandwidth <= 0 or ln.latency < 0:
                raise BudgetError(f"link {ln.src}->{ln.dst} needs bandwidth > 0 and latency >= 0")
        if check:
            self._check_feasible()

    # ---------------------------------------------------------------- build
    @classmethod
    def single(cls, graph: Graph, budget, device: str | None = None, *, kind: str | None = None) -> Problem:
        """One device with ``budget`` (bytes, ``"8GiB"`` or ``"80%"``).

        The device is named after its cost kind: ``"gpu"`` for profiled
        graphs, ``"cost"`` for node-link graphs.
        """
        kind = kind or (device if device in graph.costs else None) or graph.cost_kinds[0]
        name = device or kind
        return cls(graph, [Device(name, kind, parse_budget(budget, graph))])

    @classmethod
    def from_specs(cls, graph: Graph, specs: Sequence[str] | None, budget=None) -> Problem:
        """Build from CLI-style specs ``["gpu=2GiB", "cpu=64GiB"]``.

        With one spec or none, ``budget`` applies.  Links come from the
        graph's ``transfer`` record when two devices are given.
        """
        if not specs:
            if budget is None:
                raise BudgetError("give a budget (--budget) or devices (--device NAME=SIZE)")
            return cls.single(graph, budget)
        devices = []
        for s in specs:
            name, _, size = s.partition("=")
            name = name.strip()
            if not size:
                if budget is None:
                    raise BudgetError(f"device {name!r} has no size: write {name}=SIZE")
                size = budget
            kind = name if name in graph.costs else ("storage" if name in ("host", "storage") else None)
            if kind is None:
                raise BudgetError(f"device {name!r} is not a cost kind of graph {graph.name!r} ({', '.join(graph.cost_kinds)})")
            devices.append(Device(name, kind, parse_budget(size, graph), can_compute=kind != "storage"))
        return cls(graph, devices, default_links(graph, [d.name for d in devices]))

    def with_objective(self, objective) -> Problem:
        """The same problem with another objective (``"serial"``, ``"makespan"``)."""
        obj = get_objective(objective)
        if obj is self.objective:
            return self
        return Problem(self.graph, self.devices, self.links, check=False, objective=obj)

    def with_budgets(self, **budgets) -> Problem:
        """A copy with some device budgets replaced (by name)."""
        devs = [
            Device(d.name, d.kind, parse_budget(budgets[d.name], self.graph), d.can_compute)
            if d.name in budgets
            else d
            for d in self.devices
        ]
        return Problem(self.graph, devs, self.links, objective=self.objective)

    def _check_feasible(self) -> None:
        need = node_need_bytes(self.graph)
        cap = max(d.memory_bytes for d in self.devices if d.can_compute)
        if need.max() > cap:
            v = int(need.argmax())
            feas = int(need.max())
            what = "budget" if len(self.devices) == 1 else "largest compute-device budget"
            raise BudgetError(
                f"{what} {cap} B ({format_bytes(cap)}) is below the node bound {feas} B ({format_bytes(feas)}), "
                f"a lower bound on the smallest feasible budget: node {v} ({self.graph.names[v]}) needs that much "
                f"with its inputs"
            )

    # ------------------------------------------------------------- accessors
    @property
    def primary(self) -> Device:
        return self.devices[0]

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def is_single_device(self) -> bool:
        return len(self.devices) == 1

    def device_index(self, name: str) -> int:
        for i, d in enumerate(self.devices):
            if d.name == name:
                return i
        raise BudgetError(f"problem has no device {name!r} (it has {', '.join(d.name for d in self.devices)})")

    @property
    def budgets(self) -> np.ndarray:
        return np.array([d.memory_bytes for d in self.devices], dtype=np.int64)

    @property
    def can_compute(self) -> np.ndarray:
        return np.array([d.can_compute for d in self.devices], dtype=np.bool_)

    @property
    def cost_matrix(self) -> np.ndarray:
        """``(n_devices, n)`` operator times; ``inf`` on storage-only devices."""
        rows = [
            self.graph.cost(d.kind) if d.can_compute else np.full(self.graph.n, np.inf) for d in self.devices
        ]
        return np.ascontiguousarray(np.stack(rows).astype(np.float64))

    @property
    def link_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(bandwidth, latency)`` as ``(D, D)`` arrays; bandwidth 0 = no link."""
        D = len(self.devices)
        bw = np.zeros((D, D), dtype=np.float64)
        lat = np.zeros((D, D), dtype=np.float64)
        for ln in self.links:
            i, j = self.device_index(ln.src), self.device_index(ln.dst)
            bw[i, j] = ln.bandwidth
            lat[i, j] = ln.latency
        return bw, lat

    @property
    def base_cost(self) -> float:
        """Sum of node costs on the primary device: the TDI% reference."""
        return float(self.graph.cost(self.primary.kind).sum())

    def keep_all_peak(self) -> int:
        return keep_all_peak(self.graph)

    def min_feasible_budget(self) -> int:
        return min_feasible_budget(self.graph)

    def __repr__(self) -> str:
        devs = ", ".join(f"{d.name}={format_bytes(d.memory_bytes)}" for d in self.devices)
        return f"Problem({self.graph.name!r}, {devs})"


def default_links(graph: Graph, names: Sequence[str]) -> list[Link]:
    """Links between every pair of named devices, from the graph's
    ``transfer`` record (pinned host<->device copies) when present, else
    PCIe-like 25 GB/s and 10 us."""
    tr = graph.meta.get("transfer") or {}
    out = []
    for a in names:
        for b in names:
            if a == b:
                continue
            if a == "cpu" or a in ("host", "storage"):
                bw = tr.get("h2d_bytes_per_s", 25e9)
            else:
                bw = tr.get("d2h_bytes_per_s", 25e9)
            out.append(Link(a, b, float(bw), float(tr.get("latency_s", 1e-5))))
    return out
