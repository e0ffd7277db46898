"""The staged Checkmate MILP on SCIP (pyscipopt), its decoder and its encoder.

Model (Jain et al. 2020, section 1 of ``reference/checkmate.md``), with the
improvements of its section 8 and a generalisation to *block stages*:

* Stages ``s = 0..T-1``; stage ``s`` owns the consecutive nodes
  ``[starts[s], starts[s+1])`` (Checkmate: one node per stage).  Every node of
  its block is computed in stage ``s`` (the block part of ``R`` is the
  constant 1); earlier nodes may be recomputed (``R[s, i]`` binary,
  ``i < starts[s]``); later nodes are never touched.  Triangularity is
  therefore enforced by *not creating* the variables rather than by rows.
* ``S[s, i]`` (binary, ``i < starts[s]``): ``i`` is resident when stage ``s``
  starts.  ``S[s+1, i] <= S[s, i] + R[s, i]``; ``R[s, v] <= R[s, u] + S[s, u]``
  for every edge ``u -> v``.  Nodes run in index order within a stage.
* ``FREE[s, (i, k)]`` (continuous in [0, 1]): ``i`` is freed right after
  ``k``, its last consumer in the stage, unless kept.  Only the upper bounds
  of the product ``R[s,k] (1 - S[s+1,i]) prod_{j in succ(i), k<j} (1 - R[s,j])``
  are needed (freeing less only over-counts memory) and they are exactly
  Checkmate's three tightening cuts plus ``FREE <= R[s,k]``; with the cut
  ``sum_k FREE[s,(i,k)] <= 1``.  Block nodes with no consumer in their stage
  get a self-free ``FS[s,k] <= 1 - S[s+1,k]``; sinks are freed at once and
  never recomputed or kept.
* ``U[s, k]``: memory right after ``k`` is allocated (before its inputs are
  freed), ``U <= B`` as a variable bound (no redundant rows).  Memory is
  counted in units of ``unit`` bytes, sizes rounded *up* and the budget
  *down*, so every MILP-feasible plan is feasible in bytes.
* Optional recomputation cap ``sum_s R[s, v] <= C - 1`` (Moccasin's ``C``).
* Objective: ``sum c_v R[s, v]`` plus the constant ``sum_v c_v`` (every node
  once), scaled by the largest cost for the solver's numerics.

Decoding takes ``S`` from a solution, the minimal ``R`` for it
(:func:`solve_r_opt`, never costlier and never more memory than the
solution's own ``R``), :func:`~hybrid_remat.plan.plan_from_rs` and the
simulator.  Encoding takes any staged plan
(:func:`~hybrid_remat.plan.rs_from_plan`), derives ``FREE``, ``FS`` and ``U``
exactly as the model defines them and checks the start with
``checkSol(original=True)`` before ``addSol``.

Scope of the bound.  The model optimises over *staged plans*: first
computations in the reference order, each node computed at most once per
stage, in index order within a stage.  Its optimum (with exact memory
units) equals the best such plan under the simulator's accounting; its dual
bound is a bound over that class, not over every plan (a plan following
another topological order can be cheaper).  :mod:`hybrid_remat.exact.brute`
computes both optima on tiny graphs.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(5, bytes=1), 3)
>>> r = CheckmateFormulation().solve(p, node_limit=1000)
>>> r.status, r.objective
('optimal', 5.0)
"""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass, field
from functools import reduce

import numpy as np

from ..errors import PlanError, SolverError
from ..interfaces import Formulation, FormulationResult
from ..plan import Plan, plan_from_rs, rs_from_plan
from ..simulate import simulate

__all__ = [
    "stage_starts", "staged_rs", "MemoryScale", "solve_r_opt", "estimate_size", "CheckmateModel",
    "build_checkmate_model", "CheckmateFormulation", "BuildTimeout",
]

#: SCIP statuses that mean "stopped early" rather than "proved something".
_LIMIT_STATUSES = {
    "timelimit", "nodelimit", "totalnodelimit", "stallnodelimit", "gaplimit", "sollimit",
    "bestsollimit", "memlimit", "restartlimit", "userinterrupt", "primallimit", "duallimit", "unknown",
}


class BuildTimeout(SolverError):
    """Model construction did not finish before the deadline."""


def stage_starts(n: int, stage_size: int = 1) -> np.ndarray:
    """Block boundaries ``[0, g, 2g, ..., n]`` for ``ceil(n / g)`` stages.

    >>> stage_starts(5, 2).tolist()
    [0, 2, 4, 5]
    """
    g = max(1, int(stage_size))
    return np.array(list(range(0, n, g)) + [n], dtype=np.int64)


