"""The one portfolio runner of hybrid_remat.

``anytime_solve``, the parallel workers, the hetero lift and the torch
planner are built on it:

* :mod:`~hybrid_remat.portfolio.ledger`: incumbent, bounds by scope,
  history, report, status (every plan simulated, impossible bounds rejected);
* :mod:`~hybrid_remat.portfolio.scheduler`: every decision: admission,
  order by measured value per second, time shares, skips, later rounds,
  seeds, copies (``next(view, now, slot)`` and ``done(assignment, outcome)``);
* :mod:`~hybrid_remat.portfolio.execute`: one task of any kind, called
  with its kind's one signature (:mod:`~hybrid_remat.portfolio.calls`:
  older components are wrapped once, when registered);
* :mod:`~hybrid_remat.portfolio.runner`: the loop between the scheduler
  and an executor (in this process), signals, deadlines;
* :mod:`~hybrid_remat.portfolio.workers`: the forked executor (worker
  processes that run what they are given) and the shared incumbent;
* :mod:`~hybrid_remat.portfolio.reduce`: the reductions of a multi-device
  problem (each device alone, the merged devices' bounds), solved by the
  same runner.
"""

from .calls import adapt
from .execute import LedgerView, Outcome, execute
from .ledger import Improvement, Ledger, SourceReport
from .reduce import MergedDevices, OneDevice, SubPortfolio, ThroughReduction, reductions_for
from .runner import PortfolioRun, honours_limits, run_portfolio
from .scheduler import DONE, WAIT, Assignment, Scheduler, Task
from .workers import Pool, SharedIncumbent

__all__ = [
    "Ledger", "SourceReport", "Improvement", "Scheduler", "Task", "Assignment", "WAIT", "DONE", "execute", "Outcome", "LedgerView",
    "run_portfolio", "PortfolioRun", "honours_limits", "Pool", "SharedIncumbent", "adapt", "default_workers",
    "reductions_for", "OneDevice", "MergedDevices", "SubPortfolio", "ThroughReduction",
]


def default_workers() -> int:
    """The cores this process may use (``len(os.sched_getaffinity(0))``)."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
