"""The named checks of formulations (the contract of
:func:`~hybrid_remat.hookspecs.hybrid_remat_register_formulations`).

Each accepted instance is solved with the witness plan as incumbent and
without one (:func:`check_formulation_results`), again with the witness
(:func:`check_formulation_deterministic`), once with ``stop`` already set
(:func:`check_formulation_honours_stop`) and once with an incumbent of
another graph (:func:`check_formulation_foreign_incumbent`); single thread,
``time_limit`` and ``node_limit`` per solve.

Bounds (``on_bound``, ``lower_bound``) and ``optimal`` must not exceed the
value of any valid plan.  A formulation declaring ``"scoped_bound"`` (its
bounds and optimality hold for the staged plans of its model only) is
compared with the witness only where the witness is a staged plan
(:func:`~hybrid_remat.plan.rs_from_plan` accepts it), and always with its
own plans.

Examples
--------
>>> from hybrid_remat.interfaces import Formulation, FormulationResult
>>> class Echo(Formulation):
...     name, version = "echo", "1"
...     capabilities = frozenset({"dag", "chain", "single_device"})
...     def solve(self, problem, *, incumbent=None, **kw):
...         return FormulationResult("feasible" if incumbent else "no_solution", incumbent)
>>> check_formulation_results(Echo())["status"]["chain6@100%"]
'feasible'
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

from .. import generators
from ..errors import HybridRematError
from ..interfaces import FormulationResult
from ..limits import Limits
from ..plan import keep_all_plan
from ..simulate import simulate
from ._base import FORMULATION_STATUSES, TOL, Runs, call, check_plan, close, in_staged_scope, select, who
from .instances import Instance

__all__ = ["check_formulation_results", "check_formulation_keeps_a_fitting_incumbent",
           "check_formulation_deterministic", "check_formulation_honours_stop",
           "check_formulation_foreign_incumbent"]

_SECONDS = 20.0     # per solve (a backstop; the battery's instances are tiny)
_NODES = 2000       # per solve: keeps the checks fast and deterministic


def _known(formulation, inst: Instance) -> float:
    """The value no bound of ``formulation`` may exceed on ``inst`` (``inf``:
    the witness lies outside the class its bounds cover)."""
    if "scoped_bound" in set(getattr(formulation, "capabilities", ())) and not in_staged_scope(inst):
        return math.inf
    return simulate(inst.problem, inst.witness).total_time


def _one_signature(formulation):
    """``formulation`` called the portfolio's way (an older one: wrapped, with a warning)."""
    from ..portfolio.calls import adapt

    return adapt("formulation", formulation)


def _solve(formulation, inst: Instance, what: str, *, incumbent, seed: int, time_limit: float,
           node_limit: int | None, stop=None, callbacks: bool = True):
    """``(result, [(plan, source)] reported, [bounds] reported)``."""
    plans, bounds = [], []
    kw = {}
    if callbacks:
        kw = {"on_incumbent": lambda plan, source=None: plans.append((plan, source)),
              "on_bound": lambda value: bounds.append(float(value))}
    f = _one_signature(formulation)
    limits = Limits.seconds(time_limit, nodes=node_limit, stop=stop if stop is not None else threading.Event())
    res = call(formulation, inst.name, what, f.solve, inst.problem, incumbent=incumbent, limits=limits, seed=seed,
               **kw)
    return res, plans, bounds


def _first_solves(formulation, instances, seed, time_limit, node_limit, runs) -> list:
    """``[(instance, [(incumbent given, result, plans, bounds)] with and without the witness)]``."""
    runs = runs if runs is not None else Runs()
    chosen, _ = select(formulation, instances, runs)

    def compute():
        return [(inst, [(incumbent is not None,
                         *_solve(formulation, inst, "solve", incumbent=incumbent, seed=seed, time_limit=time_limit,
                                 node_limit=node_limit))
                        for incumbent in (inst.witness, None)]) for inst in chosen]

    return runs.get(("solve", seed, time_limit, node_limit,
                     None if instances is None else tuple(i.name for i in instances)), compute)


def _check_result(obj, inst: Instance, res, known: float) -> None:
    assert isinstance(res, FormulationResult), (
        f"{who(obj)} on {inst.name}: solve returned {type(res).__name__}, not a FormulationResult")
    assert res.status in FORMULATION_STATUSES, f"{who(obj)} on {inst.name}: unknown status {res.status!r}"
    assert res.status != "infeasible", f"{who(obj)} on {inst.name}: says infeasible, but a valid plan exists"
    lb = float(res.lower_bound)
    assert lb <= known * (1 + TOL) + TOL or math.isinf(known), (
        f"{who(obj)} on {inst.name}: lower bound {lb} exceeds the cost {known} of a valid plan")
    if res.plan is not None:
        r = check_plan(obj, inst, res.plan, "its returned plan")
        assert lb <= r.total_time * (1 + TOL) + TOL, (
            f"{who(obj)} on {inst.name}: lower bound {lb} exceeds its own plan's cost {r.total_time}")
    if res.status in ("optimal", "feasible"):
        assert res.plan is not None, f"{who(obj)} on {inst.name}: status {res.status!r} without a plan"
    if res.status == "optimal":
        r = simulate(inst.problem, res.plan)
        assert r.total_time <= known * (1 + TOL) + TOL or math.isinf(known), (
            f"{who(obj)} on {inst.name}: 'optimal' plan costs {r.total_time}, more than a known plan's {known}")
        if inst.full_budget and inst.problem.is_single_device:
            assert close(r.total_time, inst.problem.base_cost), (
                f"{who(obj)} on {inst.name}: 'optimal' at full budget must cost the sum of node costs "
                f"{inst.problem.base_cost}, got {r.total_time}")