@dataclass(frozen=True)
class MemoryScale:
    """How bytes become model units: sizes rounded up, the budget down.

    Attributes
    ----------
    unit : int
        Bytes per unit.
    budget : int
        ``floor(B / unit)``.
    sizes : ndarray of int64
        ``ceil(bytes / unit)`` per node.
    exact : bool
        ``unit`` divides every size, so model memory is exact (the budget is
        floored without loss: memory is a multiple of ``unit``).
    relaxed : bool
        Sizes were rounded *down* (``relax=True`` with an inexact unit): the
        model then admits every plan that fits in bytes (and a few that do
        not), so its dual bound bounds the staged class; its solutions must
        be checked by the simulator (they always are).
    """

    unit: int
    budget: int
    sizes: np.ndarray = field(repr=False)
    exact: bool
    relaxed: bool = False

    @property
    def bound_valid(self) -> bool:
        """Whether the model's optimum is at most the best byte-feasible plan's."""
        return self.exact or self.relaxed

    @classmethod
    def choose(cls, bytes_, budget: int, *, max_units: int = 1 << 24, target_units: int = 1 << 18,
               relax: bool = False) -> MemoryScale:
        """The gcd of all sizes when that leaves at most ``max_units`` budget
        units (exact: memory is always a multiple of it, so flooring the
        budget loses nothing), else a multiple of it giving about
        ``target_units``: sizes rounded up (conservative: every model plan
        fits in bytes) or, with ``relax=True``, down (a relaxation: every
        plan that fits in bytes is a model plan, since
        ``sum floor(b/u) <= floor(sum b / u) <= floor(B/u)``).

        Examples
        --------
        >>> MemoryScale.choose([3, 5], 10, max_units=2, target_units=2).sizes.tolist()
        [1, 1]
        >>> MemoryScale.choose([3, 5], 10, max_units=2, target_units=2, relax=True).sizes.tolist()
        [0, 1]
        """
        vals = [int(b) for b in np.asarray(bytes_).tolist() if b > 0]
        g = reduce(math.gcd, vals) if vals else 1
        unit = g
        if budget // g > max_units:
            unit = g * max(1, math.ceil(budget / g / target_units))
        exact = unit == g
        b = np.asarray(bytes_, dtype=np.int64)
        relaxed = bool(relax and not exact)
        sizes = b // unit if relaxed else -(-b // unit)
        return cls(int(unit), int(budget // unit), sizes.astype(np.int64), bool(exact), relaxed)


def solve_r_opt(graph, S, starts) -> np.ndarray:
    """The minimal ``R`` for a staged ``S`` (Checkmate's ``solve_r_opt``).

    Block nodes are computed in their stage; a value kept into stage
    ``s+1`` but not resident at the start of ``s`` is computed in ``s``; then
    every missing input of a computed node is computed too (scanning each
    stage backwards, so the closure is complete).

    Parameters
    ----------
    graph : Graph
    S : array (T, n) of bool
    starts : array (T+1,) of int

    Returns
    -------
    ndarray (T, n) of bool
    """
    S = np.asarray(S) > 0.5
    T, n = S.shape
    R = np.zeros((T, n), dtype=bool)
    pp, pi = graph.pred_ptr, graph.pred_idx
    for s in range(T):
        lo, hi = int(starts[s]), int(starts[s + 1])
        R[s, lo:hi] = True
        if s + 1 < T:
            R[s, :hi] |= S[s + 1, :hi] & ~S[s, :hi]
        row_r, row_s = R[s], S[s]
        for v in range(hi - 1, -1, -1):
            if row_r[v]:
                for j in range(pp[v], pp[v + 1]):
                    u = pi[j]
                    if not row_r[u] and not row_s[u]:
                        row_r[u] = True
    return R


def _sinks(graph) -> np.ndarray:
    return np.diff(graph.succ_ptr) == 0


def staged_rs(graph, plan: Plan, starts) -> tuple[np.ndarray, np.ndarray]:
    """Block-staged ``R``/``S`` of a plan (``T x n`` bool) for stage ``starts``,
    cleaned of sinks' useless entries.

    Raises
    ------
    PlanError
        The plan has no staged form (not frontier-ordered, copies, ...).
    """
    try:
        Rc, Sc = rs_from_plan(graph, plan)
    except IndexError:  # core rs_from_plan: a compute after the last node's first compute
        raise PlanError("the plan computes nodes after the last node's first computation") from None
    st = np.asarray(starts)
    T = len(st) - 1
    R = np.zeros((T, graph.n), dtype=bool)
    S = np.zeros((T, graph.n), dtype=bool)
    for s in range(T):
        lo, hi = st[s], st[s + 1]
        R[s] = Rc[lo:hi].any(axis=0)
        S[s] = Sc[lo]
    sink = _sinks(graph)
    S[:, sink] = False
    for s in range(T):
        lo, hi = st[s], st[s + 1]
        rec_sink = sink.copy()
        rec_sink[lo:hi] = False
        R[s, rec_sink] = False
    return R, S


def estimate_size(graph, starts, recompute_cap: int | None = None) -> dict:
    """Rough variable and row counts of the model for ``starts`` (cheap).

    Returns ``{"vars", "binaries", "rows", "stages"}``.
    """
    starts = np.asarray(starts)
    T = len(starts) - 1
    nonsink = (~_sinks(graph)).astype(np.int64)
    cum_ns = np.concatenate([[0], np.cumsum(nonsink)])
    src, dst = graph.edges().T if graph.m else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    dst_sorted = np.sort(dst)
    lo = starts[:-1]
    hi = starts[1:]
    n_rs = cum_ns[lo]  # per stage recompute/S vars
    edges_in = np.searchsorted(dst_sorted, hi, side="left")  # edges with v < hi
    rec = 0 if recompute_cap == 1 else int(n_rs.sum())
    svars = int(n_rs.sum())
    fvars = int(edges_in.sum())
    uvars = int(hi.sum())
    binaries = rec + svars
    rows = int(edges_in.sum()) * 2 + svars + fvars * 2 + uvars
    return {"vars": binaries + fvars + uvars, "binaries": binaries, "rows": rows, "stages": T}


def _const(x) -> bool:
    return isinstance(x, (int, float))


class CheckmateModel:
    """A built staged Checkmate model (see the module docstring).

    Parameters
    ----------
    problem : Problem
        Single-device problem; its primary device gives costs and budget.
    starts : array of int, optional
        Stage blocks (default: one node per stage).
    recompute_cap : int, optional
        At most this many computations per node (``None``: unlimited).
    integral : bool
        ``False`` builds the LP relaxation.
    budget : int, optional
        Budget in bytes (default: the device's).
    deadline : float, optional
        ``time.perf_counter()`` value; :class:`BuildTimeout` when building
        would pass it.
    scale : MemoryScale, optional
        Default: :meth:`MemoryScale.choose` with ``relax=relax_memory``.
    relax_memory : bool
        Round sizes down when the memory unit is inexact, so that the model
        is a relaxation (its bound bounds the staged class) rather than a
        restriction; decoded plans are still checked by the simulator.
    fix : (R0, S0, free) , optional
        A *window* model (decomposition): staged ``R0``/``S0`` (``T x n``
        bool, e.g. from :meth:`stage_rs` of an incumbent) and a boolean
        mask ``free`` of the nodes whose decisions stay open; every other
        node keeps ``R0``/``S0`` as constants, so only the free nodes get
        variables.  Its optimum is the best plan that agrees with ``R0``/``S0``
        outside ``free`` (a neighbourhood of the incumbent, not a bound).

    Attributes
    ----------
    model : pyscipopt.Model
    R, S, FS : dict (s, i) -> variable
    F : dict (s, i, k) -> variable
    cost_scale, const_cost : float
        ``real objective = const_cost + cost_scale * model objective``.
    """

    def __init__(self, problem, *, starts=None, recompute_cap: int | None = None, integral: bool = True,
                 budget: int | None = None, deadline: float | None = None, scale: MemoryScale | None = None,
                 relax_memory: bool = False, fix=None, name: str = "checkmate"):
        from pyscipopt import Model, quicksum

        self.problem = problem
        g = self.graph = problem.graph
        n = g.n
        self.starts = np.asarray(starts if starts is not None else stage_starts(n, 1), dtype=np.int64)
        if self.starts[0] != 0 or self.starts[-1] != n or np.any(np.diff(self.starts) <= 0):
            raise SolverError(f"stage starts must rise strictly from 0 to {n}")
        self.T = T = len(self.starts) - 1
        self.recompute_cap = recompute_cap
        self.integral = integral
        dev = problem.primary
        self.budget_bytes = int(budget if budget is not None else dev.memory_bytes)
        self.scale = scale or MemoryScale.choose(g.bytes, self.budget_bytes, relax=relax_memory)
        M = self.scale.sizes
        Bu = self.scale.budget
        cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
        self.cost = cost
        self.cost_scale = float(cost.max()) if n and cost.max() > 0 else 1.0
        self.const_cost = float(cost.sum())
        c = cost / self.cost_scale
        sink = _sinks(g)
        self.home = np.repeat(np.arange(T), np.diff(self.starts))
        vt = "B" if integral else "C"
        m = self.model = Model(name)
        m.hideOutput()
        self.R: dict = {}
        self.S: dict = {}
        self.F: dict = {}
        self.FS: dict = {}
        self.U: dict = {}
        # per created F / FS variable: its upper bounds as (const, coef, var) meaning x <= const + coef * var
        self._ubs: dict = {}
        # U definitions in creation order: (uvar, [(coef, var)], const)
        self._udefs: list = []
        self._rows = 0
        self.fixed = 0  # variables fixed by a RINS-style phase or a window (the model is then restricted)
        if fix is not None:
            R0, S0, free_mask = (np.asarray(x, dtype=bool) for x in fix)
            if R0.shape != (T, n) or S0.shape != (T, n) or free_mask.shape != (n,):
                raise SolverError(f"fix: R0 and S0 must be {T} x {n} and the free mask of length {n}")
            self.fixed = int((~free_mask).sum())
        else:
            R0 = S0 = None
            free_mask = np.ones(n, dtype=bool)
        self.free_mask = free_mask
        self.R0, self.S0 = R0, S0
        cap_rec = None if recompute_cap is None else max(0, int(recompute_cap) - 1)
        succ_ptr, succ_idx = g.succ_ptr, g.succ_idx
        pred_ptr, pred_idx = g.pred_ptr, g.pred_idx
        allow_rec = cap_rec is None or cap_rec > 0

        # variables: S and R of stage s for i < lo (non-sinks)
        free_idx = np.flatnonzero(free_mask & ~sink)
        for s in range(T):
            lo = int(self.starts[s])
            for i in free_idx[free_idx < lo].tolist():
                self.S[s, i] = m.addVar(vtype=vt, lb=0.0, ub=1.0, name=f"S_{s}_{i}")
                if allow_rec:
                    self.R[s, i] = m.addVar(vtype=vt, lb=0.0, ub=1.0, obj=float(c[i]), name=f"R_{s}_{i}")
            if deadline is not None and time.perf_counter() > deadline:
                raise BuildTimeout("model construction passed the deadline (variables)")

        def Rv(s, i):
            lo, hi = self.starts[s], self.starts[s + 1]
            if lo <= i < hi:
                return 1
            if i < lo:
                if R0 is not None and not free_mask[i]:
                    return int(R0[s, i])
                return self.R.get((s, i), 0)
            return 0

        def Sv(s, i):
            if s >= T:
                return 0
            if S0 is not None and not free_mask[i]:
                return int(S0[s, i]) if not sink[i] else 0
            return self.S.get((s, i), 0)

        if R0 is None:
            def active(s, hi):
                return range(hi)
        else:
            # nodes that may be computed or resident in stage s: free ones and the incumbent's
            def active(s, hi):
                mask = free_mask[:hi] | R0[s, :hi] | S0[s, :hi]
                mask[int(self.starts[s]):hi] = True
                return np.flatnonzero(mask).tolist()

        add = m.addCons
        for s in range(T):
            lo, hi = int(self.starts[s]), int(self.starts[s + 1])
            act = active(s, hi)
            # dependencies
            for v in act:
                rv = Rv(s, v)
                if _const(rv) and rv == 0:
                    continue
                for j in range(pred_ptr[v], pred_ptr[v + 1]):
                    u = int(pred_idx[j])
                    ru = Rv(s, u)
                    if _const(ru) and ru == 1:
                        continue
                    su = Sv(s, u)
                    if _const(su) and su == 1:
                        continue
                    rhs = [x for x in (ru, su) if not _const(x)]
                    if not rhs:
                        if not _const(rv):  # window model: v cannot run in this stage
                            m.chgVarUb(rv, 0.0)
                            continue
                        raise SolverError(f"stage {s}: node {v} needs node {u}, which cannot be available")
                    if _const(rv):
                        add(quicksum(rhs) >= 1)
                    else:
                        add(rv - quicksum(rhs) <= 0)
                    self._rows += 1
            # carry
            if s + 1 < T:
                for i in range(lo):
                    if (s + 1, i) in self.S:
                        rhs = [x for x in (Sv(s, i), Rv(s, i)) if not _const(x)]
                        add(self.S[s + 1, i] - quicksum(rhs) <= 0)
                        self._rows += 1
            # frees: for each producer i < hi, its consumers within the stage
            frees_after: dict[int, list] = {}
            for i in act:
                if sink[i]:
                    continue
                ri = Rv(s, i)
                si = Sv(s, i)
                if _const(ri) and ri == 0 and _const(si) and si == 0:
                    continue  # i cannot be resident in this stage
                keep = Sv(s + 1, i) if s + 1 < T else 0
                cons = [int(k) for k in succ_idx[succ_ptr[i]:succ_ptr[i + 1]] if k < hi]
                cons = [k for k in cons if not (_const(Rv(s, k)) and Rv(s, k) == 0)]
                block_cons = [k for k in cons if k >= lo]
                if block_cons:
                    cands = [max(block_cons)]
                else:
                    cands = cons
                made = []
                for k in cands:
                    ubs = []
                    rk = Rv(s, k)
                    if not _const(rk):
                        ubs.append((0.0, 1.0, rk))
                    if not _const(keep):
                        ubs.append((1.0, -1.0, keep))
                    elif keep:
                        continue  # kept into the next stage: never freed here
                    later = [Rv(s, j) for j in cons if j > k]
                    if any(_const(x) and x for x in later):
                        continue  # a later consumer certainly runs: not the last read
                    ubs.extend((1.0, -1.0, x) for x in later if not _const(x))
                    if not ubs:
                        # every term is a constant (window models): freed right after k
                        frees_after.setdefault(k, []).append((int(M[i]), 1))
                        continue
                    f = m.addVar(vtype="C", lb=0.0, ub=1.0, name=f"F_{s}_{i}_{k}")
                    self.F[s, i, k] = f
                    self._ubs[f.name] = ubs
                    for c0, c1, x in ubs:
                        add(f - c1 * x <= c0)
                        self._rows += 1
                    frees_after.setdefault(k, []).append((int(M[i]), f))
                    made.append(f)
                if len(made) >= 3:
                    add(quicksum(made) <= 1)
                    self._rows += 1
                if not cons and lo <= i < hi:
                    # a block node nobody in the stage reads: freed at once unless kept
                    if _const(keep):
                        if not keep:
                            frees_after.setdefault(i, []).append((int(M[i]), 1))
                    else:
                        fs = m.addVar(vtype="C", lb=0.0, ub=1.0, name=f"FS_{s}_{i}")
                        self.FS[s, i] = fs
                        self._ubs[fs.name] = [(1.0, -1.0, keep)]
                        add(fs + keep <= 1)
                        self._rows += 1
                        frees_after.setdefault(i, []).append((int(M[i]), fs))
            # memory recurrence over allocation positions
            prev = None
            pending: list = []
            for k in act:
                rk = Rv(s, k)
                if _const(rk) and rk == 0:
                    continue
                terms = []  # (coef, var)
                const = 0.0
                if prev is None:
                    for i in range(lo):
                        if (s, i) in self.S and M[i] > 0:
                            terms.append((float(M[i]), self.S[s, i]))
                    if S0 is not None:
                        fixed_res = S0[s, :lo] & ~free_mask[:lo] & ~sink[:lo]
                        const += float(M[:lo][fixed_res].sum())
                else:
                    terms.append((1.0, prev))
                for mb, f in pending:
                    if mb == 0:
                        continue
                    if _const(f):
                        const -= mb * f
                    else:
                        terms.append((-float(mb), f))
                if _const(rk):
                    const += float(M[k])
                elif M[k] > 0:
                    terms.append((float(M[k]), rk))
                u = m.addVar(vtype="C", lb=0.0, ub=float(Bu), name=f"U_{s}_{k}")
                self.U[s, k] = u
                add(u - quicksum(cf * x for cf, x in terms) == const)
                self._rows += 1
                self._udefs.append((u, terms, const))
                prev = u
                pending = list(frees_after.get(k, []))
                if sink[k]:
                    pending.append((int(M[k]), 1))
            if deadline is not None and time.perf_counter() > deadline:
                raise BuildTimeout(f"model construction passed the deadline (stage {s} of {T})")
        # recomputation cap
        if cap_rec is not None and cap_rec > 0:
            per_node: dict[int, list] = {}
            for (_s, i), r in self.R.items():
                per_node.setdefault(i, []).append(r)
            for rs in per_node.values():
                if len(rs) > cap_rec:
                    add(quicksum(rs) <= cap_rec)
                    self._rows += 1
        m.setMinimize()

    # ------------------------------------------------------------------ sizes
    @property
    def n_vars(self) -> int:
        return len(self.R) + len(self.S) + len(self.F) + len(self.FS) + len(self.U)

    @property
    def n_binaries(self) -> int:
        return len(self.R) + len(self.S) if self.integral else 0

    @property
    def n_rows(self) -> int:
        return self._rows

    def objective_value(self, scip_value: float) -> float:
        """Model objective -> total compute time."""
        return self.const_cost + self.cost_scale * float(scip_value)

    def model_value(self, total_time: float) -> float:
        """Total compute time -> model objective."""
        return (float(total_time) - self.const_cost) / self.cost_scale

    # --------------------------------------------------------------- decoding
    def s_from_values(self, value_of) -> np.ndarray:
        """``S`` (T x n bool) from a ``var -> value`` function."""
        S = np.zeros((self.T, self.graph.n), dtype=bool)
        if self.S0 is not None:
            S[:, ~self.free_mask] = self.S0[:, ~self.free_mask]
            S[:, _sinks(self.graph)] = False
        for (s, i), v in self.S.items():
            if value_of(v) > 0.5:
                S[s, i] = True
        return S

    def plan_from_s(self, S, meta: dict | None = None) -> Plan:
        """Decode ``S`` with the minimal ``R`` (see :func:`solve_r_opt`)."""
        R = solve_r_opt(self.graph, S, self.starts)
        return plan_from_rs(self.graph, R, S, self.problem.primary.name, meta)

    def decode(self, sol, meta: dict | None = None) -> Plan:
        """The plan of a SCIP solution (or of an LP solution when ``sol`` is None)."""
        m = self.model
        if sol is None:
            S = self.s_from_values(m.getVal)
        else:
            S = self.s_from_values(lambda v: m.getSolVal(sol, v))
        return self.plan_from_s(S, meta)

    # --------------------------------------------------------------- encoding
    def stage_rs(self, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
        """Block-staged ``R``/``S`` of a plan for this model's stages (:func:`staged_rs`)."""
        return staged_rs(self.graph, plan, self.starts)

    def values_from_rs(self, R, S) -> tuple[dict | None, str]:
        """Every variable's value for staged ``R``/``S``, derived as the model
        defines ``FREE``, ``FS`` and ``U``; ``(None, reason)`` when the pair
        violates a constraint (checked here with a readable reason)."""
        R = np.asarray(R, dtype=bool)
        S = np.asarray(S, dtype=bool)
        g = self.graph
        st = self.starts
        val: dict = {}
        for s in range(self.T):
            lo = st[s]
            if S[s, lo:].any():
                return None, f"stage {s} keeps a node that is not computed yet"
            if R[s, st[s + 1]:].any():
                return None, f"stage {s} computes a node of a later stage"
            if not R[s, lo:st[s + 1]].all():
                return None, f"stage {s} does not compute all of its block"
        if self.S0 is not None:
            fixed = ~self.free_mask & ~_sinks(g)
            if (S[:, fixed] != self.S0[:, fixed]).any():
                return None, "the plan differs from the window's fixed checkpoints"
            for s in range(self.T):
                lo = st[s]
                cols = np.flatnonzero(fixed[:lo])
                if (R[s, cols] != self.R0[s, cols]).any():
                    return None, f"stage {s}: the plan differs from the window's fixed recomputations"
        for key, v in self.S.items():
            val[v.name] = float(S[key])
        for (s, i) in zip(*np.nonzero(S), strict=True):
            if (int(s), int(i)) not in self.S and self.free_mask[i]:
                return None, f"S[{s},{i}] has no variable (sink or first stage)"
        for key, v in self.R.items():
            val[v.name] = float(R[key])
        for (s, i) in zip(*np.nonzero(R), strict=True):
            s, i = int(s), int(i)
            if i < st[s] and (s, i) not in self.R and self.free_mask[i]:
                return None, f"R[{s},{i}] has no variable (recomputation cap or sink)"
        if self.recompute_cap is not None:
            counts = R.sum(axis=0)
            worst = int(counts.argmax())
            if counts[worst] > self.recompute_cap:
                return None, f"node {worst} is computed {int(counts[worst])} times, over the cap {self.recompute_cap}"
        # dependencies and carry
        for s in range(self.T):
            for v in np.flatnonzero(R[s]):
                for u in g.preds(v):
                    if not (R[s, u] or S[s, u]):
                        return None, f"stage {s}: node {int(v)} needs {int(u)}, neither kept nor computed"
            if s + 1 < self.T:
                bad = S[s + 1] & ~(S[s] | R[s])
                if bad.any():
                    return None, f"S[{s + 1},{int(np.flatnonzero(bad)[0])}] without S or R in stage {s}"

        def get(x):
            return float(x) if _const(x) else val[x.name]

        for f in list(self.F.values()) + list(self.FS.values()):
            ubs = self._ubs[f.name]
            val[f.name] = min([1.0] + [c0 + c1 * get(x) for c0, c1, x in ubs])
        Bu = self.scale.budget
        for u, terms, const in self._udefs:
            x = const + sum(cf * get(v) for cf, v in terms)
            val[u.name] = x
            if x > Bu + 1e-9:
                s, k = u.name.split("_")[1:]
                how = "relaxed" if self.scale.relaxed else "conservative"
                return None, (
                    f"memory after node {k} in stage {s} is {x * self.scale.unit:.0f} B in the model's "
                    f"{how} accounting, over the budget {Bu * self.scale.unit} B"
                )
            if x < -1e-9:
                return None, f"negative memory at {u.name} (model error)"
        return val, ""

    def add_start(self, plan: Plan) -> tuple[str, str]:
        """Encode ``plan`` as a complete MIP start and add it.

        Tries the plan's own ``R``/``S``, then the minimal ``R`` for its
        ``S``.  Returns ``(kind, reason)`` with ``kind`` one of ``"full"``,
        ``"full_min_r"`` or ``"none"``; never raises for a bad plan.
        """
        try:
            R, S = self.stage_rs(plan)
        except PlanError as e:
            return "none", f"incumbent has no staged form: {e}"
        attempts = [("full", R), ("full_min_r", solve_r_opt(self.graph, S, self.starts))]
        reasons = []
        for kind, Rk in attempts:
            val, why = self.values_from_rs(Rk, S)
            if val is None:
                reasons.append(f"{kind}: {why}")
                continue
            m = self.model
            sol = m.createSol()
            for v in m.getVars():
                m.setSolVal(sol, v, val.get(v.name, 0.0))
            if not m.checkSol(sol, printreason=False, original=True):
                reasons.append(f"{kind}: SCIP rejects the start (checkSol)")
                m.freeSol(sol)
                continue
            m.addSol(sol, free=True)
            return kind, "; ".join(reasons)
        return "none", "; ".join(reasons)

    def free(self) -> None:
        """Release the SCIP model."""
        if getattr(self, "model", None) is not None:
            try:
                self.model.free()
            finally:
                self.model = None


def build_checkmate_model(problem, **kwargs) -> CheckmateModel:
    """Build a :class:`CheckmateModel` (keyword arguments as its constructor)."""
    return CheckmateModel(problem, **kwargs)


#: SCIP settings chosen by measurement (benchmarks/exact_tradeoffs.py; FCN8 @0.9: the default settings spend the
#: first 25 s in presolve, cut rounds and strong branching without improving the start, these find RENS plans)
DEFAULT_PARAMS = {"presolve": "FAST", "separating": "OFF", "heuristics": "AGGRESSIVE"}


def apply_params(model, params: dict) -> None:
    """Set SCIP parameters; the keys ``presolve``, ``separating`` and
    ``heuristics`` take an emphasis (``"FAST"``, ``"OFF"``, ``"AGGRESSIVE"``,
    ``"DEFAULT"``), every other key is a SCIP parameter name."""
    from pyscipopt import SCIP_PARAMSETTING

    setters = {"presolve": model.setPresolve, "separating": model.setSeparating, "heuristics": model.setHeuristics}
    for k, v in params.items():
        if k in setters:
            setters[k](getattr(SCIP_PARAMSETTING, str(v).upper()))
        else:
            model.setParam(k, v)


#: measured pyscipopt construction throughput (vars + rows per second) on the team machine
BUILD_RATE = 40_000.0


class CheckmateFormulation(Formulation):
    """The staged Checkmate MILP on SCIP, warm-started from the incumbent.

    Parameters
    ----------
    stage_size : int or "auto"
        Nodes per stage; ``"auto"``: see :meth:`phases`.
    recompute_cap : int or None
        Moccasin's ``C`` (at most ``C`` computations per node); with
        ``"auto"`` it applies to the fast phase (default 2 there).
    push_local_search : bool
        Polish each new SCIP incumbent by local search (dropping
        recomputations, :mod:`.local_search`) and push improvements back
        into the running solve through a SCIP primal heuristic.
    follow_incumbent : bool
        Model the incumbent's order of first computations (relabelling the
        graph) rather than the reference order, so the start is usable.
    tiny_items, small_items, fast_items, max_stage_size
        Size thresholds (variables + rows per 60 s) of the ``"auto"`` policy.
    build_fraction : float
        Share of the time limit model construction may take.
    rins_share : float
        With an incumbent and a model small enough for the full staged
        phase, this share of the time first goes to a RINS-style phase: the
        full model with every ``S`` fixed where its LP relaxation and the
        incumbent agree.  Its plans count; its bound and status do not (the
        model is restricted).  Off by default: measured in
        ``benchmarks/results/exact_rins.md`` it helped vgg19 @0.8 but cost
        RLG1 its best plans (the LP relaxation alone used the phase's time).
    params : dict, optional
        Extra SCIP parameters.
    """

    name = "checkmate"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "exact", "scoped_bound"})

    def __init__(self, stage_size="auto", recompute_cap: int | None = None, build_fraction: float = 0.4,
                 params: dict | None = None, name: str | None = None, small_items: float = 40_000,
                 fast_items: float = 20_000, max_stage_size: int = 8, tiny_items: float = 5_000,
                 follow_incumbent: bool = True, push_local_search: bool = True, rins_share: float = 0.0):
        self.rins_share = float(rins_share)
        self.tiny_items = tiny_items
        self.follow_incumbent = follow_incumbent
        self.push_local_search = push_local_search
        self.small_items = small_items
        self.fast_items = fast_items
        self.max_stage_size = max_stage_size
        self.stage_size = stage_size
        self.recompute_cap = recompute_cap
        self.build_fraction = build_fraction
        self.params = dict(DEFAULT_PARAMS if params is None else params)
        if name:
            self.name = name

    def choose_starts(self, problem, time_limit: float | None, cap=None, max_items: float | None = None):
        """Stage blocks for ``problem`` and the size estimate behind them."""
        n = problem.graph.n
        if self.stage_size != "auto":
            st = stage_starts(n, int(self.stage_size))
            return st, estimate_size(problem.graph, st, cap)
        if max_items is None:
            max_items = BUILD_RATE * self.build_fraction * (time_limit if time_limit else 60.0)
        g = 1
        while True:
            st = stage_starts(n, g)
            est = estimate_size(problem.graph, st, cap)
            if est["vars"] + est["rows"] <= max_items or g >= n:
                return st, est
            g = max(g + 1, int(g * 1.25))

    def phases(self, problem, time_limit: float | None) -> list:
        """The models to solve, in order: ``[(stage_size, recompute_cap, share)]``.

        Fixed ``stage_size``: one phase with this object's cap.  ``"auto"``:
        the full staged model (one node per stage, no cap: its bound covers
        the staged class) alone when it is tiny; the same model with the cap
        first (70 % of the time; SCIP's RENS finds better plans there) when
        it is small; otherwise first a smaller model
        (Moccasin's cap ``C = recompute_cap`` (default 2), stages of ``g``
        nodes with the smallest ``g <= max_stage_size`` that fits
        ``fast_items``) for incumbents, then the full model with the rest of
        the time when it can be built in a third of it.
        """
        if self.stage_size != "auto":
            return [(int(self.stage_size), self.recompute_cap, 1.0)]
        limit = time_limit if time_limit else 60.0
        scale = 1.0 if limit >= 20.0 else limit / 60.0
        g = problem.graph
        full = estimate_size(g, stage_starts(g.n, 1), None)
        full_items = full["vars"] + full["rows"]
        cap = self.recompute_cap if self.recompute_cap is not None else 2
        if full_items <= self.tiny_items:
            return [(1, None, 1.0)]
        if full_items <= self.small_items * scale:
            return [(1, cap, 0.7), (1, None, 1.0)]
        out = []
        size = 2
        while size <= self.max_stage_size:
            est = estimate_size(g, stage_starts(g.n, size), cap)
            if est["vars"] + est["rows"] <= self.fast_items * scale:
                out.append((size, cap, 0.7))
                break
            size *= 2
        if full_items / BUILD_RATE <= limit / 3:
            out.append((1, None, 1.0))
        return out

    def solve(self, problem, *, incumbent=None, time_limit: float = 60.0, node_limit=None, seed: int = 0,
              threads: int = 1, on_incumbent=None, on_bound=None, stop=None) -> FormulationResult:
        t0 = time.perf_counter()
        deadline = t0 + float(time_limit) if time_limit is not None else None
        stats: dict = {"formulation": self.name, "phases": []}
        if not problem.is_single_device:
            return FormulationResult("error", stats={**stats, "error": "checkmate handles one device only"})
        stop = stop or threading.Event()
        phases = self.phases(problem, time_limit)
        if not phases:
            stats["skipped"] = "every model is too large to build and solve within the time limit"
            return FormulationResult("no_solution", stats=stats)
        best_plan, best_obj = None, float("inf")
        if incumbent is not None:
            sim = simulate(problem, incumbent)
            if sim.valid:
                best_plan, best_obj = incumbent, sim.total_time
        from .reorder import first_compute_order, plan_to_original, plan_to_relabelled, relabel

        bound = float("-inf")
        status = "no_solution"
        full = estimate_size(problem.graph, stage_starts(problem.graph.n, 1), None)
        rins_time = self.rins_share * (float(time_limit) if time_limit is not None else 60.0)
        rins_fits = 2 * (full["vars"] + full["rows"]) / BUILD_RATE <= 0.6 * rins_time  # LP + MILP builds
        if (self.rins_share > 0 and best_plan is not None and rins_fits and not stop.is_set()
                and first_compute_order(best_plan, problem.graph.n) is not None):
            now = time.perf_counter()
            rins_deadline = None if deadline is None else now + (deadline - now) * self.rins_share
            rstats: dict = {"stage_size": 1, "recompute_cap": None, "rins_phase": True}
            stats["phases"].append(rstats)
            order = first_compute_order(best_plan, problem.graph.n)
            if np.array_equal(order, np.arange(problem.graph.n)):
                rproblem, rstart, ron_inc, order = problem, best_plan, on_incumbent, None
            else:
                rproblem, order = relabel(problem, order)
                rstart = plan_to_relabelled(best_plan, order)

                def ron_inc(plan, source=None, _order=order):
                    if on_incumbent is not None:
                        on_incumbent(plan_to_original(plan, _order), source)
            fr = self._solve_phase(rproblem, 1, None, rstart, rins_deadline, node_limit, seed, ron_inc, None, stop,
                                   rstats, fix_from_lp=True)
            if order is not None and fr.plan is not None:
                fr.plan = plan_to_original(fr.plan, order)
            rstats["status"] = fr.status  # a restricted model: its status and bound are not claims
            if fr.plan is not None and fr.objective < best_obj - 1e-12 * max(1.0, abs(best_obj)):
                best_plan, best_obj = fr.plan, fr.objective
        for k, (size, cap, share) in enumerate(phases):
            if stop.is_set():
                break
            now = time.perf_counter()
            phase_deadline = None
            if deadline is not None:
                left = deadline - now
                if left <= 0.5:
                    break
                phase_deadline = now + left * share if k < len(phases) - 1 else deadline
            pstats: dict = {"stage_size": size, "recompute_cap": cap}
            stats["phases"].append(pstats)
            # the fast phase of a multi-phase run keeps the reference order; the others model the best
            # plan's order of first computations (relabelling the graph) so that it is a complete start
            order = None
            if best_plan is not None and self.follow_incumbent and (k > 0 or len(phases) == 1):
                order = first_compute_order(best_plan, problem.graph.n)
                if order is not None and np.array_equal(order, np.arange(problem.graph.n)):
                    order = None
            if order is not None:
                pproblem, order = relabel(problem, order)
                pstart = plan_to_relabelled(best_plan, order)
                pstats["relabelled"] = True

                def pon_inc(plan, source=None, _order=order):
                    if on_incumbent is not None:
                        on_incumbent(plan_to_original(plan, _order), source)
            else:
                pproblem, pstart, pon_inc = problem, best_plan, on_incumbent
            fr = self._solve_phase(pproblem, size, cap, pstart, phase_deadline, node_limit, seed, pon_inc,
                                   on_bound, stop, pstats)
            if order is not None and fr.plan is not None:
                fr.plan = plan_to_original(fr.plan, order)
            pstats["status"] = fr.status
            if fr.plan is not None and (best_plan is None or fr.objective < best_obj - 1e-12 * max(1.0, abs(best_obj))):
                best_plan, best_obj = fr.plan, fr.objective
            if math.isfinite(fr.lower_bound):
                bound = max(bound, fr.lower_bound)
            if size == 1 and cap is None and fr.status in ("optimal", "infeasible"):
                status = fr.status
        if stats["phases"]:
            last = stats["phases"][-1]
            for key in ("vars", "binaries", "rows", "build_s", "mem_unit", "mem_exact", "mem_relaxed", "start",
                        "start_note",
                        "scip_status", "nodes", "skipped", "model_bound", "stages", "relabelled"):
                if key in last:
                    stats[key] = last[key]
        if any(ph.get("relabelled") for ph in stats["phases"]):
            stats["relabelled"] = True
            stats["order_note"] = "modelled the incumbent's first-compute order; bounds cover that order's staged plans"
        if status == "optimal" and best_plan is not None:
            lb = best_obj if best_obj - bound <= 1e-9 * max(1.0, abs(best_obj)) else min(bound, best_obj)
            return FormulationResult("optimal", best_plan, best_obj, lb, stats)
        if status == "infeasible" and best_plan is None:
            # the staged class is empty; other plans may exist: never claim infeasibility (team contract)
            stats["staged_class_empty"] = True
            return FormulationResult("no_solution", None, float("inf"), float("-inf"), stats)
        if best_plan is not None:
            return FormulationResult("feasible", best_plan, best_obj, min(bound, best_obj), stats)
        return FormulationResult("no_solution", None, float("inf"), bound, stats)

    def _solve_phase(self, problem, size, cap, incumbent, deadline, node_limit, seed, on_incumbent, on_bound, stop,
                     stats, fix_from_lp: bool = False) -> FormulationResult:
        t0 = time.perf_counter()
        starts = stage_starts(problem.graph.n, size)
        est = estimate_size(problem.graph, starts, cap)
        stats.update(stages=int(len(starts) - 1), estimate=est)
        if deadline is not None and (est["vars"] + est["rows"]) / BUILD_RATE > 0.9 * (deadline - t0):
            stats["skipped"] = "model too large to build within the time limit"
            return FormulationResult("no_solution", stats=stats)
        cm = None
        try:
            try:
                # the full staged model is built as a relaxation (sizes rounded down when the memory unit is
                # inexact) so that its dual bound is valid; restricted phases stay conservative
                relax = size == 1 and cap is None and not fix_from_lp
                cm = CheckmateModel(problem, starts=starts, recompute_cap=cap, deadline=deadline,
                                    relax_memory=relax)
            except BuildTimeout as e:
                stats["skipped"] = str(e)
                return FormulationResult("no_solution", stats=stats)
            stats.update(vars=cm.n_vars, binaries=cm.n_binaries, rows=cm.n_rows, build_s=time.perf_counter() - t0,
                         mem_unit=cm.scale.unit, mem_exact=cm.scale.exact, mem_relaxed=cm.scale.relaxed)
            if fix_from_lp and incumbent is not None:
                self._fix_where_lp_agrees(cm, problem, incumbent, deadline, stats)
            return self._solve_model(cm, problem, incumbent, deadline, node_limit, seed, on_incumbent, on_bound,
                                     stop, stats, t0)
        finally:
            if cm is not None:
                cm.free()

    @staticmethod
    def _fix_where_lp_agrees(cm, problem, incumbent, deadline, stats, tol: float = 0.05) -> None:
        """RINS-style restriction: solve the LP relaxation of the same model and
        fix every checkpoint variable ``S`` where the LP value and the
        incumbent agree (within ``tol``).  The incumbent stays feasible; the
        model's bound no longer bounds the staged class (``cm.fixed > 0``)."""
        try:
            R_inc, S_inc = cm.stage_rs(incumbent)
        except PlanError as e:
            stats["rins"] = f"incumbent has no staged form: {e}"
            return
        lp = None
        try:
            t_lp = time.perf_counter()
            lp = CheckmateModel(problem, starts=cm.starts, recompute_cap=cm.recompute_cap, integral=False,
                                deadline=deadline, scale=cm.scale)
            m = lp.model
            m.setParam("lp/threads", 1)
            if deadline is not None:
                m.setParam("limits/time", max(0.05, 0.3 * (deadline - time.perf_counter())))
            m.optimize()
            if m.getStatus() != "optimal":
                stats["rins"] = f"LP relaxation {m.getStatus()}"
                return
            fixed = 0
            for key, var in cm.S.items():
                s_, i = key
                want = 1.0 if S_inc[s_, i] else 0.0
                if abs(m.getVal(lp.S[key]) - want) <= tol:
                    cm.model.chgVarLb(var, want)
                    cm.model.chgVarUb(var, want)
                    fixed += 1
            cm.fixed = fixed
            stats["rins"] = {"fixed": fixed, "of": len(cm.S), "lp_s": round(time.perf_counter() - t_lp, 3)}
        except BuildTimeout as e:
            stats["rins"] = f"LP not built: {e}"
        finally:
            if lp is not None:
                lp.free()

    # ------------------------------------------------------------------ solve
    @staticmethod
    def _local_search_push(cm, problem, plan, pushed, stats) -> None:
        """Polish a new incumbent with local search; queue it for SCIP when it improves."""
        from .local_search import drop_recomputations

        before = simulate(problem, plan)
        better = drop_recomputations(problem, plan, deadline=time.perf_counter() + 0.3)
        after = simulate(problem, better)
        if not (after.valid and after.total_time < before.total_time - 1e-12 * max(1.0, before.total_time)):
            return
        try:
            R, S = cm.stage_rs(better)
        except PlanError:
            return
        val, _ = cm.values_from_rs(R, S)
        if val is not None:
            pushed.put(val)
            stats["pushed"] = stats.get("pushed", 0) + 1

    @staticmethod
    def _include_push_heuristic(cm, pushed, stats) -> None:
        """A SCIP primal heuristic that tries the queued local-search plans."""
        from pyscipopt import SCIP_HEURTIMING, SCIP_RESULT, Heur

        by_name = {v.name: v for v in cm.model.getVars()}

        class PushHeur(Heur):
            def heurexec(self, heurtiming, nodeinfeasible):
                result = SCIP_RESULT.DIDNOTRUN
                while True:
                    try:
                        values = pushed.get_nowait()
                    except queue.Empty:
                        return {"result": result}
                    result = SCIP_RESULT.DIDNOTFIND
                    try:
                        sol = self.model.createSol(self)
                        for name, x in values.items():
                            var = by_name.get(name)
                            if var is None:
                                continue
                            tvar = self.model.getTransformedVar(var)
                            if tvar.getStatus() not in ("LOOSE", "COLUMN"):
                                continue  # fixed or aggregated by presolve: SCIP derives its value
                            self.model.setSolVal(sol, tvar, x)
                        if self.model.trySol(sol, printreason=False):
                            result = SCIP_RESULT.FOUNDSOL
                            stats["push_accepted"] = stats.get("push_accepted", 0) + 1
                        else:
                            stats["push_rejected"] = stats.get("push_rejected", 0) + 1
                    except Exception as e:  # never raise inside SCIP
                        stats["push_error"] = repr(e)

        cm.model.includeHeur(PushHeur(), "hr_local_search", "plans from local search", "Y",
                             timingmask=SCIP_HEURTIMING.AFTERLPNODE | SCIP_HEURTIMING.AFTERPSEUDONODE, freq=1)

    def _solve_model(self, cm, problem, incumbent, deadline, node_limit, seed, on_incumbent, on_bound, stop,
                     stats, t0) -> FormulationResult:
        from pyscipopt import SCIP_EVENTTYPE

        m = cm.model
        best = {"plan": None, "obj": float("inf"), "bound": float("-inf")}
        if incumbent is not None:
            sim = simulate(problem, incumbent)
            kind, why = cm.add_start(incumbent)
            stats["start"] = kind
            if why:
                stats["start_note"] = why
            if sim.valid:
                best["plan"], best["obj"] = incumbent, sim.total_time
        else:
            stats["start"] = "none"
        m.setParam("randomization/randomseedshift", int(seed) % 2**31)
        m.setParam("lp/threads", 1)
        m.setParam("parallel/maxnthreads", 1)
        if node_limit is not None:
            m.setParam("limits/nodes", int(node_limit))
        if deadline is not None:
            m.setParam("limits/time", max(0.0, deadline - time.perf_counter()))
        apply_params(m, self.params)
        errors: list = []
        # only the full staged model's bound bounds the staged class (blocks and caps restrict it)
        full_class = bool(cm.scale.bound_valid and np.all(np.diff(cm.starts) == 1) and cm.recompute_cap is None
                          and cm.fixed == 0)

        pushed: queue.SimpleQueue = queue.SimpleQueue()
        if self.push_local_search:
            self._include_push_heuristic(cm, pushed, stats)

        def on_event(model, event):
            try:
                et = event.getType()
                if et == SCIP_EVENTTYPE.BESTSOLFOUND:
                    sol = model.getBestSol()
                    plan = cm.decode(sol, {"solver": self.name})
                    if self.push_local_search:
                        self._local_search_push(cm, problem, plan, pushed, stats)
                    sim = simulate(problem, plan)
                    if sim.valid and (not math.isfinite(best["obj"]) or
                                      sim.total_time < best["obj"] - 1e-12 * max(1.0, abs(best["obj"]))):
                        best["plan"], best["obj"] = plan, sim.total_time
                        if on_incumbent is not None:
                            on_incumbent(plan, self.name)
                    elif not sim.valid:
                        stats["decode_rejected"] = stats.get("decode_rejected", 0) + 1
                db = model.getDualbound()
                pb = model.getPrimalbound()
                # at a limit SCIP may report the primal bound as dual bound: only trust a bound below the primal
                if abs(db) < 1e19 and (abs(pb) >= 1e19 or db < pb - 1e-9 * max(1.0, abs(pb))):
                    lb = cm.objective_value(db)
                    if not math.isfinite(best["bound"]) or lb > best["bound"] + 1e-12 * max(1.0, abs(lb)):
                        best["bound"] = lb
                        if on_bound is not None and full_class:
                            on_bound(lb)
                if stop.is_set() or (deadline is not None and time.perf_counter() > deadline):
                    model.interruptSolve()
            except Exception as e:  # never let a callback error escape into SCIP
                errors.append(repr(e))
                try:
                    model.interruptSolve()
                except Exception:
                    pass

        m.attachEventHandlerCallback(
            on_event,
            [SCIP_EVENTTYPE.BESTSOLFOUND, SCIP_EVENTTYPE.NODESOLVED, SCIP_EVENTTYPE.LPSOLVED,
             SCIP_EVENTTYPE.DUALBOUNDIMPROVED],
            name="hybrid_remat_anytime",
        )
        worker_error: list = []

        def work():
            try:
                m.optimizeNogil()
            except Exception as e:
                worker_error.append(repr(e))

        th = threading.Thread(target=work, name="scip-solve", daemon=True)
        th.start()
        interrupted = False
        try:
            while th.is_alive():
                th.join(0.1)
                if stop.is_set():
                    break
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
        if th.is_alive():
            stop.set()  # the event handler interrupts SCIP from its own thread (never call SCIP from here)
            th.join()
        if errors:
            stats["callback_errors"] = errors[:3]
        if worker_error:
            stats["solver_error"] = worker_error[0]
        status = m.getStatus()
        stats["scip_status"] = status
        if status == "userinterrupt" and not stop.is_set() and not errors:
            interrupted = True  # SCIP caught a Ctrl-C itself (misc/catchctrlc): pass it on
            stop.set()
        stats["nodes"] = m.getNNodes()
        stats["solve_s"] = time.perf_counter() - t0 - stats.get("build_s", 0.0)
        db = m.getDualbound()
        pb = m.getPrimalbound()
        trusted = status in ("optimal", "infeasible") or abs(pb) >= 1e19 or db < pb - 1e-9 * max(1.0, abs(pb))
        if abs(db) < 1e19 and trusted:
            best["bound"] = max(best["bound"], cm.objective_value(db))
        if best["plan"] is None and m.getNSols() > 0:
            try:
                plan = cm.decode(m.getBestSol(), {"solver": self.name})
                sim = simulate(problem, plan)
                if sim.valid:
                    best["plan"], best["obj"] = plan, sim.total_time
            except Exception as e:
                stats["decode_error"] = repr(e)
        if interrupted:
            raise KeyboardInterrupt
        stats["model_bound"] = best["bound"]
        stats["bound_valid_for_staged_class"] = full_class
        if not full_class:
            # a restricted model's bound does not bound the staged class: report it in stats only
            best["bound"] = float("-inf")
        if status == "optimal" and best["plan"] is not None:
            lb = min(best["bound"], best["obj"])
            closed = best["obj"] - lb <= 1e-9 * max(1.0, abs(best["obj"]))
            if closed:
                lb = best["obj"]
            elif full_class and cm.scale.relaxed:
                # the relaxed model's optimum does not fit in bytes: our best plan is not proven optimal
                stats["relaxed_optimum_over_budget"] = True
                return FormulationResult("feasible", best["plan"], best["obj"], lb, stats)
            return FormulationResult("optimal", best["plan"], best["obj"], lb, stats)
        if status == "infeasible":
            return FormulationResult("infeasible" if best["plan"] is None else "feasible", best["plan"], best["obj"],
                                     float("inf") if best["plan"] is None else best["bound"], stats)
        if best["plan"] is not None:
            return FormulationResult("feasible", best["plan"], best["obj"], min(best["bound"], best["obj"]), stats)
        return FormulationResult("no_solution", None, float("inf"), best["bound"], stats)
