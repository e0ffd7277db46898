"""The *frontier cut bound*: the cut bound with every node that is neither an
ancestor nor a descendant of the cut placed before or after it (a 0/1
choice), so that a value computed before the cut and read after it counts
even when it is not an ancestor of the cut node (a weight gradient that a
later node adds to, the output of a side branch).  Valid for every
single-device plan in any order; serial time.

The cut bound (:mod:`hybrid_remat.bounds.cut`) looks at one moment, the
first computation of a node ``t``, and only at ``t``'s ancestors.  A node
``s`` off ``t``'s ancestry is invisible there: on ``gpt2_small_b4_s512``
the 154 MB gradient of the tied embedding (``mm`` after the loss, read by
the last node) is computed before every backward cut in the reference
order, but the cut bound never counts it.

Model at a cut ``t``.  ``A``: ``t``'s strict ancestors, ``D``: its strict
descendants, ``P``: its inputs, ``O``: every other node but ``t``.  For
``v`` in ``A`` and ``O``: ``b[v]`` (``v``'s first computation precedes
``t``'s; fixed to 1 on ``A``, and taken as 0 on ``D`` and ``t``),
``x[v]`` (resident at that moment; not for ``P``, which is) and ``z[v]``
(``v`` computed again after that moment).  Rows:

1. order: ``b[v] <= b[u]`` for every edge ``u -> v`` (an input is computed
   before its reader's first computation);
2. ``x[v] <= b[v]`` and ``z[v] <= b[v]``;
3. need: ``x[v] + z[v] >= b[v] - b[w]`` for every edge ``v -> w`` with
   ``v`` not in ``P`` and ``w`` in ``D`` or ``O`` (``b[w] = 0`` on ``D``);
4. chains: ``x[u] + z[u] + 1 - b[u] >= z[v]`` for every input ``u`` of
   ``v`` not in ``P``;
5. memory: ``sum of bytes(v) x[v] <= B - bytes(t) - bytes(P)``.

Objective: ``sum of c[v] z[v]``.

Proof.  Take any valid plan and define ``b[v]`` = 1 iff ``v``'s first
computation comes before ``t``'s, ``x[v]`` = 1 iff ``v`` is resident while
``t`` is first computed, ``z[v]`` = 1 iff ``b[v] = 1`` and ``v`` is computed
at some step after that moment.  Every node of ``A`` is computed before
``t`` (its first computation reads its inputs), no node of ``D`` is (each
needs ``t``).  Row 1: a node's first computation reads its inputs, which
were computed before it.  Row 2: resident means computed before; ``z``
was defined so.  Row 3: if ``b[v] = 1`` and ``b[w] = 0``, ``w``'s first
computation comes after ``t``'s and reads ``v``; ``v`` was computed
before ``t``, so it is resident at ``t``'s moment or computed again between
the two (``z[v] = 1``).  Row 4: if ``z[v] = 1``, at that later computation
of ``v`` each input ``u`` is resident: ``u`` was resident at ``t``'s moment,
or computed after it, which is a recomputation (``z[u] = 1``) when
``b[u] = 1`` and otherwise ``1 - b[u] = 1``; inputs of ``t`` are resident
then, so they need no row.  Row 5: while ``t`` is computed its inputs, its
output and every ``x[v] = 1`` are resident, distinct nodes, within the
budget (the simulator counts memory after each allocation).  Each
``z[v] = 1`` is a computation of ``v`` besides its first (distinct nodes
``v``), so the objective is at most the plan's recomputation cost:
``base cost`` plus the least objective bounds every plan, and so does SCIP's
dual bound of it (valid at any node or time limit; its feasibility
tolerance only enlarges the region).  With ``O`` empty (every ``b``
fixed) the model is the cut bound's chains model at ``t``.  Costs are
scaled (``ObjectiveScale``), the memory row divided by the budget.

Examples
--------
>>> from hybrid_remat.graph import Graph
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.bounds.cut import cut_lower_bound
>>> from hybrid_remat.oracle import brute_force
>>> # a chain 0-1-2-4 with a big side value 3 (read by the last node)
>>> g = Graph.from_arrays([1, 1, 1, 3, 1], [(0, 1), (1, 2), (2, 4), (0, 3), (3, 4)], [1.0, 1, 1, 5, 1])
>>> p = Problem.single(g, 5)
>>> cut_lower_bound(p).value <= frontier_cuts_lower_bound(p).value <= brute_force(p)[0]
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..interfaces import ALL_PLANS, SERIAL_BOUND_CAPABILITIES, Bound, BoundResult
from ..limits import Limits, now

__all__ = ["FrontierCutsBound", "FrontierCutsResult", "frontier_cuts_lower_bound", "MAX_NODES"]

#: graphs above this size are left to the other bounds (the model is built in Python)
MAX_NODES = 2_000
#: cuts solved at most (the screen's heaviest)
MAX_CUTS = 24
#: SCIP node limit per cut
_NODE_LIMIT = 500


@dataclass
class FrontierCutsResult:
    """``value = base + extra`` bounds every plan's serial time; ``node``: the binding cut (-1: none)."""

    value: float
    extra: float
    node: int
    stats: dict = field(default_factory=dict, repr=False)


