"""The time promise: a component that declares ``"honours_limits"`` returns
within its limits, whatever its kind.

:func:`check_honours_limits` gives it, on the largest standard instance it
accepts, limits that have already expired and limits of
:data:`TINY_S` seconds, and fails it when it returns more than
:data:`SLACK_S` after the deadline (the best of :data:`TRIES` runs, after a
first untimed one that compiles what it needs: a machine stall does not
fail a component, a component that sleeps does).  A component that does
not declare ``"honours_limits"`` makes no promise: the portfolio runs it in
a process that is killed at its deadline (the check is skipped).

Examples
--------
>>> import time
>>> from hybrid_remat.heuristics.keep_all import KeepAll
>>> check_honours_limits(KeepAll())            # returns at once: passes
>>> class Sleepy(KeepAll):
...     name = "sleepy"
...     def run(self, problem, *, seed=0, limits=None):
...         time.sleep(0.3)                     # whatever its limits
...         return super().run(problem, seed=seed, limits=limits)
>>> try:
...     check_honours_limits(Sleepy())
... except AssertionError as e:
...     print(str(e).split(" returned")[0], "after its deadline" in str(e))
Sleepy 'sleepy' True
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..limits import Limits, now
from ._base import Runs, SkipCheck, call, select, who
from .instances import Instance

__all__ = ["check_honours_limits", "SLACK_S", "TINY_S", "TRIES"]

#: seconds a component may take past its deadline
SLACK_S = 0.2
#: the tiny limits' seconds
TINY_S = 0.01
#: timed runs per limits; the best one counts
TRIES = 3


def _method(obj, kind: str):
    from ..portfolio.calls import adapt

    obj = adapt(kind, obj)

    def run(inst: Instance, limits: Limits):
        p = inst.problem
        if kind == "heuristic":
            return obj.run(p, seed=0, limits=limits)
        if kind == "bound":
            return obj.bound(p, limits=limits)
        if kind == "improver":
            return obj.improve(p, inst.witness, seed=0, limits=limits, on_incumbent=lambda *a: None, shared=None)
        return obj.solve(p, incumbent=inst.witness, limits=limits, seed=0,
                         on_incumbent=lambda *a: None, on_bound=lambda v: None)

    return run


def check_honours_limits(obj, *, kind: str | None = None, instances: Sequence[Instance] | None = None,
                         runs: Runs | None = None) -> None:
    """An object that declares ``"honours_limits"`` returns within
    :data:`SLACK_S` of its deadline, with limits already expired and with
    :data:`TINY_S` seconds, on the largest standard instance it accepts
    (module docstring)."""
    if "honours_limits" not in set(getattr(obj, "capabilities", ())):
        raise SkipCheck("it does not declare honours_limits (it runs in a process killed at its deadline)")
    kind = kind or next((k for m, k in (("solve", "formulation"), ("bound", "bound"), ("improve", "improver"),
                                        ("run", "heuristic")) if callable(getattr(obj, m, None))), None)
    if kind not in ("heuristic", "bound", "improver", "formulation"):
        raise SkipCheck(f"a {kind or 'component'} takes no limits")
    chosen, _ = select(obj, instances, runs)
    if not chosen:
        raise SkipCheck("it accepts none of the instances")
    inst = max(chosen, key=lambda i: (i.problem.graph.n, i.name))
    run = _method(obj, kind)
    call(obj, inst.name, "a first, untimed run", run, inst, Limits.seconds(0.3))
    for what, make in (("already expired", lambda: Limits(now() - 1.0, stop=threading.Event())),
                       (f"of {TINY_S} s", lambda: Limits.seconds(TINY_S, stop=threading.Event()))):
        late = []
        for _ in range(TRIES):
            limits, t0 = make(), now()
            call(obj, inst.name, f"limits {what}", run, inst, limits)
            late.append(now() - max(limits.deadline, t0))
            if late[-1] <= SLACK_S:
                break
        assert min(late) <= SLACK_S, (
            f"{who(obj)} returned {min(late):.2g} s after its deadline (limits {what}, best of {len(late)} "
            f"runs, on {inst.name}) although it declares honours_limits: give it the limits' deadline "
            f"(limits.expired(), limits.left(), limits.work_for(...)) or drop the capability")
