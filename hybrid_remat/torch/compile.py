"""Our planner inside ``torch.compile``: a custom activation-memory solver.

``torch.compile``'s partitioner (AOTAutograd's min-cut) decides which
forward values the compiled backward reads from memory and which it
recomputes.  Under ``activation_memory_budget < 1`` it asks a *knapsack
solver* which of the expensive ("banned") nodes it may recompute, then
re-runs the min-cut with those allowed.  The built-in solvers ("dp",
"greedy", "ilp") weigh each node's size against its FLOPs, one node at a
time, against a normalised budget.  :class:`CompileSolver` answers the same
question by planning the joint graph it is given: for each candidate answer
it runs the min-cut itself, maps the values the partition saves onto a remat
graph of the joint graph, and simulates the step (forward, then backward
with recomputations where they are needed): the *peak* memory, recompute
chains and the time are the simulator's.  It returns the fastest answer whose
simulated peak fits ``budget``; candidates come from orders of the banned
nodes (most bytes per recompute-second first) and from the keep sets of
:func:`hybrid_remat.torch.plan_graph`'s search, which maps the plan of
:func:`hybrid_remat.anytime.anytime_solve`.

One line::

    hrt.CompileSolver(budget=0.5).install()   # 50% of the step's keep-all peak
    step = torch.compile(train_step)           # or model = torch.compile(model)

``install()`` sets ``torch._functorch.config.activation_memory_budget_solver``
to the solver and ``activation_memory_budget`` to a small positive value, so
that the partitioner always asks it (a budget of 1.0 never does; with a
larger one the partitioner may settle for its own plan first).  ``uuid()``
folds the solver's source and settings into the compile cache key.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import warnings

import numpy as np
from torch._inductor.custom_graph_pass import CustomKnapsackSolver, CustomPartitionerFn, get_hash_for_files

from ..budgets import keep_all_peak, parse_budget_spec
from ..errors import BudgetError, HybridRematError
from ..problem import Device, Problem
from ..simulate import simulate
from ._joint import joint_to_graph
from ._planner import executable_plan, search_keep_set

__all__ = ["CompileSolver", "PartitionRecorder", "Program", "partition_stats"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = tuple(os.path.join(_HERE, f) for f in ("compile.py", "_joint.py", "_planner.py", "cost_model.py"))
#: ``activation_memory_budget`` set by :meth:`CompileSolver.install` (below any ratio the min-cut reaches).
ASK_ALWAYS = 1e-4


class CompileSolver(CustomKnapsackSolver):
    """Plans ``torch.compile``'s activation memory with the simulator.

    Parameters
    ----------
    budget : float, int or str
        Peak activation memory of each compiled graph's step: a fraction of
        its keep-all peak (``0.5``), a percentage (``"50%"``), a size
        (``"2GiB"``) or bytes.
    time_limit : float
        Seconds per joint graph.
    use_solvers : bool
        Also map the plan of ``anytime_solve`` (costs time, may find plans
        the orders miss).
    over_budget : {"raise", "warn"}
        When no partition's simulated peak fits ``budget`` (the min-cut
        saves more than the budget whatever the knapsack answers):
        ``"raise"`` (default) a :class:`~hybrid_remat.errors.BudgetError`
        that names the lowest peak and a budget that plans (``torch.compile``
        reports it as the backend's failure); ``"warn"``: warn and use the
        partition of lowest peak.

    Attributes
    ----------
    reports : list of dict
        One per joint graph solved: nodes, budget, keep-all peak, predicted
        peak and time, banned nodes recomputed, the family chosen, seconds.

    Examples
    --------
    >>> import torch, hybrid_remat.torch as hrt
    >>> solver = hrt.CompileSolver(budget=0.5, time_limit=2)
    >>> with solver.patch():                                   # doctest: +SKIP
    ...     loss = torch.compile(model)(x).sum(); loss.backward()
    >>> isinstance(solver.uuid(), bytes)
    True
    """

    def __init__(self, budget, time_limit: float = 5.0, *, use_solvers: bool = False, over_budget: str = "raise"):
        if over_budget not in ("raise", "warn"):
            raise HybridRematError(f"over_budget must be 'raise' or 'warn', not {over_budget!r}")
        self.budget = budget
        self.program = Program(budget, who="CompileSolver")
        self.time_limit = float(time_limit)
        self.use_solvers = bool(use_solvers)
        self.over_budget = over_budget
        self.reports: list[dict] = []
        self.reset()

    def reset(self) -> None:
        """Start a new program: forget the bytes earlier graphs hold
        (:meth:`patch` does it on entry)."""
        self.program.reset()

    def uuid(self):
        return get_hash_for_files(_SOURCES, f"{self.budget!r}|{self.time_limit}|{self.use_solvers}|{self.over_budget}")

    def __repr__(self) -> str:
        return f"CompileSolver(budget={self.budget!r}, time_limit={self.time_limit})"

    # ---------------------------------------------------------------- config
    def install(self) -> CompileSolver:
        """Make ``torch.compile`` use this solver (process-wide config)."""
        from torch._functorch import config

        config.activation_memory_budget_solver = self
        if config.activation_memory_budget >= 1.0:
            config.activation_memory_budget = ASK_ALWAYS
        return self

    @contextlib.contextmanager
    def patch(self):
        """The same as :meth:`install`, for the ``with`` block only (compile
        inside it: compilation happens at the first call)."""
        from torch._functorch import config

        self.reset()
        with config.patch(activation_memory_budget_solver=self, activation_memory_budget=ASK_ALWAYS):
            yield self

    # ---------------------------------------------------------------- solve
    def __call__(self, memory, joint_graph, max_memory, node_info, all_recomputable_banned_nodes):
        warm_up()  # cold start (Numba's cache) outside the user's time limit
        t0 = time.perf_counter()
        items = list(all_recomputable_banned_nodes)
        try:
            recomp, report = self._solve(joint_graph, node_info, items, t0 + self.time_limit)
        except HybridRematError:
            raise
        except Exception as e:  # noqa: BLE001 - never break a compile: fall back to the built-in answer
            warnings.warn(f"hybrid_remat CompileSolver failed ({type(e).__name__}: {e}); recomputing every "
                          "banned node", RuntimeWarning, stacklevel=2)
            recomp, report = list(range(len(items))), {"error": f"{type(e).__name__}: {e}"}
        report["seconds"] = time.perf_counter() - t0
        self.reports.append(report)
        rset = set(recomp)
        return [i for i in range(len(items)) if i not in rset], sorted(rset)

    def _solve(self, joint_graph, node_info, items, t_end):
        from torch._functorch import config
        from torch._functorch.partitioners import MinCutOptions, solve_min_cut
        from torch.utils._ordered_set import OrderedSet

        jg = joint_to_graph(joint_graph, node_info)
        g = jg.graph
        kind = g.cost_kinds[0]
        nbytes, program = self.program.allowance(g)
        problem = Problem(g, [Device(kind, kind, nbytes)], check=False)
        options = MinCutOptions(False, False, False, False, config.ban_recompute_reductions)
        cache: dict = {}

        def evaluate(recomp: frozenset):
            got = cache.get(recomp)
            if got is None:
                saved, _ = solve_min_cut(joint_graph, node_info, options, OrderedSet(items[i] for i in sorted(recomp)))
                keep = jg.keep_of(saved)
                sim = simulate(problem, executable_plan(g, keep, kind), check_budget=False)
                got = cache[recomp] = (next(iter(sim.peak_bytes.values())), sim.total_time, sim.n_recompute)
            return got

        def fits(r):
            return evaluate(r)[0] <= nbytes

        owner = [jg.owner.get(b) for b in items]
        # random ops are recomputed only where their RNG state is replayed (else other dropout masks in backward)
        fixed = frozenset() if _rng_replayed(kind) else frozenset(i for i, b in enumerate(items) if is_rng_node(b))
        movable = [i for i in range(len(items)) if i not in fixed]
        cost = np.asarray(problem.cost_matrix[0])
        size = np.array([g.bytes[o] if o is not None else 0 for o in owner], dtype=np.float64)
        rc = np.array([cost[o] if o is not None else 0.0 for o in owner])
        order = sorted(movable, key=lambda i: -size[i] / (rc[i] + 1e-12))
        cands = {"none": frozenset(), "all": frozenset(movable)}
        # shortest prefix of the order that fits
        lo, hi, best_k = 1, len(order), None
        while lo <= hi and time.perf_counter() < t_end:
            mid = (lo + hi) // 2
            if fits(frozenset(order[:mid])):
                best_k, hi = mid, mid - 1
            else:
                lo = mid + 1
        if best_k is not None:
            cands["bytes-per-second"] = frozenset(order[:best_k])
        # the keep sets of the eager planner's search (and anytime_solve's plan), as knapsack answers
        if time.perf_counter() < t_end:
            _, _, ev = search_keep_set(problem, time_limit=max(0.0, (t_end - time.perf_counter()) / 2),
                                       use_solvers=self.use_solvers)
            fitting = sorted((c for c in ev.seen.values() if c.peak <= nbytes), key=lambda c: c.step_s)[:4]
            for c in fitting or sorted(ev.seen.values(), key=lambda c: c.peak)[:4]:
                if time.perf_counter() > t_end:
                    break
                cands[f"keep-set:{c.family}"] = frozenset(i for i, o in enumerate(owner) if i not in fixed
                                                          and o is not None and o < jg.n_forward and not c.keep[o])
        if best_k is None and time.perf_counter() < t_end:
            # nothing fits: look for the lowest peak (prefixes of the order, the search's lowest keep sets)
            for k in sorted({int(round(f * len(order))) for f in np.linspace(0.0, 1.0, 17)} - {0, len(order)}):
                if time.perf_counter() > t_end:
                    break
                cands[f"prefix:{k}"] = frozenset(order[:k])
        scored = []
        for fam, r in cands.items():
            if fam in ("none", "all") or time.perf_counter() < t_end:
                peak, t, _ = evaluate(r)
                scored.append((peak > nbytes, t, peak, fam, r))
        scored.sort(key=lambda x: (x[0], x[1] if not x[0] else x[2]))
        over, _, _, fam, best = scored[0]
        # polish: save again the banned nodes the budget does not need (the most expensive first)
        if not over:
            for i in sorted(best, key=lambda i: -rc[i]):
                if time.perf_counter() > t_end:
                    break
                trial = best - {i}
                if fits(trial) and evaluate(trial)[1] <= evaluate(best)[1]:
                    best, fam = trial, fam + "+polish"
        peak, t, n_rec = evaluate(best)
        base = evaluate(frozenset())
        report = {
            "n_nodes": g.n, "n_forward": jg.n_forward, "n_banned": len(items), "n_recomputed_banned": len(best),
            "budget_bytes": nbytes, "keep_all_peak_bytes": keep_all_peak(g), "predicted_peak_bytes": int(peak),
            "predicted_time_s": t, "save_banned_peak_bytes": int(base[0]), "save_banned_time_s": base[1],
            "n_recompute": n_rec, "fits": not over, "family": fam, "evaluations": len(cache),
            "n_random_kept": len(fixed), "program": program,
        }
        lowest = min(evaluate(r)[0] for r in cache)
        no_choice = over and lowest >= base[0] and peak <= program["target_bytes"]
        if no_choice:
            # no answer changes this graph's peak (a leftover graph with nothing to recompute) and it fits the
            # program's budget on its own: it spends its bytes from the program; later graphs get what is left
            report["no_choice"] = True
            over = False
            warnings.warn(f"hybrid_remat CompileSolver: a compiled graph ({g.n} nodes) peaks at {int(peak)} B whatever "
                          f"is recomputed, over the {nbytes} B the program has left; counted against the program's "
                          f"budget of {program['target_bytes']} B", RuntimeWarning, stacklevel=3)
        if not over:
            held, held_all = self._held_bytes(jg, joint_graph, node_info, best, items, options)
            self.program.hold(held, held_all, int(peak))
            report.update(held_bytes=held)
        if over:
            kap = max(1, keep_all_peak(g))
            fraction = math.ceil(1000.0 * peak / kap) / 1000.0  # a budget that plans: the lowest peak fits it
            relative = self.program.relative
            # in the user's own terms: a fraction for a fraction or percentage (a float is a fraction), else bytes
            hint = repr(fraction) if relative and fraction <= 1.0 else str(int(math.ceil(peak)))
            what = (f"no partition of this compiled graph ({g.n} nodes) fits {nbytes} B: the lowest simulated peak found is "
                    f"{int(peak)} B, {100.0 * peak / kap:.1f}% of its keep-all peak {kap} B")
            if self.over_budget == "raise":
                err = BudgetError(f"hybrid_remat CompileSolver: {what}; budget={hint} plans "
                                  "(or CompileSolver(..., over_budget='warn') to use that partition)")
                report.update(error=str(err), budget_hint=hint, seconds=time.perf_counter() - (t_end - self.time_limit))
                self.reports.append(report)
                raise err
            warnings.warn(f"hybrid_remat CompileSolver: {what}; using it", RuntimeWarning, stacklevel=3)
        return sorted(best), report

    @staticmethod
    def _held_bytes(jg, joint_graph, node_info, recomp, items, options) -> tuple[int, int]:
        """Bytes the partition for ``recomp`` saves for backward, and the same
        had it saved every forward value backward reads."""
        from torch._functorch.partitioners import solve_min_cut
        from torch.utils._ordered_set import OrderedSet

        g = jg.graph
        saved, _ = solve_min_cut(joint_graph, node_info, options, OrderedSet(items[i] for i in sorted(recomp)))
        keep = jg.keep_of(saved)
        n_fwd = jg.n_forward
        read_by_bwd = np.zeros(n_fwd, dtype=bool)
        e = np.asarray(g.edges()).reshape(-1, 2)
        read_by_bwd[e[(e[:, 0] < n_fwd) & (e[:, 1] >= n_fwd), 0]] = True
        fb = g.bytes[:n_fwd]
        return int(fb[keep & read_by_bwd].sum()), int(fb[read_by_bwd].sum())


class Program:
    """One budget over a program's compiled graphs (a graph break splits a
    program into several; they run one after the other, and the graphs of
    earlier breaks hold their saved bytes while the later ones run).

    ``budget`` in the library's grammar (:func:`hybrid_remat.budgets.parse_budget_spec`):
    bytes or a size are the program's peak; a fraction or percentage is of
    the program's keep-all peak so far (the largest of: earlier graphs'
    saved-everything bytes plus a graph's keep-all peak)."""

    def __init__(self, budget, who: str = "CompilePartitioner"):
        if budget is None or isinstance(budget, bool):
            raise BudgetError(f"{who} needs a budget: a fraction (0.5), '50%', a size ('2GiB') or bytes, "
                              f"not {budget!r}")
        self.spec = parse_budget_spec(budget)  # BudgetError naming the spelling (1.5, '0', '-1GB', 'lots')
        self.budget = budget
        self.forget()

    @property
    def relative(self) -> bool:
        return self.spec.fraction is not None

    def reset(self) -> None:
        """Start the program again (a new compile of it): what its graphs
        needed last time is kept, so that earlier graphs leave room for later
        ones (:attr:`overshoot`); :meth:`forget` drops it."""
        graphs = getattr(self, "graphs", [])
        if graphs:  # room graph k leaves for later ones: max over j > k of (j's peak + what k+1..j-1 hold)
            self.reserve = [max([graphs[j]["peak"] + sum(graphs[i]["held"] for i in range(k + 1, j))
                                 for j in range(k + 1, len(graphs))], default=0) for k in range(len(graphs))]
        self.held = 0  # bytes the program's earlier graphs hold for their backward (their partitions)
        self.room = 0  # bytes earlier graphs' budgets give later ones: their gradients, not yet made (see hold)
        self.held_all = 0  # the same, had they saved everything
        self.keep_all_peak = 0  # the program's keep-all peak so far
        self.graphs: list[dict] = []  # per graph of this pass: predicted peak, held bytes, target

    def forget(self) -> None:
        """Forget the program's graphs entirely (another program follows)."""
        self.graphs = []
        self.reserve = []
        self.reset()

    @property
    def predicted_peak(self) -> int:
        """The program's predicted peak so far: the largest of a graph's peak plus what earlier graphs hold."""
        return max((r["peak"] + r["held_before"] for r in self.graphs), default=0)

    @property
    def overshoot(self) -> int:
        """Bytes by which this pass's predicted peak exceeds the budget (0: it fits).  Positive when a later
        graph (a graph break's leftover) needed more than earlier graphs left it: compile the program again
        (``torch._dynamo.reset()``, then :meth:`reset`): earlier graphs then leave that room."""
        return max((max(0, r["peak"] + r["held_before"] - r["target"] - r.get("room_before", 0)) for r in self.graphs),
                   default=0)

    def allowance(self, g) -> tuple[int, dict]:
        """Bytes the step of graph ``g`` (the next one of the program) may
        peak at, and the program's account."""
        kap = keep_all_peak(g)
        self.keep_all_peak = max(self.keep_all_peak, self.held_all + kap)
        if self.relative:
            target = max(1, math.floor(float(self.spec.fraction) * self.keep_all_peak))
        else:
            target = int(self.spec.resolve(0))
        k = len(self.graphs)
        reserve = self.reserve[k] if k < len(getattr(self, "reserve", [])) else 0
        allowed = max(1, target + self.room - self.held - reserve)
        self._pending = {"target": int(target), "held_before": int(self.held), "room_before": int(self.room)}
        return allowed, {"target_bytes": int(target), "held_before_bytes": int(self.held),
                         "room_before_bytes": int(self.room),
                         "program_keep_all_peak_bytes": int(self.keep_all_peak),
                         "reserved_for_later_bytes": int(reserve), "graph_index": k}

    def hold(self, held: int, held_all: int, peak: int | None = None, room: int = 0) -> None:
        """A graph's partition is chosen: it holds ``held`` bytes (``held_all`` had it saved everything)
        while the program's later graphs run; ``peak``: its predicted peak.  ``room``: bytes of its own budget
        that exist only in its backward, after the later graphs ran (the gradients it returns, which a
        fraction's promise puts on top): later graphs may spend them."""
        rec = dict(getattr(self, "_pending", None) or {"target": 0, "held_before": int(self.held)})
        rec.update(peak=int(peak or 0), held=int(held))
        self.graphs.append(rec)
        self._pending = None
        self.held += int(held)
        self.held_all += int(held_all)
        self.room += int(room)


