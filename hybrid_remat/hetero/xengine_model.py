"""Building XEngine's staged CPU+GPU MILP (the model of
:mod:`hybrid_remat.hetero.xengine`), whole or as a *window* of a plan.

Stages ``t`` of a grid ``ends`` run slots ``k = 0..ends[t]``.  Per device
``d``: ``R[d,t,i]`` (computed), ``X[a,b,t,i]`` (copied ``a -> b``),
``S[d,t,i]`` (resident when stage ``t`` starts), ``A = R + sum_a X[a,d]``
(an arrival), ``FREE[d,t,i,k]`` (``i`` freed right after slot ``k``) and
``U`` (memory).  Constraints::

    sum_d R[d,t,i] = 1                     for the stage's own nodes (frontier)
    R[d,t,v] <= S[d,t,u] + A[d,t,u]        for (u, v) in E       (inputs on d)
    S[d,t+1,i] <= S[d,t,i] + A[d,t,i]                     (residency carries)
    X[a,b,t,i] <= S[a,t,i] + R[a,t,i]      (a copy needs a source; no relays)
    A[d,t,i] + S[d,t,i] <= 1               (no arrival where already resident)
    FREE[d,t,i,i] <= S + A;  FREE[d,t,i,k] <= R[d,t,k]  (k > i)
    FREE[d,t,i,k] <= 1 - S[d,t+1,i];  FREE[d,t,i,k] <= 1 - R[d,t,j]  (j in succ(i), j > k)
    memory after each arrival <= budget    (devices that can hold everything: no rows)

Objective: ``sum c_d(i) R + sum (lat + m_i/bw) X`` (serial time), scaled by
its largest coefficient (:class:`~hybrid_remat.scip.ObjectiveScale`).

**Windows.**  ``fix=(R0, S0, X0, stages, nodes)`` keeps a plan's staged
arrays as constants everywhere but on the free ``stages`` x ``nodes``: only
those get variables, a constraint is written only where a variable appears,
and memory rows only where a variable changes the memory (the constant
part of each stretch is added as its maximum).  The residency entering the
first free stage and leaving the last one are the plan's, so a window's
solution is a whole plan that agrees with the given one elsewhere.  Its
optimum is the best plan in that neighbourhood (no bound).

Examples
--------
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.problem import Device, Link, Problem
>>> g = chain(3, bytes=1).with_costs({"gpu": [1.0] * 3, "cpu": [2.0] * 3})
>>> p = Problem(g, [Device("gpu", "gpu", 2), Device("cpu", "cpu", 9)], [Link("gpu", "cpu", 1.0)])
>>> with XEngineModel(p) as xm:
...     xm.n_vars > 0, xm.T
(True, 3)
"""

from __future__ import annotations

import time

import numpy as np

from ..core.staged import decode
from ..errors import SolverError
from ..scip import BuildTimeout, ObjectiveScale, OwnsModel, new_model
from .staging import copy_costs, memory_scale

__all__ = ["XEngineModel", "BuildTimeout"]


