"""A conformance battery for plugin objects (in the manner of
scikit-learn's ``check_estimator`` and cvxpy's solver test helpers).

Third-party test suites call it on their objects; our own tests call it on
every registered built-in::

    from hybrid_remat.testing import check_heuristic
    def test_my_heuristic_conforms():
        check_heuristic(MyHeuristic())

Each ``check_*`` runs the object on small standard instances
(:func:`standard_instances`: a chain, a small training graph, a random DAG,
each at 100 % of the keep-all peak and at a tight budget, and a CPU+GPU
problem for ``multi_device`` objects) and raises :class:`AssertionError`
naming the object, the instance and what went wrong.  On success it returns
a report ``{"checked": [...], "skipped": [...]}``.  Every plan an object
returns is verified with :func:`~hybrid_remat.simulate.simulate`.

What is asserted
----------------
* plans pass ``simulate`` within the budget and use only the problem's
  devices; ``None`` (heuristics) only where allowed (never at 100 %
  budget unless ``require_plan_at_full_budget=False``);
* the same seed gives the same result;
* capabilities are respected: an object is only called on the instances it
  accepts (:func:`~hybrid_remat.interfaces.accepts`), and must not raise on
  them; it must accept at least one instance;
* errors on bad input are :class:`~hybrid_remat.errors.HybridRematError`
  subclasses;
* bounds (and legacy ``"bound_only"`` heuristics): a deterministic bound
  below the witness (and below the brute-force optimum on tiny graphs when
  its scope is every plan);
* improvers: every reported and returned plan valid, none worse than the
  start;
* formulations: statuses from the documented set, bounds below every valid
  plan, ``optimal`` only with a plan no worse than the known one, every
  ``on_incumbent`` plan valid, a set ``stop`` event honoured;
* cost models: finite non-negative float arrays of length ``n``,
  deterministic, usable as a cost kind;
* loaders: files written by the battery (``remat-graph/1``, gzip and
  plain, and node-link JSON) read back to the same graph when sniffed, a
  loader's own ``save(graph, path)`` round-trips when it has one, garbage
  is refused with a ``HybridRematError``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from . import generators
from .budgets import keep_all_peak
from .errors import HybridRematError
from .graph import Graph
from .interfaces import FormulationResult, accepts, objectives_of
from .plan import Plan, keep_all_plan, plan_from_order, rs_from_plan
from .problem import Device, Problem, default_links
from .simulate import simulate
from .testing_io import (
    _check_declared,
    _who,
    check_cost_model,
    check_loader,
    standard_graphs,
    write_node_link,
    write_remat_graph,
)

__all__ = [
    "Instance", "standard_instances", "standard_graphs", "check_heuristic", "check_bound", "check_improver",
    "check_formulation",
    "check_cost_model", "check_loader", "write_remat_graph", "write_node_link", "FORMULATION_STATUSES",
]

FORMULATION_STATUSES = frozenset({"optimal", "feasible", "infeasible", "no_solution", "error"})
_TOL = 1e-6


@dataclass(frozen=True)
class Instance:
    """A standard problem with a known valid plan.

    Attributes
    ----------
    name : str
        E.g. ``"training9@tight"``.
    problem : Problem
    witness : Plan
        A valid plan for ``problem`` (proof that it is feasible; the
        incumbent given to formulations).
    full_budget : bool
        The budget is the keep-all peak (the reference order fits).
    """

    name: str
    problem: Problem
    witness: Plan
    full_budget: bool


def _training9() -> Graph:
    fwd = nx.DiGraph()
    for i, (b, c) in enumerate([(4, 2.0), (6, 3.0), (3, 1.0), (5, 2.0)]):
        fwd.add_node(i, bytes=b, cost=c)
    fwd.add_edges_from([(0, 1), (1, 2), (2, 3)])
    return generators.training_graph(fwd, name="training9")


def _blocks13() -> Graph:
    """A stem, two identical (wide, narrow) blocks and a head, with its backward pass: repeated blocks."""
    fwd = nx.DiGraph()
    for i, (b, c) in enumerate([(2, 1.0), (4, 2.0), (1, 1.0), (4, 2.0), (1, 1.0), (1, 1.0)]):
        fwd.add_node(i, bytes=b, cost=c)
        if i:
            fwd.add_edge(i - 1, i)
    return generators.training_graph(fwd, name="blocks13")


def standard_instances(*, multi_device: bool = True, makespan: bool = False) -> list[Instance]:
    """The battery's problems (small: at most 13 nodes each; one with repeated blocks).

    Tight budgets are the smallest feasible ones (a node with its inputs);
    the witness plans that reach them were found by exhaustive search over
    recomputation sets and are stored as compute sequences.  With
    ``makespan`` the CPU+GPU problems come a second time with the makespan
    objective (for objects that declare ``"makespan"``).
    """
    out = []
    ch = generators.chain(6, bytes=[3, 1, 4, 1, 5, 9], cost=[2.0, 7.0, 1.0, 8.0, 2.0, 8.0], name="chain6")
    tr = _training9()
    rd = generators.random_dag(10, p=0.3, seed=3)
    for g, tight_seq in ((ch, None), (tr, [0, 1, 2, 3, 4, 5, 6, 0, 1, 7, 0, 8]),
                         (rd, [0, 1, 2, 5, 4, 6, 7, 0, 3, 8, 1, 4, 9]),
                         (_blocks13(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 11, 12])):
        peak = keep_all_peak(g)
        out.append(Instance(f"{g.name}@100%", Problem.single(g, peak), keep_all_plan(g, "cost"), True))
        if tight_seq is not None:
            w = plan_from_order(g, tight_seq, "cost")
            budget = simulate(Problem.single(g, peak), w).peak_bytes["cost"]
            out.append(Instance(f"{g.name}@tight", Problem.single(g, budget), w, False))
    if multi_device:
        g2 = generators.random_dag(8, p=0.35, seed=5, kinds=("gpu", "cpu"))
        peak = keep_all_peak(g2)
        links = default_links(g2, ["gpu", "cpu"])
        full = Problem(g2, [Device("gpu", "gpu", peak), Device("cpu", "cpu", 4 * peak)], links)
        out.append(Instance(f"{g2.name}/gpu+cpu@100%", full, keep_all_plan(g2, "gpu"), True))
        tight_gpu = max(int(np.max(g2.bytes)), int(0.5 * peak))
        tight = Problem(g2, [Device("gpu", "gpu", tight_gpu), Device("cpu", "cpu", 4 * peak)], links, check=False)
        cpu_plan = keep_all_plan(g2, "cpu")
        out.append(Instance(f"{g2.name}/gpu+cpu@tight", tight, cpu_plan, False))
        if makespan:
            out += [Instance(f"{g2.name}/gpu+cpu@100%/makespan", full.with_objective("makespan"),
                             keep_all_plan(g2, "gpu"), True),
                    Instance(f"{g2.name}/gpu+cpu@tight/makespan", tight.with_objective("makespan"), cpu_plan, False)]
    for inst in out:  # the battery's own premise: every witness is valid
        r = simulate(inst.problem, inst.witness)
        assert r.valid, f"internal: witness of {inst.name} invalid: {r.error}"
    return out


# --------------------------------------------------------------------- helpers
def _check_plan(obj, inst: Instance, plan, what: str):
    assert isinstance(plan, Plan), f"{_who(obj)} on {inst.name}: {what} is {type(plan).__name__}, not a Plan"
    names = {d.name for d in inst.problem.devices}
    if inst.problem.n_devices > 1:
        bad = set(plan.devices) - names
        assert not bad, f"{_who(obj)} on {inst.name}: {what} uses unknown devices {sorted(bad)}"
    try:
        r = simulate(inst.problem, plan)
    except HybridRematError as e:
        raise AssertionError(f"{_who(obj)} on {inst.name}: {what} cannot be simulated: {e}") from None
    assert r.valid, f"{_who(obj)} on {inst.name}: {what} is invalid: {r.error}"
    return r


def _select(obj, instances: Sequence[Instance] | None) -> tuple[list[Instance], list[tuple[str, str]]]:
    insts = list(instances) if instances is not None else standard_instances(
        makespan="makespan" in objectives_of(obj))
    chosen, skipped = [], []
    for inst in insts:
        ok, why = accepts(obj, inst.problem)
        if ok:
            chosen.append(inst)
        else:
            skipped.append((inst.name, why))
    assert chosen, f"{_who(obj)} accepts none of the instances ({skipped}): check its capabilities"
    return chosen, skipped


def _call(obj, inst: Instance, what: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except AssertionError:
        raise
    except Exception as e:
        raise AssertionError(
            f"{_who(obj)} raised {type(e).__name__}: {e} on {inst.name}, a problem its capabilities accept ({what})"
        ) from e


# ------------------------------------------------------------------ heuristics
def check_heuristic(heuristic, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                    require_plan_at_full_budget: bool = True) -> dict:
    """Check a heuristic against the contract of
    :func:`~hybrid_remat.hookspecs.hybrid_remat_register_heuristics`.

    Parameters
    ----------
    heuristic : object with ``name``, ``version``, ``capabilities``, ``rank``, ``run``
    instances : sequence of Instance, optional
        Default :func:`standard_instances`.
    seed : int
    require_plan_at_full_budget : bool
        A heuristic must find a plan when the keep-all order fits (default).

    Returns
    -------
    dict
        ``{"checked": [names], "skipped": [(name, reason)], "found": {name: total_time or None}}``.
    """
    _check_declared(heuristic, "heuristic")
    assert isinstance(getattr(heuristic, "rank", None), (int, float)), f"{_who(heuristic)}: `rank` must be a number"
    assert callable(getattr(heuristic, "run", None)), f"{_who(heuristic)} has no run()"
    chosen, skipped = _select(heuristic, instances)
    found = {}
    if "bound_only" in heuristic.capabilities:  # legacy: a bound riding the heuristic hook
        for inst in chosen:
            plan = _call(heuristic, inst, "run", heuristic.run, inst.problem, seed=seed)
            assert plan is None, f"{_who(heuristic)} is bound_only but returned a plan on {inst.name}"
        return check_bound(heuristic, instances=chosen)
    for inst in chosen:
        plan = _call(heuristic, inst, "run", heuristic.run, inst.problem, seed=seed)
        if plan is None:
            assert not (inst.full_budget and require_plan_at_full_budget), (
                f"{_who(heuristic)} returned None on {inst.name}, where the reference order fits")
            found[inst.name] = None
        else:
            r = _check_plan(heuristic, inst, plan, "its plan")
            found[inst.name] = r.total_time
        again = _call(heuristic, inst, "run, second time", heuristic.run, inst.problem, seed=seed)
        assert (plan is None) == (again is None) and (plan is None or plan == again), (
            f"{_who(heuristic)} is not deterministic on {inst.name} for seed {seed}")
    return {"checked": [i.name for i in chosen], "skipped": skipped, "found": found}


def check_bound(bound, *, instances: Sequence[Instance] | None = None) -> dict:
    """Check a bound against the contract of
    :func:`~hybrid_remat.hookspecs.hybrid_remat_register_bounds` (a legacy
    ``bound_only`` heuristic through its adapter): a
    :class:`~hybrid_remat.interfaces.BoundResult` or ``None``, below every
    valid plan (the witness, and the brute-force optimum on graphs of at
    most 8 nodes when its scope is every plan), deterministic.

    Returns
    -------
    dict
        ``{"checked": [names], "skipped": [(name, reason)], "found": {name: value or None}}``.
    """
    from .interfaces import ALL_PLANS, BoundResult
    from .limits import Limits
    from .oracle import brute_force
    from .portfolio.calls import as_bound, call_bound

    b = as_bound(bound)
    _check_declared(b, "bound")
    chosen, skipped = _select(b, instances)
    found = {}
    for inst in chosen:
        res = _call(b, inst, "bound", call_bound, b, inst.problem, limits=Limits.seconds(60.0))
        found[inst.name] = None if res is None else res.value
        if res is None:
            continue
        assert isinstance(res, BoundResult) and isinstance(res.value, (int, float)) and not math.isnan(res.value), (
            f"{_who(b)}: bound {res!r} on {inst.name}")
        known = inst.problem.objective.value(simulate(inst.problem, inst.witness))
        assert res.value <= known * (1 + 1e-9), f"{_who(b)}: bound {res.value} above the witness {known} on {inst.name}"
        if res.scope == ALL_PLANS and inst.problem.graph.n <= 8 and inst.problem.objective.name == "serial":
            opt = brute_force(inst.problem)[0]
            assert res.value <= opt * (1 + 1e-9), f"{_who(b)}: bound {res.value} above the optimum {opt} on {inst.name}"
        again = _call(b, inst, "bound, second time", call_bound, b, inst.problem, limits=Limits.seconds(60.0))
        assert again is not None and again.value == res.value, f"{_who(b)} is not deterministic on {inst.name}"
    return {"checked": [i.name for i in chosen], "skipped": skipped, "found": found}


def check_improver(improver, *, instances: Sequence[Instance] | None = None, seed: int = 0, moves: int = 50) -> dict:
    """Check an improver against the contract of
    :func:`~hybrid_remat.hookspecs.hybrid_remat_register_improvers`: from
    each instance's witness, every plan it reports (``on_incumbent``) and
    returns is valid, and the returned one is no worse than the witness.
    It runs with ``moves`` as its node limit (legacy ``max_iters``).

    Returns
    -------
    dict
        ``{"checked": [names], "skipped": [(name, reason)], "found": {name: value or None}}``.
    """
    from .limits import Limits
    from .portfolio.calls import call_improver

    _check_declared(improver, "improver")
    assert callable(getattr(improver, "improve", None)), f"{_who(improver)} has no improve()"
    chosen, skipped = _select(improver, instances)
    found = {}
    for inst in chosen:
        seen: list = []
        out = _call(improver, inst, "improve", call_improver, improver, inst.problem, inst.witness, seed=seed,
                    limits=Limits.seconds(30.0, nodes=moves), on_incumbent=lambda p, s=None, _seen=seen: _seen.append(p))
        for plan in seen:
            _check_plan(improver, inst, plan, "a reported plan")
        found[inst.name] = None
        if out is not None:
            value = inst.problem.objective.value(_check_plan(improver, inst, out, "its plan"))
            known = inst.problem.objective.value(simulate(inst.problem, inst.witness))
            assert value <= known * (1 + 1e-9), f"{_who(improver)}: {value} is worse than its start {known} on {inst.name}"
            found[inst.name] = value
    return {"checked": [i.name for i in chosen], "skipped": skipped, "found": found}


# ---------------------------------------------------------------- formulations
def check_formulation(formulation, *, instances: Sequence[Instance] | None = None, seed: int = 0,
                      time_limit: float = 20.0, node_limit: int | None = 2000,
                      require_plan_at_full_budget: bool = True) -> dict:
    """Check a formulation against the contract of
    :func:`~hybrid_remat.hookspecs.hybrid_remat_register_formulations`.

    Each accepted instance is solved with the witness plan as incumbent and
    without one, twice with the same seed (single thread: same status and
    objective), and once with ``stop`` already set.

    Bounds (``on_bound``, ``lower_bound``) and ``optimal`` must not exceed
    the cost of any valid plan.  A formulation declaring the capability
    ``"scoped_bound"`` (its bounds and optimality hold for the staged plans
    of its model only) is compared with the witness only where the witness
    is a staged plan (:func:`~hybrid_remat.plan.rs_from_plan` accepts it),
    and always with its own plans.

    Parameters
    ----------
    formulation : object with ``name``, ``version``, ``capabilities``, ``solve``
    instances : sequence of Instance, optional
    seed : int
    time_limit : float
        Per solve (a backstop; the battery's instances are tiny).
    node_limit : int or None
        Per solve, passed through (keeps the check fast and deterministic).
    require_plan_at_full_budget : bool
        Given the (keep-all) incumbent at 100 % budget, the formulation
        must return a plan (default).

    Returns
    -------
    dict
        ``{"checked", "skipped", "status": {name: status}}``.
    """
    _check_declared(formulation, "formulation")
    chosen, skipped = _select(formulation, instances)
    statuses = {}
    scoped = "scoped_bound" in set(getattr(formulation, "capabilities", ()))
    for inst in chosen:
        known = simulate(inst.problem, inst.witness).total_time
        if scoped and not _in_staged_scope(inst):
            known = math.inf  # the witness may lie outside the model its bounds cover
        results = []
        for incumbent in (inst.witness, None):
            seen_plans, seen_bounds = [], []

            def on_incumbent(plan, source, _seen=seen_plans, _inst=inst):
                assert isinstance(source, str), f"{_who(formulation)}: on_incumbent source must be a string"
                _seen.append(_check_plan(formulation, _inst, plan, f"incumbent from {source!r}").total_time)

            def on_bound(value, _seen=seen_bounds):
                _seen.append(float(value))

            res = _call(formulation, inst, "solve", formulation.solve, inst.problem, incumbent=incumbent,
                        time_limit=time_limit, node_limit=node_limit, seed=seed, threads=1,
                        on_incumbent=on_incumbent, on_bound=on_bound, stop=threading.Event())
            _check_result(formulation, inst, res, known, incumbent is not None)
            if incumbent is not None and inst.full_budget and require_plan_at_full_budget:
                assert res.plan is not None, (
                    f"{_who(formulation)} on {inst.name}: no plan although the incumbent it was given fits "
                    f"(status {res.status!r})")
            for b in seen_bounds:
                assert b <= known * (1 + _TOL) + _TOL or math.isinf(known), (
                    f"{_who(formulation)} on {inst.name}: on_bound({b}) exceeds a valid plan's cost {known}")
            results.append(res)
        again = _call(formulation, inst, "solve, second time", formulation.solve, inst.problem,
                      incumbent=inst.witness, time_limit=time_limit, node_limit=node_limit, seed=seed, threads=1)
        assert again.status == results[0].status and _close(again.objective, results[0].objective), (
            f"{_who(formulation)} is not deterministic on {inst.name}: {results[0].status}/{results[0].objective} "
            f"then {again.status}/{again.objective} for seed {seed}")
        stop = threading.Event()
        stop.set()
        stopped = _call(formulation, inst, "solve with stop set", formulation.solve, inst.problem,
                        incumbent=inst.witness, time_limit=time_limit, node_limit=node_limit, seed=seed, threads=1,
                        stop=stop)
        _check_result(formulation, inst, stopped, known, True)
        # a hint for another graph is a bad input: ignore it or say so with a HybridRematError
        alien = keep_all_plan(generators.chain(inst.problem.graph.n + 3), inst.problem.primary.name)
        try:
            res = formulation.solve(inst.problem, incumbent=alien, time_limit=time_limit, node_limit=node_limit,
                                    seed=seed, threads=1)
        except HybridRematError:
            pass
        except Exception as e:
            raise AssertionError(f"{_who(formulation)} raised {type(e).__name__} (not a HybridRematError) when "
                                 f"given an incumbent for another graph on {inst.name}: {e}") from e
        else:
            _check_result(formulation, inst, res, known, False)
        statuses[inst.name] = results[0].status
    return {"checked": [i.name for i in chosen], "skipped": skipped, "status": statuses}


def _in_staged_scope(inst: Instance) -> bool:
    """The witness is a staged plan (first computations in the reference
    order, one device): inside the model of every staged formulation."""
    if not inst.problem.is_single_device:
        return False
    try:
        rs_from_plan(inst.problem.graph, inst.witness)
    except HybridRematError:
        return False
    return True


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= _TOL * max(1.0, abs(a), abs(b))


def _check_result(obj, inst: Instance, res, known: float, had_incumbent: bool) -> None:
    assert isinstance(res, FormulationResult), (
        f"{_who(obj)} on {inst.name}: solve returned {type(res).__name__}, not a FormulationResult")
    assert res.status in FORMULATION_STATUSES, f"{_who(obj)} on {inst.name}: unknown status {res.status!r}"
    assert res.status != "infeasible", f"{_who(obj)} on {inst.name}: says infeasible, but a valid plan exists"
    lb = float(res.lower_bound)
    assert lb <= known * (1 + _TOL) + _TOL or math.isinf(known), (
        f"{_who(obj)} on {inst.name}: lower bound {lb} exceeds the cost {known} of a valid plan")
    if res.plan is not None:
        r = _check_plan(obj, inst, res.plan, "its returned plan")
        assert lb <= r.total_time * (1 + _TOL) + _TOL, (
            f"{_who(obj)} on {inst.name}: lower bound {lb} exceeds its own plan's cost {r.total_time}")
    if res.status in ("optimal", "feasible"):
        assert res.plan is not None, f"{_who(obj)} on {inst.name}: status {res.status!r} without a plan"
    if res.status == "optimal":
        r = simulate(inst.problem, res.plan)
        assert r.total_time <= known * (1 + _TOL) + _TOL or math.isinf(known), (
            f"{_who(obj)} on {inst.name}: 'optimal' plan costs {r.total_time}, more than a known plan's {known}")
        if inst.full_budget and inst.problem.is_single_device:
            assert _close(r.total_time, inst.problem.base_cost), (
                f"{_who(obj)} on {inst.name}: 'optimal' at full budget must cost the sum of node costs "
                f"{inst.problem.base_cost}, got {r.total_time}")
