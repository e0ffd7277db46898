"""The staged Checkmate MILP on SCIP (pyscipopt): building the model.

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
  once), scaled by the largest cost for the solver's numerics
  (:class:`~hybrid_remat.scip.ObjectiveScale`).

Encoding and decoding: :mod:`.encoding`; stage sizes and phases:
:mod:`.policy`; the formulation: :mod:`.formulation`.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Problem
>>> with CheckmateModel(Problem.single(chain(4, bytes=1), 2)) as cm:
...     cm.n_binaries > 0, cm.T
(True, 4)
"""

from __future__ import annotations

import time

import numpy as np

from ...core.staged import sinks as _sinks
from ...core.staged import stage_starts
from ...errors import SolverError
from ...scip import BuildTimeout, MemoryScale, ObjectiveScale, OwnsModel, new_model
from .encoding import StagedEncoding

__all__ = ["CheckmateModel", "build_checkmate_model", "estimate_size", "BuildTimeout"]


def estimate_size(graph, starts, recompute_cap: int | None = None) -> dict:
    """Rough variable and row counts of the model for ``starts`` (cheap).

    Returns ``{"vars", "binaries", "rows", "stages"}``.
    """
    starts = np.asarray(starts)
    T = len(starts) - 1
    nonsink = (~_sinks(graph)).astype(np.int64)
    cum_ns = np.concatenate([[0], np.cumsum(nonsink)])
    lo = starts[:-1]
    hi = starts[1:]
    n_rs = cum_ns[lo]  # per stage recompute/S vars
    edges_in = np.asarray(graph.pred_ptr)[hi]  # edges with v < hi: the predecessor CSR counts them (linear)
    rec = 0 if recompute_cap == 1 else int(n_rs.sum())
    svars = int(n_rs.sum())
    fvars = int(edges_in.sum())
    uvars = int(hi.sum())
    binaries = rec + svars
    rows = int(edges_in.sum()) * 2 + svars + fvars * 2 + uvars
    return {"vars": binaries + fvars + uvars, "binaries": binaries, "rows": rows, "stages": T}


def _const(x) -> bool:
    return isinstance(x, (int, float))


class CheckmateModel(StagedEncoding, OwnsModel):
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
    limits : Limits, optional
        Its deadline and stop flag, as ``deadline`` (the model is freed and
        :class:`BuildTimeout` raised when either passes).
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
    name : str
        SCIP's model name.
    seed : int
        SCIP's random seed shift.

    Attributes
    ----------
    model : pyscipopt.Model
    R, S, FS : dict (s, i) -> variable
    F : dict (s, i, k) -> variable
    objscale : ObjectiveScale
        ``real objective = offset + scale * model objective`` (also as
        ``const_cost`` and ``cost_scale``).
    """

    def __init__(self, problem, **kwargs):
        self.model = None
        try:
            self._build(problem, **kwargs)
        except BaseException:  # BuildTimeout, a bad fix, Ctrl-C: never leave a SCIP model behind
            self.free()
            raise

    def _build(self, problem, *, starts=None, recompute_cap: int | None = None, integral: bool = True,
               budget: int | None = None, deadline: float | None = None, scale: MemoryScale | None = None,
               relax_memory: bool = False, fix=None, name: str = "checkmate", seed: int = 0, limits=None):
        from pyscipopt import quicksum

        if limits is not None:
            deadline = limits.deadline if deadline is None else min(deadline, limits.deadline)
        stop = getattr(limits, "stop", None)

        def expired() -> bool:
            return (deadline is not None and time.perf_counter() > deadline) or (stop is not None and stop.is_set())

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
        self.objscale = ObjectiveScale.of(cost, offset=float(cost.sum()))
        self.cost_scale, self.const_cost = self.objscale.scale, self.objscale.offset
        c = cost / self.cost_scale
        sink = _sinks(g)
        self.home = np.repeat(np.arange(T), np.diff(self.starts))
        vt = "B" if integral else "C"
        m = self.model = new_model(name, seed=seed)
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
            if expired():
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
            if expired():
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
        return self.objscale.real(scip_value)

    def model_value(self, total_time: float) -> float:
        """Total compute time -> model objective."""
        return self.objscale.model(total_time)


def build_checkmate_model(problem, **kwargs) -> CheckmateModel:
    """Build a :class:`CheckmateModel` (keyword arguments as its constructor)."""
    return CheckmateModel(problem, **kwargs)

