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

The contraction.  The ideal condition forces every ancestor of ``I`` into
``S`` and every descendant of ``O`` out of it, so the kernel first closes
``I`` under inputs and ``O`` under readers (when they meet: no such ideal,
the answer is ``2**126``) and contracts the closed sets into the source and
the sink: only the nodes in neither (tens, on RLG4's windows, out of 1000)
and the ``a_v`` of the nodes with a reader among them stay.  A node of the
closed ``I`` with a reader in the closed ``O`` pays ``keep(v)`` in every such
ideal (a constant); a free node with a reader in the closed ``O`` gets an
edge of capacity ``keep(v)`` to the sink; an edge into the source side or out
of the sink side is never cut and is dropped.  The cut values are those of
the whole network.  The maximum flow is Dinic's (a Numba kernel,
:func:`min_live_kernel`).

Exact integers.  The flow runs on 64-bit capacities: with ``q`` the
smallest power of two making ``sum keep(v) // q`` at most ``2**60``, each
capacity is ``keep(v) // q``; a cut's scaled value times ``q`` is at most
its true value, so ``q * (scaled minimum)`` is a lower bound on ``m``
(exact when ``q = 1``, i.e. total bytes up to ``2**60``; no flow or sum
exceeds ``2**61``).

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
from numba import njit

__all__ = ["MinLive", "min_live_kernel"]

_CAP = 1 << 60  # the finite capacities sum to at most this
_INF = 1 << 62  # an infinite capacity: above every flow
_NONE = 1 << 126  # no ideal between I and O: no concrete state


