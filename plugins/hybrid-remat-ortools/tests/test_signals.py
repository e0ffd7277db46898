"""Issue 12.5 (plugin side): Ctrl-C during and after a CP-SAT solve, in a
subprocess.  Before the fix CP-SAT's own SIGINT handler swallowed Ctrl-C
until the time limit and left SIG_DFL installed, so a later Ctrl-C killed
the process (return code -2) instead of raising KeyboardInterrupt."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

HERE = pathlib.Path(__file__).resolve()
SRC = HERE.parents[1] / "src"
ROOT = HERE.parents[3]

SCRIPT = textwrap.dedent('''
    import ctypes, json, signal, sys, threading, time
    from hybrid_remat import Problem, generators
    from hybrid_remat_ortools import CpSatRemat
    from hybrid_remat.limits import Limits

    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]

    def c_handler():  # the process-level SIGINT handler (Python's getsignal does not see CP-SAT's)
        h = libc.signal(signal.SIGINT, None)
        libc.signal(signal.SIGINT, h)
        return h

    def ctrl_c_after(seconds):
        t = threading.Timer(seconds, lambda: signal.raise_signal(signal.SIGINT))
        t.start()
        return t

    mode = sys.argv[1]
    out = {"mode": mode, "threads_before": threading.active_count()}
    before = c_handler()
    if mode == "after":  # a finished solve must leave Ctrl-C working
        p = Problem.single(generators.random_layered(30, seed=1), "90%")
        res = CpSatRemat().solve(p, limits=Limits.seconds(5, nodes=2000))
        out["status"] = res.status
        try:
            signal.raise_signal(signal.SIGINT)
            time.sleep(1.0)
            out["after"] = "no KeyboardInterrupt"
        except KeyboardInterrupt:
            out["after"] = "KeyboardInterrupt"
    else:
        p = Problem.single(generators.random_layered(200, seed=2), "85%")
        form = CpSatRemat(phase1_share=0.5 if mode.endswith("phase1") else 0.0)
        stop = threading.Event()
        if mode.startswith("stop"):  # a runner's handler: Ctrl-C sets the stop flag
            signal.signal(signal.SIGINT, lambda *a: stop.set())
        timer = ctrl_c_after(1.0)
        t0 = time.perf_counter()
        try:
            res = form.solve(p, limits=Limits.seconds(600, stop=stop))
            out["returned"] = {"stopped": res.stats["stopped"], "model_status": res.stats["model_status"],
                               "phase1": res.stats["phase1"], "valid_plan": res.plan is not None}
        except KeyboardInterrupt:
            out["raised"] = "KeyboardInterrupt"
        out["seconds_after_ctrl_c"] = time.perf_counter() - t0 - 1.0
        timer.join()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    out["handler_kept"] = c_handler() == before
    out["threads_after"] = threading.active_count()
    print(json.dumps(out))
''')


def run_script(mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])  # -2: killed by SIGINT
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_ctrl_c_after_a_solve_raises_keyboard_interrupt():
    out = run_script("after")
    assert out["after"] == "KeyboardInterrupt"
    assert out["handler_kept"] and out["threads_after"] == out["threads_before"]


@pytest.mark.parametrize("mode", ["ctrl-c", "ctrl-c-phase1"])
def test_ctrl_c_during_a_solve_stops_it_and_raises(mode):
    out = run_script(mode)
    assert out.get("raised") == "KeyboardInterrupt", out
    assert out["seconds_after_ctrl_c"] < 60  # far below the 600 s limit: it stopped (not a timing claim)
    assert out["handler_kept"] and out["threads_after"] == out["threads_before"]


@pytest.mark.parametrize("mode", ["stop", "stop-phase1"])
def test_a_stop_flag_set_by_a_signal_handler_ends_the_solve(mode):
    out = run_script(mode)
    assert out["returned"]["stopped"] is True, out
    assert out["returned"]["model_status"] != "OPTIMAL" or out["returned"]["phase1"]
    assert out["seconds_after_ctrl_c"] < 60
    assert out["handler_kept"] and out["threads_after"] == out["threads_before"]
