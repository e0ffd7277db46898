"""The one SCIP layer: every SCIP model of hybrid_remat is made, run and
freed here (:mod:`.model`, :mod:`.solve`, :mod:`.status`, :mod:`.scale`,
:mod:`.push`).

What it gives a model builder:

* :func:`scip_model` (:func:`new_model`) -- a context manager that makes a
  quiet, single threaded, seeded ``pyscipopt.Model`` and always calls
  ``model.free()``
  (the model/plugin reference cycle otherwise holds SCIP's memory until the
  cyclic GC runs; ``reference/tooling.md`` 1.11).
* :func:`set_limits` -- the time and node limits of a
  :class:`~hybrid_remat.limits.Limits` as SCIP parameters
  (:func:`cap_nodes`: a model's own node cap on top);
  :func:`apply_params` -- emphasis settings and raw parameters.
* :func:`run` -- the run loop: ``optimizeNogil`` in a worker thread, an
  event handler that reports every new incumbent (``on_solution``) and every
  trusted dual bound (``on_dual``) and interrupts SCIP from its own thread
  when the stop flag is set or the deadline passes; the waiting thread never
  calls SCIP.  SCIP does not catch Ctrl-C (``misc/catchctrlc`` off: it would
  replace Python's handler for the solve and swallow the signal where the
  solve runs outside the main thread); Python catches it, in the waiting
  thread or the caller's (which sets the stop flag); a ``userinterrupt``
  nobody asked for is still passed on; :class:`RunResult` says ``interrupted`` and
  :meth:`RunResult.reraise` raises ``KeyboardInterrupt`` once the caller has
  collected what it needs.
* :data:`STATUS_MAP` / :func:`status_of` -- SCIP's status strings onto the
  library's (``optimal``, ``feasible``, ``infeasible``, ``no_solution``,
  ``error``), as cvxpy keeps one ``STATUS_MAP`` per backend.
* The trusted-bound rule (:func:`trusted_dual`, :class:`ObjectiveScale`,
  :func:`check_bound`), below.
* :class:`PushHeuristic` -- a SCIP primal heuristic that tries plans pushed
  from outside (local search, other solvers) inside a running solve.

The trusted-bound rule
----------------------
*When.*  SCIP's dual bound is read only in the SCIP thread (event handler or
after the solve); it is trusted when the status is ``optimal`` or
``infeasible``, when no primal solution exists, or when it lies strictly
below the primal bound (at a limit SCIP may report the primal bound as the
dual one).  It is then lowered by SCIP's own optimality tolerance
(:meth:`ObjectiveScale.bound`) before it leaves the model: every objective is
scaled so that its largest coefficient is 1 (:class:`ObjectiveScale`), so
that tolerance is relative to the data, and a cost of 1e-9 s is as safe as
one of 1e6 s.  Memory is counted in a unit chosen the same way
(:class:`MemoryScale`).

*In what scope.*  A dual bound bounds exactly the plans the model admits.
A formulation reports it (``on_bound``, ``lower_bound``) only when its model
is a relaxation of the class it names in ``bound_scope`` (e.g. the full
staged model for the ``"staged"`` class, with memory sizes rounded down);
a restricted model (coarser stages, a recomputation cap, fixed variables,
windows, conservative memory units) keeps its bound in ``stats`` only.

*Against plans.*  :func:`check_bound` compares every bound with the best
simulated plan: a bound above it by more than the tolerance is a numerical
failure (reported, bound dropped); within the tolerance it is clamped.

Examples
--------
>>> with scip_model("demo") as m:
...     x = m.addVar(vtype="B", obj=-1.0)
...     res = run(m)
...     res.status, round(m.getSolVal(m.getBestSol(), x))
('optimal', 1)
>>> status_of("timelimit", has_solution=True), status_of("nodelimit", has_solution=False)
('feasible', 'no_solution')
"""

from .model import DEFAULT_PARAMS, BuildTimeout, OwnsModel, apply_params, new_model, scip_model, set_limits
from .push import PushHeuristic
from .scale import MemoryScale, ObjectiveScale, check_bound
from .solve import DEFAULT_SECONDS, RunResult, cap_nodes, run, solve_limits
from .status import BOUND_RTOL, INFINITY, LIMIT_STATUSES, STATUS_MAP, status_of, trusted_dual

__all__ = [
    "STATUS_MAP", "LIMIT_STATUSES", "status_of", "new_model", "scip_model", "set_limits", "apply_params",
    "DEFAULT_PARAMS", "run", "RunResult", "trusted_dual", "ObjectiveScale", "MemoryScale", "check_bound",
    "PushHeuristic", "BOUND_RTOL", "INFINITY", "OwnsModel", "BuildTimeout", "solve_limits", "cap_nodes", "DEFAULT_SECONDS",
]
