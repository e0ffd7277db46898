"""What the chain-of-cuts bounds share (:mod:`~hybrid_remat.bounds.multicut`
and :mod:`~hybrid_remat.bounds.multicut_groups`): the result, the choice of
the chain of cuts, the LP's sparse rows and its certified value."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

__all__ = ["MultiCutBound", "SparseRows", "cut_chain", "spread_cuts"]


@dataclass
class MultiCutBound:
    """The chain-of-cuts bound: ``value`` bounds every plan's serial time.

    Attributes
    ----------
    value : float
        ``base cost + extra``.
    extra : float
        Recomputation cost that no plan avoids.
    chain : list of int
        The cut nodes ``t_1, ..., t_k`` (each an ancestor of the next).
    method : str
        ``"lp"`` (certified LP value), ``"milp"`` (SCIP's dual bound) or
        ``"none"`` (nothing binding).
    stats : dict
    """

    value: float
    extra: float
    chain: list
    method: str
    stats: dict = field(default_factory=dict, repr=False)


@njit(cache=True)
def _heaviest_paths(pred_ptr, pred_idx, w):
    """``(best, prev)``: the largest total ``w`` of a path ending at each node
    and its previous node (``-1``: none), nodes in topological numbering
    (predecessors first; ties keep the first predecessor)."""
    n = w.shape[0]
    best = w.copy()
    prev = np.full(n, -1, dtype=np.int64)
    for v in range(n):
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[e]
            if best[u] + w[v] > best[v]:
                best[v] = best[u] + w[v]
                prev[v] = u
    return best, prev


def cut_chain(graph, weight: np.ndarray, max_cuts: int) -> list[int]:
    """A path of the graph (each node an ancestor of the next) of largest
    total ``weight``, extended to a sink, thinned to at most ``max_cuts``
    nodes (the heaviest kept).

    Examples
    --------
    >>> from hybrid_remat.generators import chain
    >>> cut_chain(chain(5), np.array([0, 2.0, 0, 1.0, 3.0]), 2)
    [1, 4]
    >>> cut_chain(chain(5), np.array([0, 2.0, 0, 0.0, 0.0]), 5)   # extended past the last binding cut
    [1, 2, 3, 4]
    """
    n = graph.n
    w = np.maximum(np.asarray(weight, dtype=np.float64), 0.0)
    best, prev = _heaviest_paths(np.asarray(graph.pred_ptr, dtype=np.int64),
                                 np.asarray(graph.pred_idx, dtype=np.int64), w)
    if n == 0 or best.max() <= 0:
        return []
    path = []
    v = int(np.flatnonzero(best >= best.max())[-1])
    while v >= 0:
        path.append(v)
        v = int(prev[v])
    path = path[::-1]
    # extend the path past its last binding cut (later cuts bind once recomputed values must be kept)
    while True:
        nxt = graph.succs(path[-1])
        if nxt.size == 0:
            break
        path.append(int(nxt[np.argmax(w[nxt])]) if w[nxt].max() > 0 else int(nxt.max()))
    if len(path) > max_cuts:
        keep = np.sort(np.argsort(-w[path], kind="stable")[:max_cuts])
        path = [path[i] for i in keep]
    return path


class SparseRows:
    """Rows ``sum vals[k] z[cols[k]] <= rhs`` of an LP, added one at a time
    (:meth:`add`) and returned as a CSR matrix and its right-hand side
    (:meth:`matrix`)."""

    def __init__(self):
        self.rows, self.cols, self.vals, self.rhs = [], [], [], []

    def add(self, cols, vals, rhs: float) -> None:
        self.rows.extend([len(self.rhs)] * len(cols))
        self.cols.extend(cols)
        self.vals.extend(vals)
        self.rhs.append(rhs)

    def matrix(self, n_cols: int):
        """``(A, b)``: ``A`` of shape ``(rows, n_cols)``."""
        import scipy.sparse as sp

        A = sp.csr_matrix((np.asarray(self.vals, dtype=np.float64), (np.asarray(self.rows, dtype=np.int64),
                                                                      np.asarray(self.cols, dtype=np.int64))),
                          shape=(len(self.rhs), n_cols))
        return A, np.asarray(self.rhs, dtype=np.float64)


def _certified_lp(c, A, b, lb, ub, limits) -> float | None:
    """A certified lower bound on ``min c z, A z <= b, lb <= z <= ub`` (the
    Lagrangian of HiGHS' clipped duals), or ``None``."""
    from scipy.optimize import linprog

    opts = {"presolve": True}
    left = limits.left()
    if math.isfinite(left):
        opts["time_limit"] = max(0.01, 0.85 * left)  # scipy's setup and the certificate take the rest
    res = linprog(c, A_ub=A, b_ub=b, bounds=np.stack([lb, ub], 1), method="highs", options=opts)
    if res.status != 0 or getattr(res, "ineqlin", None) is None:
        return None
    mu = np.maximum(0.0, -np.asarray(res.ineqlin.marginals))
    d = c + A.T @ mu
    return max(0.0, -float(mu @ b) + float(np.where(d > 0, d * lb, d * ub).sum()))


def spread_cuts(weight: np.ndarray, count: int) -> np.ndarray:
    """Positions of at most ``count`` cuts along a path whose cuts weigh
    ``weight``: the heaviest half, the rest spread evenly over the others
    (heaviest cuts alone cluster where the reference order peaks and miss
    the memory that builds up later, e.g. gradients held across a long
    backward: on the 2k-node U-Net the chain's LP rose from 3.83 to 4.03-4.12
    TDI %, ``benchmarks/results/unet_multicut_s30.md``).

    Examples
    --------
    >>> spread_cuts(np.array([0.0, 5.0, 0.0, 0.0, 1.0, 0.0]), 3).tolist()
    [0, 1, 5]
    >>> spread_cuts(np.array([1.0, 2.0]), 5).tolist()
    [0, 1]
    """
    m = int(np.asarray(weight).size)
    count = max(0, min(int(count), m))
    if count == m:
        return np.arange(m)
    heavy = np.argsort(-np.asarray(weight, dtype=np.float64), kind="stable")[:count // 2]
    rest = np.setdiff1d(np.arange(m), heavy)
    even = rest[np.unique(np.linspace(0, rest.size - 1, count - heavy.size).round().astype(np.int64))] \
        if count > heavy.size else np.zeros(0, dtype=np.int64)
    return np.sort(np.concatenate([heavy, even])).astype(np.int64)
