"""SCIP's statuses and dual bounds as the library reads them: one status
map (cvxpy's ``STATUS_MAP`` style) and the trusted-bound rule (see the
package docstring).

Examples
--------
>>> status_of("gaplimit", has_solution=True), LIMIT_STATUSES >= {"timelimit", "userinterrupt"}
('feasible', True)
"""

from __future__ import annotations

__all__ = ["STATUS_MAP", "LIMIT_STATUSES", "status_of", "trusted_dual", "INFINITY", "BOUND_RTOL"]


#: SCIP's "infinity" as pyscipopt reports it
INFINITY = 1e20

#: SCIP status -> what it proves: "optimal", "infeasible", "limit" (stopped early) or "error"
STATUS_MAP = {
    "optimal": "optimal",
    "infeasible": "infeasible",
    "unbounded": "error",
    "inforunbd": "error",
    **{s: "limit" for s in (
        "timelimit", "nodelimit", "totalnodelimit", "stallnodelimit", "gaplimit", "sollimit", "bestsollimit",
        "memlimit", "restartlimit", "userinterrupt", "primallimit", "duallimit", "unknown")},
}

#: SCIP statuses that mean "stopped early" rather than "proved something"
LIMIT_STATUSES = frozenset(k for k, v in STATUS_MAP.items() if v == "limit")

#: relative optimality tolerance of a scaled objective (SCIP's dual feasibility tolerance is 1e-7)
BOUND_RTOL = 1e-6


def status_of(scip_status: str, has_solution: bool) -> str:
    """The library's status for a SCIP status string.

    ``optimal``/``infeasible`` as SCIP proved them (in the model's class),
    ``feasible`` or ``no_solution`` at a limit, ``error`` otherwise.
    """
    kind = STATUS_MAP.get(str(scip_status), "error")
    if kind == "optimal":
        return "optimal" if has_solution else "error"
    if kind == "infeasible":
        return "infeasible"
    if kind == "limit":
        return "feasible" if has_solution else "no_solution"
    return "error"


def trusted_dual(model, status: str | None = None) -> float | None:
    """SCIP's dual bound (model units) when the rule of the package docstring
    trusts it, else ``None``.  Call it from the SCIP thread or after a solve."""
    db = model.getDualbound()
    if not abs(db) < 1e19:
        return None
    if status in ("optimal", "infeasible"):
        return float(db)
    pb = model.getPrimalbound()
    if abs(pb) >= 1e19 or db < pb - 1e-9 * max(1.0, abs(pb)):
        return float(db)
    return None
