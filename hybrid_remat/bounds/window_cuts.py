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

__all__ = ["MinLive", "Residual", "min_live_kernel", "residual_kernel", "extend_kernel"]

_CAP = 1 << 60  # the finite capacities sum to at most this
_INF = 1 << 62  # an infinite capacity: above every flow
_NONE = 1 << 126  # no ideal between I and O: no concrete state


@njit(cache=True)
def _closures(pred_ptr, pred_idx, succ_ptr, succ_idx, inside, outside):
    """``I`` closed under inputs, ``O`` under readers; ``ok``: they do not meet."""
    n = inside.size
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
                return src, snk, False
            for k in range(succ_ptr[v], succ_ptr[v + 1]):
                snk[succ_idx[k]] = True
    return src, snk, True


@njit(cache=True)
def _network(pred_ptr, pred_idx, succ_ptr, succ_idx, cap, src, snk, spare):
    """The contracted network of closed ``src``/``snk`` (room for ``spare`` more edges):
    ``(head, nxt, res, first, m, ne, idx, fixed)``."""
    n = cap.size
    idx = np.full(n, -1, dtype=np.int64)
    m = 2  # 0: the source (closed I), 1: the sink (closed O)
    for v in range(n):
        if not src[v] and not snk[v]:
            idx[v] = m
            m += 1
    emax = 2 * (pred_idx.size + succ_idx.size + 2 * n) + 2 + 2 * spare
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
    return head, nxt, res, first, m, ne, idx, fixed


@njit(cache=True)
def _dinic(head, nxt, res, first, m, fixed, limit):
    """``fixed`` plus Dinic's maximum flow from node 0 to node 1 on the residual capacities ``res``
    (updated in place); with ``limit >= 0`` it stops once the sum passes ``limit``."""
    level = np.empty(m, dtype=np.int64)
    it = np.empty(m, dtype=np.int64)
    queue = np.empty(m, dtype=np.int64)
    path = np.empty(m, dtype=np.int64)
    flow = 0
    if 0 <= limit < fixed:
        return fixed
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
            if 0 <= limit < fixed + flow:
                return fixed + flow
    return fixed + flow




@njit(cache=True)
def min_live_kernel(pred_ptr, pred_idx, succ_ptr, succ_idx, cap, inside, outside, limit):
    """The least ``sum cap[v]`` over ``v`` in ``S`` with a reader outside
    ``S``, over the ideals ``S`` holding ``inside`` and disjoint from
    ``outside`` (boolean arrays; ``cap`` int64, summing to at most
    ``2**60``; CSR arrays of the DAG, node ids a topological order); ``-1``
    when no such ideal exists.  The contracted network and Dinic's maximum
    flow of the module docstring.

    With ``limit >= 0`` only the comparison with ``limit`` is exact: the
    result is at most ``limit`` exactly when the minimum is (then it may be
    the live memory of one ideal between, the closed ``I`` or the
    complement of the closed ``O``: no flow runs), and above it exactly when
    the minimum is (the flow stops once it passes ``limit``).  ``limit < 0``:
    the exact minimum."""
    src, snk, ok = _closures(pred_ptr, pred_idx, succ_ptr, succ_idx, inside, outside)
    if not ok:
        return -1
    n = cap.size
    if limit >= 0:  # two ideals between: the closed I and all but the closed O
        lo_ideal = 0
        hi_ideal = 0
        for v in range(n):
            if cap[v] > 0 and not snk[v]:
                out_lo = False
                out_hi = False
                for k in range(succ_ptr[v], succ_ptr[v + 1]):
                    w = succ_idx[k]
                    if not src[w]:
                        out_lo = True
                    if snk[w]:
                        out_hi = True
                if src[v] and out_lo:
                    lo_ideal += cap[v]
                if out_hi:
                    hi_ideal += cap[v]
        if lo_ideal <= limit:
            return lo_ideal
        if hi_ideal <= limit:
            return hi_ideal
    head, nxt, res, first, m, ne, idx, fixed = _network(pred_ptr, pred_idx, succ_ptr, succ_idx, cap, src,
                                                       snk, 0)
    return _dinic(head, nxt, res, first, m, fixed, limit)