def _cut_extra(problem, t: int, limits) -> float | None:
    """SCIP's dual bound of the model at cut ``t`` (real units), ``inf`` when
    infeasible, ``None`` when stopped before a bound."""
    from pyscipopt import quicksum

    from ..scip import ObjectiveScale, cap_nodes, run, scip_model
    from .cut import reach

    g = problem.graph
    cost = np.asarray(problem.cost_matrix[0], dtype=np.float64)
    size = [int(s) for s in g.bytes]
    B = float(problem.budgets[0])
    anc, desc = reach(g, t, up=True), reach(g, t, up=False)
    P = set(g.preds(t).tolist())
    room = int(problem.budgets[0]) - size[t] - sum(size[u] for u in P)  # exact integers (bytes to 5e17)
    if room < 0:
        return math.inf
    live = [v for v in range(g.n) if v != t and not desc[v]]  # A and O
    sc = ObjectiveScale.of(cost)
    with scip_model("frontier_cuts") as m:
        b, x, z = {}, {}, {}
        for v in live:
            b[v] = 1.0 if anc[v] else m.addVar(f"b_{v}", vtype="B")
            if v not in P:
                x[v] = m.addVar(f"x_{v}", vtype="B")
                z[v] = m.addVar(f"z_{v}", vtype="B", obj=sc.coef(float(cost[v])))
                if not anc[v]:
                    m.addCons(x[v] <= b[v])  # 2.
                    m.addCons(z[v] <= b[v])
        for v in live:
            if limits.expired():
                return None
            if not anc[v]:
                for u in g.preds(v).tolist():  # 1. order
                    if not anc[u]:
                        m.addCons(b[v] <= b[u])
            if v in P:
                continue
            for w in g.succs(v).tolist():  # 3. need
                if w == t:
                    continue
                bw = 0.0 if desc[w] else b[w]
                if isinstance(bw, float) and isinstance(b[v], float):
                    if b[v] - bw > 0:
                        m.addCons(x[v] + z[v] >= 1.0)
                else:
                    m.addCons(x[v] + z[v] >= b[v] - bw)
            for u in g.preds(v).tolist():  # 4. chains
                if u in P:
                    continue
                m.addCons(x[u] + z[u] + (1.0 - b[u]) >= z[v])
        if x:  # 5. memory
            m.addCons(quicksum((size[v] / B) * x[v] for v in x) <= room / B)
        res = run(m, limits=cap_nodes(limits, limits.nodes or _NODE_LIMIT))
        res.reraise()
        if res.status == "infeasible":
            return math.inf
        if res.dual is None or abs(res.dual) >= 1e19:
            return None
        return max(0.0, sc.bound(res.dual))


def frontier_cuts_lower_bound(problem, *, cuts=None, max_cuts: int = MAX_CUTS,
                              limits: Limits | None = None) -> FrontierCutsResult:
    """The frontier cut bound (module docstring): the best over ``cuts``
    (default: the cut screen's heaviest ``max_cuts`` cuts; every node on
    graphs of at most ``max_cuts`` nodes), each given half the time left.

    Raises
    ------
    ValueError
        On a multi-device problem.
    """
    from .cut import _STEPS_PER_SECOND
    from .multicut import _screen

    if not problem.is_single_device:
        raise ValueError("the frontier cut bound covers single-device problems only")
    limits = limits or Limits()
    t0 = now()
    base = float(problem.base_cost)
    g = problem.graph
    if g.n > MAX_NODES:
        return FrontierCutsResult(base, 0.0, -1, {"skipped": f"more than {MAX_NODES} nodes"})
    if cuts is None:
        if g.n <= max_cuts:
            cuts = list(range(g.n))
        else:
            screen = limits.share(0.1 * limits.left() if math.isfinite(limits.left()) else None)
            weight = _screen(problem, screen.work_for(_STEPS_PER_SECOND))
            cuts = [int(v) for v in np.argsort(-weight, kind="stable")[:max_cuts]]
    best, node, done = 0.0, -1, 0
    for i, t in enumerate(cuts):
        if limits.expired():
            break
        left = limits.left()
        # half the time left per cut (all of it for the last): the heaviest cuts come first and most solve
        # in a fraction of their share, so a short share (the portfolio's first probe) still proves the first
        lim = limits.share(left / (2 if i + 1 < len(cuts) else 1)) if math.isfinite(left) else limits
        val = _cut_extra(problem, int(t), lim)
        done += 1
        if val is not None and val > best:
            best, node = val, int(t)
            if math.isinf(val):
                break
    stats = {"seconds": now() - t0, "cuts": done}
    return FrontierCutsResult(base + best, best, node, stats)


class FrontierCutsBound(Bound):
    """The frontier cut bound as a registered bound (``frontier_cuts_bound``,
    scope: every plan; serial time, one device, up to :data:`MAX_NODES`
    nodes).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> from hybrid_remat.problem import Problem
    >>> r = FrontierCutsBound().bound(Problem.single(chain(6, bytes=1), 3))
    >>> r.scope, r.value >= 6.0
    ('all plans', True)
    """

    name = "frontier_cuts_bound"
    version = "1"
    capabilities = SERIAL_BOUND_CAPABILITIES
    rank = 6.6
    bound_scope = ALL_PLANS

    def applicable(self, problem) -> tuple[bool, str]:
        from .cut import serial_single_device

        return serial_single_device(problem, max_nodes=MAX_NODES)

    def bound(self, problem, *, limits: Limits | None = None) -> BoundResult:
        r = frontier_cuts_lower_bound(problem, limits=limits)
        return BoundResult(r.value, ALL_PLANS, {"extra": r.extra, "node": r.node, **r.stats})
