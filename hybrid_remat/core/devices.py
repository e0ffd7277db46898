"""The reductions of a multi-device problem (the protocol of
:mod:`hybrid_remat.core.reduction`).

* :class:`OneDevice`: the problem of one compute device alone.  Its plans
  are plans of the original as they are, and lifted with host offload
  (:func:`~hybrid_remat.core.lift.lift_plan`: recomputations replaced by
  round trips to another device where that is cheaper), which is its
  :meth:`~OneDevice.inverts`.  Its bounds hold for the plans that compute on
  that device alone without copies (scope ``"<device> only"``), not for the
  multi-device problem: a plan may keep a value on the host instead of
  recomputing it, or compute a node where it is cheaper.
* :class:`MergedDevices` (bounds only): every device merged into one, each
  node at its cheapest compute cost, the sum of the budgets.  Its bounds hold
  for every multi-device plan (the proof: :mod:`hybrid_remat.portfolio.reduce`),
  divided by the number of compute devices for the makespan.
* :class:`Paging`: every device but the primary storage-only (POET's
  remat + paging model).  Its plans are plans of the original (they compute
  on the primary device only); its bounds and ``optimal`` hold for those
  plans only (scope ``"paging"``).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(4, bytes=1).with_costs({"gpu": [1.0] * 4, "cpu": [3.0] * 4})
>>> p = Problem(g, [Device("gpu", "gpu", 3), Device("cpu", "cpu", 64)],
...             [Link("gpu", "cpu", 1.0), Link("cpu", "gpu", 1.0)])
>>> m = MergedDevices(); merged = m.apply(p)
>>> merged.primary.memory_bytes, merged.base_cost, m.carry(4.0).scope
(67, 4.0, 'all plans')
>>> r = Paging(); [d.can_compute for d in r.apply(p).devices], r.carry(4.0, "optimal")
([True, False], Carried(bound=4.0, status='feasible', scope='paging', scope_status='optimal'))
>>> OneDevice("gpu").lower_bound(p)
4.0
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ..problem import Device, Problem
from .lift import gpu_only_problem, lift_plan
from .plans import OP_COMPUTE, OP_COPY, Plan, plan_key
from .reduction import ALL_PLANS, Reduction

__all__ = ["OneDevice", "MergedDevices", "Paging", "paging_problem", "MEMO_SIZE"]

#: lifted plans a one-device reduction remembers (to map them back for the improvers)
MEMO_SIZE = 64


class OneDevice(Reduction):
    """The one-device problem of ``device``.

    Parameters
    ----------
    device : str
        A compute device of the problems it is applied to.
    """

    def __init__(self, device: str):
        super().__init__()
        self.device = device
        self.name = f"{device} only"
        self.prefix = f"{device}/"
        self._memo: OrderedDict = OrderedDict()  # key of a lifted plan -> the one-device plan it came from
        self._sub: tuple | None = None

    def apply(self, problem: Problem) -> Problem | None:
        """The problem of ``device`` alone (serial objective: on one device
        it equals the makespan); ``None`` when the graph does not fit on it."""
        self.original = problem
        if self._sub is None or self._sub[0] is not problem:
            can = problem.devices[problem.device_index(self.device)].can_compute
            self._sub = (problem, gpu_only_problem(problem, self.device) if can else None)
        return self._sub[1]

    def scope_of(self) -> str:
        return self.name

    def lower_bound(self, problem: Problem) -> float:
        """What every plan on the device alone costs at least: each node once there."""
        return float(problem.cost_matrix[problem.device_index(self.device)].sum())

    def policies(self) -> tuple:
        """The lift policies worth trying for the original's objective."""
        return ("serial", "all") if self._original().objective.name == "makespan" else ("serial",)

    def invert(self, plan: Plan | None) -> Plan | None:
        """The one-device plan as a plan of the original, as it is."""
        if plan is None:
            return None
        return plan.renamed([self.device] * len(plan.devices)) if len(plan.devices) == 1 else plan

    def inverts(self, plan: Plan | None, policies=None) -> list:
        """``[(tag, plan)]`` of the original: the plan as it is (tag ``""``)
        and lifted with host offload for each policy that changes it (tag
        ``"+offload"``, ``"+offload_all"``); ``policies`` default
        :meth:`policies`."""
        raw = self.invert(plan)
        if raw is None:
            return []
        out = [("", raw)]
        if (raw.op == OP_COPY).any():
            return out
        problem = self._original()
        keys = set()
        for policy in policies or self.policies():
            lifted = lift_plan(problem, raw, policy=policy)
            key = plan_key(lifted)
            if lifted.meta.get("offloads") and key not in keys:
                keys.add(key)
                out.append(("+offload" if policy == "serial" else f"+offload_{policy}", lifted))
                self._remember(key, raw)
        return out

    def forward(self, plan: Plan | None) -> Plan | None:
        """The one-device plan behind a plan of the original: the plan a
        lifted plan came from, or the plan itself when it computes on
        ``device`` only, without copies; ``None`` otherwise."""
        if plan is None:
            return None
        src = self._memo.get(plan_key(plan))
        if src is not None:
            return src
        if len(plan) == 0 or (plan.op == OP_COPY).any():
            return None
        used = {plan.devices[i] for i in np.unique(plan.device).tolist()}
        if used != {self.device}:
            return None
        return Plan(plan.op, plan.node, np.zeros(len(plan), np.int64), np.full(len(plan), -1, np.int64),
                    [self.device], plan.meta)

    def _remember(self, key: bytes, raw: Plan) -> None:
        self._memo[key] = raw
        while len(self._memo) > MEMO_SIZE:
            self._memo.popitem(last=False)


