"""The executor kernel releases the GIL, so that the in-process runner can
stop waiting for a heuristic that overruns its deadline (it abandons it at
the deadline plus ``ABANDON_S``): the main thread runs *during* one call."""

import threading
import time

import numpy as np

from hybrid_remat.generators import random_layered
from hybrid_remat.heuristics.common import GraphArrays, empty_drop
from hybrid_remat.heuristics.executor import SCORE_NAMES, execute_kernel
from hybrid_remat.limits import UNLIMITED_WORK
from hybrid_remat.problem import Problem


def _args(a, score):
    dptr, didx = empty_drop(a.n)
    return (a.bytes, a.cost, a.pred_ptr, a.pred_idx, a.succ_ptr, a.succ_idx, np.int64(a.budget), dptr, didx,
            np.ones(a.n), SCORE_NAMES.index(score), True, 0, 4 * a.n + 1000, 2048, 256, UNLIMITED_WORK,
            np.zeros(1, dtype=np.uint8))


def test_execute_kernel_is_compiled_without_the_gil():
    assert execute_kernel.targetoptions.get("nogil") is True


def test_main_thread_runs_during_one_kernel_call():
    a = GraphArrays.from_problem(Problem.single(random_layered(4000, seed=1), "50%"))
    args = _args(a, "belady")
    execute_kernel(*args)  # compiled or loaded before the measured call
    state = {"inside": False, "calls": 0}

    def work():
        for _ in range(10):  # several calls, so that a fast machine still gives the main thread some turns
            state["inside"] = True
            execute_kernel(*args)
            state["inside"] = False
            state["calls"] += 1

    th = threading.Thread(target=work, daemon=True)
    seen_inside = 0
    th.start()
    while th.is_alive():
        if state["inside"]:
            seen_inside += 1
        time.sleep(0.0005)
    th.join()
    # holding the GIL, a call would let the main thread look at most once (before it starts) per call
    assert state["calls"] == 10
    assert seen_inside > 2 * state["calls"]
