"""Our planner as ``torch.compile``'s partitioner, not only its knapsack.

:class:`CompilePartitioner` is a ``CustomPartitionerFn``
(``torch._inductor.config.custom_partitioner_fn``, or the partition function
of an ``aot_autograd`` backend).  AOTAutograd hands it the joint
forward+backward graph; it chooses the values the forward saves for the
backward -- every other value the backward reads is recomputed there from
the saved ones -- and lets torch's own min-cut machinery extract, reorder
and clean the two graphs (only the choice of saved values is ours).

The choice: the joint graph is mapped to a remat graph
(:func:`~hybrid_remat.torch._joint.joint_to_graph`), candidates are
simulated and the fastest whose simulated peak fits the budget wins.
Candidates: the partitions of PT2's own min-cut at several
``activation_memory_budget`` values, and the keep sets of the eager planner's
search (:func:`~hybrid_remat.torch._planner.search_keep_set`), each turned
into the saved values it implies.  Random ops (``native_dropout``,
``rand_like``...) are never recomputed: without a replayed RNG state a
recomputation draws another mask (gradients would differ from eager).
Dropout's output is rewritten to ``x * mask * scale`` read from its saved
bool mask (:mod:`~hybrid_remat.torch._rng_masks`, bit-identical): the mask
(1 byte per element) is saved, the float output saved or recomputed like
any deterministic value.
Training batch norm (it updates the running statistics it reads) is saved
too.

Offloading (``offload=True``, :mod:`~hybrid_remat.torch._offload`): a
candidate over the budget may also hold saved values in host memory between
the forward and the backward; the simulated plan gets the copies (out after
the value's last forward reader, back before its first backward reader, at
torch's ``activation_offload_cpu_gpu_bw``), the offloaded bytes leave the
device peak in between and the copies count in the time.  Only values
torch's ``can_offload`` accepts are chosen; after torch's partition the
chosen forward outputs are marked ``should_offload`` and torch's
``enable_activation_offloading`` pass inserts the transfers.  On the CPU the
host is the device: ``offload=True`` is refused there, ``offload="test"``
plans and inserts the transfers as on an accelerator (a test mode: the
report says no device memory is saved and the promise counts the offloaded
bytes as resident).

The budget, in the library's grammar:

* a size or bytes (``"300MB"``, ``"1.5GiB"``, ``123456``) is the compiled
  step's **measured peak**, above what is allocated before the step
  (parameters, inputs, existing ``.grad``): the simulation counts the
  gradients a compiled backward returns together at its end, the tangents it
  receives and the outputs later graphs read;
* a fraction or percentage (``0.5``, ``"50%"``) is of the keep-all peak of
  the activations, as at every door of the library; what no partition
  changes comes on top (the gradients returned, the tangents, the outputs,
  a margin): :attr:`CompilePartitioner.promised_peak` is the measured peak
  the compiled step stays under.

One budget spans the program's graphs (graph breaks, :class:`~.compile.Program`):
a leftover graph whose peak no choice changes is charged to the program
instead of failing, and :attr:`CompilePartitioner.overshoot` says when a
second compile (earlier graphs then leave the room later ones needed) is due.

One line::

    part = hrt.CompilePartitioner("300MB")
    step = torch.compile(model, backend=part.backend("inductor"))   # or "aot_eager"
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
import warnings

import numpy as np
from torch._inductor.custom_graph_pass import CustomPartitionerFn, get_hash_for_files

from ..budgets import keep_all_peak
from ..errors import BudgetError, HybridRematError
from ..graph import Graph
from ..problem import Device, Problem
from ..simulate import simulate
from ._joint import joint_to_graph
from ._offload import apply_offload, offload_choice
from ._planner import executable_plan, search_keep_set
from ._rng_masks import mask_only_bytes, recompute_dropout_from_masks
from .compile import Program, is_rng_node, warm_up

__all__ = ["CompilePartitioner", "HAS_CPU_OFFLOAD"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = tuple(os.path.join(_HERE, f) for f in ("partition.py", "compile.py", "_joint.py", "_planner.py",
                                                   "_rng_masks.py", "cost_model.py", "_offload.py"))
#: PT2's own ``activation_memory_budget`` values whose min-cut partitions are candidates.
PT2_BUDGETS = (1.0, 0.5, 0.2, 0.0)


def _has_cpu_offload() -> bool:
    from torch.utils import checkpoint

    return hasattr(getattr(checkpoint, "CheckpointPolicy", None), "MUST_CPU_OFFLOAD")


#: Whether this torch has ``CheckpointPolicy.MUST_CPU_OFFLOAD`` (activation offloading in the partitioner).
HAS_CPU_OFFLOAD = _has_cpu_offload()


class CompilePartitioner(CustomPartitionerFn):
    """Partitions ``torch.compile``'s joint graph under a peak-memory budget.

    Parameters
    ----------
    budget : int, float or str
        The compiled step's measured peak in bytes (above what exists before
        it, gradients it returns included): ``123456``, ``"300MB"``,
        ``"1.5GiB"``; or a fraction of the activations' keep-all peak
        (``0.5``, ``"50%"``).  Spread over the program's graphs.
    time_limit : float
        Seconds per joint graph.
    use_solvers : bool
        Also map the plan of ``anytime_solve`` (slower).
    offload : bool or "test"
        Also hold saved values in host memory between forward and backward
        (torch's ``enable_activation_offloading`` pass inserts the copies),
        chosen where the simulated peak needs it; the copies count in the
        predicted time.  Activations on the CPU: ``True`` is refused (the host
        is the device, nothing is saved); ``"test"`` plans and offloads there
        as on an accelerator, to test the passes (no memory saved).
    offload_bandwidth : float, optional
        Host<->device bytes per second; default torch's
        ``activation_offload_cpu_gpu_bw``.
    over_budget : {"raise", "warn"}
        No partition fits: ``"raise"`` a :class:`~hybrid_remat.errors.BudgetError`
        naming the lowest peak found and a budget that plans, or ``"warn"``
        and use the lowest-peak partition.  A graph whose peak no choice
        changes (a leftover graph after a break, nothing to recompute) that
        still fits the program's budget is accepted with a warning.

    Attributes
    ----------
    reports : list of dict
        One per joint graph: budget, predicted peak and time, family chosen,
        saved bytes, candidates, seconds; ``"offload"`` (with ``offload``):
        the values offloaded, their bytes, the values torch refuses.

    Examples
    --------
    >>> import hybrid_remat.torch as hrt
    >>> part = hrt.CompilePartitioner("64MiB", time_limit=2)
    >>> part.program.spec.bytes
    67108864
    >>> hrt.CompilePartitioner(1.5)
    Traceback (most recent call last):
    ...
    hybrid_remat.errors.BudgetError: budget 1.5 is ambiguous: a number above 1 without a unit must be whole bytes; write 150% or a size such as 1.5GB
    """

    def __init__(self, budget, time_limit: float = 5.0, *, use_solvers: bool = False, offload=False,
                 offload_bandwidth: float | None = None, over_budget: str = "raise"):
        if over_budget not in ("raise", "warn"):
            raise HybridRematError(f"over_budget must be 'raise' or 'warn', not {over_budget!r}")
        if not (isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool)
                and math.isfinite(time_limit) and time_limit > 0):
            raise HybridRematError(f"time_limit must be a positive number of seconds, not {time_limit!r}")
        if offload not in (False, True, "test"):
            raise HybridRematError(f"offload must be False, True or 'test', not {offload!r}")
        if offload_bandwidth is not None and not (isinstance(offload_bandwidth, (int, float))
                                                  and math.isfinite(offload_bandwidth) and offload_bandwidth > 0):
            raise HybridRematError(f"offload_bandwidth must be positive bytes per second, not {offload_bandwidth!r}")
        self.program = Program(budget)
        self.budget = budget
        self.time_limit = float(time_limit)
        self.use_solvers = bool(use_solvers)
        self.offload = offload
        self.offload_bandwidth = offload_bandwidth
        self.over_budget = over_budget
        self.reports: list[dict] = []

    def __repr__(self) -> str:
        return f"CompilePartitioner(budget={self.budget!r}, time_limit={self.time_limit})"

    def uuid(self):
        return get_hash_for_files(_SOURCES, f"{self.budget!r}|{self.time_limit}|{self.use_solvers}|{self.offload}|"
                                            f"{self.offload_bandwidth}|{self.over_budget}")

    def reset(self) -> None:
        """Compile the program again: earlier graphs hold nothing yet, and leave
        the room later graphs needed last time (``program.overshoot``);
        :meth:`patch` does it on entry.  ``program.forget()`` for another program."""
        self.program.reset()

    @property
    def promised_peak(self) -> int:
        """The compiled step's peak (bytes) this compile promises, the most its measured allocator peak reaches:
        a byte budget itself; for a fraction, the largest over the program's graphs of what earlier graphs hold
        + fraction x keep-all + the gradients returned + tangents, outputs and margin (0 before a compile)."""
        k = len(self.program.graphs)
        return max((int(r.get("promised_peak_bytes", 0)) for r in self.reports[-k:]), default=0) if k else 0

    @property
    def overshoot(self) -> int:
        """Bytes by which the program's predicted peak went over the budget
        (a later graph needed more than earlier ones left): 0 when it fits.
        Positive: ``torch._dynamo.reset()``, :meth:`reset`, compile again."""
        return self.program.overshoot

    # ------------------------------------------------------------ doors
    def install(self) -> CompilePartitioner:
        """Make inductor use this partitioner (process-wide config)."""
        from torch._inductor import config

        config.custom_partitioner_fn = self
        return self

    @contextlib.contextmanager
    def patch(self):
        """:meth:`install` for the ``with`` block only (compile inside it)."""
        from torch._inductor import config

        self.reset()
        with config.patch(custom_partitioner_fn=self):
            yield self

    def backend(self, kind: str = "inductor"):
        """A ``torch.compile`` backend partitioning with this partitioner:
        ``"inductor"`` (code generation) or ``"aot_eager"`` (ATen graphs run
        eagerly, no decompositions: random ops draw as eager does)."""
        if kind == "inductor":
            def inductor(gm, example_inputs):
                from torch._inductor import config
                from torch._inductor.compile_fx import compile_fx

                with config.patch(custom_partitioner_fn=self):
                    return compile_fx(gm, example_inputs)

            return inductor
        if kind == "aot_eager":
            from torch._dynamo.backends.common import aot_autograd
            from torch._dynamo.backends.debugging import get_nop_func

            return aot_autograd(fw_compiler=get_nop_func(), bw_compiler=get_nop_func(),
                                partition_fn=functools.partial(self, compiler="inductor"))
        raise HybridRematError(f"backend kind must be 'inductor' or 'aot_eager', not {kind!r}")

    # ------------------------------------------------------------ partition
    def __call__(self, gm, joint_inputs, **kwargs):
        from unittest import mock

        from torch._functorch import partitioners

        original = partitioners.choose_saved_values_set
        kwargs.setdefault("compiler", "inductor")
        if recompute_dropout_from_masks(gm.graph):  # dropout saved as its bool mask, its output recomputable
            gm.recompile()
        state: dict = {"num_fwd_outputs": int(kwargs.get("num_fwd_outputs", 0))}
        choose = functools.partial(self._choose, original, state=state)
        with mock.patch.object(partitioners, "choose_saved_values_set", choose):
            fw, bw = partitioners.min_cut_rematerialization_partition(gm, joint_inputs, **kwargs)
        if state.get("offload"):  # torch's own pass inserts the transfers of the values the plan offloads
            done = apply_offload(fw, bw, state["offload"], state["num_fwd_outputs"], state["static"])
            state["report"]["applied"] = done
            if sorted(done) != sorted(state["offload"]):
                raise HybridRematError(f"internal: torch's offload pass offloaded {done}, the plan {state['offload']}")
        return fw, bw

    def _choose(self, original, joint_graph, node_info, memory_budget=1.0, *, state=None):
        warm_up()  # cold start (Numba's cache) outside the user's time limit
        t0 = time.perf_counter()
        report: dict = {}
        try:
            saved = self._plan(original, joint_graph, node_info, t0 + self.time_limit, report,
                               {} if state is None else state)
        finally:
            report["seconds"] = time.perf_counter() - t0
            self.reports.append(report)
        return saved

    def _plan(self, original, joint_graph, node_info, t_end, report, state):
        jg = joint_to_graph(joint_graph, node_info)
        # simulated: the whole compiled step, the gradients its backward returns together at its end included
        g = _with_gradient_bytes(jg)
        kind = g.cost_kinds[0]
        grad_bytes = int(g.bytes[jg.n_forward:].sum() - jg.graph.bytes[jg.n_forward:].sum())
        tangent_bytes, output_bytes = _boundary_bytes(joint_graph, node_info)
        # not simulated, charged on top (bounds, not timed): the tangents (gradients of the graph's outputs) and
        # the outputs (the caller may hold them through the backward), and a margin of the largest value for
        # temporaries no graph node shows (an op's workspace, dropout's own output freed as it returns)
        boundary = tangent_bytes + output_bytes + (int(g.bytes.max()) if g.n else 0)
        relative = self.program.relative
        if relative:
            # a fraction is of the activations' keep-all peak, as at every door of the library; what no partition
            # changes (the gradients returned, the boundary above) comes on top: the step promises at most
            # fraction x keep-all + gradients + boundary (report["promised_peak_bytes"]), and keeps it
            act, program = self.program.allowance(_with_gradient_bytes(jg, gradients=False))
            nbytes = act + grad_bytes
            promised = program["held_before_bytes"] + nbytes + boundary
        else:  # a size or bytes is the whole compiled step's measured peak
            nbytes, program = self.program.allowance(g)
            nbytes = max(1, nbytes - boundary)
            promised = program["target_bytes"]
        problem = Problem(g, [Device(kind, kind, nbytes)], check=False)
        fixed = _must_save(jg)
        cands: dict[str, list] = {"pt2:1": list(original(joint_graph, node_info, memory_budget=1.0))}  # PT2's default
        for b in PT2_BUDGETS[1:]:  # PT2's own knapsack at lower budgets, while time is left
            if time.perf_counter() < t_end:
                with contextlib.suppress(Exception):  # noqa: BLE001 - a PT2 knapsack failing is no candidate
                    cands[f"pt2:{b:g}"] = list(original(joint_graph, node_info, memory_budget=b))
        _, _, ev = search_keep_set(problem, time_limit=max(0.0, (t_end - time.perf_counter()) * 0.5),
                                   use_solvers=self.use_solvers)
        seen = list(ev.seen.values())
        if self.offload:  # what the backward reads, all saved: with offload, often the fastest that fits
            cands["save-all"] = saved_values_of(joint_graph, node_info, jg, np.ones(jg.n_forward, dtype=bool))
        fitting = sorted((c for c in seen if c.peak <= nbytes), key=lambda c: c.step_s)[:8]
        lowest = sorted(seen, key=lambda c: (c.peak, c.step_s))[:4]
        for i, c in enumerate(fitting + lowest):
            keep = np.asarray(c.keep, dtype=bool) | fixed
            cands[f"keep-set:{c.family}#{i}"] = saved_values_of(joint_graph, node_info, jg, keep)
        scored = []
        for fam, saved in cands.items():  # at most 16, one simulation each: scored whatever the clock
            if any(is_rng_node(x) for x in recomputed_nodes(joint_graph, node_info, saved)):
                continue  # a PT2 partition recomputing a random op: never ours
            keep = jg.keep_of(saved)
            sim = simulate(problem, executable_plan(g, keep, kind), check_budget=False)
            if not sim.valid:
                raise HybridRematError(f"internal: partition {fam} does not simulate: {sim.error}")
            peak = int(next(iter(sim.peak_bytes.values())))
            scored.append((peak > nbytes, sim.total_time, peak, fam, saved, keep, None))
        if not scored:  # every PT2 partition recomputes randomness and no search ran: save what backward reads
            keep = np.ones(jg.n_forward, dtype=bool)
            saved = saved_values_of(joint_graph, node_info, jg, keep)
            sim = simulate(problem, executable_plan(g, jg.keep_of(saved), kind), check_budget=False)
            peak = int(next(iter(sim.peak_bytes.values())))
            scored.append((peak > nbytes, sim.total_time, peak, "save-all", saved, jg.keep_of(saved), None))
        if self.offload:  # each candidate over the budget, with the values it may offload (one simulation a round)
            scored += offload_choice(self, problem, joint_graph, node_info, jg, scored, nbytes, state, t_end)
        scored.sort(key=lambda x: (x[0], x[1] if not x[0] else x[2]))
        over, t_pred, peak, fam, saved, keep, off = scored[0]
        default = next((s for s in scored if s[3] == "pt2:1"), None)
        kap = max(1, keep_all_peak(g))
        report.update({
            "n_nodes": g.n, "n_forward": jg.n_forward, "budget_bytes": int(nbytes), "keep_all_peak_bytes": int(kap),
            "predicted_peak_bytes": peak, "predicted_time_s": t_pred, "family": fam, "fits": not over,
            "n_candidates": len(scored), "n_random_saved": len({o for n, o in jg.owner.items() if o is not None and o < jg.n_forward and is_rng_node(n)}),
            "n_must_save": int(fixed.sum()), "program": program,
            "gradient_bytes": grad_bytes,
            "pt2_default_peak_bytes": None if default is None else default[2],
            "pt2_default_time_s": None if default is None else default[1],
            "candidates": {s[3]: {"peak_bytes": s[2], "time_s": s[1]} for s in scored},
        })
        # on the CPU in test mode the offloaded values stay in the device's memory: the peak it holds is the plan's
        # without offload (the simulator's), and the promise and the program's ledger count that one
        held_peak = peak if off is None else off["device_peak_bytes"]
        if off is not None:
            state.update(offload=off["values"], static=node_info.static_lifetime_input_nodes, report=off)
            report["offload"] = off
        # never below the prediction: a graph accepted over its allowance (no choice, a later graph) says so here
        promised = max(promised, program["held_before_bytes"] + held_peak + boundary)
        report["promised_peak_bytes"] = int(promised)
        # the program's terms: activations for a fraction (the gradients come on top), the whole step for bytes
        own = max(0, held_peak - grad_bytes) if relative else held_peak + boundary
        lowest_peak = min(s[2] for s in scored)
        if over and lowest_peak >= max(s[2] for s in scored) and own <= program["target_bytes"]:
            # no choice changes this graph's peak (a leftover graph with nothing to recompute) and it fits the
            # program's budget on its own: it spends its bytes from the program; later graphs get what is left
            report["no_choice"] = True
            over = False
            warnings.warn(f"hybrid_remat CompilePartitioner: a compiled graph ({g.n} nodes) peaks at {peak} B whatever "
                          f"is recomputed, over the {nbytes} B the program has left; counted against the program's "
                          f"budget of {program['target_bytes']} B", RuntimeWarning, stacklevel=2)
        if over:
            # the program's peak so, with the room reserved for its later graphs (a second pass knows them)
            prog_peak = int(own) + int(program["held_before_bytes"]) + int(program["reserved_for_later_bytes"])
            frac = math.ceil(1000.0 * prog_peak / max(1, program["program_keep_all_peak_bytes"])) / 1000.0
            hint = repr(frac) if self.program.relative and 0 < frac <= 1.0 else str(prog_peak)
            what = (f"no partition of this compiled graph ({g.n} nodes) fits {nbytes} B: the lowest simulated peak "
                    f"found is {peak} B, {100.0 * peak / kap:.1f}% of its keep-all peak {kap} B")
            later = program["graph_index"] > 0 and not getattr(self.program, "reserve", None)
            if later:  # a later graph of a first pass: the earlier ones took its room; `overshoot` asks for a 2nd
                report["overshoot"] = True
                warnings.warn(f"hybrid_remat CompilePartitioner: {what}; a later graph of the program: using it (the "
                              "program's overshoot says to compile again, earlier graphs then leave it room)",
                              RuntimeWarning, stacklevel=2)
            elif self.over_budget == "raise":
                err = BudgetError(f"hybrid_remat CompilePartitioner: {what}; budget={hint} plans "
                                  "(or CompilePartitioner(..., over_budget='warn') to use that partition)")
                report.update(error=str(err), budget_hint=hint)
                raise err
            warnings.warn(f"hybrid_remat CompilePartitioner: {what}; using it", RuntimeWarning, stacklevel=2)
        held, held_all = _held(jg, g, keep)
        if off is not None and off["saves_device_memory"]:  # offloaded values are on the host while later graphs run
            held -= off["bytes"]
        # the graph's outputs (a later graph's inputs) are held too while later graphs run
        extra = 0 if relative else output_bytes
        # a fraction's promise puts the gradients on top: they exist in this graph's backward only, which runs
        # after the later graphs (a graph break's leftover) ran and freed theirs: later graphs may use that room
        self.program.hold(held + extra, held_all + extra, own, room=grad_bytes if relative else 0)
        report.update(held_bytes=held + extra, saved_bytes=held, tangent_bytes=tangent_bytes,
                      output_bytes=output_bytes)
        return saved


def _boundary_bytes(joint_graph, node_info) -> tuple[int, int]:
    """Bytes of the tangents the backward receives, and of the forward's
    outputs that the program's later graphs read (not saved for backward)."""
    from torch._functorch.partitioners import _size_of

    tangents = sum(_size_of(n) for n in joint_graph.nodes
                   if n.op == "placeholder" and "tangents" in str(n.target) and "val" in n.meta)
    out = next((n for n in joint_graph.nodes if n.op == "output"), None)
    outputs = 0
    if out is not None:
        seen = set()
        for a in out.all_input_nodes:
            if node_info.is_required_fw(a) and a.op != "placeholder" and a not in seen and "val" in a.meta:
                seen.add(a)
                outputs += _size_of(a)
    return int(tangents), int(outputs)


def _with_gradient_bytes(jg, gradients: bool = True) -> Graph:
    """The joint graph with the gradients' bytes counted and held to the end:
    a compiled backward returns them together when it ends (a last node, of
    no bytes and no cost, reads them all), whatever the optimizer does next."""
    from torch._functorch.partitioners import _size_of

    g = jg.graph
    n = g.n
    full = np.array([_size_of(x) for x in jg.fx_nodes], dtype=np.int64)
    grads = [v for v in range(jg.n_forward, n) if full[v] > g.bytes[v]]
    nb = np.append(np.where(np.arange(n) >= jg.n_forward, np.maximum(full, g.bytes), g.bytes) if gradients
                   else g.bytes.copy(), 0)
    for v in range(jg.n_forward):  # a dropout rewritten to recompute from its mask holds its mask only
        mask = mask_only_bytes(jg.fx_nodes[v])
        if mask is not None:
            nb[v] = min(int(nb[v]), mask)
    kind = g.cost_kinds[0]
    tm = dict(g.meta["torch"])
    for key in ("op", "overwritten", "takes_from", "moves"):
        if key in tm:
            tm[key] = list(tm[key]) + [{"op": "end", "overwritten": False}.get(key, [])]
    meta = dict(g.meta)
    meta["torch"] = tm
    edges = [tuple(e) for e in np.asarray(g.edges()).reshape(-1, 2).tolist()] + [(v, n) for v in grads]
    required = sorted(set(np.flatnonzero(g.required).tolist()) | {n})
    return Graph.from_arrays(nb, edges, {kind: np.append(g.cost(kind), 0.0)}, name=g.name,
                             names=[*g.names, "bwd end:returns the gradients"], phase=np.append(g.phase, 1),
                             flops=np.append(g.flops, 0.0), required=required, meta=meta)


def _must_save(jg) -> np.ndarray:
    """Forward nodes that are never recomputed: random ops (no RNG replay),
    ops updating state (batch norm), ``MUST_SAVE`` tags, and calls that are
    not ATen ops."""
    import operator

    from torch._ops import OpOverload
    from torch.utils.checkpoint import CheckpointPolicy

    fixed = np.zeros(jg.n_forward, dtype=bool)
    for n, o in jg.owner.items():
        if o is None or o >= jg.n_forward:
            continue
        tgt = n.target
        if (is_rng_node(n) or n.meta.get("recompute") == CheckpointPolicy.MUST_SAVE or _reads_mutated_state(n)
                or not (isinstance(tgt, OpOverload) or tgt is operator.getitem)):
            fixed[o] = True
    return fixed


def _reads_mutated_state(node) -> bool:
    """Functionalized ops that update state they read (batch norm's running
    statistics, written back into the buffers after the forward): run again
    in backward they would read the updated buffers (autograd's version check
    fails), so they are saved."""
    tgt = node.target
    name = str(getattr(tgt, "__name__", tgt))
    return name.split(".")[0].endswith("_functional") or "batch_norm" in name


def saved_values_of(joint_graph, node_info, jg, keep) -> list:
    """The FX values a partition saves when the forward nodes ``keep`` stay
    resident: what the backward reads, each either saved (kept, a primal, a
    symbolic size) or recomputed from its own inputs, recursively."""
    import torch

    def stop(x):
        o = jg.owner.get(x)
        return isinstance(x.meta.get("val"), torch.Tensor) and o is not None and o < jg.n_forward and bool(keep[o])

    return _closure(joint_graph, node_info, stop)[0]


def recomputed_nodes(joint_graph, node_info, saved) -> list:
    """The forward FX nodes that the backward of a partition saving ``saved`` runs again."""
    saved = set(saved)
    return _closure(joint_graph, node_info, lambda x: x in saved)[1]


def _closure(joint_graph, node_info, is_saved) -> tuple[list, list]:
    import torch

    primals = set(node_info.inputs)
    saved: dict = {}
    again: dict = {}
    seen: set = set()
    stack = []
    for n in joint_graph.nodes:  # what the backward computes reads what it does not: saved or recomputed
        if n.op in ("placeholder", "output") or not node_info.is_required_bw(n):
            continue
        stack.extend(a for a in n.all_input_nodes if not node_info.is_required_bw(a))
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if x.op == "placeholder":
            if x in primals:
                saved[x] = None
            continue
        if isinstance(x.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool)) or is_saved(x):
            saved[x] = None
            continue
        again[x] = None
        stack.extend(x.all_input_nodes)
    order = {n: i for i, n in enumerate(joint_graph.nodes)}
    return sorted(saved, key=order.get), sorted(again, key=order.get)


def _held(jg, g, keep) -> tuple[int, int]:
    """Bytes the partition keeps for the backward (``keep`` & read by it), and the same had it kept every
    forward value the backward reads."""
    n_fwd = jg.n_forward
    read = np.zeros(n_fwd, dtype=bool)
    e = np.asarray(g.edges()).reshape(-1, 2)
    read[e[(e[:, 0] < n_fwd) & (e[:, 1] >= n_fwd), 0]] = True
    fb = g.bytes[:n_fwd]
    return int(fb[keep & read].sum()), int(fb[read].sum())
