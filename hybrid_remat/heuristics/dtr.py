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
recomputed at the next use).  The compute sequence is then pruned of
recomputations the budget does not need.  Deterministic for a seed.

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
from .common import GraphArrays, finish, prune_sequence, run_executor, score_code

__all__ = ["DTR"]


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
    """

    version = "1"
    capabilities = frozenset({"dag", "chain", "single_device", "needs_budget"})

    def __init__(self, score: str = "dtr_eq", *, prune: bool = True, name: str | None = None, rank: float = 2.0):
        score_code(score)
        self.score = score
        self.prune = prune
        self.name = name or f"dtr_{score}"
        self.rank = rank

    def run(self, problem, *, seed: int = 0):
        a = GraphArrays.from_problem(problem)
        res = run_executor(a, score=self.score, seed=seed)
        if not res.ok:
            return None
        seq = prune_sequence(a, res.seq) if self.prune else res.seq
        return finish(problem, a, seq, self.name, score=self.score, seed=seed)
