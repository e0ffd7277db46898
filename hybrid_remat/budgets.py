"""Memory budgets: parsing, the keep-all peak and a lower bound on the
smallest feasible budget.

The *keep-all peak* is the peak memory of executing the reference order
``0..n-1`` once, each output live from its producer until its last consumer:
at step ``j`` the live outputs of earlier nodes plus the output of node ``j``
(the Moccasin/Checkmate protocol).  Budgets are activation memory only;
parameters are excluded.

:func:`budget_lower_bound` (old name :func:`min_feasible_budget`) is the
largest node plus its inputs: no plan fits below it, but a plan need not
exist at it.  :mod:`hybrid_remat.feasibility` has a tighter bound and an
exact search for the smallest feasible budget.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> g = chain(4, bytes=10)
>>> keep_all_peak(g), budget_lower_bound(g)
(20, 20)
>>> parse_budget("50%", g), parse_budget("1KiB", g), parse_budget(64, g)
(10, 1024, 64)
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
from numba import njit

from .errors import BudgetError
from .graph import MAX_TOTAL_BYTES, Graph

__all__ = [
    "parse_budget", "keep_all_peak", "budget_lower_bound", "min_feasible_budget", "node_need_bytes", "format_bytes",
    "MAX_BUDGET_BYTES",
]

#: the largest budget accepted (4 EiB): budgets and graph sizes both stay
#: below it, so their sums fit int64 (see :data:`hybrid_remat.graph.MAX_TOTAL_BYTES`)
MAX_BUDGET_BYTES = MAX_TOTAL_BYTES

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z%]*)\s*$")


@njit(cache=True)
def _node_need_kernel(bytes_, pred_ptr, pred_idx):
    n = bytes_.shape[0]
    need = np.empty(n, dtype=np.int64)
    for v in range(n):
        s = bytes_[v]
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            s += bytes_[pred_idx[k]]
        need[v] = s
    return need


def keep_all_peak(graph: Graph) -> int:
    """Peak bytes of the reference order with each output freed after its last reader."""
    from .core.sequence import sequence_peak

    return sequence_peak(graph, np.arange(graph.n, dtype=np.int64))


def node_need_bytes(graph: Graph) -> np.ndarray:
    """Bytes needed to compute each node: its output plus all its inputs."""
    return _node_need_kernel(graph.bytes, graph.pred_ptr, graph.pred_idx)


def budget_lower_bound(graph: Graph) -> int:
    """A lower bound on the smallest feasible budget: the largest node's
    bytes plus its inputs' bytes (computing it needs them all resident).

    Not the smallest budget at which a plan exists: with bytes
    ``[10, 1, 10, 1, 1]`` and edges ``0->1, 2->3, 1->4, 3->4`` it is 11 B but
    every plan needs 12 B.  :func:`hybrid_remat.feasibility.order_bound` is
    tighter and :func:`hybrid_remat.feasibility.smallest_feasible_budget`
    searches for the exact value.

    Examples
    --------
    >>> from hybrid_remat.graph import Graph
    >>> budget_lower_bound(Graph.from_arrays([10, 1, 10, 1, 1], [(0, 1), (2, 3), (1, 4), (3, 4)], [1.0] * 5))
    11
    """
    return int(node_need_bytes(graph).max())


def min_feasible_budget(graph: Graph) -> int:
    """Old name of :func:`budget_lower_bound`, kept so that callers do not
    break.  Despite the name it is a lower bound (see there), not the
    smallest budget at which a plan exists."""
    return budget_lower_bound(graph)


def format_bytes(b: float) -> str:
    """``1536 -> '1.50 KiB'``; plain numbers below 1 KiB."""
    b = float(b)
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b:.0f} B"


def parse_budget(budget, graph: Graph | None = None) -> int:
    """Turn a budget into bytes.

    Parameters
    ----------
    budget : int, float or str
        Bytes (``123``), a size with unit (``"8GiB"``, ``"512MB"``,
        ``"1.5G"``; k/M/G alone are binary), or a percentage of the keep-all
        peak (``"80%"`` = ``ceil(0.8 x peak)``).  A float in (0, 1] is *not*
        taken as a fraction: write ``"90%"``.
    graph : Graph, optional
        Needed for percentages.

    Raises
    ------
    BudgetError
        Unparsable, negative, zero or non-finite budgets, budgets above
        :data:`MAX_BUDGET_BYTES` (4 EiB), or a percentage without a graph.
    """
    if isinstance(budget, bool):
        raise BudgetError(f"budget {budget!r} is not a size")
    if isinstance(budget, (int, np.integer)):
        value = int(budget)
    elif isinstance(budget, float):
        if not math.isfinite(budget):
            raise BudgetError(f"budget {budget!r} is not finite")
        value = int(math.floor(budget))
    elif isinstance(budget, str):
        mt = _RE.match(budget)
        if not mt:
            raise BudgetError(f"cannot read budget {budget!r}: use bytes, a size like '8GiB' or '512MB', or '80%'")
        num, unit = mt.group(1), mt.group(2).lower()
        if float(num) > 1e30:  # before exact arithmetic on it ('1e999999999' would take forever)
            raise BudgetError(f"budget {budget!r} is too large: at most {MAX_BUDGET_BYTES} B (4 EiB)")
        if unit == "%":
            if graph is None:
                raise BudgetError(f"budget {budget!r} is a percentage but no graph was given")
            frac = Fraction(num) / 100
            if frac <= 0:
                raise BudgetError(f"budget {budget!r} must be positive")
            value = math.ceil(frac * keep_all_peak(graph))
        elif unit in _UNITS:
            value = int(math.floor(Fraction(num) * _UNITS[unit]))
        else:
            raise BudgetError(f"cannot read budget {budget!r}: unknown unit {mt.group(2)!r}")
    else:
        raise BudgetError(f"budget {budget!r} is not a size")
    if value <= 0:
        raise BudgetError(f"budget {budget!r} must be positive")
    if value > MAX_BUDGET_BYTES:
        raise BudgetError(f"budget {budget!r} is too large: at most {MAX_BUDGET_BYTES} B (4 EiB)")
    return value
