"""Making, configuring and freeing SCIP models.

Examples
--------
>>> with scip_model("demo", params={"presolve": "OFF"}) as m:
...     m.getParam("randomization/randomseedshift"), m.getParam("lp/threads")
(0, 1)
"""

from __future__ import annotations

import contextlib
import math

from ..errors import SolverError

__all__ = ["new_model", "scip_model", "set_limits", "apply_params", "DEFAULT_PARAMS", "BuildTimeout", "OwnsModel"]

#: SCIP_STAGE_SOLVING (a model stopped at a limit; ``optimize()`` resumes it)
_STAGE_SOLVING = 9  # pyscipopt.SCIP_STAGE.SOLVING

#: SCIP settings chosen by measurement (benchmarks/exact_tradeoffs.py; FCN8 @0.9: the default settings spend the
#: first 25 s in presolve, cut rounds and strong branching without improving the start, these find RENS plans)
DEFAULT_PARAMS = {"presolve": "FAST", "separating": "OFF", "heuristics": "AGGRESSIVE"}


def new_model(name: str = "hybrid_remat", *, seed: int = 0, threads: int = 1, quiet: bool = True,
              params: dict | None = None):
    """A configured ``pyscipopt.Model`` (the caller frees it; prefer
    :func:`scip_model`, or an object whose ``free()`` a ``finally`` calls).

    Parameters
    ----------
    name : str
    seed : int
        ``randomization/randomseedshift``.
    threads : int
        LP threads and SCIP's thread cap (1 by default: several models may
        run side by side, one per thread).
    quiet : bool
        Hide SCIP's log (its error messages still go to stderr).
    params : dict, optional
        See :func:`apply_params`.

    Raises
    ------
    SolverError
        pyscipopt is not installed.
    """
    try:
        from pyscipopt import Model
    except ImportError as e:  # pragma: no cover - a core dependency
        raise SolverError(f"pyscipopt is needed for the exact models: {e}") from None
    m = Model(name)
    try:
        if quiet:
            m.hideOutput()
        m.setParam("randomization/randomseedshift", int(seed) % 2**31)
        m.setParam("lp/threads", max(1, int(threads)))
        m.setParam("parallel/maxnthreads", max(1, int(threads)))
        if params:
            apply_params(m, params)
    except BaseException:
        m.free()
        raise
    return m


@contextlib.contextmanager
def scip_model(name: str = "hybrid_remat", *, seed: int = 0, threads: int = 1, quiet: bool = True,
               params: dict | None = None, limits=None):
    """A :func:`new_model` freed on exit whatever happens; ``limits`` are set
    with :func:`set_limits` (:func:`run` sets them again before solving)."""
    m = new_model(name, seed=seed, threads=threads, quiet=quiet, params=params)
    try:
        if limits is not None:
            set_limits(m, limits)
        yield m
    finally:
        m.free()


#: SCIP overruns its time limit by what one LP solve or sub-MIP heuristic takes (measured up to ~1.7 s on
#: 60k-variable models on the shared 2-core machine): it is told to stop this share of the time left earlier
TIME_MARGIN = 0.1
#: ... and at most this many seconds earlier
MAX_TIME_MARGIN_S = 2.0


def set_limits(model, limits) -> float:
    """Set ``limits/time`` (the seconds left, less a margin for SCIP's
    overrun: :data:`TIME_MARGIN`; SCIP counts total solving time, so the
    solving time so far is added) and ``limits/nodes`` (both reset to
    unlimited when ``limits`` has none).  Returns the seconds left (``inf``
    without a deadline)."""
    left = math.inf if limits is None else limits.left()
    if math.isfinite(left):
        spent = model.getSolvingTime() if model.getStage() == _STAGE_SOLVING else 0.0
        margin = min(MAX_TIME_MARGIN_S, TIME_MARGIN * left)
        model.setParam("limits/time", max(0.0, float(left) - margin) + spent)
    else:
        model.setParam("limits/time", 1e20)
    nodes = None if limits is None else limits.nodes
    model.setParam("limits/nodes", -1 if nodes is None else int(nodes))
    return left


def apply_params(model, params: dict) -> None:
    """Set SCIP parameters; the keys ``presolve``, ``separating`` and
    ``heuristics`` take an emphasis (``"FAST"``, ``"OFF"``, ``"AGGRESSIVE"``,
    ``"DEFAULT"``), every other key is a SCIP parameter name."""
    from pyscipopt import SCIP_PARAMSETTING

    setters = {"presolve": model.setPresolve, "separating": model.setSeparating, "heuristics": model.setHeuristics}
    for k, v in params.items():
        if k in setters:
            setters[k](getattr(SCIP_PARAMSETTING, str(v).upper()))
        else:
            model.setParam(k, v)


class BuildTimeout(SolverError):
    """Model construction did not finish before the deadline (or the stop flag was set)."""


class OwnsModel:
    """Base of the objects that build and own a SCIP model (``self.model``):
    ``free()`` releases it (idempotent) and the object is a context
    manager that frees it on exit."""

    model = None

    def free(self) -> None:
        """Release the SCIP model."""
        if getattr(self, "model", None) is not None:
            try:
                self.model.free()
            finally:
                self.model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.free()
