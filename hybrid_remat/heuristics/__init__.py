"""Fast planners (Numba kernels) and the improvers built on them, each a
registered plugin object.

:func:`builtin_heuristics` lists the single-device portfolio in order of
cost (``rank``); :func:`builtin_improvers` the improver family
(``drop_recomputations``, ``local_search``, ``lns``, ``segment_resolve``); :func:`warmup`
compiles every kernel on tiny inputs (call it outside any user time limit).

Nothing here imports :mod:`hybrid_remat.exact`; both build on
:mod:`hybrid_remat.core`.
"""

from __future__ import annotations

__all__ = ["builtin_heuristics", "builtin_improvers", "warmup"]


def builtin_heuristics() -> list:
    """The built-in single-device heuristics, cheapest first."""
    from .checkpoints import ChenGreedy, ChenSqrtN
    from .dtr import DTR
    from .keep_all import KeepAll
    from .lifetime_split import LifetimeSplit
    from .local_search import LocalSearch
    from .rotor import Rotor
    from .staged_evict import StagedEvict

    hs = [
        KeepAll(),
        ChenSqrtN(rank=1.0),
        ChenSqrtN(use_aps=True, rank=1.1),
        DTR("dtr_eq", name="dtr_eq", rank=2.0),
        DTR("belady", name="dtr_belady", rank=2.05),
        DTR("next_use_full", name="dtr_next_use", rank=2.1),
        DTR("dtr", name="dtr", rank=2.2),
        DTR("lru", name="dtr_lru", rank=2.3, max_nodes=30_000,
            why_not="LRU eviction thrashes on wide graphs: 2.3 s for no plan at 100k nodes on random layered ones"),
        DTR("size", name="dtr_size", rank=2.4),
        LifetimeSplit(rank=3.0),
        Rotor(rank=4.0),
        StagedEvict(),
        ChenGreedy(rank=6.0),
        ChenGreedy(use_aps=True, rank=6.1),
        LocalSearch(time_limit=0.7),
    ]
    return sorted(hs, key=lambda h: h.rank)


def builtin_improvers() -> list:
    """The improver family, cheapest first."""
    from .local_search import LNS, DropRecomputations, LocalSearch
    from .segment_resolve import SegmentResolve

    return [DropRecomputations(), LocalSearch(rank=10.0), LNS(), SegmentResolve()]  # (the heuristic local_search ranks last: 50)


def warmup() -> None:
    """Compile (or load from cache) every heuristic kernel on a tiny graph."""
    import networkx as nx
    import numpy as np

    from ..budgets import keep_all_peak, min_feasible_budget
    from ..generators import training_graph
    from ..limits import Limits
    from ..problem import Problem
    from .revolve import revolve_dp, revolve_dp_costs

    g = training_graph(nx.path_graph(4, create_using=nx.DiGraph))
    p = Problem.single(g, max(min_feasible_budget(g), int(0.8 * keep_all_peak(g))))
    # small work budgets (no deadline: a cold cache compiles for seconds): the kernels compile on their
    # first call, the searches need not run long
    for h in builtin_heuristics():
        h.run(p, limits=Limits(work=5_000))
    start = builtin_heuristics()[-1].run(p, limits=Limits(work=5_000))
    for imp in builtin_improvers():
        imp.improve(p, start, limits=Limits(work=5_000))
    revolve_dp(3, 2)
    revolve_dp_costs(np.ones(3), 2)