def check_formulation_results(formulation, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                              time_limit: float = _SECONDS, node_limit: int | None = _NODES,
                              runs: Runs | None = None) -> dict:
    """With the witness as incumbent and without: a
    :class:`~hybrid_remat.interfaces.FormulationResult` with a documented
    status (never ``infeasible``: the witness exists), a valid plan behind
    ``optimal``/``feasible``, ``optimal`` no worse than the witness, bounds
    (returned and ``on_bound``) below every valid plan, every
    ``on_incumbent`` plan valid with a string source."""
    status = {}
    for inst, solves in _first_solves(formulation, instances, seed, time_limit, node_limit, runs):
        known = _known(formulation, inst)
        for _, res, plans, bounds in solves:
            for plan, source in plans:
                assert isinstance(source, str), f"{who(formulation)}: on_incumbent source must be a string"
                check_plan(formulation, inst, plan, f"incumbent from {source!r}")
            _check_result(formulation, inst, res, known)
            for b in bounds:
                assert b <= known * (1 + TOL) + TOL or math.isinf(known), (
                    f"{who(formulation)} on {inst.name}: on_bound({b}) exceeds a valid plan's cost {known}")
        status[inst.name] = solves[0][1].status
    return {"status": status}


def check_formulation_keeps_a_fitting_incumbent(formulation, *, instances: Sequence[Instance] | None = None,
                                                seed: int = 0, time_limit: float = _SECONDS,
                                                node_limit: int | None = _NODES, runs: Runs | None = None) -> None:
    """Given the keep-all incumbent at 100 % budget it returns a plan (tag
    ``plan_at_full_budget``)."""
    for inst, solves in _first_solves(formulation, instances, seed, time_limit, node_limit, runs):
        given, res = solves[0][0], solves[0][1]
        if given and inst.full_budget:
            assert getattr(res, "plan", None) is not None, (
                f"{who(formulation)} on {inst.name}: no plan although the incumbent it was given fits "
                f"(status {getattr(res, 'status', None)!r})")


def check_formulation_deterministic(formulation, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                    time_limit: float = _SECONDS, node_limit: int | None = _NODES,
                                    runs: Runs | None = None) -> None:
    """Solved again with the same incumbent and seed (one thread): the same
    status and objective (tag ``deterministic``)."""
    for inst, solves in _first_solves(formulation, instances, seed, time_limit, node_limit, runs):
        first = solves[0][1]
        again, _, _ = _solve(formulation, inst, "solve, second time", incumbent=inst.witness, seed=seed,
                             time_limit=time_limit, node_limit=node_limit, callbacks=False)
        assert again.status == first.status and close(again.objective, first.objective), (
            f"{who(formulation)} is not deterministic on {inst.name}: {first.status}/{first.objective} "
            f"then {again.status}/{again.objective} for seed {seed}")


def check_formulation_honours_stop(formulation, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                   time_limit: float = _SECONDS, node_limit: int | None = _NODES,
                                   runs: Runs | None = None) -> None:
    """With ``stop`` already set it returns a result that keeps the contract."""
    chosen, _ = select(formulation, instances, runs)
    for inst in chosen:
        stop = threading.Event()
        stop.set()
        res, _, _ = _solve(formulation, inst, "solve with stop set", incumbent=inst.witness, seed=seed,
                           time_limit=time_limit, node_limit=node_limit, stop=stop, callbacks=False)
        _check_result(formulation, inst, res, _known(formulation, inst))


def check_formulation_foreign_incumbent(formulation, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                                        time_limit: float = _SECONDS, node_limit: int | None = _NODES,
                                        runs: Runs | None = None) -> None:
    """An incumbent for another graph is bad input: ignored, or refused with
    a :class:`~hybrid_remat.errors.HybridRematError`."""
    chosen, _ = select(formulation, instances, runs)
    for inst in chosen:
        alien = keep_all_plan(generators.chain(inst.problem.graph.n + 3), inst.problem.primary.name)
        try:
            res = _one_signature(formulation).solve(inst.problem, incumbent=alien, seed=seed,
                                                    limits=Limits.seconds(time_limit, nodes=node_limit))
        except HybridRematError:
            continue
        except Exception as e:
            raise AssertionError(f"{who(formulation)} raised {type(e).__name__} (not a HybridRematError) when "
                                 f"given an incumbent for another graph on {inst.name}: {e}") from e
        _check_result(formulation, inst, res, _known(formulation, inst))