class MergedDevices(Reduction):
    """Every device merged into one: each node at its cheapest compute cost,
    the sum of the budgets (:mod:`hybrid_remat.portfolio.reduce`: why its
    bounds hold for every multi-device plan).  Bounds only: its plans are
    not plans of the original."""

    name = "merged devices"
    prefix = "merged/"
    maps_plans = False
    exact = False   # its optimum bounds the original's, it is not the original's

    def apply(self, problem: Problem) -> Problem:
        self.original = problem
        cm = problem.cost_matrix[problem.can_compute]
        kind = "merged"
        while kind in problem.graph.costs:
            kind += "_"
        g = problem.graph.with_costs({kind: cm.min(axis=0)})
        return Problem(g, [Device(kind, kind, int(problem.budgets.sum()))], check=False)

    def scope_of(self) -> str:
        return ALL_PLANS

    def invert(self, plan):
        return None

    def forward(self, plan):
        return None

    def carry(self, bound: float, status: str = "feasible"):
        """The bound of the original that a bound over every merged plan
        gives (the makespan: divided by the number of compute devices)."""
        problem = self._original()
        value = float(bound)
        if problem.objective.name == "makespan" and math.isfinite(value):
            value = value / max(1, int(problem.can_compute.sum()))
        return super().carry(value, status)


def paging_problem(problem: Problem) -> Problem:
    """The same problem with every non-primary device storage-only."""
    devs = [problem.primary] + [Device(d.name, "storage", d.memory_bytes, can_compute=False)
                                for d in problem.devices[1:]]
    return Problem(problem.graph, devs, problem.links)


class Paging(Reduction):
    """Every device but the primary storage-only (:func:`paging_problem`):
    the reduced problem's plans are plans of the original, its bounds and
    ``optimal`` hold for the paging plans only (scope ``"paging"``: every
    computation on the primary device).  ``apply`` raises
    :class:`~hybrid_remat.errors.BudgetError` when the primary device alone
    cannot hold some node (no paging plan, which says nothing of the rest)."""

    name = "paging"
    prefix = "paging/"

    def apply(self, problem: Problem) -> Problem:
        self.original = problem
        return paging_problem(problem)

    def scope_of(self) -> str:
        return "paging"

    def invert(self, plan):
        return plan   # the same device names: a paging plan is a plan of the original

    def forward(self, plan):
        """``plan`` when it computes on the primary device only, else ``None``."""
        if plan is None:
            return None
        primary = self._original().primary.name
        prim = [i for i, nm in enumerate(plan.devices) if nm == primary]
        ok = bool(prim) and all(int(plan.device[k]) in prim for k in range(len(plan)) if plan.op[k] == OP_COMPUTE)
        return plan if ok else None
