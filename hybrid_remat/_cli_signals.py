"""The command line's one signal contract, for every command and every
worker count.

* SIGINT (Ctrl-C) ends a command with exit code 130, SIGTERM with 143;
  where a command has a best result (``solve``'s plan, ``sweep``'s rows) it
  is written first, marked interrupted.
* Outside a solve, SIGTERM raises :class:`Terminated` (a
  ``KeyboardInterrupt``) in the main thread, as Ctrl-C raises
  ``KeyboardInterrupt``: ``finally`` blocks run, process pools are
  terminated, nothing is left behind.
* During a solve, :func:`hybrid_remat.anytime.anytime_solve` handles both
  signals itself (``signals=("SIGINT", "SIGTERM")``): it installs its
  handlers over the default ones and over :class:`Terminated`'s, which
  yields to a solve (``yields_to_solve``), and keeps the best plan.
* A signal the process was started with ignored (a background job of a
  script) stays ignored.
* A signal that lands inside a finalizer (``weakref.finalize``, ``__del__``:
  Python prints an exception raised there and drops it) is sent again a few
  milliseconds later, so that it is raised in the code the finalizer
  interrupted (a SIGTERM during ``torch-plan`` was once lost that way and
  the command ran on).

Examples
--------
>>> exit_code(Terminated()), exit_code(KeyboardInterrupt())
(143, 130)
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

__all__ = ["Terminated", "terminate_raises", "exit_code", "signal_name"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (raised in the main thread by :func:`terminate_raises`)."""


#: seconds after which a signal that landed in a finalizer is sent again
RESEND_S = 0.02


def _in_finalizer(frame) -> bool:
    """Whether ``frame`` runs inside a finalizer, where an exception is printed and dropped."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or (code.co_name == "__call__" and code.co_filename.endswith("weakref.py")):
            return True
        frame = frame.f_back
    return False


def _resend_later(signum) -> None:
    t = threading.Timer(RESEND_S, os.kill, (os.getpid(), signum))
    t.daemon = True
    t.start()


def _raise_terminated(signum, frame):
    if _in_finalizer(frame):
        _resend_later(signum)
        return
    raise Terminated("SIGTERM")


def _raise_interrupt(signum, frame):
    if _in_finalizer(frame):
        _resend_later(signum)
        return
    raise KeyboardInterrupt


_raise_terminated.yields_to_solve = True  # a solve may install its own handler over it
_raise_interrupt.yields_to_solve = True


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminate_raises():
    """While inside, SIGTERM raises :class:`Terminated` in the main thread
    (where its handler is the default one) and SIGINT ``KeyboardInterrupt``
    (where its handler is Python's default one), neither of them lost in a
    finalizer (module docstring)."""
    saved = {}
    if _main_thread():
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, _raise_terminated)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            saved[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupt)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def signal_name(exc: BaseException) -> str:
    """``"SIGTERM"`` for :class:`Terminated` (or an interruption naming it), else ``"SIGINT"``."""
    name = getattr(exc, "signal", None)
    if isinstance(name, str):
        return name
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"


def exit_code(exc: BaseException) -> int:
    """130 for SIGINT, 143 for SIGTERM (128 + the signal's number)."""
    return 143 if signal_name(exc) == "SIGTERM" else 130