_WARM = False


def warm_up() -> None:
    """Load the simulator's and the keep-set planner's compiled kernels (Numba's cache) once per process, on a
    six-node graph, so that the first compiled graph's ``time_limit`` is not spent on cold start."""
    global _WARM
    if _WARM:
        return
    from ..graph import Graph
    from ._planner import executable_plan

    n = 6
    meta = {"source": "warm-up", "torch": {"op": ["warm-up"] * n, "n_forward": 3, "overwritten": [False] * n,
                                           "takes_from": [[] for _ in range(n)], "moves": [[] for _ in range(n)],
                                           "device": "cpu", "costs": "flops"}}
    g = Graph.from_arrays(np.full(n, 4, dtype=np.int64), [(0, 1), (1, 2), (2, 3), (1, 3), (3, 4), (0, 4), (4, 5)],
                          {"cpu": np.ones(n)}, name="warm-up", names=[f"n{i}" for i in range(n)],
                          phase=np.array([0, 0, 0, 1, 1, 1], dtype=np.int8), flops=np.ones(n), required=[5], meta=meta)
    problem = Problem(g, [Device("cpu", "cpu", 1 << 20)], check=False)
    for keep in (np.ones(3, dtype=bool), np.array([True, False, True])):
        simulate(problem, executable_plan(g, keep, "cpu"), check_budget=False)
    _WARM = True


