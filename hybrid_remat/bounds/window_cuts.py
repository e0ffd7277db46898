"""The least live memory of any ideal between two node sets, by a minimum
cut: the strengthened move test of the projected order search.

:mod:`.projected_order` checks a move ``(A, t)`` of its search against the
bytes of ``cl(A + t) - t - Z`` with a reader in ``F(A)``: nodes that every
concrete state projecting on ``A`` holds.  Every such concrete state is the
set ``S`` of nodes computed before ``t``'s first computation: an *ideal*
(closed under inputs) with ``cl(A + t) - t`` inside and ``F(A)`` outside,
holding each ``v`` of ``S - Z`` with a reader outside ``S``.  So the least
such live memory over all those ideals,

    m(I, O) = min { sum of keep(v) over v in S with a reader outside S :
                    S an ideal, I <= S, S and O disjoint },

(``keep(v)`` the bytes of ``v``, 0 on ``Z``) with ``I = cl(A + t) - t``
and ``O = F(A)`` is again a lower bound on every concrete state's memory,
and at least the old one (each node it counted lies in ``S`` with a
reader in ``O``, outside ``S``).  The projected search's proof goes
through unchanged with ``m`` in its place.

The minimum cut.  Source side = ``S``.  Edges: ``v -> u`` (infinite) for
each input ``u`` of ``v`` (``v`` in ``S`` forces ``u`` in ``S``);
``v -> a_v`` of capacity ``keep(v)`` and ``a_v -> w`` (infinite) for each
reader ``w`` (``v`` in ``S`` and some reader outside puts ``a_v`` on the
sink side: the cut pays ``keep(v)`` once); source ``-> i`` for ``i`` in
``I`` and ``o ->`` sink for ``o`` in ``O`` (infinite).  A finite cut is an
ideal ``S`` with ``I <= S``, ``S`` and ``O`` disjoint, and its least
capacity over the ``a_v`` is ``S``'s live memory: the minimum cut is
``m(I, O)``.  (When no such ideal exists the flow reaches the infinite capacity and
the answer is ``2**126``: no concrete state, nothing to hold.)

Exact integers.  The flow runs on 32-bit capacities: with ``q`` the
smallest power of two making ``sum keep(v) // q`` at most ``2**28``, each
capacity is ``keep(v) // q``; a cut's scaled value times ``q`` is at most
its true value, so ``q * (scaled minimum)`` is a lower bound on ``m``
(exact when ``q = 1``, i.e. total bytes up to ``2**28``).

Examples
--------
>>> import numpy as np
>>> from hybrid_remat.generators import chain
>>> g = chain(4, bytes=1)
>>> live = MinLive(g, np.zeros(4, dtype=bool))
>>> inside = np.array([True, True, False, False]); outside = np.array([False, False, True, True])
>>> live(inside, outside)
1
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

__all__ = ["MinLive"]

_BIG = 1 << 30  # an infinite capacity: above the sum of the finite ones (<= 2**28)
_CAP = 1 << 28


class MinLive:
    """``m(I, O)`` of the module docstring for one graph and one ``Z``
    (boolean mask ``free``; the sinks are added: they have no reader).
    Calling it with boolean masks ``inside`` (``I``) and ``outside``
    (``O``) returns a lower bound on ``m`` (exact up to ``2**28`` total
    bytes), an ``int``."""

    def __init__(self, graph, free):
        n = graph.n
        self.n = n
        size = np.asarray(graph.bytes, dtype=np.int64)
        nsucc = np.diff(np.asarray(graph.succ_ptr))
        keep = np.where(np.asarray(free, dtype=bool) | (nsucc == 0), 0, size)
        total = int(sum(int(x) for x in keep.tolist()))
        q = 1
        while total // q > _CAP:
            q *= 2
        self.q = q
        cap = keep // q
        rows, cols, caps = [], [], []
        for v in range(n):
            succ = sorted(set(graph.succs(v).tolist()))
            if cap[v] > 0 and succ:
                rows.append(v); cols.append(n + v); caps.append(int(cap[v]))  # noqa: E702
                rows += [n + v] * len(succ); cols += succ; caps += [_BIG] * len(succ)  # noqa: E702
            preds = sorted(set(graph.preds(v).tolist()))
            rows += [v] * len(preds); cols += preds; caps += [_BIG] * len(preds)  # noqa: E702
        self._r = np.asarray(rows, dtype=np.int64)
        self._c = np.asarray(cols, dtype=np.int64)
        self._w = np.asarray(caps, dtype=np.int64)

    def __call__(self, inside, outside) -> int:
        n = self.n
        s, t = 2 * n, 2 * n + 1
        a = np.flatnonzero(inside)
        b = np.flatnonzero(outside)
        r = np.concatenate([self._r, np.full(a.size, s), b])
        c = np.concatenate([self._c, a, np.full(b.size, t)])
        w = np.concatenate([self._w, np.full(a.size + b.size, _BIG)])
        m = sp.csr_matrix((w, (r, c)), shape=(2 * n + 2, 2 * n + 2))
        m.sum_duplicates()
        m.data = np.minimum(m.data, _BIG).astype(np.int32)
        flow = int(maximum_flow(m, s, t).flow_value)
        return flow * self.q if flow < _BIG else 1 << 126  # no such ideal: no concrete state
