"""Plans in another topological order: sinks deferred (``sinks_last``) or
the memory-greedy order (``memory_order``).

Every heuristic but the search ones follows the graph's reference order, and
so does the staged model (it models the incumbent's order).  A *sink* (a
node no other node reads, e.g. a weight gradient) computed where the
reference order puts it allocates its output when the memory of the values
still waiting for the backward pass is high; computed at the end, after
every other node, it needs only its own inputs kept until then.  On
``vgg16_b16`` at 50 % the 411 MB gradient of the first classifier weight
is such a sink: in the reference order every plan recomputes 3.4 % of the
work, with the sinks last the same heuristics reach 1.490 %, which is the
cut bound, so that plan is optimal over every plan.

:class:`SinksLast` relabels the problem along each candidate order (all
sinks last; only the sinks whose output outweighs their inputs last), runs
fast heuristics on it and maps the best simulated plan back.  It is one
more heuristic: the portfolio keeps the better of its plan and the others.
:class:`MemoryOrder` does the same in the memory-greedy order
(:func:`~hybrid_remat.core.reductions.memory_greedy_order`: next the ready
node that adds the least memory); on ``mlp_chain_b256`` at 70 % it gives
4.363 % where the reference-order heuristics give 4.711 %.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> deferred_sink_orders(chain(3)) == []        # no sink but the last node: nothing to reorder
True
"""

from __future__ import annotations

import numpy as np

from ..interfaces import Heuristic
from ..limits import Limits

__all__ = ["SinksLast", "MemoryOrder", "deferred_sink_orders", "INNER", "ITEM_SECONDS"]

#: the heuristics run on each reordered problem (fast ones)
INNER = ("dtr_eq", "dtr", "split", "local_search")
#: CPU seconds per node and edge of the Python passes that run before any inner heuristic can look at the
#: clock: a relabelling, and the memory-greedy order (each 4-7 us of wall per item measured at 10k-30k nodes on
#: random layered graphs, decoders and U-Nets on the shared 2-core machine at load 4-5, i.e. about 2 us of CPU;
#: 3 here).  Neither can be interrupted, so they start only where the time left covers them (at the share of a
#: core the load leaves): at 10k nodes and a 0.3 s limit, memory_order took 1.0 s before
ITEM_SECONDS = 3e-6


def pass_seconds(graph) -> float:
    """Predicted wall seconds of one uninterruptible pass (a relabelling or
    the memory-greedy order) over ``graph`` on this machine now."""
    from .common import cpu_share

    return ITEM_SECONDS * (graph.n + graph.m) / cpu_share()


def deferred_sink_orders(graph) -> list[np.ndarray]:
    """Topological orders that move sinks to the end (in their relative
    order): every sink, then only those whose output is larger than their
    inputs together; distinct and not the identity.

    Examples
    --------
    >>> from hybrid_remat.graph import Graph
    >>> g = Graph.from_arrays([1, 1, 9, 1], [(0, 1), (0, 2), (1, 3)], [1.0] * 4)
    >>> [o.tolist() for o in deferred_sink_orders(g)]
    [[0, 1, 3, 2]]
    """
    n = graph.n
    nsucc = np.diff(graph.succ_ptr)
    sinks = np.flatnonzero(nsucc == 0)
    b = np.asarray(graph.bytes, dtype=np.int64)
    heavy = np.array([v for v in sinks.tolist() if b[v] > int(b[graph.preds(v)].sum())], dtype=np.int64)
    out, seen = [], set()
    for moved in (sinks, heavy):
        if moved.size == 0:
            continue
        keep = np.ones(n, dtype=bool)
        keep[moved] = False
        order = np.concatenate([np.flatnonzero(keep), moved]).astype(np.int64)
        key = order.tobytes()
        if key in seen or np.array_equal(order, np.arange(n)):
            continue
        seen.add(key)
        out.append(order)
    return out


class SinksLast(Heuristic):
    """Fast heuristics in the deferred-sink orders (module docstring).
    When no order differs from the reference one, or none gave a valid
    plan, the first of :data:`INNER` in the reference order.  Single
    device; honours its limits (each inner run gets a share of the time
    left)."""

    name = "sinks_last"
    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})
    rank = 3.5
    #: above this many nodes the orders and the inner runs take more than the
    #: first phase's second (measured at 100k nodes: 0.6-10 s, no plan on
    #: random layered graphs and U-Nets; benchmarks/heuristic_scaling.py)
    max_nodes = 30_000

    def applicable(self, problem) -> tuple[bool, str]:
        if not problem.is_single_device:
            return False, "single device only"
        if problem.graph.n > self.max_nodes:
            return False, f"above {self.max_nodes} nodes (reordering and its inner runs take seconds)"
        return True, ""

    def orders(self, graph, limits: Limits | None = None) -> list[np.ndarray]:
        """The candidate orders (not the identity)."""
        return deferred_sink_orders(graph)

    def run(self, problem, *, seed: int = 0, limits: Limits | None = None):
        from .. import plugins
        from ..core.reductions import plan_to_original, relabel
        from ..simulate import simulate

        limits = limits or Limits()
        if not problem.is_single_device:
            return None
        registry = plugins.heuristics()
        inner = [registry[nm] for nm in INNER if nm in registry]
        best, best_val = None, float("inf")
        if limits.expired():
            return None
        orders = self.orders(problem.graph, limits)
        runs = max(1, len(orders) * len(inner))
        for order in orders:
            # the orders and each relabelling take O(n) Python work (0.3-1 s at 10k-30k nodes) that cannot stop
            if limits.expired():
                return best
            if limits.left() < pass_seconds(problem.graph):
                break       # no time to relabel: the reference order's first inner heuristic, with the time left
            q, _ = relabel(problem, order)
            for h in inner:
                if limits.expired():
                    return best
                left = limits.left()
                share = limits.share(left / runs if np.isfinite(left) else None)
                runs = max(1, runs - 1)
                plan = h.run(q, seed=seed, limits=share)
                if plan is None:
                    continue
                sim = simulate(q, plan)
                if sim.valid and q.objective.value(sim) < best_val:
                    best, best_val = plan_to_original(plan, order), q.objective.value(sim)
                    best.meta.update(solver=self.name, inner=h.name)
        if best is None and inner and not limits.expired():  # no other order (or nothing there): the reference one
            best = inner[0].run(problem, seed=seed, limits=limits)
        return best


class MemoryOrder(SinksLast):
    """Fast heuristics in the memory-greedy order (module docstring); the
    reference order's first inner heuristic when that order is the
    identity or gives no valid plan."""

    name = "memory_order"
    version = "1"
    rank = 3.6

    def orders(self, graph, limits: Limits | None = None) -> list[np.ndarray]:
        """The memory-greedy order, computed once per graph; none (the reference order) where it is not
        computed yet and the time left does not cover it and a relabelling."""
        from ..core.reductions import memory_greedy_order

        cached = "memory_greedy_order" in graph.__dict__.get("_derived", {})
        if not cached and limits is not None and limits.left() < 2.0 * pass_seconds(graph):
            return []
        order = graph.derived("memory_greedy_order", memory_greedy_order)   # 0.6 s at 10k nodes: once per graph
        return [] if np.array_equal(order, np.arange(graph.n)) else [order]