def is_rng_node(node) -> bool:
    """An FX node of a random op (dropout, ``rand_like``...: its output
    differs when run again unless its RNG state is replayed)."""
    import torch

    target = getattr(node, "target", None)
    if target is None or not hasattr(target, "tags"):
        return False
    if torch.Tag.nondeterministic_seeded in target.tags:
        return True
    packet = getattr(target, "overloadpacket", None)
    aten = torch.ops.aten
    return packet in (aten.native_dropout, aten.rand_like, aten.randn_like, aten.bernoulli)


def _rng_replayed(kind: str) -> bool:
    """AOTAutograd replays the RNG state of recomputed random ops
    (``functionalize_rng_ops``, on CUDA only)."""
    from torch._functorch import config

    return kind == "gpu" and bool(getattr(config, "functionalize_rng_ops", False))


# ------------------------------------------------------------ inspection
def partition_stats(fw_module, bw_module) -> dict:
    """What a forward/backward partition saves and recomputes.

    ``saved_bytes``: the activations the backward graph reads from the
    forward (parameters, inputs and tangents left out); ``recomputed_flops``
    and ``n_recomputed``: the forward ops the backward graph runs again."""
    from torch._functorch.partitioners import _size_of

    from ._joint import _flops

    fw_ops = {n.name for n in fw_module.graph.nodes if n.op == "call_function"}
    saved = [n for n in bw_module.graph.nodes if n.op == "placeholder"
             and not n.name.startswith(("tangents", "primals")) and "val" in n.meta]
    recomputed = [n for n in bw_module.graph.nodes if n.op == "call_function" and n.name in fw_ops]
    return {
        "saved_bytes": int(sum(_size_of(n) for n in saved)),
        "n_saved": len(saved),
        "n_recomputed": len(recomputed),
        "recomputed_flops": float(sum(_flops(n) for n in recomputed)),
    }