class XEngineModel(OwnsModel):
    """A built XEngine model (module docstring).

    Parameters
    ----------
    problem : Problem
    ends : array of int, optional
        Stage grid (default: one stage per node).
    fix : tuple, optional
        ``(R0, S0, X0, stages, nodes)``: staged arrays of a plan on this grid
        and boolean masks of the free stages (``T``) and nodes (``n``).
    relax_memory : bool
        Budgets not lowered when the memory unit is inexact (a relaxation:
        the bound stays valid; plans are still checked by the simulator).
    limits : Limits, optional
        Deadline and stop flag for construction (:class:`BuildTimeout`).
    seed, threads : int
    name : str

    Attributes
    ----------
    model : pyscipopt.Model
    R, S : dict (d, t, i) -> variable
    X : dict (a, b, t, i) -> variable
    objscale : ObjectiveScale
        ``real serial time = offset + scale * model objective`` (the offset
        is the fixed part's cost in a window).
    """

    def __init__(self, problem, **kwargs):
        self.model = None
        try:
            self._build(problem, **kwargs)
        except BaseException:  # never leave a SCIP model behind
            self.free()
            raise

    # ------------------------------------------------------------ building
    def _build(self, problem, *, ends=None, fix=None, relax_memory: bool = False, limits=None, seed: int = 0,
               threads: int = 1, name: str = "xengine"):
        from pyscipopt import quicksum

        self.problem = problem
        g = problem.graph
        n, D = g.n, problem.n_devices
        self.ends = ends = np.arange(n) if ends is None else np.asarray(ends, dtype=np.int64)
        self.T = T = len(ends)
        can = problem.can_compute
        cost = problem.cost_matrix
        cc = copy_costs(problem)
        self.unit, cap = memory_scale(problem, relax=relax_memory)
        self.caps = cap
        self.relaxed = bool(relax_memory)
        self.mb = g.bytes / self.unit
        links = [(a, b) for a in range(D) for b in range(D) if a != b and not np.isnan(cc[a, b, 0])]
        coefs = [cost[d] for d in range(D) if can[d]] + [cc[a, b] for a, b in links]
        self.objscale = ObjectiveScale.of(np.concatenate(coefs))
        osc = self.objscale
        preds = [g.preds(i).tolist() for i in range(n)]
        self.edges = g.edges() if g.m else np.zeros((0, 2), dtype=np.int64)
        succs = [g.succs(i).tolist() for i in range(n)]
        prev_end = np.concatenate([[-1], ends[:-1]])
        self._cost, self._cc, self._links = cost, cc, links
        stop = getattr(limits, "stop", None)
        deadline = getattr(limits, "deadline", np.inf)

        def expired() -> bool:
            return time.perf_counter() > deadline or (stop is not None and stop.is_set())

        if fix is None:
            R0 = S0 = X0 = None
            fstage = np.ones(T, dtype=bool)
            fnode = np.ones(n, dtype=bool)
        else:
            R0, S0, X0, fstage, fnode = fix
            fstage = np.asarray(fstage, dtype=bool)
            fnode = np.asarray(fnode, dtype=bool)
            if R0.shape != (D, T, n) or S0.shape != (D, T, n) or X0.shape != (D, D, T, n):
                raise SolverError(f"fix: staged arrays must be ({D}, {T}, {n}) and ({D}, {D}, {T}, {n})")
        self.R0, self.S0, self.X0, self.free_stages, self.free_nodes = R0, S0, X0, fstage, fnode
        self.fixed = fix is not None
        m = self.model = new_model(name, seed=seed, threads=threads)
        R, S, X = self.R, self.S, self.X = {}, {}, {}
        self._ubs: dict = {}   # F var name -> [(c0, c1, var)]: F <= c0 + c1 * var
        self._udefs: list = []  # (U var, prev U var or None, const, [(coef, var)])
        self._rows = 0
        stages = np.flatnonzero(fstage)
        for t in stages.tolist():
            e_t, p_t = int(ends[t]), int(prev_end[t])
            s_var = t > 0 and fstage[t - 1]
            for i in np.flatnonzero(fnode[: e_t + 1]).tolist():
                for d in range(D):
                    if can[d]:
                        R[d, t, i] = m.addVar(vtype="B", obj=osc.coef(cost[d, i]), name=f"R_{d}_{t}_{i}")
                    if i <= p_t and s_var:
                        S[d, t, i] = m.addVar(vtype="B", name=f"S_{d}_{t}_{i}")
                for a, b in links:
                    if can[a] or i <= p_t:
                        X[a, b, t, i] = m.addVar(vtype="B", obj=osc.coef(cc[a, b, i]), name=f"X_{a}_{b}_{t}_{i}")
            if expired():
                raise BuildTimeout("model construction passed the deadline (variables)")

        def Rv(d, t, i):
            v = R.get((d, t, i))
            if v is not None:
                return v
            return int(R0[d, t, i]) if R0 is not None and can[d] else 0

        def Sv(d, t, i):
            if t >= T:
                return 0
            v = S.get((d, t, i))
            if v is not None:
                return v
            return int(S0[d, t, i]) if S0 is not None else 0

        def Xv(a, b, t, i):
            v = X.get((a, b, t, i))
            if v is not None:
                return v
            return int(X0[a, b, t, i]) if X0 is not None else 0

        def split(xs):
            """(constant, [variables]) of a sum of terms."""
            c, vs = 0, []
            for x in xs:
                if isinstance(x, int):
                    c += x
                else:
                    vs.append(x)
            return c, vs

        def arrivals(d, t, i):
            return [Rv(d, t, i)] + [Xv(a, d, t, i) for a in range(D) if a != d]

        add = m.addCons
        binding = [d for d in range(D) if np.isfinite(cap[d])]
        for t in stages.tolist():
            e_t, p_t = int(ends[t]), int(prev_end[t])
            free_here = np.flatnonzero(fnode[: e_t + 1]).tolist()
            # nodes whose constraints may involve a variable: free ones and the consumers of free ones
            touched = set(free_here)
            for u in free_here:
                touched.update(v for v in succs[u] if v <= e_t)
            for i in range(p_t + 1, e_t + 1):  # frontier
                c, vs = split(Rv(d, t, i) for d in range(D) if can[d])
                if vs:
                    add(quicksum(vs) == 1 - c)
                    self._rows += 1
            for i in sorted(touched):
                for d in range(D):
                    if not can[d]:
                        continue
                    ri = Rv(d, t, i)
                    if isinstance(ri, int) and ri == 0:
                        continue
                    for u in preds[i]:
                        c, vs = split([Sv(d, t, u)] + arrivals(d, t, u))
                        if isinstance(ri, int):
                            if vs and c < 1:
                                add(quicksum(vs) >= 1 - c)
                                self._rows += 1
                        elif c < 1:
                            if vs:
                                add(ri - quicksum(vs) <= c)
                                self._rows += 1
                            else:
                                m.chgVarUb(ri, 0.0)  # the input cannot be there in this window
            for i in free_here:
                for d in range(D):
                    pres = [Sv(d, t, i)] + arrivals(d, t, i)
                    c, vs = split(pres)
                    nxt = Sv(d, t + 1, i)
                    if t + 1 < T and not (isinstance(nxt, int) and nxt == 0):
                        if isinstance(nxt, int):
                            if not vs or c >= 1:
                                continue  # constants only: the fixed plan satisfies it
                            add(quicksum(vs) >= 1 - c)
                        else:
                            add(nxt - quicksum(vs) <= c)
                        self._rows += 1
                    ca, va = split(arrivals(d, t, i) + [Sv(d, t, i)])
                    if len(va) + ca > 1 and va:
                        add(quicksum(va) <= 1 - ca)
                        self._rows += 1
                for a, b in links:
                    x = X.get((a, b, t, i))
                    if x is not None:
                        c, vs = split([Sv(a, t, i), Rv(a, t, i)])
                        if c < 1:
                            if vs:
                                add(x - quicksum(vs) <= c)
                                self._rows += 1
                            else:
                                m.chgVarUb(x, 0.0)
            # frees and memory, per binding device
            for d in binding:
                self._memory_rows(m, quicksum, d, t, e_t, p_t, Rv, Sv, arrivals, split, preds, succs, cap[d],
                                  can[d])
            if expired():
                raise BuildTimeout(f"model construction passed the deadline (stage {t} of {T})")
        m.setMinimize()
        if R0 is not None:  # the fixed part's cost: real objective = fixed + scale * model objective
            fixed = sum(float((R0[d] * cost[d][None, :]).sum()) for d in range(D) if can[d])
            fixed += sum(float((X0[a, b] * cc[a, b][None, :]).sum()) for a, b in links)
            fixed -= sum(float(cost[d, i]) for (d, t, i) in R if R0[d, t, i])
            fixed -= sum(float(cc[a, b, i]) for (a, b, t, i) in X if X0[a, b, t, i])
            self.objscale = ObjectiveScale(osc.scale, fixed)

    def _memory_rows(self, m, quicksum, d, t, e_t, p_t, Rv, Sv, arrivals, split, preds, succs, cap_d, can_d):
        """FREE variables (or constants) and the memory rows of device ``d`` in stage ``t``.

        Memory right after slot ``k``'s arrival is ``Mc[k] + variable terms``:
        ``Mc`` (constants) is a cumulative sum; a ``U`` variable is made at
        each slot where a variable term enters, and the constants that follow
        it until the next one lower its upper bound by their largest excess.
        """
        T, K = self.T, e_t + 1
        mb = self.mb[:K]
        fnode = self.free_nodes[:K]
        arr_c = np.zeros(K)
        free_c = np.zeros(K)  # constant bytes freed right after slot k
        var_terms: dict[int, list] = {}  # slot -> [(coef, var)] entering the memory there
        # candidates: nodes whose FREE may involve a variable (all nodes without a fixed plan)
        if self.R0 is None:
            cand = np.ones(K, dtype=bool)
        else:
            cand = fnode.copy()
            for u in np.flatnonzero(fnode).tolist():
                for v in preds[u]:
                    cand[v] = True
            R0, S0, X0 = self.R0, self.S0, self.X0
            A0 = R0[d, t, :K] | X0[:, d, t, :K].any(axis=0)
            pres0 = S0[d, t, :K] | A0
            keep0 = S0[d, t + 1, :K] if t + 1 < T else np.zeros(K, dtype=bool)
            last = np.full(K, -1, dtype=np.int64)
            if can_d:
                e = self.edges
                sel = (e[:, 1] < K) & R0[d, t, np.minimum(e[:, 1], K - 1)]
                np.maximum.at(last, e[sel, 0], e[sel, 1])
            k_free = np.where(last >= 0, last, np.arange(K))
            mask = ~cand & pres0 & ~keep0
            np.add.at(free_c, k_free[mask], mb[mask])
            arr_c[~fnode] = mb[~fnode] * A0[~fnode]
        for i in np.flatnonzero(cand).tolist():
            pres = [Sv(d, t, i)] + arrivals(d, t, i)
            cp, vp = split(pres)
            if not vp and cp == 0:
                continue  # never on d in this stage
            nxt = Sv(d, t + 1, i) if t + 1 < T else 0
            if isinstance(nxt, int) and nxt == 1:
                continue  # kept into the next stage: never freed here
            later = [j for j in succs[i] if j <= e_t] if can_d else []
            for k in [i] + later:
                ubs = []  # F <= c0 + c1 * sum(vars)
                const_ub = 1.0
                c0, v0 = split(pres if k == i else [Rv(d, t, k)])
                if not v0:
                    const_ub = min(const_ub, float(c0))
                elif c0 < 1:
                    ubs.append((float(c0), 1.0, v0))
                if not isinstance(nxt, int):
                    ubs.append((1.0, -1.0, [nxt]))
                for j in later:
                    if j > k:
                        rj = Rv(d, t, j)
                        if isinstance(rj, int):
                            if rj:
                                const_ub = 0.0
                        else:
                            ubs.append((1.0, -1.0, [rj]))
                if const_ub <= 0.0:
                    continue
                if not ubs:  # constants only: freed here exactly when the decoder frees it
                    free_c[k] += mb[i] * const_ub
                    continue
                f = m.addVar(vtype="C", lb=0.0, ub=const_ub, name=f"F_{d}_{t}_{i}_{k}")
                self._ubs[f.name] = [(const_ub, 0.0, [])] + ubs
                for c, c1, vs in ubs:
                    if c1 > 0:
                        m.addCons(f - quicksum(vs) <= c)
                    else:
                        m.addCons(f + quicksum(vs) <= c)
                    self._rows += 1
                if k + 1 < K and mb[i] > 0:
                    var_terms.setdefault(k + 1, []).append((-float(mb[i]), f))
        for k in np.flatnonzero(fnode).tolist():  # arrivals of free nodes
            c, vs = split(arrivals(d, t, k))
            arr_c[k] += mb[k] * c
            if mb[k] > 0 and vs:
                var_terms.setdefault(k, []).extend((float(mb[k]), x) for x in vs)
        init_c = 0.0
        for i in range(p_t + 1) if self.R0 is None else np.flatnonzero(fnode[: p_t + 1]).tolist():
            s = Sv(d, t, i)
            if not isinstance(s, int) and mb[i] > 0:
                var_terms.setdefault(0, []).append((float(mb[i]), s))
        if self.S0 is not None:
            const_s = ~np.array([(d, t, i) in self.S for i in range(p_t + 1)], dtype=bool) if p_t >= 0 else []
            init_c = float(mb[: p_t + 1][const_s] @ self.S0[d, t, : p_t + 1][const_s]) if p_t >= 0 else 0.0
        delta = arr_c.copy()
        delta[1:] -= free_c[:-1]
        Mc = init_c + np.cumsum(delta)
        events = sorted(var_terms)
        prev, prev_k = None, None
        for n_ev, k in enumerate(events):
            nxt_k = events[n_ev + 1] if n_ev + 1 < len(events) else K
            excess = max(0.0, float(Mc[k:nxt_k].max() - Mc[k]))
            const = float(Mc[k] - (Mc[prev_k] if prev is not None else 0.0))
            u = m.addVar(vtype="C", lb=0.0, ub=max(0.0, float(cap_d) - excess), name=f"U_{d}_{t}_{k}")
            terms = ([(1.0, prev)] if prev is not None else []) + var_terms[k]
            m.addCons(u - quicksum(c * x for c, x in terms) == const)
            self._rows += 1
            self._udefs.append((u, prev, const, var_terms[k]))
            prev, prev_k = u, k

    # --------------------------------------------------------------- sizes
    @property
    def n_vars(self) -> int:
        return len(self.R) + len(self.S) + len(self.X) + len(self._ubs) + len(self._udefs)

    @property
    def n_rows(self) -> int:
        return self._rows

    # -------------------------------------------------------------- values
    def arrays(self, value_of):
        """Full staged arrays ``(R, S, X)`` from a ``var -> value`` function
        (the fixed part from ``fix``)."""
        D, T, n = self.problem.n_devices, self.T, self.problem.graph.n
        R = np.zeros((D, T, n), dtype=bool) if self.R0 is None else self.R0.copy()
        S = np.zeros((D, T, n), dtype=bool) if self.S0 is None else self.S0.copy()
        X = np.zeros((D, D, T, n), dtype=bool) if self.X0 is None else self.X0.copy()
        for key, x in self.R.items():
            R[key] = value_of(x) > 0.5
        for key, x in self.S.items():
            S[key] = value_of(x) > 0.5
        for key, x in self.X.items():
            X[key] = value_of(x) > 0.5
        return R, S, X

    def decode(self, sol, meta: dict | None = None):
        """The plan of a SCIP solution."""
        m = self.model
        return decode(self.problem, *self.arrays(lambda x: m.getSolVal(sol, x)), meta, self.ends)

    def add_start(self, arrays, extra: dict | None = None) -> str:
        """A full start from staged arrays (FREE and U as the model defines
        them; ``extra``: values of further variables by name), checked with
        ``checkSol``; else a partial one.  Returns ``"full"``, ``"partial"``
        or ``"none"``."""
        Ra, Sa, Xa = arrays
        m = self.model
        val: dict = {}
        for key, x in self.R.items():
            val[x.name] = float(Ra[key])
        for key, x in self.S.items():
            val[x.name] = float(Sa[key])
        for key, x in self.X.items():
            val[x.name] = float(Xa[key])

        def get(x):
            return val[x.name]

        for name, ubs in self._ubs.items():
            val[name] = max(0.0, min([1.0] + [c0 + c1 * sum(get(x) for x in vs) for c0, c1, vs in ubs]))
        by_name = {v.name: v for v in m.getVars()}
        for u, prev, const, terms in self._udefs:
            val[u.name] = const + (val[prev.name] if prev is not None else 0.0) + sum(c * get(x) for c, x in terms)
        val.update(extra or {})
        sol = m.createSol()
        for name, x in val.items():
            m.setSolVal(sol, by_name[name], x)
        if m.checkSol(sol, printreason=False, original=True):
            m.addSol(sol, free=True)
            return "full"
        m.freeSol(sol)
        if not self.R and not self.X:
            return "none"
        ps = m.createPartialSol()
        for key, x in self.R.items():
            m.setSolVal(ps, x, float(Ra[key]))
        for key, x in self.X.items():
            m.setSolVal(ps, x, float(Xa[key]))
        m.addSol(ps)
        return "partial"
