"""The planned training step: :class:`PlannedStep` runs a
:class:`~hybrid_remat.torch.TorchPlan` with the checkpoint-region runtime
(:mod:`._regions`) or the op-replay runtime (:mod:`._runtime`)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable

import numpy as np
import torch

from ..errors import HybridRematError
from ._runtime import TorchPlanWarning, _final_owners, _Recorder, _StepState
from ._trace import as_inputs, require_loss

__all__ = ["PlannedStep", "apply"]


class PlannedStep:
    """A training step that follows a plan's keep/recompute decisions.

    Parameters
    ----------
    model : torch.nn.Module
    tplan : TorchPlan or None
        ``None`` keeps everything (plain training, with the same byte
        accounting: the baseline).  A plan of mechanism ``"regions"`` runs
        ``torch.utils.checkpoint`` on its modules; ``"ops"`` runs the
        op-replay runtime.
    loss_fn : callable, optional
        ``loss_fn(output) -> scalar``; defaults to the loss the plan was
        traced with.  Calling the step without any raises (no stand-in loss
        is ever used silently); the context form (:meth:`forward`) needs none.

    Attributes
    ----------
    stats : dict
        Figures of the last step: ``saved_peak_bytes``,
        ``saved_bytes_at_backward``, ``n_saved_kept``, ``n_saved_dropped``,
        ``n_replayed_ops``, ``replay_time_s``, ``fallback``,
        ``budget_bytes``, ``predicted_peak_bytes``.

    Examples
    --------
    >>> step = PlannedStep(model, tplan)                 # doctest: +SKIP
    >>> loss = step(x)                                   # doctest: +SKIP
    >>> with step.forward():                             # doctest: +SKIP
    ...     loss = criterion(model(x), y)
    >>> loss.backward(); step.finish()                   # doctest: +SKIP
    """

    def __init__(self, model, tplan=None, loss_fn: Callable | None = None):
        self.model = model
        self.tplan = tplan
        self.loss_fn = loss_fn if loss_fn is not None else getattr(tplan, "loss_fn", None)
        self.stats: dict = {}
        self._state: _StepState | None = None
        self.runner = None
        self.mechanism = getattr(tplan, "mechanism", "ops") if tplan is not None else "none"
        if self.mechanism == "regions":
            from ._regions import RegionRunner

            self.runner = RegionRunner(model, tplan.regions)
            return
        if tplan is None:
            self.ops = None
            self.n_fwd = 1 << 62
            self.keep = _AllTrue()
            self.held: set = set()
            self.closure: dict = {}
            self.needs_record: set | None = set()
            self.final_owner: dict = {}
            self.replays_of: dict = {}
            self.group_reads = {}
            self.readers_of_held = {}
        else:
            from ._planner import _Structure, executable_order, held_closure

            g = tplan.graph
            tm = g.meta["torch"]
            self.ops = list(tm["op"])
            self.n_fwd = int(tm["n_forward"])
            self.keep = np.asarray(tplan.keep, dtype=bool)
            st = _Structure(g)
            dropped = [int(w) for w in np.flatnonzero(~self.keep) if st.bwd_readers[w] > 0]
            self.closure, self.replays_of = {}, {}
            for w in dropped:
                rep: set = set()
                self.closure[w] = held_closure(g, self.keep, w, st, rep)
                self.replays_of[w] = rep
            self.held = set().union(*self.closure.values()) if self.closure else set()
            self.replay_set = set().union(*self.replays_of.values()) if self.replays_of else set()
            self.needs_record = None  # record every forward node: a value released early can still be rebuilt
            # release each held value once every planned recomputation that reads it has run (as the
            # plan frees it after its last use), whatever order autograd unpacks in
            groups: list = []
            executable_order(g, self.keep, st, groups)
            self.group_reads: dict = {}
            for u, nodes in groups:
                reads = {a for x in nodes for a in st.preds[x] if a in self.held}
                self.group_reads.setdefault(u, set()).update(reads)
            self.readers_of_held: dict = {}
            for u, reads in self.group_reads.items():
                for a in reads:
                    self.readers_of_held.setdefault(a, set()).add(u)
            self.final_owner = _final_owners(tm.get("moves"))

    @contextlib.contextmanager
    def forward(self):
        """Context for the forward (and loss) of one step; call
        :meth:`finish` after ``backward()``."""
        if self.runner is not None:
            with self.runner.installed():
                yield self.runner
            return
        state = _StepState(self)
        self._state = state
        with torch.autograd.graph.saved_tensors_hooks(state.pack, state.unpack):
            with _Recorder(state):
                yield state
        state.end_forward()

    def finish(self) -> dict:
        """Close the step: collect its figures and free what it held."""
        if self.runner is not None:
            self.stats = {"mechanism": "regions", "n_regions": len(self.runner.targets), "fallback": None}
            if self.tplan is not None:
                self.stats["budget_bytes"] = self.tplan.budget_bytes
                self.stats["predicted_peak_bytes"] = self.tplan.predicted_peak_bytes
            return self.stats
        s = self._state
        if s is None:
            return self.stats
        self.stats = {
            "mechanism": self.mechanism,
            "saved_peak_bytes": int(s.acct.peak),
            "saved_bytes_at_backward": int(s.bytes_at_backward),
            "n_saved_kept": s.n_kept,
            "n_saved_dropped": s.n_dropped,
            "n_replayed_ops": s.n_replayed,
            "replay_time_s": s.replay_time,
            "fallback": s.fallback,
        }
        if self.tplan is not None:
            self.stats["budget_bytes"] = self.tplan.budget_bytes
            self.stats["predicted_peak_bytes"] = self.tplan.predicted_peak_bytes
            if s.acct.peak > self.tplan.budget_bytes:
                warnings.warn(
                    f"hybrid_remat.torch: the step held {s.acct.peak} B for backward, over the plan's budget of "
                    f"{self.tplan.budget_bytes} B" + (f" ({s.fallback})" if s.fallback else ""),
                    TorchPlanWarning, stacklevel=2,
                )
        s.hold.clear()
        s.cache.clear()
        s.records.clear()
        self._state = None
        return self.stats

    def __call__(self, *inputs, loss_fn: Callable | None = None, **kwargs) -> torch.Tensor:
        """Forward (``model(*inputs, **kwargs)``), loss and backward
        (gradients accumulate in ``.grad``); returns the detached loss.  A
        forward that takes ``use_cache`` (Hugging Face) gets ``use_cache=False``
        unless given it, as in :func:`~hybrid_remat.torch.plan`."""
        inputs = as_inputs(inputs if len(inputs) != 1 else inputs[0])
        lf = require_loss(loss_fn or self.loss_fn, "the planned step (apply(model, tplan, loss_fn) or step(x, loss_fn=))")
        from ._cache_args import training_kwargs

        kwargs = training_kwargs(self.model, kwargs)
        try:
            with self.forward():
                loss = lf(self.model(*inputs, **kwargs))
                if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                    raise HybridRematError("loss_fn must return a scalar tensor")
            loss.backward()
        finally:
            self.finish()
        return loss.detach()


class _AllTrue:
    def __getitem__(self, i):
        return True


def apply(model, tplan, loss_fn: Callable | None = None) -> PlannedStep:
    """The training-step callable that follows ``tplan`` (see :class:`PlannedStep`).

    ``loss_fn`` defaults to the loss ``tplan`` was traced with; a plan
    without one (built from a graph or a file) needs it here or per call."""
    if tplan is not None and "torch" not in tplan.graph.meta:
        raise HybridRematError("apply() needs a plan from hybrid_remat.torch.plan")
    return PlannedStep(model, tplan, loss_fn)