@njit(cache=True)
def min_live_kernel(pred_ptr, pred_idx, succ_ptr, succ_idx, cap, inside, outside):
    """The least ``sum cap[v]`` over ``v`` in ``S`` with a reader outside
    ``S``, over the ideals ``S`` holding ``inside`` and disjoint from
    ``outside`` (boolean arrays; ``cap`` int64, summing to at most
    ``2**60``; CSR arrays of the DAG, node ids a topological order); ``-1``
    when no such ideal exists.  The contracted network and Dinic's maximum
    flow of the module docstring."""
    n = cap.size
    src = np.zeros(n, dtype=np.bool_)
    snk = np.zeros(n, dtype=np.bool_)
    for v in range(n - 1, -1, -1):  # close I under inputs (inputs have smaller ids)
        if inside[v]:
            src[v] = True
        if src[v]:
            for k in range(pred_ptr[v], pred_ptr[v + 1]):
                src[pred_idx[k]] = True
    for v in range(n):  # close O under readers
        if outside[v]:
            snk[v] = True
        if snk[v]:
            if src[v]:
                return -1
            for k in range(succ_ptr[v], succ_ptr[v + 1]):
                snk[succ_idx[k]] = True
    idx = np.full(n, -1, dtype=np.int64)
    m = 2  # 0: the source (closed I), 1: the sink (closed O)
    for v in range(n):
        if not src[v] and not snk[v]:
            idx[v] = m
            m += 1
    if m == 2:  # S is the closed I: its live memory
        fixed = 0
        for v in range(n):
            if src[v] and cap[v] > 0:
                for k in range(succ_ptr[v], succ_ptr[v + 1]):
                    if snk[succ_idx[k]]:
                        fixed += cap[v]
                        break
        return fixed
    emax = 2 * (pred_idx.size + succ_idx.size + 2 * n) + 2
    head = np.empty(emax, dtype=np.int64)
    nxt = np.empty(emax, dtype=np.int64)
    res = np.empty(emax, dtype=np.int64)
    first = np.full(2 * m + n, -1, dtype=np.int64)
    ne = 0
    fixed = 0
    for v in range(n):
        if snk[v]:
            continue
        a = idx[v]
        if cap[v] > 0:
            out = False
            some = False
            for k in range(succ_ptr[v], succ_ptr[v + 1]):
                w = succ_idx[k]
                if snk[w]:
                    out = True
                elif not src[w]:
                    some = True
            if out:
                if src[v]:
                    fixed += cap[v]
                else:  # free v -> sink, capacity keep(v)
                    head[ne] = 1; nxt[ne] = first[a]; res[ne] = cap[v]; first[a] = ne  # noqa: E702
                    head[ne + 1] = a; nxt[ne + 1] = first[1]; res[ne + 1] = 0; first[1] = ne + 1  # noqa: E702
                    ne += 2
            elif some:  # a_v: (v or the source) -> a_v (keep(v)) -> each free reader (infinite)
                av = m
                m += 1
                tail = 0 if src[v] else a
                head[ne] = av; nxt[ne] = first[tail]; res[ne] = cap[v]; first[tail] = ne  # noqa: E702
                head[ne + 1] = tail; nxt[ne + 1] = first[av]; res[ne + 1] = 0; first[av] = ne + 1  # noqa: E702
                ne += 2
                for k in range(succ_ptr[v], succ_ptr[v + 1]):
                    w = succ_idx[k]
                    if not snk[w] and not src[w]:
                        b = idx[w]
                        head[ne] = b; nxt[ne] = first[av]; res[ne] = _INF; first[av] = ne  # noqa: E702
                        head[ne + 1] = av; nxt[ne + 1] = first[b]; res[ne + 1] = 0; first[b] = ne + 1  # noqa: E702
                        ne += 2
        if not src[v]:  # free v -> each free input (infinite): v in S forces its inputs in S
            for k in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[k]
                if not src[u]:
                    b = idx[u]
                    head[ne] = b; nxt[ne] = first[a]; res[ne] = _INF; first[a] = ne  # noqa: E702
                    head[ne + 1] = a; nxt[ne + 1] = first[b]; res[ne + 1] = 0; first[b] = ne + 1  # noqa: E702
                    ne += 2
    level = np.empty(m, dtype=np.int64)
    it = np.empty(m, dtype=np.int64)
    queue = np.empty(m, dtype=np.int64)
    path = np.empty(m, dtype=np.int64)
    flow = 0
    while True:  # Dinic: a BFS level graph, then blocking paths along it
        level[:] = -1
        level[0] = 0
        queue[0] = 0
        qh, qt = 0, 1
        while qh < qt:
            u = queue[qh]
            qh += 1
            e = first[u]
            while e >= 0:
                w = head[e]
                if res[e] > 0 and level[w] < 0:
                    level[w] = level[u] + 1
                    queue[qt] = w
                    qt += 1
                e = nxt[e]
        if level[1] < 0:
            break
        for u in range(m):
            it[u] = first[u]
        while True:
            top = 0
            u = 0
            while u != 1:
                e = it[u]
                while e >= 0 and not (res[e] > 0 and level[head[e]] == level[u] + 1):
                    e = nxt[e]
                it[u] = e
                if e >= 0:
                    path[top] = e
                    top += 1
                    u = head[e]
                elif u == 0:
                    break
                else:  # a dead end: retreat and skip the edge that led here
                    level[u] = -1
                    top -= 1
                    u = head[path[top] ^ 1]
                    it[u] = nxt[it[u]]
            if u != 1:
                break
            f = res[path[0]]
            for j in range(1, top):
                if res[path[j]] < f:
                    f = res[path[j]]
            for j in range(top):
                res[path[j]] -= f
                res[path[j] ^ 1] += f
            flow += f
    return fixed + flow


class MinLive:
    """``m(I, O)`` of the module docstring for one graph and one ``Z``
    (boolean mask ``free``; the sinks are added: they have no reader).
    Calling it with boolean masks ``inside`` (``I``) and ``outside``
    (``O``) returns a lower bound on ``m`` (exact up to ``2**60`` total
    bytes), an ``int``."""

    def __init__(self, graph, free):
        size = np.asarray(graph.bytes, dtype=np.int64)
        self._csr = tuple(np.ascontiguousarray(x, dtype=np.int64)
                          for x in (graph.pred_ptr, graph.pred_idx, graph.succ_ptr, graph.succ_idx))
        nsucc = np.diff(self._csr[2])
        keep = np.where(np.asarray(free, dtype=bool) | (nsucc == 0), 0, size)
        total = int(sum(int(x) for x in keep.tolist()))
        q = 1
        while total // q > _CAP:
            q *= 2
        self.q = q
        self.n = graph.n
        self._cap = (keep // q).astype(np.int64)

    def __call__(self, inside, outside) -> int:
        r = int(min_live_kernel(*self._csr, self._cap, np.asarray(inside, dtype=np.bool_),
                                np.asarray(outside, dtype=np.bool_)))
        return r * self.q if r >= 0 else _NONE
