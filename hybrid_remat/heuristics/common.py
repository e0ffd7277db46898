"""Glue between problems, the executor kernels and plans (single device).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(random_layered(40, seed=1), "80%")
>>> arrays = GraphArrays.from_problem(p)
>>> res = run_executor(arrays, score="next_use_full")
>>> plan = finish(p, arrays, res.seq, "dtr") if res.ok else None
>>> plan is None or simulate(p, plan).valid
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PlanError
from ..plan import OP_COMPUTE, OP_COPY, Plan
from ..simulate import simulate
from .executor import (
    SCORE_NAMES,
    STATUS_OK,
    execute_kernel,
    prune_kernel,
    sequence_plan_kernel,
)

__all__ = [
    "GraphArrays", "ExecResult", "score_code", "run_executor", "plan_from_sequence", "sequence_of_plan",
    "prune_sequence", "finish", "empty_drop",
]


@dataclass(frozen=True)
class GraphArrays:
    """The arrays of a one-device problem that the kernels read."""

    bytes: np.ndarray
    cost: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    budget: int
    device: str
    phase: np.ndarray

    @classmethod
    def from_problem(cls, problem) -> GraphArrays:
        g = problem.graph
        return cls(
            bytes=np.ascontiguousarray(g.bytes, dtype=np.int64),
            cost=np.ascontiguousarray(problem.cost_matrix[0], dtype=np.float64),
            pred_ptr=g.pred_ptr, pred_idx=g.pred_idx, succ_ptr=g.succ_ptr, succ_idx=g.succ_idx,
            budget=int(problem.budgets[0]), device=problem.primary.name, phase=np.asarray(g.phase),
        )

    @property
    def n(self) -> int:
        return int(self.bytes.shape[0])


@dataclass
class ExecResult:
    """A compute sequence with its cost and peak, or a failure status."""

    status: int
    seq: np.ndarray
    cost: float
    peak: int

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK


def score_code(score: str | int) -> int:
    """``"dtr_eq"`` -> its kernel code; codes pass through."""
    if isinstance(score, (int, np.integer)):
        if not 0 <= int(score) < len(SCORE_NAMES):
            raise ValueError(f"unknown eviction score code {score}")
        return int(score)
    try:
        return SCORE_NAMES.index(score)
    except ValueError:
        raise ValueError(f"unknown eviction score {score!r}; choose from {', '.join(SCORE_NAMES)}") from None


def empty_drop(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A drop CSR that drops nothing."""
    return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)


def run_executor(a: GraphArrays, *, score="dtr_eq", weights=None, drop=None, allow_evict=True, seed=0,
                 budget=None, max_steps=None) -> ExecResult:
    """Run :func:`~hybrid_remat.heuristics.executor.execute_kernel` and
    return the compute sequence it produced."""
    n = a.n
    w = np.ones(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    dptr, didx = drop if drop is not None else empty_drop(n)
    b = a.budget if budget is None else int(budget)
    steps = max_steps if max_steps is not None else 10 * n + 1000
    status, op, node, peak, total = execute_kernel(
        a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(b), dptr, didx, w,
        score_code(score), bool(allow_evict), int(seed), int(steps),
    )
    seq = node[op == OP_COMPUTE].copy()
    return ExecResult(int(status), seq, float(total), int(peak))


def prune_sequence(a: GraphArrays, seq: np.ndarray, *, budget=None, max_tries: int | None = None) -> np.ndarray:
    """Drop recomputations from ``seq`` while its minimal-memory plan fits."""
    b = a.budget if budget is None else int(budget)
    active = np.ones(seq.shape[0], dtype=np.bool_)
    tries = seq.shape[0] if max_tries is None else int(max_tries)
    active, _ = prune_kernel(np.ascontiguousarray(seq, dtype=np.int64), active, a.bytes, a.cost, a.pred_ptr,
                             a.pred_idx, np.int64(b), tries)
    return seq[active]


def plan_from_sequence(a: GraphArrays, seq: np.ndarray, meta: dict | None = None) -> tuple[Plan, int]:
    """The minimal-memory plan of a compute sequence and its peak."""
    seq = np.ascontiguousarray(seq, dtype=np.int64)
    op, node, peak = sequence_plan_kernel(seq, np.ones(seq.shape[0], dtype=np.bool_), a.bytes, a.pred_ptr,
                                          a.pred_idx)
    return Plan.single_device(op, node, a.device, meta), int(peak)


def sequence_of_plan(plan: Plan) -> np.ndarray:
    """The compute sequence of a one-device plan without copies."""
    if (plan.op == OP_COPY).any() or len(set(plan.device.tolist())) > 1:
        raise PlanError("only one-device plans without copies have a compute sequence")
    return plan.node[plan.op == OP_COMPUTE].copy()


def finish(problem, a: GraphArrays, seq: np.ndarray, solver: str, **meta) -> Plan | None:
    """Build the plan of ``seq``; return it only if the simulator accepts it."""
    plan, peak = plan_from_sequence(a, seq, {"solver": solver, **meta})
    if peak > a.budget:
        return None
    res = simulate(problem, plan)
    return plan if res.valid else None
