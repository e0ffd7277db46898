"""Encoding plans into the staged Checkmate model and decoding its solutions.

Decoding takes ``S`` from a solution, the minimal ``R`` for it
(:func:`~hybrid_remat.core.staged.solve_r_opt`, never costlier and never
more memory than the solution's own ``R``),
:func:`~hybrid_remat.core.staged.plan_from_staged` and the simulator.
Encoding takes any staged plan
(:func:`~hybrid_remat.core.staged.staged_rs`), derives ``FREE``, ``FS`` and ``U``
exactly as the model defines them and checks the start with
``checkSol(original=True)`` before ``addSol``.

The plan <-> ``R``/``S`` conversions themselves are the shared staged
encoding (:mod:`hybrid_remat.core.staged`); this module adds what depends on
the model's variables (:class:`StagedEncoding`, a base class of
:class:`~hybrid_remat.exact.checkmate.model.CheckmateModel`).

Examples
--------
>>> from hybrid_remat.exact.checkmate import CheckmateModel
>>> from hybrid_remat.generators import chain
>>> from hybrid_remat.plan import keep_all_plan
>>> from hybrid_remat.problem import Problem
>>> p = Problem.single(chain(4, bytes=1), "100%")
>>> with CheckmateModel(p) as cm:
...     cm.add_start(keep_all_plan(p.graph, "cost"))
('full', '')
"""

from __future__ import annotations

import numpy as np

from ...core.staged import plan_from_staged, sinks, solve_r_opt, staged_rs
from ...errors import PlanError
from ...plan import Plan

__all__ = ["StagedEncoding"]


def _const(x) -> bool:
    return isinstance(x, (int, float))


class StagedEncoding:
    """Plans <-> variable values of a staged Checkmate model.

    Expects the attributes a :class:`~.model.CheckmateModel` builds
    (``graph``, ``problem``, ``starts``, ``T``, ``R``, ``S``, ``F``, ``FS``,
    ``scale``, ``free_mask``, ``R0``, ``S0``, ``recompute_cap``, ``model``).
    """

    # --------------------------------------------------------------- decoding
    def s_from_values(self, value_of) -> np.ndarray:
        """``S`` (T x n bool) from a ``var -> value`` function."""
        S = np.zeros((self.T, self.graph.n), dtype=bool)
        if self.S0 is not None:
            S[:, ~self.free_mask] = self.S0[:, ~self.free_mask]
            S[:, sinks(self.graph)] = False
        for (s, i), v in self.S.items():
            if value_of(v) > 0.5:
                S[s, i] = True
        return S

    def plan_from_s(self, S, meta: dict | None = None) -> Plan:
        """Decode ``S`` with the minimal ``R`` (see :func:`~hybrid_remat.core.staged.solve_r_opt`)."""
        R = solve_r_opt(self.graph, S, self.starts)
        return plan_from_staged(self.graph, R, S, self.problem.primary.name, meta, self.starts)

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
        """Block-staged ``R``/``S`` of a plan for this model's stages (:func:`~hybrid_remat.core.staged.staged_rs`)."""
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
            fixed = ~self.free_mask & ~sinks(g)
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