@njit(cache=True)
def residual_kernel(pred_ptr, pred_idx, succ_ptr, succ_idx, cap, inside, outside, spare):
    """The maximum flow of ``min_live_kernel(..., -1)`` and its residual
    network, kept for :func:`extend_kernel`: ``(value, head, nxt, res,
    first, m, ne, idx, snk)`` (``value`` ``-1``: no ideal between)."""
    src, snk, ok = _closures(pred_ptr, pred_idx, succ_ptr, succ_idx, inside, outside)
    head, nxt, res, first, m, ne, idx, fixed = _network(pred_ptr, pred_idx, succ_ptr, succ_idx, cap, src, snk,
                                                       spare if ok else 0)
    if not ok:
        return -1, head, nxt, res, first, m, ne, idx, snk
    value = _dinic(head, nxt, res, first, m, fixed, -1)
    return value, head, nxt, res, first, m, ne, idx, snk


@njit(cache=True)
def extend_kernel(head, nxt, res, first, m, ne, idx, snk, value, extra, limit):
    """``min_live_kernel(..., inside + extra, outside, limit)`` from the
    residual network of ``(inside, outside)`` (:func:`residual_kernel`,
    left unchanged): an infinite edge from the source to each node of
    ``extra`` that is neither side yet, and Dinic's augmenting paths on.
    The flow of the residual network stays a flow of the larger one, and
    an infinite edge from the source to ``u`` is ``u`` contracted into the
    source side (its inputs follow by their infinite edges): the result
    is the one of the module docstring, compared with ``limit >= 0`` the
    same way.  A node of ``extra`` on the sink side: no ideal, ``-1``.
    (Only the spare edge slots of ``head`` are written: the residual
    network stays valid for the next call.)"""
    top = ne + 2 * extra.size  # the edges in use after the additions
    res = res[:top].copy()
    nxt = nxt[:top].copy()
    first = first[:m].copy()
    for j in range(extra.size):
        u = extra[j]
        if snk[u]:
            return -1
        b = idx[u]
        if b >= 0:
            head[ne] = b; nxt[ne] = first[0]; res[ne] = _INF; first[0] = ne  # noqa: E702
            head[ne + 1] = 0; nxt[ne + 1] = first[b]; res[ne + 1] = 0; first[b] = ne + 1  # noqa: E702
            ne += 2
    return _dinic(head, nxt, res, first, m, value, limit)


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
                                np.asarray(outside, dtype=np.bool_), -1))
        return r * self.q if r >= 0 else _NONE

    def exceeds(self, inside, outside, room) -> bool:
        """``self(inside, outside) > room``, usually without the whole flow:
        an ideal between whose live memory fits answers ``False`` at once,
        and the flow stops as soon as it passes ``room``."""
        if room < 0:
            return True
        limit = min(int(room) // self.q, _INF)
        r = int(min_live_kernel(*self._csr, self._cap, np.asarray(inside, dtype=np.bool_),
                                np.asarray(outside, dtype=np.bool_), limit))
        return r < 0 or r > limit

    def residual(self, inside, outside, spare: int) -> Residual:
        """The maximum flow of ``(inside, outside)`` kept for moves that add
        at most ``spare`` nodes to ``inside`` (:class:`Residual`)."""
        out = residual_kernel(*self._csr, self._cap, np.asarray(inside, dtype=np.bool_),
                              np.asarray(outside, dtype=np.bool_), int(spare))
        return Residual(self.q, out)


class Residual:
    """``m(I, O)`` (``value``, a lower bound in bytes as :class:`MinLive`
    returns) with its flow, from :meth:`MinLive.residual`; ``exceeds(extra,
    room)`` is ``MinLive(...)(I + extra, O) > room`` by augmenting this flow
    (:func:`extend_kernel`)."""

    def __init__(self, q, out):
        self.q = q
        self._net = out[1:]
        self._raw = int(out[0])
        self.value = self._raw * q if self._raw >= 0 else _NONE

    def exceeds(self, extra, room) -> bool:
        if self._raw < 0 or room < 0 or self.value > room:
            return True
        limit = min(int(room) // self.q, _INF)
        r = int(extend_kernel(*self._net, self._raw, np.asarray(extra, dtype=np.int64), limit))
        return r < 0 or r > limit
