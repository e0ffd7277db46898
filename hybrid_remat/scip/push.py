"""Plans from outside tried inside a running solve (a SCIP primal heuristic)."""

from __future__ import annotations

import queue

__all__ = ["PushHeuristic"]

class PushHeuristic:
    """Plans from outside tried inside a running solve (a SCIP primal heuristic).

    ``push(values)`` (any thread) queues a complete assignment
    ``{variable name: value}``; SCIP's thread tries each at its next
    heuristic call with ``trySol``.  Variables fixed or aggregated by
    presolve are left to SCIP.  Counts go to ``stats`` (``pushed``,
    ``push_accepted``, ``push_rejected``, ``push_error``).

    Examples
    --------
    >>> from hybrid_remat.scip import run, scip_model
    >>> with scip_model() as m:
    ...     x = m.addVar("x", vtype="I", ub=5, obj=-1.0)
    ...     h = PushHeuristic.include(m, "demo")
    ...     h.push({"x": 5.0})
    ...     run(m).status
    'optimal'
    """

    def __init__(self, model, stats: dict | None = None):
        self.model = model
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.stats = stats if stats is not None else {}
        self._by_name = None

    def push(self, values: dict) -> None:
        self.queue.put(values)
        self.stats["pushed"] = self.stats.get("pushed", 0) + 1

    @classmethod
    def include(cls, model, name: str, description: str = "plans pushed from outside", stats: dict | None = None):
        """Create one and include it in ``model`` (before solving)."""
        from pyscipopt import SCIP_HEURTIMING, SCIP_RESULT, Heur

        me = cls(model, stats)
        me._by_name = {v.name: v for v in model.getVars()}

        class _Heur(Heur):
            def heurexec(self, heurtiming, nodeinfeasible):
                return {"result": me._try_all(self.model, self, SCIP_RESULT)}

        model.includeHeur(_Heur(), f"hr_{name}", description, "Y",
                          timingmask=SCIP_HEURTIMING.AFTERLPNODE | SCIP_HEURTIMING.AFTERPSEUDONODE
                          | SCIP_HEURTIMING.BEFORENODE, freq=1)
        return me

    def _try_all(self, m, heur, RES):
        result = RES.DIDNOTRUN
        while True:
            try:
                values = self.queue.get_nowait()
            except queue.Empty:
                return result
            if result == RES.DIDNOTRUN:
                result = RES.DIDNOTFIND
            try:
                sol = m.createSol(heur)
                for name, x in values.items():
                    var = self._by_name.get(name)
                    if var is None:
                        continue
                    tvar = m.getTransformedVar(var)
                    if tvar.getStatus() not in ("LOOSE", "COLUMN"):
                        continue  # fixed or aggregated by presolve: SCIP derives its value
                    m.setSolVal(sol, tvar, x)
                if m.trySol(sol, printreason=False):
                    result = RES.FOUNDSOL
                    self.stats["push_accepted"] = self.stats.get("push_accepted", 0) + 1
                else:
                    self.stats["push_rejected"] = self.stats.get("push_rejected", 0) + 1
            except Exception as e:  # never raise inside SCIP
                self.stats["push_error"] = repr(e)
