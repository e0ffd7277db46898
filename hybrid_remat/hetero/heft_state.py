"""The records and state of the HEFT kernel (:mod:`hybrid_remat.hetero.heft_kernel`).

* :class:`HeftGraph`   the graph: sizes and both CSR adjacencies;
* :class:`HeftMachine` the devices: costs, budgets, links;
* :class:`HeftParams`  the variant: mode, offload weight, eviction score,
  victim scan width, seed, strict placement of recomputation sets;
* :class:`HeftState`   what changes: residency and memory per device, the
  stream clocks, pins, the per-device lists of resident values, the emitted
  steps and the counters (steps emitted, work spent, work budget, random
  state), with the few helpers that keep them consistent.

Examples
--------
>>> from hybrid_remat.generators import chain
>>> graph_record(chain(3, bytes=4)).bytes.tolist()
[4, 4, 4]
>>> params_record(MODE_MAKESPAN).mode
1
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

__all__ = [
    "HeftGraph", "HeftMachine", "HeftParams", "HeftState", "graph_record", "machine_record", "params_record",
    "MODE_SERIAL", "MODE_MAKESPAN", "SCORE_STALENESS", "SCORE_NEXT_USE", "ST_OK", "ST_NO_DEVICE", "ST_CAPACITY",
    "ST_STUCK", "ST_WORK", "SCAN", "K_STEPS", "K_WORK", "K_BUDGET", "K_RNG", "new_state", "emit", "place", "drop",
    "resident_anywhere", "rand",
]

MODE_SERIAL = 0
MODE_MAKESPAN = 1
SCORE_STALENESS = 0
SCORE_NEXT_USE = 1

ST_OK = 0
ST_NO_DEVICE = 1
ST_CAPACITY = 2
ST_STUCK = 3
ST_WORK = 4

#: default eviction scan width: every resident value when at most this many, else a sample this large
SCAN = 256

HeftGraph = namedtuple("HeftGraph", "bytes pred_ptr pred_idx succ_ptr succ_idx")
HeftMachine = namedtuple("HeftMachine", "cost can_compute budget bw lat")
HeftParams = namedtuple("HeftParams", "mode offload_weight score_kind scan seed strict")
HeftState = namedtuple(
    "HeftState",
    "resident mem ready stream cstream last_use pin mark marked remaining done pos rlist rpos rcount "
    "ops nodes devs dsts ctr clock",
)

# indices into HeftState.ctr
K_STEPS = 0
K_WORK = 1
K_BUDGET = 2
K_RNG = 3


def graph_record(graph) -> HeftGraph:
    """The kernel's view of a :class:`~hybrid_remat.graph.Graph`."""
    return HeftGraph(graph.bytes, graph.pred_ptr, graph.pred_idx, graph.succ_ptr, graph.succ_idx)


def machine_record(problem, cost=None, can_compute=None) -> HeftMachine:
    """The kernel's view of a problem's devices (``cost``/``can_compute``
    override the problem's, e.g. to restrict computation to some devices)."""
    bw, lat = problem.link_arrays
    cost = problem.cost_matrix if cost is None else cost
    can = problem.can_compute if can_compute is None else can_compute
    return HeftMachine(np.ascontiguousarray(cost, dtype=np.float64), np.ascontiguousarray(can, dtype=np.bool_),
                       problem.budgets, bw, lat)


def params_record(mode: int, offload_weight: float = 1.0, score_kind: int = SCORE_STALENESS, scan: int = SCAN,
                  seed: int = 0, strict: bool = False) -> HeftParams:
    """A variant of the kernel (see :func:`heft_kernel`)."""
    return HeftParams(int(mode), float(offload_weight), int(score_kind), int(max(1, scan)), int(seed), bool(strict))


# ------------------------------------------------------------------ state
@njit(cache=True)
def new_state(n, D, cap, work_budget, seed):
    return HeftState(
        np.zeros((D, n), dtype=np.bool_), np.zeros(D, dtype=np.int64), np.zeros((D, n)), np.zeros(D),
        np.zeros((D, D)), np.zeros((D, n)), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.int64), np.zeros((D, n), dtype=np.int64), np.zeros((D, n), dtype=np.int64),
        np.zeros(D, dtype=np.int64), np.zeros(cap, dtype=np.int8), np.zeros(cap, dtype=np.int64),
        np.zeros(cap, dtype=np.int64), np.full(cap, -1, dtype=np.int64),
        np.array([0, 0, work_budget, seed % 2147483648], dtype=np.int64), np.zeros(1))


@njit(cache=True, _nrt=False)
def emit(S, o, v, d, t):
    k = S.ctr[K_STEPS]
    if k < S.ops.shape[0]:
        S.ops[k] = o
        S.nodes[k] = v
        S.devs[k] = d
        S.dsts[k] = t
    S.ctr[K_STEPS] = k + 1
    S.ctr[K_WORK] += 1


@njit(cache=True, _nrt=False)
def place(S, G, d, v):
    """Make ``v`` resident on ``d`` (memory and the resident list)."""
    S.resident[d, v] = True
    S.mem[d] += G.bytes[v]
    c = S.rcount[d]
    S.rlist[d, c] = v
    S.rpos[d, v] = c
    S.rcount[d] = c + 1


@njit(cache=True, _nrt=False)
def drop(S, G, d, v):
    """Remove ``v`` from ``d`` (memory and the resident list)."""
    S.resident[d, v] = False
    S.mem[d] -= G.bytes[v]
    c = S.rcount[d] - 1
    i = S.rpos[d, v]
    last = S.rlist[d, c]
    S.rlist[d, i] = last
    S.rpos[d, last] = i
    S.rcount[d] = c


@njit(cache=True, _nrt=False)
def resident_anywhere(S, u):
    for e in range(S.resident.shape[0]):
        if S.resident[e, u]:
            return True
    return False


@njit(cache=True, _nrt=False)
def rand(S, hi):
    """A deterministic pseudo-random integer in ``[0, hi)`` (a 31-bit
    linear congruential generator: no overflow, same in pure Python)."""
    x = (S.ctr[K_RNG] * 1103515245 + 12345) % 2147483648
    S.ctr[K_RNG] = x
    return (x >> 7) % hi