class PartitionRecorder(CustomPartitionerFn):
    """The min-cut partitioner of ``torch.compile``, recording
    :func:`partition_stats` of every partition it makes (``records``).

    For inductor: ``torch._inductor.config.custom_partitioner_fn = rec``;
    :meth:`backend` gives a backend that partitions the same way and runs
    the partitioned graphs eagerly (no code generation: quick to compile)."""

    def __init__(self):
        self.records: list[dict] = []

    def __call__(self, gm, joint_inputs, **kwargs):
        from torch._functorch.partitioners import min_cut_rematerialization_partition

        fw, bw = min_cut_rematerialization_partition(gm, joint_inputs, **kwargs)
        self.records.append(partition_stats(fw, bw))
        return fw, bw

    def uuid(self):
        return None  # never cached: every compile partitions (and records)

    def backend(self):
        """A ``torch.compile`` backend: inductor's decompositions and this
        partitioner, graphs run eagerly."""
        import functools
        from importlib import import_module

        from torch._dynamo.backends.common import aot_autograd
        from torch._dynamo.backends.debugging import get_nop_func

        return aot_autograd(
            fw_compiler=get_nop_func(), bw_compiler=get_nop_func(),
            decompositions=lambda: import_module("torch._inductor.compile_fx").select_decomp_table(),
            partition_fn=functools.partial(self, compiler="inductor"),
        )
