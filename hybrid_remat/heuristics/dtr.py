"""DTR-style eviction heuristics (Kirisame et al., ICLR 2021), offline.

The graph runs in the reference order under the budget; when memory is
short the resident, unpinned value with the lowest score is evicted, and
evicted inputs are recomputed on demand, recursively
(:func:`~hybrid_remat.heuristics.executor.execute_kernel`).  Scores
(``score=``): ``"dtr"`` = cost / (bytes x staleness) (h_DTR^local),
``"dtr_eq"`` = the equivalence-class variant (evicted neighbours merged by
union-find), ``"lru"``, ``"size"``, ``"msps"``, and offline variants that
know each value's next reader (``"next_use"``, ``"next_use_eq"``,
``"next_use_full"``: cost of every ancestor that would have to be
recomputed at the next use; ``"belady"``: the same score kept in a heap,
keyed when a value is computed or read and re-keyed lazily when it comes up
as the victim, so an eviction costs a few heap operations instead of a
sample of scores: 0.03-0.08 CPU s at 10k nodes on six families where
``next_use_full`` takes 0.16-0.37 s, and a plan on every family where
``next_use_full`` gives one, at 50 % and 30 %, also the U-Net at 30 %).  The compute sequence is then pruned of
recomputations the budget does not need.  Deterministic for a seed and a
work budget.  ``lru`` and ``size`` pick their victims from a heap; the
other scores score every resident value while there are at most
``scan_all`` of them, else a seeded sample of ``sample``, so a run is
near-linear in the graph size; above :data:`SAMPLING_NODES` nodes both
shrink in proportion (at least 32), so that a run stays near 1 s at 100k
nodes (``benchmarks/results/heuristic_scaling.md``: 4.2 -> 0.8 CPU s for
``dtr_next_use`` on the 100k-node random layered graph, TDI 6.9 -> 7.3 %).

Thrashing.  A run gives up after :data:`STEP_FACTOR` ``n + 1000`` steps
(computes and frees): on the six graph families at 10k nodes, 50 % and 30 %,
every run that gave a plan took at most ``3.2 n`` steps but one (LRU on the
ResNet stages, ``6.8 n``, a plan the other scores beat), while the runs that
thrash (most scores on random layered graphs) used the whole former limit of
``10 n`` before failing: 0.6-2.3 s for no plan at 100k nodes.  At target ``t`` it also gives up after
``1000 + STEP_FACTOR (t + 1)`` steps (the kernel's pace limit): a run that thrashes from the backward's
start stops there (``dtr_size`` at 100k nodes on random layered graphs: 111k computations instead of 197k,
0.35 CPU s instead of 0.62 at load 7; the runs that plan take the same steps).  ``max_nodes``
(``dtr_lru``: 30k) declines larger graphs.

Deadlines.  From :data:`~hybrid_remat.heuristics.common.WATCH_NODES` nodes the kernel stops at the deadline by
its stop flag (:func:`~hybrid_remat.heuristics.common.stop_flag`), not by a work budget sized from a measured rate
(which overran on loaded or niced machines); a stopped run gives no plan.  ``belady`` runs in
:func:`~hybrid_remat.heuristics.belady.belady_kernel` (the same steps, 3-5x faster: 0.03-0.36 CPU s at 100k nodes
on six families, ``benchmarks/results/first_plan_s33.md``).

Examples
--------
>>> from hybrid_remat.generators import random_layered
>>> from hybrid_remat.problem import Problem
>>> from hybrid_remat.simulate import simulate
>>> p = Problem.single(random_layered(60, seed=3), "90%")
>>> plan = DTR(score="next_use_full").run(p)
>>> plan is None or simulate(p, plan).valid
True
"""

from __future__ import annotations

from ..interfaces import Heuristic
from .common import SAMPLE, SCAN_ALL, GraphArrays, WorkMeter, finish, score_code

__all__ = ["DTR", "SAMPLING_NODES", "STEP_FACTOR", "sampling"]

#: graphs up to this many nodes get the full ``scan_all`` / ``sample``; larger ones proportionally fewer
SAMPLING_NODES = 12_500
MIN_SAMPLE = 32
#: a run gives up (thrashing) after ``STEP_FACTOR * n + 1000`` steps (module docstring)
STEP_FACTOR = 3.5


def sampling(n: int, scan_all: int = SCAN_ALL, sample: int = SAMPLE) -> tuple[int, int]:
    """``(scan_all, sample)`` for a graph of ``n`` nodes: as given up to
    :data:`SAMPLING_NODES`, above it scaled by ``SAMPLING_NODES / n`` (at
    least :data:`MIN_SAMPLE`), so the scoring work per run stays about
    constant instead of growing with ``n`` times the residents.

    Examples
    --------
    >>> sampling(10_000), sampling(100_000)
    ((2048, 256), (256, 32))
    """
    if n <= SAMPLING_NODES:
        return scan_all, sample
    f = SAMPLING_NODES / float(n)
    smp = max(min(sample, MIN_SAMPLE), int(sample * f))
    return max(smp, int(scan_all * f)), smp


class DTR(Heuristic):
    """Budgeted eviction with on-demand recomputation.

    Parameters
    ----------
    score : str
        Eviction score (see the module docstring).
    prune : bool
        Drop recomputations the budget does not need afterwards.
    name : str, optional
        Registered name (default ``"dtr_<score>"``).
    scan_all, sample : int
        Eviction candidates scored per eviction (every resident value up to
        ``scan_all``, else a seeded sample of ``sample``).
    scale_sampling : bool
        Fewer of both on graphs above :data:`SAMPLING_NODES` nodes
        (:func:`sampling`).
    max_nodes : int, optional
        Decline (``applicable``) graphs with more nodes.
    why_not : str
        The reason given when it declines.
    """

    version = "3"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget", "honours_limits", "deterministic"})

    def __init__(self, score: str = "dtr_eq", *, prune: bool = True, name: str | None = None, rank: float = 2.0,
                 scan_all: int = SCAN_ALL, sample: int = SAMPLE, scale_sampling: bool = True,
                 max_nodes: int | None = None, why_not: str = ""):
        score_code(score)
        self.max_nodes = max_nodes
        self.why_not = why_not
        self.scale_sampling = bool(scale_sampling)
        self.score = score
        self.prune = prune
        self.name = name or f"dtr_{score}"
        self.rank = rank
        self.scan_all = int(scan_all)
        self.sample = int(sample)

    def applicable(self, problem) -> tuple[bool, str]:
        if self.max_nodes is not None and problem.graph.n > self.max_nodes:
            return False, f"above {self.max_nodes} nodes{' (' + self.why_not + ')' if self.why_not else ''}"
        return True, ""

    def run(self, problem, *, seed: int = 0, limits=None):
        """A plan, or ``None`` when eviction fails (or thrashes: more than
        :data:`STEP_FACTOR` ``n + 1000`` steps) or ``limits`` run out (or
        ``limits.stop`` is set) before the schedule is complete (a partial
        prune still counts)."""
        a = GraphArrays.from_problem(problem)
        meter = WorkMeter(limits)
        scan_all, sample = (sampling(a.n, self.scan_all, self.sample) if self.scale_sampling
                            else (self.scan_all, self.sample))
        res = meter.execute(a, score=self.score, seed=seed, scan_all=scan_all, sample=sample,
                            max_steps=int(STEP_FACTOR * a.n) + 1000)
        if not res.ok:
            return None
        seq = meter.prune(a, res.seq) if self.prune else res.seq
        return finish(problem, a, seq, self.name, score=self.score, seed=seed)
