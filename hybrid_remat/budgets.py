"""Memory budgets: parsing, the keep-all peak and a lower bound on the
smallest feasible budget.

The *keep-all peak* is the peak memory of executing the reference order
``0..n-1`` once, each output live from its producer until its last consumer:
at step ``j`` the live outputs of earlier nodes plus the output of node ``j``
(the Moccasin/Checkmate protocol).  Budgets are activation memory only;
parameters are excluded.

:func:`budget_lower_bound` (old name :func:`min_feasible_budget`) is the
largest node plus its inputs: no plan fits below it, but a plan need not
exist at it.  :mod:`hybrid_remat.bounds.feasibility` has a tighter bound and an
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
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numba import njit

from .errors import BudgetError
from .graph import MAX_TOTAL_BYTES, Graph

__all__ = [
    "parse_budget", "keep_all_peak", "budget_lower_bound", "min_feasible_budget", "node_need_bytes", "format_bytes",
    "MAX_BUDGET_BYTES", "BudgetSpec", "parse_budget_spec", "BUDGET_GRAMMAR",
]

#: the largest budget accepted (4 EiB): budgets and graph sizes both stay
#: below it, so their sums fit int64 (see :data:`hybrid_remat.graph.MAX_TOTAL_BYTES`)
MAX_BUDGET_BYTES = MAX_TOTAL_BYTES

#: the budget grammar of every door (CLI ``--budget``/``--budgets``/``--device NAME=SIZE``,
#: ``Problem``, ``anytime_solve``, ``sweep``, ``hybrid_remat.torch.plan(budget=)``, ``torch-plan``)
BUDGET_GRAMMAR = (
    "bytes as an integer (123456, '123456'); a size with a unit: B, KB, MB, GB, TB, PB, EB (powers of 1000) "
    "or KiB, MiB, GiB, TiB, PiB, EiB (powers of 1024; K, M, G, T alone are binary too), up to 4 EiB; "
    "a percentage of the keep-all peak ('80%'; above 100% means keep-all fits); or a fraction of it, a "
    "number in (0, 1] (0.8, '0.8', '1')"
)

_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15, "eb": 10**18,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50, "eib": 2**60,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_RE = re.compile(r"^\s*([+-]?)([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z%]*)\s*$")
_INTEGER = re.compile(r"^\s*\+?[0-9]+\s*$")
_HINT = "write bytes (123456), a size (2GB, 512MiB), a percentage (80%) or a fraction in (0, 1] (0.8)"


@dataclass(frozen=True)
class BudgetSpec:
    """A budget as written, before any graph: bytes, or a fraction of a
    reference peak (the keep-all peak for graphs).

    Attributes
    ----------
    text : str
        The spelling it was read from (for messages).
    bytes : int or None
        An absolute budget.
    fraction : Fraction or None
        A budget relative to the reference peak (``Fraction(1, 2)``: half).

    Examples
    --------
    >>> parse_budget_spec("50%").resolve(1000), parse_budget_spec(0.25).resolve(1000)
    (500, 250)
    >>> parse_budget_spec("2KiB").resolve(1000), parse_budget_spec("2KiB").relative
    (2048, False)
    """

    text: str
    bytes: int | None = None
    fraction: Fraction | None = None

    @property
    def relative(self) -> bool:
        """Whether it needs a reference peak."""
        return self.fraction is not None

    def resolve(self, reference_bytes: int) -> int:
        """Bytes: the absolute budget, or ``ceil(fraction x reference_bytes)``.

        Raises
        ------
        BudgetError
            A relative budget that comes to 0 B or above 4 EiB.
        """
        if self.fraction is None:
            return int(self.bytes)
        value = math.ceil(self.fraction * int(reference_bytes))
        if value <= 0:
            raise BudgetError(f"budget {self.text!r} is 0 B: the keep-all peak is {int(reference_bytes)} B")
        if value > MAX_BUDGET_BYTES:
            raise BudgetError(f"budget {self.text!r} is too large: {value} B, at most {MAX_BUDGET_BYTES} B (4 EiB)")
        return value


def _bad(spec, why: str) -> BudgetError:
    return BudgetError(f"budget {spec!r} {why}")


def _absolute(spec, value) -> BudgetSpec:
    value = int(math.floor(value))
    if value <= 0:
        raise _bad(spec, "is less than 1 B: a budget must be positive")
    if value > MAX_BUDGET_BYTES:
        raise _bad(spec, f"is too large: at most {MAX_BUDGET_BYTES} B (4 EiB)")
    return BudgetSpec(str(spec), bytes=value)


def _relative(spec, frac: Fraction) -> BudgetSpec:
    if frac > MAX_BUDGET_BYTES:  # would be too large against any peak of at least 1 B
        raise _bad(spec, f"is too large: at most {MAX_BUDGET_BYTES} B (4 EiB)")
    return BudgetSpec(str(spec), fraction=frac)


def _from_number(spec, x: Fraction, *, integer: bool) -> BudgetSpec:
    """A number without a unit: ``1`` and (0, 1] a fraction, integers >= 2 bytes."""
    if x <= 0:
        raise _bad(spec, "must be positive")
    if x <= 1:
        return _relative(spec, x)
    if integer:
        return _absolute(spec, x)
    raise _bad(spec, "is ambiguous: a number above 1 without a unit must be whole bytes; "
                     f"write {float(x) * 100:g}% or a size such as {float(x):g}GB")


def parse_budget_spec(spec) -> BudgetSpec:
    """Read a budget (the one grammar of every door, :data:`BUDGET_GRAMMAR`)
    without a graph.

    ``int >= 2`` or an integer string: bytes.  A number in (0, 1] (``0.5``,
    ``"0.5"``, ``1``, ``"1"``): a fraction of the keep-all peak.  ``"50%"``:
    a percentage (any positive one).  ``"2GB"``, ``"1.5GiB"``: a size.  A
    unitless non-integer above 1 (``1.5``, ``"1.5"``, ``2.0``) is ambiguous.

    Raises
    ------
    BudgetError
        Zero, negative, non-finite, empty or unreadable budgets, unknown
        units, ambiguous numbers and sizes above 4 EiB; the message names
        the spelling.

    Examples
    --------
    >>> parse_budget_spec("8GiB").bytes, parse_budget_spec("80%").fraction, parse_budget_spec(1).fraction
    (8589934592, Fraction(4, 5), Fraction(1, 1))
    >>> parse_budget_spec(1.5)
    Traceback (most recent call last):
    ...
    hybrid_remat.errors.BudgetError: budget 1.5 is ambiguous: a number above 1 without a unit must be whole bytes; write 150% or a size such as 1.5GB
    """
    if isinstance(spec, BudgetSpec):
        return spec
    if isinstance(spec, bool) or spec is None:
        raise _bad(spec, f"is not a budget: {_HINT}")
    if isinstance(spec, (int, np.integer)):
        return _from_number(spec, Fraction(int(spec)), integer=True)
    if isinstance(spec, (float, np.floating)):
        x = float(spec)
        if not math.isfinite(x):
            raise _bad(spec, f"is not finite: {_HINT}")
        if x > 1e30:
            raise _bad(spec, f"is too large: at most {MAX_BUDGET_BYTES} B (4 EiB)")
        return _from_number(spec, Fraction(repr(x)), integer=False)  # 0.1 is 1/10, not its binary neighbour
    if not isinstance(spec, str):
        raise _bad(spec, f"is not a budget: {_HINT}")
    if not spec.strip():
        raise _bad(spec, f"is empty: {_HINT}")
    mt = _RE.match(spec)
    if not mt:
        raise _bad(spec, f"cannot be read: {_HINT}")
    sign, num, unit = mt.group(1), mt.group(2), mt.group(3).lower()
    if unit and unit != "%" and unit not in _UNITS:
        raise _bad(spec, f"has an unknown unit {mt.group(3)!r}: use B, KB, MB, GB, TB, PB, EB, KiB, MiB, GiB, TiB, "
                         "PiB, EiB or %")
    x = float(num)
    if sign == "-" and x != 0:
        raise _bad(spec, "must be positive")
    if x > 1e30:  # before exact arithmetic on it ('1e999999999' would take forever)
        raise _bad(spec, f"is too large: at most {MAX_BUDGET_BYTES} B (4 EiB)")
    if x < 1e-30:  # zero, or so small that exact arithmetic would take forever ('1e-999999999')
        raise _bad(spec, "must be positive")
    value = Fraction(num)
    if unit == "%":
        return _relative(spec, value / 100)
    if unit:
        return _absolute(spec, value * _UNITS[unit])
    return _from_number(spec, value, integer=bool(_INTEGER.match(spec)))


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
    every plan needs 12 B.  :func:`hybrid_remat.bounds.feasibility.order_bound` is
    tighter and :func:`hybrid_remat.bounds.feasibility.smallest_feasible_budget`
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
    """Turn a budget into bytes: :func:`parse_budget_spec` read against the
    keep-all peak of ``graph`` (:meth:`BudgetSpec.resolve`).

    Parameters
    ----------
    budget : int, float or str
        See :data:`BUDGET_GRAMMAR`: bytes (``123``, ``"123"``), a size
        (``"8GiB"``, ``"512MB"``), a percentage (``"80%"``) or a fraction
        (``0.8``, ``"0.8"``) of the keep-all peak.
    graph : Graph, optional
        Needed for percentages and fractions.

    Raises
    ------
    BudgetError
        A spelling outside the grammar (the message names it), zero,
        negative or non-finite budgets, budgets above
        :data:`MAX_BUDGET_BYTES` (4 EiB), or a percentage without a graph.

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> g = chain(4, bytes=10)  # keep-all peak 20 B
    >>> parse_budget(0.5, g), parse_budget("0.5", g), parse_budget("150%", g), parse_budget("2KB")
    (10, 10, 30, 2000)
    """
    spec = parse_budget_spec(budget)
    if spec.fraction is None:
        return spec.resolve(0)
    if graph is None:
        raise BudgetError(f"budget {spec.text!r} is relative to the keep-all peak, but no graph was given")
    return spec.resolve(keep_all_peak(graph))
