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

Examples
--------
>>> exit_code(Terminated()), exit_code(KeyboardInterrupt())
(143, 130)
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

__all__ = ["Terminated", "terminate_raises", "exit_code", "signal_name"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (raised in the main thread by :func:`terminate_raises`)."""


def _raise_terminated(signum, frame):
    raise Terminated("SIGTERM")


_raise_terminated.yields_to_solve = True  # a solve may install its own handler over it


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminate_raises():
    """While inside, SIGTERM raises :class:`Terminated` in the main thread
    (where its handler is the default one)."""
    saved = None
    if _main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        saved = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        if saved is not None:
            signal.signal(signal.SIGTERM, saved)


def signal_name(exc: BaseException) -> str:
    """``"SIGTERM"`` for :class:`Terminated` (or an interruption naming it), else ``"SIGINT"``."""
    name = getattr(exc, "signal", None)
    if isinstance(name, str):
        return name
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"


def exit_code(exc: BaseException) -> int:
    """130 for SIGINT, 143 for SIGTERM (128 + the signal's number)."""
    return 143 if signal_name(exc) == "SIGTERM" else 130
