"""``CompileSolver`` under ``torch.compile``: random ops never recomputed
without their RNG state (gradients equal eager with dropout), one budget
over a program's several graphs (graph breaks)."""

from __future__ import annotations

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import hybrid_remat.torch as hrt  # noqa: E402
from hybrid_remat.torch.examples import DropMLP  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)


def _compiled_step(model, x, solver, backend="aot_eager"):
    # aot_eager: the min-cut partitioner, ATen ops as eager runs them (the decomposing backends draw dropout
    # masks another way than eager, so their gradients differ from eager's whatever the partition)
    torch._dynamo.reset()
    try:
        with solver.patch():
            torch.manual_seed(7)
            hrt.default_loss(torch.compile(model, backend=backend)(x)).backward()
    finally:
        torch._dynamo.reset()


def test_compiled_gradients_equal_eager_with_dropout():
    """The knapsack is handed ``native_dropout`` among the banned nodes;
    recomputing it in backward (no RNG replay on CPU) draws other masks.
    The solver keeps random ops saved: gradients equal eager's."""
    torch.manual_seed(0)
    model, x = DropMLP(scale=1.5), torch.randn(32, 64)
    ref = copy.deepcopy(model)
    torch.manual_seed(7)
    hrt.default_loss(ref(x)).backward()
    solver = hrt.CompileSolver(budget=0.3, time_limit=2, over_budget="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 30% may be below what any partition reaches
        _compiled_step(model, x, solver)
    rep = solver.reports[-1]
    assert rep["n_random_kept"] >= 1  # dropout was offered for recomputation and kept
    for (name, a), b in zip(ref.named_parameters(), model.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6), name


def test_the_knapsack_alone_would_recompute_dropout_and_change_gradients(monkeypatch):
    """What the test above guards against (so it can fail): with random ops
    allowed, the low budget recomputes dropout and the gradients differ."""
    import hybrid_remat.torch.compile as hc

    monkeypatch.setattr(hc, "is_rng_node", lambda node: False)
    torch.manual_seed(0)
    model, x = DropMLP(scale=1.5), torch.randn(32, 64)
    ref = copy.deepcopy(model)
    torch.manual_seed(7)
    hrt.default_loss(ref(x)).backward()
    solver = hrt.CompileSolver(budget=0.3, time_limit=2, over_budget="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _compiled_step(model, x, solver)
    same = all(torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6)
               for a, b in zip(ref.parameters(), model.parameters(), strict=True))
    assert solver.reports[-1]["n_recomputed_banned"] >= 1 and not same


class Broken(nn.Module):
    """A graph break before a small tail with nothing to recompute."""

    def __init__(self, d=64):
        super().__init__()
        self.body = nn.Sequential(*(m for _ in range(4) for m in (nn.Linear(d, d), nn.GELU())))
        self.head = nn.Linear(d, 4)

    def forward(self, x):
        h = self.body(x)
        torch._dynamo.graph_break()
        return torch.log_softmax(self.head(h), -1)


def test_one_budget_spreads_over_a_programs_graphs():
    torch.manual_seed(0)
    model, x = Broken(), torch.randn(64, 64)
    ref = copy.deepcopy(model)
    hrt.default_loss(ref(x)).backward()
    solver = hrt.CompileSolver(budget=0.7, time_limit=2)
    _compiled_step(model, x, solver)  # used to fail on the tail: 70% of a graph that cannot go under 100%
    assert len(solver.reports) == 2
    body, tail = solver.reports
    assert body["fits"] and body["predicted_peak_bytes"] <= body["budget_bytes"]
    assert tail["program"]["held_before_bytes"] == body["held_bytes"] > 0
    # the tail runs while the body's saved bytes are held: together within the program's budget
    assert tail["predicted_peak_bytes"] + body["held_bytes"] <= tail["program"]["target_bytes"]
    assert tail["program"]["target_bytes"] <= 0.7 * tail["program"]["program_keep_all_peak_bytes"] + 1
    for (name, a), b in zip(ref.named_parameters(), model.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6), name
